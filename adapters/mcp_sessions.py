"""What the MCP server and middleware share: which connection a request belongs to, and how long
a result may back a FileRef.

Invariants:
- One filecache session per client connection. A stdio server serves exactly one client, so the
  process is the connection; over streamable HTTP the ``mcp-session-id`` header names it; a
  request with neither (stateless HTTP) gets a session of its own, so it is always sent content.
- A client that names its filecache session with the ``filecache-session`` header (HTTP) gets
  that session, on any replica serving the same store: an ``mcp-session-id`` is one replica's
  connection, a ``filecache-session`` is the model context, and its ledger outlives the
  connection; its view is leased to one live connection at a time (``mcp_server``).
- An MCP server cannot see the client's transcript, so it cannot know when a result it answered
  was compacted away. ``RefWindow`` bounds that risk: a result backs FileRefs and diffs only for
  ``max_calls`` later calls and ``max_minutes`` (settings ``mcp_ref_calls``/``mcp_ref_minutes``);
  after that its call id is forgotten (``Session.forget``), and the next read sends content.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from filecache.errors import RequestError
from filecache.extras import DISTRIBUTION, install_hint
from filecache.store.store import Store

__all__ = [
    "DISTRIBUTION",
    "MCP_INSTALL_HINT",
    "SESSION_HEADER",
    "Connections",
    "OtherServers",
    "RefWindow",
    "client_session_id",
    "connection_key",
    "mcp_required",
    "new_session_id",
]

MCP_INSTALL_HINT = (
    f"filecache's MCP server and middleware need the mcp extra: {install_hint('mcp')}"
)
_EXTRA_MODULES = ("mcp", "mcp_types", "anyio", "pydantic", "pydantic_core")

_SESSION_HEADER = "mcp-session-id"
SESSION_HEADER = "filecache-session"
"""The HTTP header a client sends to name its filecache session across connections and replicas."""
_SESSION_ID = re.compile(r"[A-Za-z0-9._:@+-]{1,128}")
_MAX_CONNECTIONS = 1024  # connection states kept (HTTP); the least recently used go first

T = TypeVar("T")


@contextmanager
def mcp_required() -> Iterator[None]:
    """Around the imports of the mcp extra (the SDK, anyio, pydantic): a missing one raises
    ``ModuleNotFoundError`` (name ``mcp``) with ``MCP_INSTALL_HINT``; any other missing module
    is raised as it is."""
    try:
        yield
    except ModuleNotFoundError as exc:  # the [mcp] extra is not installed
        if (exc.name or "").split(".")[0] not in _EXTRA_MODULES:
            raise
        raise ModuleNotFoundError(MCP_INSTALL_HINT, name="mcp") from exc


def connection_key(request: object) -> str | None:
    """The connection a request belongs to, from ``ServerRequestContext.request``.

    ``request`` is None on stdio (one client per process: ``"stdio"``); over HTTP it is the
    Starlette request, whose ``mcp-session-id`` header names the connection. None means the
    request cannot be tied to a connection (stateless HTTP).
    """
    if request is None:
        return "stdio"
    headers: Mapping[str, str] | None = getattr(request, "headers", None)
    value = headers.get(_SESSION_HEADER) if headers is not None else None
    return f"http:{value}" if value else None


def client_session_id(request: object) -> str | None:
    """The filecache session a request names in its ``filecache-session`` header, or None.

    Raises:
        RequestError: the header is not 1-128 characters of letters, digits and ``._:@+-``.
    """
    headers: Mapping[str, str] | None = getattr(request, "headers", None)
    value = headers.get(SESSION_HEADER) if headers is not None else None
    if value is None:
        return None
    if _SESSION_ID.fullmatch(value) is None:
        raise RequestError(
            f"{SESSION_HEADER} header {value[:40]!r}: a session id is 1-128 letters, digits "
            "or ._:@+-"
        )
    return value


def new_session_id() -> str:
    """A fresh session id for a new connection."""
    return "mcp-" + secrets.token_hex(6)


class RefWindow:
    """The call ids a connection's model may still hold, oldest first, with their age.

    ``begin_call()`` counts every tool call of the connection; ``record(call_id)`` notes a result
    that may back later FileRefs; ``expired()`` pops the ids that are now too old (more than
    ``max_calls`` calls ago, or older than ``max_minutes``). ``max_calls=0`` or
    ``max_minutes=0`` means no result is ever relied on: every read sends content.
    """

    def __init__(
        self, max_calls: int, max_minutes: float, clock: Callable[[], float] = time.time
    ) -> None:
        if max_calls < 0 or max_minutes < 0:
            raise ValueError("max_calls and max_minutes must be 0 or more")
        self.max_calls = max_calls
        self.max_minutes = max_minutes
        self._clock = clock
        self._calls = 0
        self._entries: deque[tuple[int, float, str]] = deque()
        self._lock = threading.Lock()

    def seed(self, events: Iterable[tuple[float, str]]) -> None:
        """Count earlier calls of a continued session: ``(created, call_id)`` in order."""
        with self._lock:
            for created, call_id in events:
                self._calls += 1
                self._entries.append((self._calls, created, call_id))

    def begin_call(self) -> None:
        with self._lock:
            self._calls += 1

    def record(self, call_id: str) -> None:
        with self._lock:
            self._entries.append((self._calls, self._clock(), call_id))

    def expired(self) -> list[str]:
        """Pop and return the call ids that may no longer back an answer."""
        oldest_call = self._calls - self.max_calls
        oldest_time = self._clock() - self.max_minutes * 60
        out: list[str] = []
        with self._lock:
            while self._entries:
                seq, created, call_id = self._entries[0]
                too_old = self.max_calls == 0 or self.max_minutes == 0
                if not (too_old or seq < oldest_call or created < oldest_time):
                    break
                self._entries.popleft()
                out.append(call_id)
        return out


@dataclass
class Connections(Generic[T]):
    """Per-connection state, created on first use; the least recently used are dropped.

    Dropping a state only costs content later (its session is never reused), never a stale view.
    """

    factory: Callable[[], T]
    limit: int = _MAX_CONNECTIONS
    _states: OrderedDict[str, T] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: str | None, factory: Callable[[], T] | None = None) -> T:
        """The state for ``key``; a new one (not kept) when ``key`` is None. ``factory``
        replaces ``self.factory`` for a state made now."""
        make = factory or self.factory
        if key is None:
            return make()
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = make()
                while len(self._states) > self.limit:
                    self._states.popitem(last=False)
            else:
                self._states.move_to_end(key)
            return state

    def peek(self, key: str | None) -> T | None:
        """The state for ``key`` if it exists (no creation)."""
        if key is None:
            return None
        with self._lock:
            return self._states.get(key)

    def values(self) -> list[T]:
        with self._lock:
            return list(self._states.values())


class OtherServers:
    """Counts into a connection's ``RefWindow`` the calls that other servers (replicas on one
    store, or another process with the same ``--session``) answered in its sessions.

    Without it, a replica's window would never expire a result another replica answered, and
    would let it back FileRefs for ever. ``catch_up`` reads each session's events after the last
    one counted (one query per session) and counts those not answered here (``mine``).
    """

    def __init__(self, sessions: Iterable[tuple[Store, str]], window: RefWindow) -> None:
        self._window = window
        self._seen: dict[tuple[Store, str], int] = {pair: 0 for pair in sessions}
        self._own: set[str] = set()
        self._lock = threading.Lock()

    def mine(self, call_id: str) -> None:
        """A call answered here (the window records it itself)."""
        with self._lock:
            self._own.add(call_id)

    def catch_up(self) -> None:
        """Count the calls stored since the last look that were answered elsewhere."""
        with self._lock:
            found: list[tuple[float, str]] = []
            for (store, sid), seen in self._seen.items():
                events = store.events(sid, after=seen)
                if events:
                    self._seen[(store, sid)] = events[-1].seq
                found += [
                    (e.created, e.call_id)
                    for e in events
                    if e.call_id not in self._own and e.tool != "change"  # changes are no calls
                ]
            self._own.clear()
            self._window.seed(sorted(found))
