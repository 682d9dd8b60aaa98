"""``filecache serve``: an MCP server whose file tools answer re-reads with FileRefs and diffs.

Tools: ``read_file``, ``write_file``, ``edit_file`` and ``cache_stats``, each a thin call into
``Session`` run in a worker thread (``Session`` is thread-safe; the event loop stays free).

Invariants:
- Every path is confined twice: to the server's roots (``fsio.locate``: resolved, symlinks
  included) and, when the client declares MCP roots, to those too. Anything refused, and any
  other failure, is a tool error (``isError``) with a message that says what to do; the server
  keeps answering.
- One filecache session per client connection (``mcp_sessions.connection_key``), the session a
  client names in its ``filecache-session`` header (the same on every replica of one store), or
  the fixed ``--session``. With several roots a connection has one session per root (``ID``,
  ``ID.1``, ...) so that equal relative paths under different roots never share a view.
- A result backs FileRefs only within the connection's ``RefWindow`` (N calls, T minutes): an MCP
  server cannot see when the client compacts its context.
- Stores open in the server's lifespan and are closed (blobs flushed) when it ends.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote, urlparse

from filecache import FileCache, ReadResult, Session, WriteResult
from filecache.errors import ConfigError, FileCacheError, OutsideRootError, PathError
from filecache.render import mcp_instructions

from .mcp_sessions import (
    Connections,
    OtherServers,
    RefWindow,
    client_session_id,
    connection_key,
    mcp_required,
    new_session_id,
)

with mcp_required():
    import anyio
    import anyio.to_thread
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.types import (
        CallToolResult,
        ListRootsRequest,
        ListRootsResult,
        TextContent,
        ToolAnnotations,
    )
    from pydantic import Field

__all__ = ["FileCacheServer", "ServeOptions", "build_server", "serve"]

log = logging.getLogger("filecache.mcp")

_ROOTS_TIMEOUT = 5.0  # seconds to wait for the client's roots/list answer


@dataclass(frozen=True)
class ServeOptions:
    """How ``filecache serve`` runs. ``max_calls``/``max_minutes`` bound how long a result may
    back FileRefs (see ``RefWindow``; None: the settings ``mcp_ref_calls``/``mcp_ref_minutes``);
    ``session`` fixes one session id for every connection; ``watch`` watches the roots for files
    changed outside the agent (the setting ``watch``)."""

    roots: tuple[Path, ...]
    store: str | None = None
    session: str | None = None
    max_calls: int | None = None
    max_minutes: float | None = None
    name: str = "filecache"
    watch: bool = False


class _Connection:
    """One client connection: its sessions (one per root), ref window and client roots."""

    def __init__(
        self, sessions: list[Session], window: RefWindow, others: OtherServers | None = None
    ) -> None:
        self.sessions = sessions
        self.window = window
        self.others = others  # a session that other servers may answer too (named or fixed)
        self.client_roots: tuple[Path, ...] | None = None
        self.roots_known = False


class FileCacheServer:
    """The state behind the MCP tools: roots, their caches (opened in the lifespan), connections."""

    def __init__(self, options: ServeOptions) -> None:
        if not options.roots:
            raise ConfigError("serve needs at least one --root directory")
        roots = []
        for root in options.roots:
            real = Path(root).resolve()
            if not real.is_dir():
                raise ConfigError(f"root {root} is not a directory")
            roots.append(real)
        self.options = options
        self.roots = tuple(roots)
        self.caches: list[FileCache] = []
        self.connections: Connections[_Connection] = Connections(self._new_connection)
        self._open_lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        """Open one cache (and store) per root."""
        overrides: dict[str, Any] = {}
        if self.options.store:
            overrides["store"] = self.options.store
        if self.options.max_calls is not None:
            overrides["mcp_ref_calls"] = self.options.max_calls
        if self.options.max_minutes is not None:
            overrides["mcp_ref_minutes"] = self.options.max_minutes
        if self.options.watch:
            overrides["watch"] = True
        with self._open_lock:
            if not self.caches:
                self.caches = [FileCache(root, **overrides) for root in self.roots]
                self.caches[0].count("warm up")  # load the BPE vocabulary before the first call

    def close(self) -> None:
        """Flush and close every store."""
        with self._open_lock:
            caches, self.caches = self.caches, []
        for cache in caches:
            cache.close()

    @asynccontextmanager
    async def lifespan(self, _app: MCPServer[Any]) -> AsyncIterator[FileCacheServer]:
        await anyio.to_thread.run_sync(self.open)
        try:
            yield self
        finally:
            await anyio.to_thread.run_sync(self.close)

    def _new_connection(self, named: str | None = None) -> _Connection:
        if not self.caches:
            raise FileCacheError("the server is not running (its stores are closed)")
        session_id = self.options.session or named or new_session_id()
        sessions = [
            cache.session(session_id if i == 0 else f"{session_id}.{i}")
            for i, cache in enumerate(self.caches)
        ]
        settings = self.caches[0].settings
        window = RefWindow(settings.mcp_ref_calls, settings.mcp_ref_minutes)
        if not (self.options.session or named):
            return _Connection(sessions, window)
        # A continued session (fixed or named): its calls so far count towards the window, and
        # so do those other servers answer later (replicas on one store).
        others = OtherServers([(s.cache.store, s.id) for s in sessions], window)
        others.catch_up()
        return _Connection(sessions, window, others)

    # -- paths --------------------------------------------------------------------------------

    def _pick_root(self, raw: str) -> tuple[int, Path | None]:
        """The root a path belongs to, and its resolved form (None when it cannot be resolved
        inside a root; ``Session`` then refuses it with its own message)."""
        if "\x00" in raw:
            raise PathError(f"{raw!r}: path contains a NUL byte")
        if not raw:
            return 0, None
        path = Path(raw)
        inside: list[tuple[int, Path]] = []
        for i, root in enumerate(self.roots):
            real = _resolve(root / path)
            if real == root or root in real.parents:
                inside.append((i, real))
        if not inside:
            if len(self.roots) == 1:
                return 0, None
            where = ", ".join(str(r) for r in self.roots)
            raise OutsideRootError(
                f"{raw}: outside every root ({where}); only files under a root can be read or "
                "written"
            )
        if path.is_absolute():  # the deepest root that contains it
            return max(inside, key=lambda c: len(self.roots[c[0]].parts))
        for candidate in inside:  # relative: the first root where it exists...
            if os.path.lexists(candidate[1]):
                return candidate
        for candidate in inside:  # ...else where its folder exists (a new file)
            if candidate[1].parent.is_dir():
                return candidate
        return inside[0]

    def _confine(self, conn: _Connection, raw: str) -> Session:
        index, real = self._pick_root(raw)
        allowed = conn.client_roots
        if (
            allowed
            and real is not None
            and not any(a == real or a in real.parents for a in allowed)
        ):
            where = ", ".join(str(a) for a in allowed)
            raise OutsideRootError(
                f"{raw}: resolves to {real}, outside the roots your client shared ({where})"
            )
        return conn.sessions[index]

    async def _client_roots(self, rc: ServerRequestContext[Any, Any], conn: _Connection) -> None:
        """Fetch the client's MCP roots once per connection (again after roots/list_changed)."""
        if conn.roots_known:
            return
        session = rc.session
        caps = session.client_capabilities
        roots: tuple[Path, ...] | None = None
        if caps is not None and caps.roots is not None and session.can_send_request:
            try:
                with anyio.fail_after(_ROOTS_TIMEOUT):
                    result = await session.send_request(ListRootsRequest(), ListRootsResult)
                roots = tuple(p for p in (_path_of_uri(str(r.uri)) for r in result.roots) if p)
            except Exception as exc:  # a client that fails roots/list: serve the server's roots
                log.warning("roots/list failed (%s); using the server's roots only", exc)
        conn.client_roots = roots or None
        conn.roots_known = True

    async def observe(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Server middleware: a roots/list_changed notification makes the next call re-fetch."""
        if ctx.method == "notifications/roots/list_changed":
            try:
                conn = self.connections.peek(self._key(ctx))
            except FileCacheError:  # a bad filecache-session header: its calls say so
                conn = None
            if conn is not None:
                conn.roots_known = False
        return await call_next(ctx)

    # -- calls --------------------------------------------------------------------------------

    async def call(
        self,
        ctx: Context[Any, Any],
        path: str | None,
        op: Callable[[Session], ReadResult | WriteResult],
    ) -> CallToolResult:
        """Run ``op`` on the session that owns ``path`` in a worker thread; errors become
        ``isError`` results."""
        rc = ctx.request_context
        try:
            conn = await self._connection(rc)
            await self._client_roots(rc, conn)
            result = await anyio.to_thread.run_sync(self._run, conn, path, op)
        except FileCacheError as exc:
            return _error(str(exc))
        except Exception as exc:  # never crash the server on one bad call
            log.exception("filecache tool failed")
            return _error(f"internal error ({type(exc).__name__}): {exc}")
        meta = {k: v for k, v in dataclasses.asdict(result).items() if k != "text"}
        return CallToolResult(
            content=[TextContent(type="text", text=result.text)], _meta={"filecache": meta}
        )

    def _key(self, rc: ServerRequestContext[Any, Any]) -> str | None:
        # A fixed --session is one model context: every connection shares its sessions (two
        # Session objects of one id would each number its ledger rows).
        if self.options.session:
            return "fixed"
        named = client_session_id(rc.request)
        return f"session:{named}" if named is not None else connection_key(rc.request)

    async def _connection(self, rc: ServerRequestContext[Any, Any]) -> _Connection:
        """The request's connection; a new one is made in a worker thread (it reads the store)."""
        key = self._key(rc)
        conn = self.connections.peek(key)
        if conn is None:
            named = key.removeprefix("session:") if key and key.startswith("session:") else None
            make = functools.partial(self._new_connection, named)
            conn = await anyio.to_thread.run_sync(self.connections.get, key, make)
        return conn

    def _run(
        self, conn: _Connection, path: str | None, op: Callable[[Session], ReadResult | WriteResult]
    ) -> ReadResult | WriteResult:
        if conn.others is not None:
            conn.others.catch_up()
        conn.window.begin_call()
        expired = conn.window.expired()
        if expired:
            for session in conn.sessions:
                session.forget(expired)
        session = self._confine(conn, path) if path is not None else conn.sessions[0]
        result = op(session)
        conn.window.record(result.call_id)
        if conn.others is not None:
            conn.others.mine(result.call_id)
        return result

    async def stats(self, ctx: Context[Any, Any]) -> CallToolResult:
        """This connection's numbers, as JSON."""
        rc = ctx.request_context
        try:
            conn = await self._connection(rc)
            payload = await anyio.to_thread.run_sync(self._stats, conn)
        except FileCacheError as exc:
            return _error(str(exc))
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(payload))],
            _meta={"filecache": payload},
        )

    def _stats(self, conn: _Connection) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        sent = plain = 0
        for session in conn.sessions:
            for call in session.ledger().calls.values():
                kinds[call.kind] = kinds.get(call.kind, 0) + 1
                if call.tool == "read":
                    sent += call.tokens
                    plain += call.tokens_full
        return {
            "session": conn.sessions[0].id,
            "roots": [str(r) for r in self.roots],
            "answers": dict(sorted(kinds.items())),
            "read_tokens_sent": sent,
            "read_tokens_plain": plain,
            "read_tokens_saved_pct": round(100 * (plain - sent) / plain, 1) if plain else 0.0,
            "refs_expire_after": {
                "calls": conn.window.max_calls,
                "minutes": conn.window.max_minutes,
            },
        }


def _resolve(path: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loops
        raise PathError(f"{path}: cannot resolve path ({exc})") from exc


def _path_of_uri(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path)).resolve()


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


# -- the tools -------------------------------------------------------------------------------

_PATH = Field(description="File path, relative to the root (or absolute inside a root).")
_READ_DOC = (
    "Read a text file. Lines come numbered (number, TAB, line) under a one-line header. "
    "Use offset/limit for a part of a large file."
)
_WRITE_DOC = (
    "Create or replace a text file with content (atomically). The server remembers what you "
    "wrote: a later read_file of it answers 'unchanged'."
)
_EDIT_DOC = (
    "Replace old_string with new_string in a file; old_string must occur exactly once unless "
    "replace_all is true. The server remembers your edit: a later read_file answers "
    "'unchanged' (or a diff of changes made by others)."
)
_STATS_DOC = "This connection's filecache numbers: answers by kind and read tokens saved (JSON)."


def build_server(options: ServeOptions) -> MCPServer[Any]:
    """The MCP server for ``options`` (stores open when it runs)."""
    state = FileCacheServer(options)
    guide = mcp_instructions("read_file")
    server: MCPServer[Any] = MCPServer(
        options.name,
        instructions=guide,
        lifespan=state.lifespan,
        middleware=[state.observe],
        log_level="WARNING",
    )

    async def read_file(
        path: Annotated[str, _PATH],
        ctx: Context[Any, Any],
        offset: Annotated[
            int | None, Field(description="First line to read (1-based). Default: 1.")
        ] = None,
        limit: Annotated[
            int | None, Field(description="Number of lines to read. Default: to the end.")
        ] = None,
        mode: Annotated[
            str,
            Field(
                description="'auto' (default), 'full' (always the lines, never an outline) or "
                "'outline' (signatures with line numbers, where supported)."
            ),
        ] = "auto",
        symbol: Annotated[
            str | None,
            Field(description="Read one definition, e.g. 'Class.method' (where supported)."),
        ] = None,
        fresh: Annotated[
            bool,
            Field(
                description="Send the full content even if you have it (use when the result a "
                "FileRef or diff names is no longer in your context)."
            ),
        ] = False,
    ) -> CallToolResult:
        return await state.call(
            ctx,
            path,
            lambda s: s.read(
                path, offset=offset, limit=limit, mode=mode, symbol=symbol, fresh=fresh
            ),
        )

    async def write_file(
        path: Annotated[str, _PATH],
        content: Annotated[str, Field(description="The file's complete new content.")],
        ctx: Context[Any, Any],
    ) -> CallToolResult:
        return await state.call(ctx, path, lambda s: s.write(path, content))

    async def edit_file(
        path: Annotated[str, _PATH],
        old_string: Annotated[str, Field(description="Exact text to replace.")],
        new_string: Annotated[str, Field(description="The replacement text.")],
        ctx: Context[Any, Any],
        replace_all: Annotated[
            bool, Field(description="Replace every occurrence, not just a unique one.")
        ] = False,
    ) -> CallToolResult:
        return await state.call(
            ctx, path, lambda s: s.edit(path, old_string, new_string, replace_all=replace_all)
        )

    async def cache_stats(ctx: Context[Any, Any]) -> CallToolResult:
        return await state.stats(ctx)

    server.add_tool(
        read_file,
        description=f"{_READ_DOC}\n\n{guide}",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    server.add_tool(
        write_file,
        description=_WRITE_DOC,
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    )
    server.add_tool(
        edit_file,
        description=_EDIT_DOC,
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False),
    )
    server.add_tool(
        cache_stats,
        description=_STATS_DOC,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    return server


def serve(
    options: ServeOptions, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000
) -> None:
    """Run the server until the client disconnects (stdio) or the process is stopped (http)."""
    server = build_server(options)
    if transport == "http" and host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"filecache: serving files on {host}:{port} without authentication; anyone who can "
            "reach it can read and write under the roots",
            file=sys.stderr,
        )
    if transport == "stdio":
        server.run("stdio")
    elif transport == "http":
        server.run("streamable-http", host=host, port=port)
    else:
        raise ConfigError(f"unknown transport {transport!r}; use 'stdio' or 'http'")
