"""``filecache serve``: an MCP server whose file tools answer re-reads with FileRefs and diffs.

Tools: ``read_file``, ``write_file``, ``edit_file`` and ``cache_stats``, each a thin call into
``Session`` (thread-safe). Over streamable HTTP the file tools run in worker threads, so that
one client's long call never stalls another's. Over stdio they run on the event loop
(``inline``): a stdio server has one client, whose calls take its session's lock (one session
per root), so they mostly run one at a time whatever runs them, and the thread hop there and
back cost more than an unchanged re-read's own work (``bench/bench_mcp.py``); a long call
delays the client's next message (a ping, another call) until it is done. ``cache_stats`` and a new
connection's set-up (store reads) run in worker threads on both.
Their definitions (``tools/list``) and argument checks come from the one table of tool specs
(``filecache.tools``), and ``FileCacheServer`` serves them as a server middleware
(``mcp_compat``), on mcp 1.x and 2.x alike: the SDK carries the transport and the handshake, and
its own argument parsing (which turns ``"5"`` into 5 and ignores unknown names) never runs.

Invariants:
- Arguments are checked strictly (``tools.check_arguments``): a wrong type, a missing argument
  or an unknown one is a tool error of one line that names it, before anything is read.
- Every path is confined twice: to the server's roots (``fsio.locate``: resolved, symlinks
  included) and, when the client declares MCP roots, to those too. Anything refused, and any
  other failure, is a tool error (``isError``) with a message that says what to do; the server
  keeps answering.
- One filecache session per client connection (``mcp_sessions.connection_key``), the session a
  client names in its ``filecache-session`` header (the same on every replica of one store), or
  the fixed ``--session``. With several roots a connection has one session per root, under one
  id that each root's cache stores apart (``FileCache.session``: ``ID#<root hash>`` off the
  root that claimed it), so equal relative paths under different roots never share a view.
- A session several connections can reach (named or fixed) is leased to one live connection at
  a time (``_leased``: a sealed row in the store, checked with the call under a store lock): a
  connection that takes it from another, or finds it used without a lease, forgets every result
  first, so it never gets a FileRef to a result its client did not receive; ``cache_stats``
  counts only the answers since its view began.
- A result backs FileRefs only within the connection's ``RefWindow`` (N calls, T minutes): an MCP
  server cannot see when the client compacts its context.
- Stores open in the server's lifespan and are closed (blobs flushed) when it ends.
- Only what the client received is a fact: a call whose request the client cancels
  (``notifications/cancelled``) is abandoned (``Session.abandon``), while it runs (its commit
  is rolled back) or after it was answered (its facts are forgotten before the next call).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import signal
import sys
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from filecache import FileCache, ReadResult, Session, WriteResult
from filecache.core.kinds import Tool
from filecache.core.render import mcp_instructions
from filecache.errors import ConfigError, FileCacheError, OutsideRootError, PathError
from filecache.figures import answers_of, headline_of, session_headline
from filecache.session import check_session_id, new_call_id
from filecache.tools import call_session, check_arguments, schemas, tool_spec

from .mcp_compat import (
    CallNext,
    HandlerResult,
    install,
    list_client_roots,
    new_server,
    run,
    wire_result,
)
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

__all__ = ["FileCacheServer", "ServeOptions", "serve"]

log = logging.getLogger("filecache.mcp")

_ROOTS_TIMEOUT = 5.0  # seconds to wait for the client's roots/list answer
_CALLS_KEPT = 256  # per connection: the request ids a notifications/cancelled may name


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
    """One client connection: its sessions (one per root), ref window and client roots.

    ``lease`` is this connection's holder name for a session other connections may reach too
    (named by a header, or the fixed ``--session``), None for a session of its own; ``since``
    is, per session, the head its view began at (what ``cache_stats`` counts).
    """

    def __init__(
        self,
        sessions: list[Session],
        window: RefWindow,
        others: OtherServers | None = None,
        lease: str | None = None,
    ) -> None:
        self.sessions = sessions
        self.window = window
        self.others = others  # a session that other servers may answer too (named or fixed)
        self.lease = lease
        self.since: dict[str, int] = {}
        self.held = False  # whether it has held its lease (then it has a context of its own)
        self.client_roots: tuple[Path, ...] | None = None
        self.roots_known = False
        # JSON-RPC request id -> the filecache call id it runs as: a notifications/cancelled
        # for the request abandons the call (bounded: a cancel refers to a recent request)
        self.calls: OrderedDict[str, str] = OrderedDict()

    def started(self, request_id: object, call_id: str) -> None:
        if request_id is None:
            return
        self.calls[str(request_id)] = call_id
        while len(self.calls) > _CALLS_KEPT:
            self.calls.popitem(last=False)

    def abandon(self, call_id: str) -> None:
        """The client gave up on ``call_id``: no session keeps a fact of it."""
        for session in self.sessions:
            session.abandon(call_id)


class FileCacheServer:
    """The state behind the MCP tools: roots, their caches (opened in the lifespan), connections."""

    def __init__(self, options: ServeOptions, *, inline: bool = False) -> None:
        if not options.roots:
            raise ConfigError("serve needs at least one --root directory")
        if options.session is not None:
            check_session_id(options.session)
        roots = []
        for root in options.roots:
            real = Path(root).resolve()
            if not real.is_dir():
                raise ConfigError(f"root {root} is not a directory")
            roots.append(real)
        self.options = options
        self.inline = inline  # file tools on the event loop (stdio), else in worker threads
        self.roots = tuple(roots)
        self.caches: list[FileCache] = []
        self.connections: Connections[_Connection] = Connections(self._new_connection)
        self._open_lock = threading.Lock()
        self._instance = new_session_id()  # names this server's connections in leases

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
                self.caches[0].engine.counts.count(
                    "warm up"
                )  # exact_counts: load the vocabulary before a call

    def close(self) -> None:
        """Release the stdio connection's lease (a later process may continue its session),
        then flush and close every store."""
        if self.inline and self.caches:
            for conn in self.connections.values():
                with contextlib.suppress(FileCacheError):
                    self._release(conn)
        with self._open_lock:
            caches, self.caches = self.caches, []
        for cache in caches:
            cache.close()

    @asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[FileCacheServer]:
        await anyio.to_thread.run_sync(self.open)
        try:
            yield self
        finally:
            await anyio.to_thread.run_sync(self.close)

    def _new_connection(self, named: str | None = None, link: str | None = None) -> _Connection:
        if not self.caches:
            raise FileCacheError("the server is not running (its stores are closed)")
        session_id = self.options.session or named or new_session_id()
        # One id on every root: a cache stores it per root (``FileCache.session``), so equal
        # relative paths under two roots of one store never share a view.
        sessions = [cache.session(session_id) for cache in self.caches]
        settings = self.caches[0].engine.settings
        window = RefWindow(settings.mcp_ref_calls, settings.mcp_ref_minutes)
        if not (self.options.session or named):
            return _Connection(sessions, window)
        # A continued session (fixed or named): its calls so far count towards the window, and
        # so do those other servers answer later (replicas on one store).
        others = OtherServers([(s.engine.store, s.id) for s in sessions], window)
        others.catch_up()
        lease = f"{self._instance}:{link or new_session_id()}"
        return _Connection(sessions, window, others, lease)

    # -- leases: one live connection per shared session ---------------------------------------

    @contextlib.contextmanager
    def _leased(self, conn: _Connection) -> Iterator[None]:
        """Around every call of a connection whose session others may reach (named or fixed):
        the connection takes the session's lease, in the store, for the call. A session whose
        lease another connection holds (on any server on the store), or that was used without
        one (the CLI, the library, an older release), is taken over with an empty view: the
        results that the session's view relies on are not in this client's context, so its
        next reads send content. The lease lock orders calls of every connection on the
        session, so no call runs between the check and the answer."""
        if conn.lease is None:
            yield
            return
        first = conn.sessions[0]
        store, seal = first.engine.store, self.caches[0].engine.seal
        with store.lock(f"lease:{first.id}"):
            holder = seal.get(store, "lease", first.id)  # sealed: a planted "" is no release
            if holder != conn.lease:
                # "" is a lease its holder released (a stdio server that exited): a new
                # connection continues it; one that held it before has lost what came between.
                if (
                    holder
                    or conn.held
                    or (holder is None and any(store.head(s.id) for s in conn.sessions))
                ):
                    if holder:
                        log.warning(
                            "filecache session %s: another connection used it; this one starts "
                            "with an empty view (give each client its own filecache-session)",
                            first.id,
                        )
                    for session in conn.sessions:
                        session.forget(session.held_call_ids())
                    conn.since = {s.id: store_head(s) for s in conn.sessions}
                seal.put(store, "lease", first.id, conn.lease)
                conn.held = True
            yield

    def _release(self, conn: _Connection) -> None:
        """Give up ``conn``'s lease if it still holds it: the next holder continues the view."""
        if conn.lease is None:
            return
        first = conn.sessions[0]
        store, seal = first.engine.store, self.caches[0].engine.seal
        with store.lock(f"lease:{first.id}"):
            if seal.get(store, "lease", first.id) == conn.lease:
                seal.put(store, "lease", first.id, "")

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
        if len(self.roots) == 1 and not conn.client_roots and "\x00" not in raw:
            return conn.sessions[0]  # no root to pick, no client roots to check: Session confines
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

    async def _client_roots(self, ctx: Any, conn: _Connection) -> None:
        """Fetch the client's MCP roots once per connection (again after roots/list_changed)."""
        if conn.roots_known:
            return
        roots: tuple[Path, ...] | None = None
        try:
            with anyio.fail_after(_ROOTS_TIMEOUT):
                uris = await list_client_roots(ctx.session)
            roots = tuple(p for p in (_path_of_uri(u) for u in uris or ()) if p)
        except Exception as exc:  # a client that fails roots/list: serve the server's roots
            log.warning("roots/list failed (%s); using the server's roots only", exc)
        conn.client_roots = roots or None
        conn.roots_known = True

    # -- the middleware that serves the tools -------------------------------------------------

    async def __call__(self, ctx: Any, call_next: CallNext) -> HandlerResult:
        """Serve ``tools/list`` and ``tools/call`` from the tool table; note roots changes."""
        if ctx.method == "tools/list":
            # new dicts: an outer middleware may edit them
            return wire_result(ctx, {"tools": schemas("mcp")})
        if ctx.method == "tools/call":
            params = ctx.params or {}
            return wire_result(
                ctx, await self.call(ctx, params.get("name"), params.get("arguments"))
            )
        if ctx.method == "notifications/cancelled":
            await self._cancelled(ctx)
        if ctx.method == "notifications/roots/list_changed":
            try:
                conn = self.connections.peek(self._key(ctx)[0])
            except FileCacheError:  # a bad filecache-session header: its calls say so
                conn = None
            # The next call re-fetches. A notification that cannot be tied to its connection
            # (mcp 1.x over HTTP) makes every connection re-fetch: one extra roots/list each.
            for each in [conn] if conn is not None else self.connections.values():
                each.roots_known = False
        return await call_next(ctx)

    async def _cancelled(self, ctx: Any) -> None:
        """``notifications/cancelled``: the client will not use the request's answer, whether
        it is still running (its commit is rolled back) or was answered already (the client
        drops a late answer: its facts are forgotten, in the store too, before the next call
        is answered). A cancel that names no call of ours is ignored."""
        raw = (ctx.params or {}).get("requestId")
        if raw is None:
            return
        try:
            conns = [self.connections.peek(self._key(ctx)[0])]
        except FileCacheError:
            conns = []
        if conns == [None]:  # not tied to its connection (mcp 1.x over HTTP): every one's
            conns = list(self.connections.values())
        for conn in conns:
            cid = conn.calls.pop(str(raw), None) if conn is not None else None
            if conn is not None and cid is not None:
                conn.abandon(cid)
                for session in conn.sessions:  # at once, for the other replicas of the store
                    await anyio.to_thread.run_sync(_settle, session)

    async def call(self, ctx: Any, name: object, arguments: object) -> dict[str, Any]:
        """One tool call: arguments checked, then the op in a worker thread; every failure is
        an ``isError`` result. A call whose request is cancelled (the client's
        ``notifications/cancelled``, which the SDK turns into a cancellation of this task)
        is abandoned: it leaves no fact (``Session.abandon``)."""
        cid: str | None = None
        conn: _Connection | None = None
        try:
            spec = tool_spec(name if isinstance(name, str) else repr(name))
            args = check_arguments(spec, arguments if arguments is not None else {})
            conn = await self._connection(ctx)
            if spec.name == "cache_stats":
                payload = await anyio.to_thread.run_sync(self._stats, conn)
                return _result(json.dumps(payload), payload)
            cid = new_call_id()
            conn.started(getattr(ctx, "request_id", None), cid)
            await self._client_roots(ctx, conn)
            if self.inline:
                result = self._run(conn, args["path"], _op(args, cid))
            else:  # a cancel does not wait for the thread: the call is abandoned at once
                result = await anyio.to_thread.run_sync(
                    self._run, conn, args["path"], _op(args, cid), abandon_on_cancel=True
                )
        except anyio.get_cancelled_exc_class():
            if conn is not None and cid is not None:
                conn.abandon(cid)
            raise
        except FileCacheError as exc:
            return _error(str(exc))
        except Exception as exc:  # never crash the server on one bad call
            log.exception("filecache tool failed")
            return _error(f"internal error ({type(exc).__name__}): {exc}")
        # shallow (the results hold only scalars): dataclasses.asdict deep-copies, ~50 us a call
        meta = {f.name: getattr(result, f.name) for f in _RESULT_FIELDS[type(result)]}
        meta.pop("text", None)
        return _result(result.text, meta)

    def _key(self, ctx: Any) -> tuple[str | None, str | None, str | None]:
        """``(key, named, link)``: the request's connection state key (None: keep no state),
        the session its header names, and its connection (``connection_key``).

        A fixed ``--session``, or a ``filecache-session`` header, names a session several
        connections may reach: each connection has its own state (window, client roots, lease)
        over the one ``Session`` object per id and root (``FileCache.session``). Without a
        connection (stateless HTTP) no state is kept: no lease can be bound to it.
        """
        link = connection_key(ctx.request)
        named = None if self.options.session else client_session_id(ctx.request)
        if link is None:
            return None, named, None
        if self.options.session:
            return f"fixed\0{link}", None, link
        return (link if named is None else f"session:{named}\0{link}"), named, link

    async def _connection(self, ctx: Any) -> _Connection:
        """The request's connection; a new one is made in a worker thread (it reads the store)."""
        key, named, link = self._key(ctx)
        conn = self.connections.peek(key)
        if conn is None:
            make = functools.partial(self._new_connection, named, link)
            conn = await anyio.to_thread.run_sync(self.connections.get, key, make)
        return conn

    def _run(
        self, conn: _Connection, path: str, op: Callable[[Session], ReadResult | WriteResult]
    ) -> ReadResult | WriteResult:
        with self._leased(conn):
            if conn.others is not None:
                conn.others.catch_up()
            conn.window.begin_call()
            expired = conn.window.expired()
            if expired:
                for session in conn.sessions:
                    session.forget(expired)
            result = op(self._confine(conn, path))
            conn.window.record(result.call_id)
            if conn.others is not None:
                conn.others.mine(result.call_id)
            return result

    def _stats(self, conn: _Connection) -> dict[str, Any]:
        """This connection's answers: those of its session since its view began (a session
        taken over from another connection counts from the takeover), and the headline
        (``filecache.figures``): its session's, when the session is the connection's own from
        its start; else of this connection's answers only, with no request figures (a client
        sending another's session header learns nothing of its reads or requests)."""
        kinds: dict[str, int] = {}
        with self._leased(conn):
            rows = [
                call
                for session in conn.sessions
                for call in session.ledger().calls.values()
                if call.seq > conn.since.get(session.id, 0)
            ]
            first = conn.sessions[0]
            if len(conn.sessions) == 1 and not conn.since.get(first.id, 0):
                headline = session_headline(first.engine.store, first.id)  # all its own
            else:  # a session taken over (or several roots): this connection's answers only,
                headline = headline_of(first.id, rows, None)  # nothing of another's requests
        calls = [call for call in rows if call.tool != Tool.FORGET]
        for call in calls:
            kinds[call.kind] = kinds.get(call.kind, 0) + 1
        answers = answers_of(rows)  # counted as every report counts them (filecache.figures)
        sent, plain = int(answers.filecache), int(answers.baseline)
        return {
            "headline": headline.to_json(),
            "session": conn.sessions[0].id,
            "roots": [str(r) for r in self.roots],
            "answers": dict(sorted(kinds.items())),
            "read_tokens_sent": sent,
            "read_tokens_plain": plain,
            "read_tokens_saved_pct": round(answers.saved_pct, 1),
            "refs_expire_after": {
                "calls": conn.window.max_calls,
                "minutes": conn.window.max_minutes,
            },
        }


_RESULT_FIELDS = {
    cls: tuple(f for f in dataclasses.fields(cls) if f.name != "text")
    for cls in (ReadResult, WriteResult)
}


def store_head(session: Session) -> int:
    """The stored head of ``session`` (its newest event's seq)."""
    return session.engine.store.head(session.id)


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


def _op(args: dict[str, Any], cid: str) -> Callable[[Session], ReadResult | WriteResult]:
    """The ``Session`` call for checked arguments of read_file, write_file or edit_file."""
    return lambda session: call_session(session, args, cid)


def _settle(session: Session) -> None:
    try:
        session.settle()
    except FileCacheError as exc:  # the next call of the session records it
        log.warning("could not record a cancelled call yet (%s)", exc)


def _result(text: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "_meta": {"filecache": meta}}


def _error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def _server_of(state: FileCacheServer, host: str, port: int) -> Any:
    server = new_server(
        state.options.name,
        instructions=mcp_instructions("read_file"),
        lifespan=state.lifespan,
        host=host,
        port=port,
    )
    install(server, state)
    return server


def serve(
    options: ServeOptions, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000
) -> None:
    """Run the server until the client disconnects (stdio) or the process is stopped (http)."""
    if transport not in ("stdio", "http"):
        raise ConfigError(f"unknown transport {transport!r}; use 'stdio' or 'http'")
    state = FileCacheServer(options, inline=transport == "stdio")
    # The stores open here, before the server's loop: a store that cannot be opened (corrupt,
    # not writable) raises its StoreError to the caller (the CLI prints it in one line), not
    # from inside the server's task group. The lifespan finds them open and closes them.
    state.open()
    try:
        server = _server_of(state, host, port)
        if transport == "http" and host not in ("127.0.0.1", "localhost", "::1"):
            print(
                f"filecache: serving files on {host}:{port} without authentication; anyone who "
                "can reach it can read and write under the roots",
                file=sys.stderr,
            )
        if transport == "stdio":
            _end_on_stdin_after_sigterm()
        else:  # where to point a client (the SDK's default path, 1.x and 2.x alike)
            where = f"[{host}]" if ":" in host else host
            print(
                f"filecache: MCP server (streamable HTTP) at http://{where}:{port}/mcp; "
                "stop it with Ctrl-C",
                file=sys.stderr,
                flush=True,
            )
        run(server, "stdio" if transport == "stdio" else "streamable-http", host=host, port=port)
    finally:
        state.close()  # a no-op after the lifespan closed them


def _end_on_stdin_after_sigterm(grace: float = 5.0) -> None:
    """A client that stops the server with SIGTERM (mcp 1.x's stdio client sends it just before
    it closes the server's stdin) gets the same clean end as one that only closes stdin: the
    server ends when stdin does, releasing its session's lease (so the next process continues
    the session) and flushing its stores. One whose stdin never ends exits after ``grace``
    seconds. Not a handler that closes stores itself: with stdio the tools run on the main
    thread, which the signal interrupts, possibly inside a call."""

    def on_term(signum: int, _frame: object) -> None:
        timer = threading.Timer(grace, os._exit, (128 + signum,))
        timer.daemon = True
        timer.start()

    with contextlib.suppress(ValueError):  # not the main thread: leave the default
        signal.signal(signal.SIGTERM, on_term)
