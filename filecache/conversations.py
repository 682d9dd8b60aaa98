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

Nothing here knows a ``FileCache`` or a ``Session``: a binding is keyed by its owner's identity
(the ``FileCache``), and a new session is opened by the function the owner passes
(``FileCache.session``). ``FileCache.conversation`` checks what it is given and calls
``open_conversation`` (an id) or ``bind`` (a ``Session``); its tool decorators find the session
with ``current_session`` (no import cycle: ``tests/test_layout.py``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar, cast

from filecache.errors import ConfigError

__all__ = ["bind", "bound_session", "current_session", "open_conversation"]

S = TypeVar("S")

# Per context: cache identity -> the session bound for it (a cache may serve several roots'
# tools side by side, each with its own binding).
_BOUND: ContextVar[tuple[tuple[int, object], ...]] = ContextVar(
    "filecache_conversation", default=()
)


class _Registry:
    """One session object per (owner, session id) while bound; owned by its lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[tuple[int, str], tuple[object, int]] = {}

    def acquire(self, owner: object, session_id: str, open_session: Callable[[str], S]) -> S:
        with self._lock:
            key = (id(owner), session_id)
            held = self._open.get(key)
            # held: what ``open_session`` gave for this key before
            session = cast(S, held[0]) if held else open_session(session_id)
            self._open[key] = (session, (held[1] if held else 0) + 1)
            return session

    def release(self, owner: object, session_id: str) -> None:
        with self._lock:
            key = (id(owner), session_id)
            session, count = self._open[key]
            if count == 1:
                del self._open[key]
            else:
                self._open[key] = (session, count - 1)


_REGISTRY = _Registry()


@contextlib.contextmanager
def bind(owner: object, session: object) -> Iterator[None]:
    """Bind ``session`` to ``owner`` in this context (the innermost binding wins)."""
    token = _BOUND.set(((id(owner), session),) + _BOUND.get())
    try:
        yield
    finally:
        _BOUND.reset(token)


@contextlib.contextmanager
def open_conversation(
    owner: object, session_id: str, open_session: Callable[[str], S]
) -> Iterator[S]:
    """Bind ``session_id``'s session to ``owner`` in this context; yields it. Concurrent
    bindings of one id share one object (``open_session(session_id)`` makes it)."""
    session = _REGISTRY.acquire(owner, session_id, open_session)
    try:
        with bind(owner, session):
            yield session
    finally:
        _REGISTRY.release(owner, session_id)


def bound_session(owner: object) -> object | None:
    """The session bound to ``owner`` in this context, or None."""
    for owner_id, session in _BOUND.get():
        if owner_id == id(owner):
            return session
    return None


def current_session(owner: object, tool: str = "this tool") -> object:
    """The session bound to ``owner`` here; ``ConfigError`` when none is (never a guess)."""
    session = bound_session(owner)
    if session is None:
        raise ConfigError(
            f"{tool} was called with no conversation bound: run the agent inside "
            "`with cache.conversation(run_id):` (one id per conversation), or decorate the "
            "tool with a Session instead of the FileCache"
        )
    return session
