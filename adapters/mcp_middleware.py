"""``FileCacheMiddleware``: filecache in front of an existing MCP server's own file tools.

Name the tools it should know, by role, with the argument that holds the path, and install it
on the server (mcp 2.x ``MCPServer`` or 1.x ``FastMCP``)::

    filecache = FileCacheMiddleware({"read": ("read_file", "path"), "edit": ("edit_file", "path")})
    filecache.install(server)    # on 2.x the same as MCPServer(..., middleware=[filecache])

A read tool still runs on every call; its output is the content (no second read). When the
connection's model still holds that output for the same arguments, the middleware answers with a
FileRef, or with a diff against the output it holds (``Session.answer_output``, as the tool
decorators do). Writes and edits pass through and are recorded in the ledger.

Invariants:
- The tool's own output reaches the model unchanged unless an ``unchanged`` or ``diff`` answer is
  reconstructible from results this connection's model still holds (within its ``RefWindow``).
- Results that are errors, not a single text block, or carry structured content that does not
  repeat the text, pass through untouched (a structured copy is never left stale).
- Content answers get one extra text block naming the result and its xxh3 tag, so that a later
  FileRef's "your result fc-..." can be found: the tool's own output has no filecache header.
- The read tool's schema gains a ``fresh`` flag, consumed here (the tool never sees it); a
  ``fresh`` that is not ``true``/``false`` is refused with a one-line error, as filecache's own
  tools refuse it.
- An argument error of the SDK's (pydantic's multi-line "1 validation error for ...Arguments")
  from a tool it knows reaches the model as one line that names the argument.

On mcp 2.x this is a ``ServerMiddleware``; on 1.x ``install`` puts it in an equivalent chain
around the server's handlers (``mcp_compat``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from filecache import FileCache, Session
from filecache.core.kinds import Kind, Tool
from filecache.core.render import mcp_instructions, render_result_tag
from filecache.errors import ConfigError
from filecache.settings import load_settings
from filecache.tools import READ_FILE

from .mcp_compat import CallNext, HandlerResult, install, replace_params, wire_result
from .mcp_sessions import (
    Connections,
    RefWindow,
    connection_key,
    mcp_required,
    new_session_id,
)

with mcp_required():
    import anyio.to_thread
    from pydantic import BaseModel

__all__ = ["FileCacheMiddleware", "ToolSpec"]

ToolSpec = tuple[str, str]
"""``(tool name, name of its path argument)``."""

ROLES = ("read", "write", "edit")
log = logging.getLogger("filecache.mcp")
_FRESH = READ_FILE.param("fresh")


@dataclasses.dataclass
class _Connection:
    session: Session
    window: RefWindow


class FileCacheMiddleware:
    """Server middleware (``(ctx, call_next)``) that puts filecache in front of file tools.

    Args:
        tools: role (``read``/``write``/``edit``) -> ``(tool name, path argument)``, or a list
            of them for several tools of one role.
        root: the directory whose ``[tool.filecache]`` settings apply (also where a default
            SQLite store would live). The host server does its own path confinement.
        store: SQLite path or ``":memory:"`` (default: views live as long as the process).
        session: one fixed session id for every connection (default: one per connection).
        max_calls, max_minutes: how long a result may back FileRefs (see ``RefWindow``;
            default: the settings ``mcp_ref_calls``/``mcp_ref_minutes``, 50 calls, 30 minutes).
        **settings: overrides of ``filecache.settings.Settings``.
    """

    def __init__(
        self,
        tools: Mapping[str, ToolSpec | Sequence[ToolSpec]],
        *,
        root: str | Path = ".",
        store: str | os.PathLike[str] = ":memory:",
        session: str | None = None,
        max_calls: int | None = None,
        max_minutes: float | None = None,
        **settings: Any,
    ) -> None:
        self._tools: dict[str, tuple[str, str]] = {}
        for role, specs in tools.items():
            if role not in ROLES:
                raise ConfigError(f"unknown tool role {role!r}; use one of {', '.join(ROLES)}")
            for name, arg in _specs(specs):
                self._tools[name] = (role, arg)
        if max_calls is not None:
            settings["mcp_ref_calls"] = max_calls
        if max_minutes is not None:
            settings["mcp_ref_minutes"] = max_minutes
        self._root, self._store, self._settings = Path(root), store, settings
        load_settings(self._root.resolve(), settings)  # bad settings fail here, not at a call
        self._session_id = session
        self._cache: FileCache | None = None
        self._lock = threading.Lock()
        self._connections: Connections[_Connection] = Connections(self._new_connection)
        reads = [n for n, (role, _) in self._tools.items() if role == Tool.READ]
        self._guide = mcp_instructions(reads[0] if reads else "the read tool")

    @property
    def cache(self) -> FileCache:
        """The ``FileCache`` (its store opens on first use)."""
        with self._lock:
            if self._cache is None:
                self._cache = FileCache(self._root, store=self._store, **self._settings)
                self._cache.engine.counts.count(
                    "warm up"
                )  # with exact_counts: load the BPE vocabulary up front
            return self._cache

    def close(self) -> None:
        """Flush and close the store (a later call opens it again)."""
        with self._lock:
            cache, self._cache = self._cache, None
        if cache is not None:
            cache.close()

    def install(self, server: Any) -> None:
        """Put this middleware in front of ``server``'s tools (mcp 2.x ``MCPServer``: its
        ``middleware`` list; 1.x ``FastMCP``: an equivalent wrapper of its handlers)."""
        install(server, self)

    def _new_connection(self) -> _Connection:
        cache = self.cache
        session = cache.session(self._session_id or new_session_id())
        window = RefWindow(
            cache.engine.settings.mcp_ref_calls, cache.engine.settings.mcp_ref_minutes
        )
        return _Connection(session, window)

    # -- the middleware -----------------------------------------------------------------------

    async def __call__(self, ctx: Any, call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/list":
            return self._listed(_as_dict(await call_next(ctx)))
        params = ctx.params
        if ctx.method != "tools/call" or params is None:
            return await call_next(ctx)
        name = params.get("name")
        # A fixed session is one model context: every connection shares its state.
        key = "fixed" if self._session_id else connection_key(ctx.request)
        conn = self._connections.peek(key)
        if conn is None:  # a new connection reads the store: not on the event loop
            conn = await anyio.to_thread.run_sync(self._connections.get, key)
        conn.window.begin_call()
        spec = self._tools.get(name) if isinstance(name, str) else None
        if spec is None:
            return await call_next(ctx)
        role, path_arg = spec
        raw_args = params.get("arguments")
        args = dict(raw_args) if isinstance(raw_args, Mapping) else {}
        if role != "read":
            result = _one_line_errors(name, _as_dict(await call_next(ctx)))
            if not result.get("isError"):
                path = str(args.get(path_arg, ""))
                try:
                    await anyio.to_thread.run_sync(conn.session.record_write, path, role)
                except Exception:  # the write happened; a ledger failure must not hide that
                    log.exception("filecache could not record %s of %s", role, path)
            return result
        fresh = args.pop("fresh", None)
        if fresh is not None and not isinstance(fresh, bool):
            message = f"{name}: argument 'fresh' must be true or false, got {fresh!r:.60}"
            return wire_result(ctx, _error(message))
        inner = replace_params(ctx, {**params, "arguments": args})
        result = _one_line_errors(name, _as_dict(await call_next(inner)))
        key = f"{name}{_canonical(args)}"
        path = str(args.get(path_arg, ""))
        try:
            return await anyio.to_thread.run_sync(
                self._answer, conn, key, path, bool(fresh), result
            )
        except Exception:  # never lose the tool's answer to a filecache failure: send it as is
            log.exception("filecache could not answer %s; sending the tool's own result", name)
            return result

    def _answer(
        self, conn: _Connection, key: str, path: str, fresh: bool, result: dict[str, Any]
    ) -> dict[str, Any]:
        content = result.get("content")
        if result.get("isError") or not isinstance(content, list) or len(content) != 1:
            return result
        block = content[0]
        text = (
            block.get("text") if isinstance(block, dict) and block.get("type") == "text" else None
        )
        if not isinstance(text, str) or "\x00" in text:
            return result  # not text that lines can carry (a NUL is the no-final-newline mark)
        structured = result.get("structuredContent")
        rewritable = structured is None or (
            isinstance(structured, dict) and any(v == text for v in structured.values())
        )
        expired = conn.window.expired()
        if expired:
            conn.session.forget(expired)
        answer = conn.session.answer_output(key, path, text, fresh=fresh or not rewritable)
        conn.window.record(answer.call_id)
        out = dict(result)
        meta = {k: v for k, v in dataclasses.asdict(answer).items() if k != "text"}
        old_meta = result.get("_meta")
        out["_meta"] = {**(old_meta if isinstance(old_meta, dict) else {}), "filecache": meta}
        tag = {"type": "text", "text": render_result_tag(answer.call_id, path, answer.version)}
        if answer.kind in (Kind.FULL, Kind.PARTIAL):
            out["content"] = [block, tag]
            return out
        out["content"] = [{"type": "text", "text": answer.text}]
        if isinstance(structured, dict):
            out["structuredContent"] = {
                k: answer.text if v == text else v for k, v in structured.items()
            }
        return out

    def _listed(self, result: dict[str, Any]) -> dict[str, Any]:
        """Read tools gain a ``fresh`` flag and filecache's instructions in their description."""
        tools = result.get("tools")
        if not isinstance(tools, list):
            return result
        out = []
        for tool in tools:
            name = tool.get("name") if isinstance(tool, dict) else None
            role = self._tools.get(name) if isinstance(name, str) else None
            if role is None or role[0] != "read":
                out.append(tool)
                continue
            tool = dict(tool)
            schema = dict(tool.get("inputSchema") or {"type": "object"})
            fresh = _FRESH.json_schema()
            schema["properties"] = {**(schema.get("properties") or {}), "fresh": fresh}
            tool["inputSchema"] = schema
            description = tool.get("description") or ""
            tool["description"] = f"{description}\n\n{self._guide}".lstrip()
            out.append(tool)
        return {**result, "tools": out}


def _specs(specs: ToolSpec | Sequence[ToolSpec]) -> list[ToolSpec]:
    if len(specs) == 2 and all(isinstance(x, str) for x in specs):
        name, arg = specs
        return [(str(name), str(arg))]
    out: list[ToolSpec] = []
    for spec in specs:
        if not (isinstance(spec, tuple | list) and len(spec) == 2):
            raise ConfigError(f"bad tool spec {spec!r}; use (tool name, path argument name)")
        out.append((str(spec[0]), str(spec[1])))
    return out


def _canonical(args: Mapping[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, default=str)


def _as_dict(result: HandlerResult) -> dict[str, Any]:
    if result is None:
        return {}
    if isinstance(result, BaseModel):
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped
    return dict(result)


def _error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


_VALIDATION = re.compile(r"(\d+) validation errors? for \S+\n")
_INPUT = re.compile(r"input_value=(.*?), input_type=")


def _one_line_errors(tool: str, result: dict[str, Any]) -> dict[str, Any]:
    """An error result whose text is pydantic's multi-line validation error, as one line:
    ``read_file: argument 'path': Field required; ...``."""
    content = result.get("content")
    if not result.get("isError") or not isinstance(content, list) or len(content) != 1:
        return result
    text = content[0].get("text") if isinstance(content[0], dict) else None
    found = _VALIDATION.search(text) if isinstance(text, str) else None
    if found is None or not isinstance(text, str):
        return result
    problems: list[str] = []
    where = ""
    for line in text[found.end() :].splitlines():
        if not line.startswith(" "):
            where = line.strip()
        elif not line.startswith("    ") and line.strip():
            message, _, detail = line.strip().partition(" [type=")
            got = _INPUT.search(detail)
            value = f" (got {got.group(1):.60})" if got and "missing" not in detail else ""
            problems.append(f"argument {where!r}: {message}{value}")
    if not problems:
        return result
    block = {**content[0], "text": f"{tool}: {'; '.join(problems)}"}
    return {**result, "content": [block]}
