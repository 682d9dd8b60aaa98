"""A session object's copy of its session in the store, and the turns that change it.

``SessionState`` is what one ``Session`` object knows of its session: the store's head as of its
last turn, the views (what the model holds, per path), each call's sequence number and the
version last seen per path. ``Turn`` is one call's pending work on it: copies of the views it
touches and the events it logs, handed to the store in one transaction by ``commit``.

Invariants:
- The state changes only in ``catch_up`` (from the store) and in a ``Turn``'s commit, after the
  store took the turn's events and views: a call that raises leaves the state as it was.
- A turn's events are numbered from the head it started at; the store's commit refuses them
  (``StoreConflictError``) when the head moved on meanwhile, and nothing is written.
- A view whose facts a turn did not change is neither stored nor replaced (an unchanged re-read
  moves only a version's stamp, which nothing decides from).

The caller (``Session._turn``) holds the session's thread lock and store lock around a turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from filecache.core.views import PathView
from filecache.store.store import Event, Store

__all__ = ["SessionState", "Turn"]


class SessionState:
    """One session object's copy of the session: head, views, call seqs, versions seen."""

    def __init__(self, store: Store, session_id: str, max_versions: int) -> None:
        self.store = store
        self.id = session_id
        self.max_versions = max_versions
        self.views: dict[str, PathView] = {}
        self.seq = 0  # the store's head as of the last turn
        self.call_seq: dict[str, int] = {}
        self.seen: dict[str, str | None] = {}  # last version observed per path
        self.tool_keys: set[str] = set()  # views of decorated tools' outputs (not files)
        self.loaded = False  # the first turn loads the views from the store

    def catch_up(self) -> None:
        """Bring the state up to date when the store is ahead (another object, thread or
        process of this session committed since our last turn)."""
        store = self.store
        head = store.head(self.id)
        if head == self.seq and self.loaded:
            return
        if head < self.seq:  # the session was deleted (and maybe begun again) elsewhere
            self.call_seq.clear()
            self.seen.clear()
            self.seq = 0
        for e in store.events(self.id, after=self.seq):
            self.call_seq[e.call_id] = e.seq
            if e.tool in ("read", "write", "edit", "change") and e.kind != "error":
                self.seen[e.path] = e.version
        self.views.clear()
        for key, state in store.load_views(self.id).items():
            try:
                self.views[key] = PathView.from_json(state, self.max_versions)
            except (ValueError, TypeError, LookupError, AttributeError) as exc:
                # a damaged row: the model is taken to hold nothing of the path (always safe:
                # its next read sends content), and the row is replaced at the next commit
                _warn("session %s: the stored view of %s is unreadable (%s)", self.id, key, exc)
        self.tool_keys |= {key for key in self.views if "{" in key}
        self.seq = head
        self.loaded = True

    def last_seen(self, key: str, view: PathView) -> str | None:
        """The version of ``key`` this session last saw (read, wrote or noticed), else the
        newest its model holds."""
        return self.seen.get(key, next(reversed(view.versions)))


class Turn:
    """One call's pending work: copies of the views it touches and the events it logs.

    Owned by the thread holding the session's turn; ``commit`` hands both to the store in one
    transaction and, only then, makes the copies the state's views.
    """

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self.base = state.seq
        self.events: list[Event] = []
        self.views: dict[str, PathView] = {}
        self.seen: dict[str, str | None] = {}
        self.committed = False
        self._after: list[Callable[[], None]] = []

    def on_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once this turn's work is committed (never if it fails)."""
        self._after.append(action)

    def view(self, key: str) -> PathView | None:
        """This call's copy of the view of ``key`` (None if the model holds nothing of it)."""
        found = self.views.get(key)
        if found is None:
            held = self.state.views.get(key)
            if held is None:
                return None
            found = self.views[key] = held.copy()
        return found

    def new_view(self, key: str) -> PathView:
        found = self.view(key)
        if found is None:
            found = self.views[key] = PathView(self.state.max_versions)
        return found

    def next_seq(self) -> int:
        return self.base + len(self.events) + 1

    def log(self, call_id: str, tool: str, path: str, **fields: Any) -> Event:
        event = Event(self.state.id, self.next_seq(), call_id, tool, path, **fields)
        self.events.append(event)
        return event

    def record_change(self, cid: str, key: str, version: str | None, held: str | None) -> None:
        """``key`` is now ``version`` (None: deleted), not the ``held`` one: a ``change`` event,
        which supersedes older reads; ``version`` becomes the one seen."""
        self.seen[key] = version
        self.log(cid, "change", key, version=version, base_version=held, kind="changed")

    def commit(self) -> None:
        if self.committed:
            return
        self.committed = True
        state = self.state
        if not self.events and not self.views:
            self._run_after()
            return
        # A copy that holds what the state's view holds (an unchanged re-read moves only the
        # version's stamp) is neither stored nor kept: memory and store keep the same view.
        changed = {k: v for k, v in self.views.items() if not _same_facts(state.views.get(k), v)}
        if not self.events and not changed:
            self._run_after()
            return  # read-only turn
        states = {key: None if v.empty() else v.to_json() for key, v in changed.items()}
        state.seq = state.store.commit(state.id, self.base, self.events, states)
        for event in self.events:
            state.call_seq[event.call_id] = event.seq
        state.seen.update(self.seen)
        for key, view in changed.items():
            if view.empty():
                state.views.pop(key, None)
            else:
                state.views[key] = view
        self._run_after()

    def _run_after(self) -> None:
        for action in self._after:
            action()


def _warn(message: str, *args: object) -> None:
    import logging  # on first use: a few ms of every CLI call's start otherwise

    logging.getLogger("filecache.session").warning(message, *args)


def _same_facts(held: PathView | None, view: PathView) -> bool:
    """Whether ``view`` holds what ``held`` holds: the same versions in the same order, with the
    same lines backed by the same call ids, and the same outlines. A version's stamp (the seq
    of the call that last touched it) is no fact: nothing decides from it."""
    if held is None:
        return view.empty()
    if held.outlines != view.outlines or list(held.versions) != list(view.versions):
        return False
    return all(
        (a.line_count, a.origin, a.spans) == (b.line_count, b.origin, b.spans)
        for a, b in zip(held.versions.values(), view.versions.values(), strict=True)
    )
