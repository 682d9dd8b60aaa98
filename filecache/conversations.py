"""Conversations: one set of tools, many model contexts, each with its own ``Session``.

Agent frameworks define tools once and run many conversations through them. ``with
cache.conversation(run_id):`` binds ``run_id``'s session to the current context (a
``contextvars.ContextVar``), and a tool decorated with the ``FileCache`` (not a ``Session``)
answers from the session bound where it runs.

Invariants and ownership:
- A binding is seen by the code that runs inside the ``with`` block: the same thread, asyncio
  tasks created inside it (they copy the context), and work handed to ``asyncio.to_thread`` or
  ``contextvars.copy_context().run``. Another thread or a task created outside the block does
  not see it: it has its own binding, or none.
- A tool called where no conversation is bound raises ``ConfigError`` (it never falls back to
  another conversation's session, so it never answers with another conversation's FileRefs).
- One ``Session`` object per (cache, id) while any binding of it is open: concurrent bindings
  of one id in one process share it (``_Registry``, under its lock); the last one to close
  drops it, and a later binding continues the session from the store.

``CacheHost`` and ``SessionHost`` name what a binding, the tool decorators
(``filecache.decorators``), a session's notices (``outside``) and a ``Session`` itself
(``Session.cache``) use of a ``FileCache`` and a ``Session``: these modules sit below
``cache`` and ``session`` and are reached from their methods, so they name the other side by
these protocols, never by importing it (no import cycle: ``tests/test_layout.py``). A session
answers with the parts its ``FileCache`` hands it (``paths``, ``secrets``, ``versions``,
``counts``, ``outlines``: objects of ``locations``, ``secrecy`` and ``sources``); the methods
are the cache's one-line forms of theirs that decorators, shell reads, pruning and replay use
through ``session.cache``. ``FileCache`` and ``Session`` satisfy them (mypy checks it where
they pass ``self``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from filecache.errors import ConfigError

if TYPE_CHECKING:
    from filecache.core.results import ReadResult
    from filecache.core.tokens import TokenCounter
    from filecache.fsio import Located
    from filecache.locations import Root
    from filecache.secrecy import Secrets
    from filecache.settings import Settings
    from filecache.sources import Counts, Outlines, Versions
    from filecache.store.store import Store

__all__ = ["CacheHost", "SessionHost", "bound_session", "conversation", "current_session"]


@runtime_checkable
class CacheHost(Protocol):
    """The ``FileCache`` members its sessions (and what they are passed to), conversations and
    decorated tools use."""

    root: Path
    settings: Settings
    store: Store
    # the parts a session answers with; the methods below are the cache's one-line forms of
    # theirs that conversations, decorators, shell reads, pruning and replay use
    paths: Root
    secrets: Secrets
    versions: Versions
    counts: Counts
    outlines: Outlines

    @property
    def tokens(self) -> TokenCounter: ...
    def session(self, session_id: str | None = None) -> SessionHost: ...
    def locate(self, path: str | Path) -> Located: ...
    def secret(self, version: str) -> bool: ...
    def reveals(self, text: str) -> str | None: ...
    def lines_of(self, version: str) -> list[str] | None: ...
    def outline_text(
        self,
        version: str,
        path: str,
        lines: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> str: ...


@runtime_checkable
class SessionHost(Protocol):
    """The ``Session`` members conversations and decorated tools use."""

    id: str

    @property
    def cache(self) -> CacheHost: ...
    def answer_output(
        self,
        key: str,
        path: str,
        output: str,
        *,
        fresh: bool = False,
        call_id: str | None = None,
        lines: tuple[int, int] | None = None,
    ) -> ReadResult: ...
    def record_write(self, path: str, tool: str, call_id: str | None = None) -> str: ...


# Per context: cache identity -> the session bound for it (a cache may serve several roots'
# tools side by side, each with its own binding).
_BOUND: ContextVar[tuple[tuple[int, SessionHost], ...]] = ContextVar(
    "filecache_conversation", default=()
)


class _Registry:
    """One ``Session`` object per (cache, session id) while bound; owned by its lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[tuple[int, str], tuple[SessionHost, int]] = {}

    def acquire(self, cache: CacheHost, session_id: str) -> SessionHost:
        with self._lock:
            key = (id(cache), session_id)
            held = self._open.get(key)
            session = held[0] if held else cache.session(session_id)
            self._open[key] = (session, (held[1] if held else 0) + 1)
            return session

    def release(self, cache: CacheHost, session_id: str) -> None:
        with self._lock:
            key = (id(cache), session_id)
            session, count = self._open[key]
            if count == 1:
                del self._open[key]
            else:
                self._open[key] = (session, count - 1)


_REGISTRY = _Registry()


@contextlib.contextmanager
def conversation(cache: CacheHost, session_id: str | SessionHost) -> Iterator[SessionHost]:
    """Bind ``session_id``'s session (or a given ``Session`` of ``cache``) to this context.

    Yields the bound ``Session``. Bindings nest: the innermost one for a cache wins.
    """
    if isinstance(session_id, SessionHost):
        if session_id.cache is not cache:
            raise ConfigError("that session belongs to another FileCache")
        session, acquired = session_id, None
    elif isinstance(session_id, str) and session_id:
        session, acquired = _REGISTRY.acquire(cache, session_id), session_id
    else:
        raise ConfigError(
            f"a conversation id must be a non-empty string or a Session, got {session_id!r}"
        )
    token = _BOUND.set(((id(cache), session),) + _BOUND.get())
    try:
        yield session
    finally:
        _BOUND.reset(token)
        if acquired is not None:
            _REGISTRY.release(cache, acquired)


def bound_session(cache: CacheHost) -> SessionHost | None:
    """The session bound to ``cache`` in this context, or None."""
    for cache_id, session in _BOUND.get():
        if cache_id == id(cache):
            return session
    return None


def current_session(cache: CacheHost, tool: str = "this tool") -> SessionHost:
    """The session bound to ``cache`` here; ``ConfigError`` when none is (never a guess)."""
    session = bound_session(cache)
    if session is None:
        raise ConfigError(
            f"{tool} was called with no conversation bound: run the agent inside "
            "`with cache.conversation(run_id):` (one id per conversation), or decorate the "
            "tool with a Session instead of the FileCache"
        )
    return session
