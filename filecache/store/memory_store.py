"""``MemoryStore``: every role of ``Store`` in this process's memory (tests, ``":memory:"``,
one-shot runs).

It keeps the rules the SQL store keeps (``sql_store``): blobs ``compress``-ed and content-
addressed, a commit's events checked by ``check_sequence`` against the head under one lock.
One ``RLock`` guards every table; ``lock(name)`` is one ``RLock`` per name (this process only).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence

from filecache.errors import StoreConflictError
from filecache.store.sql_store import check_sequence, compress, decompress
from filecache.store.store import ClosesOnExit, Event, GcReport, Intent, Projection, SessionInfo

__all__ = ["MemoryStore"]


class MemoryStore(ClosesOnExit):
    """A store that lives as long as the process: for tests, ``":memory:"`` and one-shot runs."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._blobs: dict[str, bytes] = {}
        self._events: dict[str, dict[int, Event]] = {}  # session -> seq -> event
        self._views: dict[str, dict[str, str]] = {}
        self._sessions: dict[str, tuple[float, float]] = {}
        self._cache: dict[tuple[str, str], str] = {}
        self._archive: dict[tuple[str, str], str] = {}
        self._projections: dict[str, dict[str, tuple[str, str]]] = {}
        self._projection_tokens: dict[str, dict[str, tuple[int, int, float]]] = {}
        self._intents: dict[tuple[str, str], Intent] = {}
        self._locks: dict[str, threading.RLock] = {}

    def put_blob(self, version: str, data: bytes) -> None:
        with self._lock:
            self._blobs.setdefault(version, compress(data))

    def get_blob(self, version: str) -> bytes | None:
        with self._lock:
            packed = self._blobs.get(version)
        return None if packed is None else decompress(packed)

    def has_blob(self, version: str) -> bool:
        with self._lock:
            return version in self._blobs

    def events(self, session_id: str, after: int | None = None) -> list[Event]:
        with self._lock:
            stored = self._events.get(session_id, {}).values()
            return sorted(
                (e for e in stored if after is None or e.seq > after), key=lambda e: e.seq
            )

    def head(self, session_id: str) -> int:
        with self._lock:
            return max(self._events.get(session_id) or (0,))  # {} after a commit of no events

    def settled_events(self, session_id: str, after: int) -> list[Event]:
        return self.events(session_id, after)  # a commit here is never in flight unseen

    def commit(
        self,
        session_id: str,
        expected_head: int,
        events: Sequence[Event],
        views: Mapping[str, str | None],
    ) -> int:
        with self._lock:
            head = self.head(session_id)
            if head != expected_head:
                raise StoreConflictError(
                    f"session {session_id!r} moved on to seq {head} (expected {expected_head})"
                )
            check_sequence(session_id, expected_head, events)
            stored = self._events.setdefault(session_id, {})
            for event in events:
                stored[event.seq] = event
            for path, state in views.items():
                self._save_view(session_id, path, state)
            self._touch(session_id, events[-1].created if events else time.time())
            return expected_head + len(events)

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        with self._lock:
            held = self._locks.setdefault(name, threading.RLock())
        with held:
            yield

    def put_intent(self, intent: Intent) -> None:
        with self._lock:
            self._intents[(intent.session_id, intent.call_id)] = intent

    def drop_intent(self, session_id: str, call_id: str) -> None:
        with self._lock:
            self._intents.pop((session_id, call_id), None)

    def intents(self, root: str | None = None) -> list[Intent]:
        with self._lock:
            return sorted(
                (i for i in self._intents.values() if root is None or i.root == root),
                key=lambda i: i.created,
            )

    def _save_view(self, session_id: str, path: str, state: str | None) -> None:
        with self._lock:
            views = self._views.setdefault(session_id, {})
            if state is None:
                views.pop(path, None)
            else:
                views[path] = state

    def load_views(self, session_id: str) -> dict[str, str]:
        with self._lock:
            return dict(self._views.get(session_id, {}))

    def touch_session(self, session_id: str, now: float | None = None) -> None:
        with self._lock:
            self._touch(session_id, time.time() if now is None else now)

    def _touch(self, session_id: str, now: float) -> None:
        created, _ = self._sessions.get(session_id, (now, now))
        self._sessions[session_id] = (created, now)

    def sessions(self) -> list[SessionInfo]:
        with self._lock:
            out = []
            for sid, (created, last) in self._sessions.items():
                evs = list(self._events.get(sid, {}).values())
                out.append(
                    SessionInfo(
                        session_id=sid,
                        created=created,
                        last_used=last,
                        events=len(evs),
                        tokens=sum(e.tokens for e in evs),
                        tokens_full=sum(e.tokens_full for e in evs),
                    )
                )
            return sorted(out, key=lambda s: (-s.last_used, s.session_id))

    def delete_session(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)
            self._events.pop(session_id, None)
            self._views.pop(session_id, None)
            self._projections.pop(session_id, None)
            self._projection_tokens.pop(session_id, None)
            for key in [k for k in self._archive if k[0] == session_id]:
                del self._archive[key]

    def gc(self, older_than: float) -> GcReport:
        with self._lock:
            old = [sid for sid, (_, last) in self._sessions.items() if last < older_than]
            for sid in old:
                self.delete_session(sid)
            live = _referenced_versions(e for evs in self._events.values() for e in evs.values())
            dead = [v for v in self._blobs if v not in live]
            for v in dead:
                del self._blobs[v]
            return GcReport(sessions_deleted=len(old), blobs_deleted=len(dead))

    def cache_get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self._cache.get((namespace, key))

    def cache_put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self._cache[(namespace, key)] = value

    def archive_put(self, session_id: str, call_id: str, text: str) -> None:
        with self._lock:
            self._archive.setdefault((session_id, call_id), text)

    def archive_get(self, call_id: str, session_id: str | None = None) -> str | None:
        with self._lock:
            if session_id is not None:
                return self._archive.get((session_id, call_id))
            found = [t for (_, c), t in self._archive.items() if c == call_id]
            return found[-1] if found else None

    def projection_put(
        self,
        session_id: str,
        call_id: str,
        tier: str,
        text: str,
        tokens_before: int = 0,
        tokens_after: int = 0,
    ) -> None:
        with self._lock:
            self._projections.setdefault(session_id, {})[call_id] = (tier, text)
            tokens = self._projection_tokens.setdefault(session_id, {})
            first_before, _, created = tokens.get(call_id, (0, 0, time.time()))
            tokens[call_id] = (first_before or tokens_before, tokens_after, created)

    def projections(self, session_id: str) -> dict[str, tuple[str, str]]:
        with self._lock:
            return dict(self._projections.get(session_id, {}))

    def projection_records(self, session_id: str) -> list[Projection]:
        with self._lock:
            projections = self._projections.get(session_id, {})
            tokens = self._projection_tokens.get(session_id, {})
            return sorted(
                (
                    _projection(cid, tier, tokens.get(cid, (0, 0, 0.0)))
                    for cid, (tier, _) in projections.items()
                ),
                key=lambda p: (p.created, p.call_id),
            )

    def close(self) -> None:
        pass


def _projection(call_id: str, tier: str, held: tuple[int, int, float]) -> Projection:
    before, after, created = held
    return Projection(
        call_id=call_id, tier=tier, tokens_before=before, tokens_after=after, created=created
    )


def _referenced_versions(events: Iterable[Event]) -> set[str]:
    live: set[str] = set()
    for e in events:
        if e.version:
            live.add(e.version)
        if e.base_version:
            live.add(e.base_version)
    return live
