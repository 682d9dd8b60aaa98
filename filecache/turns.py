"""A session object's copy of its session in the store, and the turns that change it.

``SessionState`` is what one ``Session`` object knows of its session: the store's head as of its
last turn, the views (what the model holds, per path), each call's sequence number, the
version last seen per path, and the events up to the head (what ``Session.ledger`` folds, a
batch at a time: a prune pass does not read the session back from the store; about 0.7 kB of
memory per event).
``Turn`` is one call's pending work on it: copies of the views it touches and the events it
logs, handed to the store in one transaction by ``commit``.

Invariants:
- The state changes only in ``catch_up`` (from the store) and in a ``Turn``'s commit, after the
  store took the turn's events and views: a call that raises leaves the state as it was.
- ``events`` are the store's events of the session up to ``seq``: a turn's are added once the
  store took them; ``catch_up`` adds what others committed, and starts afresh when the session
  was deleted meanwhile (the head went back, or our newest event is no longer under it).
- A turn's events are numbered from the head it started at; the store's commit refuses them
  (``StoreConflictError``) when the head moved on meanwhile, and nothing is written.
- A view whose facts a turn did not change is neither stored nor replaced (an unchanged re-read
  moves only a version's stamp, which nothing decides from).
- Only what the caller received is a fact. A turn that logs an abandoned call id (its caller
  gave up: a cancelled task, an MCP ``notifications/cancelled``) is rolled back, or, if it
  already replaced a file, committed without the facts that rely on that call; one abandoned
  after its commit is forgotten by the session's next turn, in that turn's commit.
- Exactly once: a commit whose reply was lost is resolved from the store (``Turn._landed``):
  landed, and the call returns its answer; not landed, and it raises with nothing recorded;
  unknown, and it raises with its calls marked unsure (forgotten if they turn out to have
  landed, unless a retry of the same call id answered them first).

The caller (``Session._turn``) holds the session's thread lock and store lock around a turn.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from filecache.core.views import PathView
from filecache.errors import CallAbandonedError, StoreConflictError, StoreError
from filecache.store.store import Event, EventStore

__all__ = ["SessionState", "Turn"]

_seq = attrgetter("seq")
_MAX_ABANDONED = 4096  # abandoned call ids remembered (one never committed stays until evicted)


class SessionState:
    """One session object's copy of the session: head, views, call seqs, versions seen."""

    def __init__(self, store: EventStore, session_id: str, max_versions: int) -> None:
        self.store = store
        self.id = session_id
        self.max_versions = max_versions
        self.views: dict[str, PathView] = {}
        self.seq = 0  # the store's head as of the last turn
        self.call_seq: dict[str, int] = {}
        self.seen: dict[str, str | None] = {}  # last version observed per path
        self.tool_keys: set[str] = set()  # views of decorated tools' outputs (not files)
        # Every event of the session up to ``seq``, in order: what ``Session.ledger`` folds,
        # kept as turns commit them and ``catch_up`` reads them, so that a prune pass does not
        # read the whole session back from the store.
        self.events: list[Event] = []
        self.lives = 0  # how many times ``events`` started afresh (the session deleted meanwhile)
        self.loaded = False  # the first turn loads the views from the store
        # Call ids whose answer never reached the caller (``Session.abandon``): a turn that
        # logs one is not committed (or, if it already replaced a file, commits without the
        # facts relying on it), and a committed one is forgotten by the next turn. ``unsure``:
        # calls whose commit failed without telling whether it landed: forgotten by the next
        # turn if they did (never refused: a retry of one is welcome). Insertion-ordered,
        # bounded, under their own lock (any thread may abandon).
        self.abandoned: dict[str, None] = {}
        self.unsure: dict[str, None] = {}
        self.abandoned_lock = threading.Lock()

    def catch_up(self) -> None:
        """Bring the state up to date when the store is ahead (another object, thread or
        process of this session committed since our last turn)."""
        store = self.store
        head = store.head(self.id)
        if head == self.seq and self.loaded:
            return
        # Deleted elsewhere (and maybe begun again): the head went back, or our newest event
        # is gone from under a head that went on. Either way the state starts afresh.
        restart = head < self.seq
        found: list[Event] | None = None
        if not restart and head > self.seq and self.events:
            last = self.events[-1]
            found = store.events(self.id, after=last.seq - 1)
            if found and _event_id(found[0]) == _event_id(last):
                del found[0]  # ours: the rest went on from it
            else:
                restart = True
        if restart:
            self.call_seq.clear()
            self.seen.clear()
            self.events.clear()
            self.lives += 1
            self.seq = 0
        if found is None or restart:
            found = store.events(self.id, after=self.seq)
        for e in found:
            self.call_seq[e.call_id] = e.seq
            if e.tool in ("read", "write", "edit", "change") and e.kind != "error":
                self.seen[e.path] = e.version
        self.events.extend(e for e in found if e.seq <= head)
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

    def event(self, seq: int) -> Event | None:
        """The session's event ``seq`` as of the last catch-up or commit, or None."""
        k = bisect_left(self.events, seq, key=_seq)
        return self.events[k] if k < len(self.events) and self.events[k].seq == seq else None

    def abandon(self, call_ids: Iterable[str], *, unsure: bool = False) -> None:
        """The answers of ``call_ids`` never reached the caller (``unsure``: may not have;
        see ``abandoned``)."""
        into = self.unsure if unsure else self.abandoned
        with self.abandoned_lock:
            for cid in call_ids:
                into[cid] = None
            while len(into) > _MAX_ABANDONED:
                del into[next(iter(into))]

    def is_abandoned(self, call_id: str) -> bool:
        with self.abandoned_lock:
            return call_id in self.abandoned

    def ended(self, call_id: str, *, failed: bool) -> None:
        """A call of ``call_id`` begins (``failed=False``: a retry of an unsure one is answered
        now) or raised (``failed=True``: nothing of it was committed, so its abandonment is
        spent and a retry with the same id is a new call)."""
        with self.abandoned_lock:
            (self.abandoned if failed else self.unsure).pop(call_id, None)

    def take_committed_abandoned(self) -> set[str]:
        """The abandoned (or unsure) call ids that were committed: to be forgotten now, and no
        longer kept (``give_back`` if the turn that forgets them fails)."""
        with self.abandoned_lock:
            found = set()
            for into in (self.abandoned, self.unsure):
                for cid in [c for c in into if c in self.call_seq]:
                    del into[cid]
                    found.add(cid)
            return found

    def give_back(self, call_ids: Iterable[str]) -> None:
        """Call ids ``take_committed_abandoned`` gave to a turn that then failed."""
        self.abandon(call_ids, unsure=True)

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
        self.replaced = False  # a write/edit of this turn has replaced its file (no way back)
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
        event = Event(
            session_id=self.state.id,
            seq=self.next_seq(),
            call_id=call_id,
            tool=tool,
            path=path,
            **fields,
        )
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
        gone = {e.call_id for e in self.events if state.is_abandoned(e.call_id)}
        if gone:
            if not self.replaced:  # nothing outside memory happened: roll back
                raise CallAbandonedError(
                    f"call {sorted(gone)[0]} was abandoned by its caller; nothing was recorded"
                )
            for view in changed.values():  # applied: recorded, but the model holds none of it
                view.forget(frozenset(gone))
        states = {key: None if v.empty() else v.to_json() for key, v in changed.items()}
        try:
            state.seq = state.store.commit(state.id, self.base, self.events, states)
        except StoreConflictError:
            raise
        except StoreError:
            if not self._landed():  # raises if it cannot tell
                raise
            state.seq = self.base + len(self.events)
        state.events.extend(self.events)
        for event in self.events:
            state.call_seq[event.call_id] = event.seq
        state.seen.update(self.seen)
        for key, view in changed.items():
            if view.empty():
                state.views.pop(key, None)
            else:
                state.views[key] = view
        self._run_after()

    def _landed(self) -> bool:
        """After a commit that failed without saying whether it happened (a reply lost with
        its connection): whether this turn's events are in the store. A turn is known by its
        first event, (seq, call id, creation time to the microsecond): its turn id. The store
        answers once no commit of the session is in flight (``Store.settled_events``). When
        the store cannot tell (still down), the turn's calls are abandoned: if it did land, the
        next turn forgets what it recorded, so the caller, who saw an error, is never answered
        from it.

        A turn without events (views only) is never taken as landed: the state reloads its
        views from the store at the next catch-up instead."""
        state = self.state
        state.loaded = False
        if not self.events:
            return False
        first = self.events[0]
        try:
            stored = state.store.settled_events(state.id, self.base)
        except StoreError:
            state.abandon((e.call_id for e in self.events), unsure=True)
            raise
        if not stored or _event_id(stored[0]) != _event_id(first):
            return False
        state.loaded = True
        return True

    def _run_after(self) -> None:
        for action in self._after:
            action()


def _event_id(event: Event) -> tuple[int, float, str]:
    """What tells an event apart from one of another life of its session: (seq, creation
    time to the microsecond, call id); ``Turn._landed`` knows a turn by its first event's."""
    return event.seq, event.created, event.call_id


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
