"""filecache's own file tools: the one table of tool specs, their schemas, and one dispatcher.

``TOOL_SPECS`` is the single source of every tool's name, description and parameters (type,
description, default, limits). Everything else is generated from it: ``schemas("openai")``,
``schemas("responses")``, ``schemas("anthropic")`` and ``schemas("mcp")`` (the definitions of
``filecache serve``), their OpenAI strict-mode variants (``strict=True``), the argument checks of
``run_tool`` and of the MCP server (``check_arguments``), the CLI's option help
(``param_help``), and the framework adapters' tool functions (their parameters and
``tool_docstring``: ``filecache.adapters.frameworks.tool_functions``).

``run_tool(session, name, arguments, call_id)`` executes one call and returns the text for the
tool result, with ``is_error`` set for anything refused (a bad path, binary file, edit that does
not match, bad arguments), so the loop never crashes on the model's mistakes.

Invariants:
- Every ``schemas()`` call builds new dicts: a caller may change what it gets (openai-agents'
  strict mode does) without changing what the next caller gets.
- Arguments are checked strictly against the table: an integer is a JSON integer (not ``"5"``,
  not ``true``), a boolean is ``true``/``false`` (not ``"yes"``, not ``1``), and an argument the
  tool does not take is refused, never ignored. ``null`` for an optional argument means "not
  given" (OpenAI strict mode sends it). Every refusal is one line that names the argument.
- The text of a successful call is exactly the ``Session`` answer's text; an error's text is the
  ``FileCacheError`` message, which says what to do, after ``Error: `` (``render_tool_error``,
  added here and nowhere else).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from filecache.errors import FileCacheError, RequestError

if TYPE_CHECKING:
    from filecache.core.results import ReadResult, WriteResult
    from filecache.session import Session

__all__ = [
    "CACHE_STATS",
    "EDIT_FILE",
    "FILE_TOOL_SPECS",
    "Param",
    "READ_FILE",
    "TOOL_SPECS",
    "ToolOutput",
    "ToolSpec",
    "WRITE_FILE",
    "check_arguments",
    "param_help",
    "run_tool",
    "schemas",
    "tool_docstring",
    "tool_spec",
]

JsonType = Literal["string", "integer", "boolean"]
Style = Literal["openai", "responses", "anthropic", "mcp"]
STYLES: tuple[Style, ...] = ("openai", "responses", "anthropic", "mcp")


@dataclass(frozen=True)
class Param:
    """One parameter of a tool: its JSON type, what it means, and its limits."""

    name: str
    type: JsonType
    description: str
    required: bool = False
    default: str | int | bool | None = None
    enum: tuple[str, ...] | None = None
    minimum: int | None = None

    def json_schema(self, strict: bool = False) -> dict[str, Any]:
        """This parameter's JSON schema; ``strict``: OpenAI strict mode's form (an optional
        parameter is nullable instead of omittable; no ``default``/``minimum``)."""
        nullable = strict and not self.required
        schema: dict[str, Any] = {"type": [self.type, "null"] if nullable else self.type}
        if self.enum is not None:
            schema["enum"] = [*self.enum, None] if nullable else list(self.enum)
        if not strict:
            if self.minimum is not None:
                schema["minimum"] = self.minimum
            if self.default is not None:
                schema["default"] = self.default
        schema["description"] = self.description
        return schema


@dataclass(frozen=True)
class ToolSpec:
    """One tool: name, description, parameters, and the MCP hints of what it does."""

    name: str
    description: str
    params: tuple[Param, ...]
    read_only: bool
    idempotent: bool = True
    guide: bool = False  # the description is followed by filecache's instructions

    def param(self, name: str) -> Param:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(f"{self.name} has no parameter {name!r}")

    def input_schema(self, strict: bool = False) -> dict[str, Any]:
        """The JSON schema of this tool's arguments (a new dict on every call)."""
        return {
            "type": "object",
            "properties": {p.name: p.json_schema(strict) for p in self.params},
            "required": [p.name for p in self.params if p.required or strict],
            "additionalProperties": False,
        }


_PATH = Param(
    "path", "string", "File path, relative to the root (or absolute, inside a root).", True
)

READ_FILE = ToolSpec(
    "read_file",
    "Read a text file, or some lines of it. Lines come numbered (number, TAB, line) under a "
    "one-line header; use offset/limit for part of a large file.",
    (
        _PATH,
        Param("offset", "integer", "First line to read (1-based). Default: 1.", minimum=1),
        Param("limit", "integer", "Number of lines to read. Default: to the end.", minimum=1),
        Param(
            "mode",
            "string",
            "'auto' (default): an outline instead of a very large file's content; 'full': "
            "always the lines; 'outline': signatures with line numbers, where supported.",
            default="auto",
            enum=("auto", "full", "outline"),
        ),
        Param("symbol", "string", "Read one definition, e.g. 'Class.method' (where supported)."),
        Param(
            "fresh",
            "boolean",
            "Send the full content even if you have it (use when the result a FileRef or diff "
            "names is no longer in your context).",
            default=False,
        ),
    ),
    read_only=True,
    guide=True,
)
WRITE_FILE = ToolSpec(
    "write_file",
    "Create or replace a text file with the given content (atomically). Your writes are "
    "remembered: a later read_file of the file answers 'unchanged'.",
    (_PATH, Param("content", "string", "The file's complete new content.", True)),
    read_only=False,
)
EDIT_FILE = ToolSpec(
    "edit_file",
    "Replace old_string with new_string in a file; old_string must occur exactly once unless "
    "replace_all is true. Your edits are remembered: a later read_file answers 'unchanged' (or "
    "a diff of changes made by others).",
    (
        _PATH,
        Param("old_string", "string", "Exact text to replace.", True),
        Param("new_string", "string", "The replacement text.", True),
        Param(
            "replace_all",
            "boolean",
            "Replace every occurrence, not just a unique one.",
            default=False,
        ),
    ),
    read_only=False,
    idempotent=False,
)
CACHE_STATS = ToolSpec(
    "cache_stats",
    "This connection's filecache numbers: answers by kind and read tokens saved (JSON).",
    (),
    read_only=True,
)

FILE_TOOL_SPECS: tuple[ToolSpec, ...] = (READ_FILE, WRITE_FILE, EDIT_FILE)
"""The tools ``run_tool`` runs and ``schemas()`` describes."""
TOOL_SPECS: tuple[ToolSpec, ...] = (*FILE_TOOL_SPECS, CACHE_STATS)
"""Every tool, ``cache_stats`` (served by ``filecache serve`` only) included."""
_BY_NAME = {spec.name: spec for spec in TOOL_SPECS}


def tool_spec(name: str) -> ToolSpec:
    """The spec of tool ``name``; a ``RequestError`` naming the tools for any other name."""
    spec = _BY_NAME.get(name)
    if spec is None:
        names = ", ".join(_BY_NAME)
        raise RequestError(f"unknown tool {_short(name)}; filecache has {names}")
    return spec


def param_help(tool: str, param: str) -> str:
    """A parameter's description, for CLI option help (the same words the model reads)."""
    return _BY_NAME[tool].param(param).description


@dataclass(frozen=True)
class ToolOutput:
    """The tool result to send back: its text, and whether it is an error."""

    text: str
    is_error: bool = False


def schemas(
    style: str = "openai", *, strict: bool = False, guide: str | None = None
) -> list[dict[str, Any]]:
    """Tool definitions for ``openai`` (chat completions), ``responses``, ``anthropic`` or
    ``mcp`` (``tools/list`` entries), new dicts on every call.

    Args:
        style: the API the definitions are for.
        strict: OpenAI strict mode (``"strict": true``; every property required, optional ones
            nullable; ``additionalProperties`` false).
        guide: the text after ``read_file``'s description. Default: ``instructions()`` (for
            ``mcp``: ``mcp_instructions()``, with ``cache_stats`` among the tools).
    """
    from filecache.core.render import instructions, mcp_instructions

    if style not in STYLES:
        raise RequestError(f"unknown style {style!r}; use openai, responses, anthropic or mcp")
    if guide is None:
        guide = mcp_instructions("read_file") if style == "mcp" else instructions()
    specs = TOOL_SPECS if style == "mcp" else FILE_TOOL_SPECS
    out: list[dict[str, Any]] = []
    for spec in specs:
        description = f"{spec.description}\n\n{guide}" if spec.guide else spec.description
        tool: dict[str, Any] = {"name": spec.name, "description": description}
        params = spec.input_schema(strict)
        if style == "openai":
            tool["parameters"] = params
            out.append({"type": "function", "function": tool | _strict(strict)})
        elif style == "responses":
            out.append({"type": "function", **tool, "parameters": params, **_strict(strict)})
        elif style == "anthropic":
            out.append({**tool, "input_schema": params, **_strict(strict)})
        else:
            _nullable_optionals(params)
            hints = {"readOnlyHint": spec.read_only, "openWorldHint": False}
            if not spec.read_only:
                hints |= {"destructiveHint": True, "idempotentHint": spec.idempotent}
            out.append({**tool, "inputSchema": params, "annotations": hints})
    return out


def tool_docstring(spec: ToolSpec, guide: str | None = None) -> str:
    """``spec`` as a Google-style docstring: its description (with ``guide`` after it for
    ``read_file``; default ``instructions()``) and an ``Args:`` line per parameter. For the
    frameworks that read a tool's description and parameters from its function's docstring
    (pydantic-ai, the OpenAI Agents SDK, smolagents)."""
    from filecache.core.render import instructions

    head = spec.description
    if spec.guide:
        head = f"{head}\n\n{guide if guide is not None else instructions()}"
    args = "".join(f"\n    {p.name}: {p.description}" for p in spec.params)
    return f"{head}\n\nArgs:{args}\n" if args else f"{head}\n"


def _nullable_optionals(params: dict[str, Any]) -> None:
    """Mark an MCP tool's optional properties ``nullable`` (the server takes ``null`` for "not
    given"): clients that copy the properties and drop ``required``, as smolagents' MCP client
    does (mcpadapt 0.1.19, grll/mcpadapt#90), then still let the model leave them out. JSON
    Schema treats the keyword as an annotation; other clients ignore it."""
    required = set(params.get("required", ()))
    for name, prop in params.get("properties", {}).items():
        if name not in required:
            prop["nullable"] = True


def _strict(strict: bool) -> dict[str, Any]:
    return {"strict": True} if strict else {}


def check_arguments(spec: ToolSpec, arguments: object) -> dict[str, Any]:
    """``arguments`` (a JSON object, or its text; anything else is refused) checked strictly
    against ``spec``.

    Returns every parameter of the tool: the value given, or None where an optional one was
    not given (or given as null). Raises ``RequestError`` (one line) for anything else.
    """
    args = _arguments(arguments)
    known = {p.name for p in spec.params}
    unknown = [name for name in args if name not in known]
    if unknown:
        takes = ", ".join(p.name for p in spec.params) or "no arguments"
        raise RequestError(
            f"{spec.name}: unknown argument {_short(unknown[0])}; {spec.name} takes {takes}"
        )
    out: dict[str, Any] = {}
    for param in spec.params:
        value = args.get(param.name)
        if value is None:
            if param.required:
                raise RequestError(f"{spec.name}: missing argument {param.name!r}")
        elif not _is(value, param.type):
            raise RequestError(
                f"{spec.name}: argument {param.name!r} must be {_A[param.type]}, "
                f"got {_short(value)}"
            )
        elif param.enum is not None and value not in param.enum:
            raise RequestError(
                f"{spec.name}: argument {param.name!r} must be one of "
                f"{', '.join(param.enum)}; got {_short(value)}"
            )
        elif param.minimum is not None and value < param.minimum:
            raise RequestError(
                f"{spec.name}: argument {param.name!r} must be {param.minimum} or more, got {value}"
            )
        out[param.name] = value
    return out


_A = {"string": "a string", "integer": "an integer", "boolean": "true or false"}


def _is(value: Any, kind: JsonType) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, bool)


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` on one line, cut to about ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _arguments(arguments: object) -> dict[str, Any]:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments or "{}")
        except (json.JSONDecodeError, RecursionError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise RequestError(f"arguments are not valid JSON ({why}); send a JSON object") from exc
        arguments = parsed
    if not isinstance(arguments, Mapping):
        raise RequestError("arguments must be a JSON object")
    return dict(arguments)


def call_session(
    session: Session, args: Mapping[str, Any], call_id: str | None = None
) -> ReadResult | WriteResult:
    """The ``Session`` call for ``check_arguments``' output of read_file, write_file or
    edit_file (told apart by their arguments)."""
    path = args["path"]
    if "content" in args:
        return session.write(path, args["content"], call_id=call_id)
    if "old_string" in args:
        return session.edit(
            path, args["old_string"], args["new_string"],
            replace_all=bool(args["replace_all"]), call_id=call_id,
        )  # fmt: skip
    return session.read(
        path, offset=args["offset"], limit=args["limit"], mode=args["mode"] or "auto",
        symbol=args["symbol"], fresh=bool(args["fresh"]), call_id=call_id,
    )  # fmt: skip


def run_tool(
    session: Session, name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None
) -> ToolOutput:
    """Run filecache's ``read_file``/``write_file``/``edit_file`` for one tool call."""
    try:
        spec = next((s for s in FILE_TOOL_SPECS if s.name == name), None)
        if spec is None:
            names = ", ".join(s.name for s in FILE_TOOL_SPECS)
            raise RequestError(f"unknown tool {_short(name)}; filecache has {names}")
        args = check_arguments(spec, arguments)
        return ToolOutput(call_session(session, args, call_id).text)
    except FileCacheError as exc:
        from filecache.core.render import render_tool_error

        return ToolOutput(render_tool_error(str(exc)), is_error=True)
