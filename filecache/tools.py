"""filecache's own file tools for an agent loop: JSON schemas and one dispatcher.

``schemas("openai")`` / ``schemas("anthropic")`` give the tool definitions to send with a
request (their descriptions carry ``instructions()``); ``run_tool(session, name, arguments,
call_id)`` executes one call and returns the text for the tool result, with ``is_error`` set
for anything refused (a bad path, binary file, edit that does not match, bad arguments), so the
loop never crashes on the model's mistakes.

Invariant: the text of a successful call is exactly the ``Session`` answer's text; an error's
text is the ``FileCacheError`` message, which says what to do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import FileCacheError, RequestError
from .render import instructions

if TYPE_CHECKING:
    from .session import Session

__all__ = ["ToolOutput", "run_tool", "schemas"]

_READ = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the project root."},
        "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
        "limit": {"type": "integer", "minimum": 1, "description": "Number of lines."},
        "mode": {
            "type": "string",
            "enum": ["auto", "full", "outline"],
            "description": "auto (default): an outline for a very large file; full: content.",
        },
        "symbol": {"type": "string", "description": "Read one definition, e.g. Queue.pop."},
        "fresh": {"type": "boolean", "description": "Send the content even if you have it."},
    },
    "required": ["path"],
    "additionalProperties": False,
}
_WRITE = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the project root."},
        "content": {"type": "string", "description": "The whole new content."},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}
_EDIT = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the project root."},
        "old_string": {"type": "string", "description": "Exact text to replace."},
        "new_string": {"type": "string", "description": "Replacement text."},
        "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
    },
    "required": ["path", "old_string", "new_string"],
    "additionalProperties": False,
}
_TOOLS = (
    ("read_file", "Read a file (or lines of it).", _READ),
    ("write_file", "Create or replace a file with the given content.", _WRITE),
    (
        "edit_file",
        "Replace old_string with new_string in a file (one match unless replace_all).",
        _EDIT,
    ),
)


@dataclass(frozen=True)
class ToolOutput:
    """The tool result to send back: its text, and whether it is an error."""

    text: str
    is_error: bool = False


def schemas(style: str = "openai") -> list[dict[str, Any]]:
    """Tool definitions for ``openai`` (chat completions), ``responses`` or ``anthropic``."""
    guide = instructions()
    out: list[dict[str, Any]] = []
    for name, summary, params in _TOOLS:
        description = summary if name != "read_file" else f"{summary}\n\n{guide}"
        if style == "openai":
            fn = {"name": name, "description": description, "parameters": params}
            out.append({"type": "function", "function": fn})
        elif style == "responses":
            out.append(
                {"type": "function", "name": name, "description": description, "parameters": params}
            )
        elif style == "anthropic":
            out.append({"name": name, "description": description, "input_schema": params})
        else:
            raise RequestError(f"unknown style {style!r}; use openai, responses or anthropic")
    return out


def _arguments(arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise RequestError(
                f"arguments are not valid JSON ({exc.msg}); send a JSON object"
            ) from exc
        except RecursionError:  # the parser recurses: a 100,000-deep array must not crash
            raise RequestError("arguments are nested too deep; send a flat JSON object") from None
        arguments = parsed
    if not isinstance(arguments, Mapping):
        raise RequestError("arguments must be a JSON object")
    return dict(arguments)


def _pick(args: dict[str, Any], name: str, kind: type, required: bool = False) -> Any:
    value = args.get(name)
    if value is None:
        if required:
            raise RequestError(f"missing argument {name!r}")
        return None
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise RequestError(f"argument {name!r} must be {kind.__name__}, got {value!r}")
    return value


def run_tool(
    session: Session, name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None
) -> ToolOutput:
    """Run filecache's ``read_file``/``write_file``/``edit_file`` for one tool call."""
    try:
        args = _arguments(arguments)
        path = _pick(args, "path", str, required=True)
        if name == "read_file":
            result = session.read(
                path,
                offset=_pick(args, "offset", int),
                limit=_pick(args, "limit", int),
                mode=_pick(args, "mode", str) or "auto",
                symbol=_pick(args, "symbol", str),
                fresh=bool(_pick(args, "fresh", bool)),
                call_id=call_id,
            )
            return ToolOutput(result.text)
        if name == "write_file":
            written = session.write(path, _pick(args, "content", str, True), call_id=call_id)
            return ToolOutput(written.text)
        if name == "edit_file":
            edited = session.edit(
                path,
                _pick(args, "old_string", str, True),
                _pick(args, "new_string", str, True),
                replace_all=bool(_pick(args, "replace_all", bool)),
                call_id=call_id,
            )
            return ToolOutput(edited.text)
        raise RequestError(f"unknown tool {name!r}; filecache has read_file, write_file, edit_file")
    except FileCacheError as exc:
        return ToolOutput(f"Error: {exc}", is_error=True)
