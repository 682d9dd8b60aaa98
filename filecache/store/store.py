"""Storage behind small role protocols, and the memory store.

The roles: ``EventStore`` (a session's ledger and views), ``BlobStore`` (content blobs),
``ArchiveStore`` (pruning's originals and projections), ``LockStore`` (named locks and write
intents), ``KvStore`` (the key-value cache) and ``RetentionStore`` (listing, deleting and
garbage-collecting sessions). ``Store`` is all of them plus ``close``: what a ``FileCache``
opens; a part that needs one role is annotated with that role.

Invariants:
- Blobs are content-addressed: ``put_blob(version, data)`` with the same version always stores
  the same bytes, so a second put is a no-op.
- Events are append-only and ordered per session by ``seq``; a ``seq`` is used once per session
  (a second event with the same one is a ``StoreError``).
- The store is the source of truth of a session across threads and processes: ``commit``
  appends a call's events and its view changes in one transaction, only if the session's head
  (its newest ``seq``) is still the one the caller computed from, else ``StoreConflictError``
  and nothing is written. So sequence numbers are assigned against the stored head, inside the
  write transaction.
- ``lock(name)`` is exclusive across threads and processes (for a shared store, machines);
  ``Session`` holds ``session:<id>`` for every call and ``FileCache`` ``path:<root>\0<rel>``
  around every replace of a file.
- An ``Intent`` is recorded before a write replaces a file and dropped after its event is
  committed: one left behind marks a call that died in between (``FileCache`` recovers it).
- ``settled_events(session, after)`` is ``events`` once no commit of the session is in flight
  (one whose reply was lost may still be running on a server): what a caller whose commit
  failed reads to find out whether it landed (``turns.Turn``).
- Every implementation is thread-safe; storage errors surface as ``StoreError`` only.
- A session's last use (``SessionInfo.last_used``) is the time it was touched or the time of its
  newest committed event, to within ``LAST_USED_SLACK`` seconds: a commit may leave it when it
  would move on by less (the SQLite store then writes no page for it).

Three implementations: ``MemoryStore`` (here), and ``SqliteStore`` and ``PostgresStore``, one
SQL implementation (``sql_store.SqlStore``) over a ``dialect``.
``filecache.store.opening.open_store`` picks one from what the caller passed.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from filecache.errors import StoreConflictError, StoreError
from filecache.fsio import STORE_DIR

__all__ = [
    "LAST_USED_SLACK",
    "ArchiveStore",
    "BlobStore",
    "Event",
    "EventStore",
    "GcReport",
    "Intent",
    "KvStore",
    "LockStore",
    "MemoryStore",
    "Projection",
    "RetentionStore",
    "SessionInfo",
    "Store",
    "STORE_FILES",
    "default_store_path",
    "fallback_store_folder",
    "refuse_links",
]


LAST_USED_SLACK = 1.0
"""Seconds by which a stored session's last use may lag its newest event (see the invariants)."""


@dataclass(frozen=True, kw_only=True)
class Event:
    """One ledger row: a read, write, edit, external change or other tool call of a session.

    Attributes:
        session_id: the session the call belongs to.
        seq: position in the session (assigned by the session, strictly increasing).
        call_id: the tool call id (given by the caller or generated ``fc-…``).
        tool: ``read`` | ``write`` | ``edit`` | ``change`` (seen outside the agent) | ``other``.
        path: the path relative to the root (or a decorated tool's key).
        start: first line of a read's range (1-based), or None.
        end: last line of a read's range (inclusive), or None.
        version: the file's version the answer reflects (after a write/edit).
        base_version: the version a diff/unchanged answer was relative to; before a write/edit.
        kind: the answer's kind (``full``, ``partial``, ``unchanged``, ``diff``, ``outline``,
            ``symbol``, ``written``, ``edited``, ``changed``, ``error``).
        base_call_id: the call id an ``unchanged``/``diff`` answer relies on.
        tokens: tokens of the text filecache answered.
        tokens_full: tokens the plain tool would have answered.
        text_hash: ``xxh3:`` hash of the answered text (lets ``sync`` tell if it still holds).
        created: UNIX time.
        deps: every call id an ``unchanged``/``diff`` answer relies on (``base_call_id`` is
            the newest of them).
        args: hashes (``args_hash``) of what a write/edit call wrote: its content, or each
            new string; ``Session.sync`` checks the call's arguments still hold them.
    """

    session_id: str
    seq: int
    call_id: str
    tool: str
    path: str
    start: int | None = None
    end: int | None = None
    version: str | None = None
    base_version: str | None = None
    kind: str = ""
    base_call_id: str | None = None
    tokens: int = 0
    tokens_full: int = 0
    text_hash: str | None = None
    created: float = field(default_factory=time.time)
    deps: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Intent:
    """A write or edit about to replace a file: recorded before, dropped after its commit.

    Attributes:
        session_id, call_id: the call.
        root: the root's absolute path; ``path``: the file, relative to it.
        before: the version the change was computed from (None: a new file).
        after: the version it writes.
        created: UNIX time.
    """

    session_id: str
    call_id: str
    root: str
    path: str
    before: str | None
    after: str
    created: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class SessionInfo:
    """A summary of one stored session."""

    session_id: str
    created: float
    last_used: float
    events: int
    tokens: int
    tokens_full: int


@dataclass(frozen=True, kw_only=True)
class Projection:
    """What pruning made of one tool result, and the tokens it took before and takes now.

    ``tokens_before`` is the original result's (kept from the first projection when a later
    pass escalates it); ``tokens_after`` the current projection's; 0 when not recorded.
    """

    call_id: str
    tier: str
    tokens_before: int
    tokens_after: int
    created: float


@dataclass(frozen=True, kw_only=True)
class GcReport:
    """What a garbage collection removed."""

    sessions_deleted: int
    blobs_deleted: int


@runtime_checkable
class BlobStore(Protocol):
    """Content blobs keyed by their version (content-addressed: a second put is a no-op)."""

    def put_blob(self, version: str, data: bytes) -> None: ...
    def get_blob(self, version: str) -> bytes | None: ...
    def has_blob(self, version: str) -> bool: ...


@runtime_checkable
class EventStore(Protocol):
    """A session's ledger and views: the head, the events after it, and ``commit`` (a
    compare-and-swap on the head that appends events and applies view changes at once)."""

    def events(self, session_id: str, after: int | None = None) -> list[Event]: ...
    def head(self, session_id: str) -> int: ...
    def settled_events(self, session_id: str, after: int) -> list[Event]: ...
    def commit(
        self,
        session_id: str,
        expected_head: int,
        events: Sequence[Event],
        views: Mapping[str, str | None],
    ) -> int: ...
    def load_views(self, session_id: str) -> dict[str, str]: ...
    def touch_session(self, session_id: str, now: float | None = None) -> None: ...


@runtime_checkable
class RetentionStore(Protocol):
    """The stored sessions: listed with their sums, deleted, garbage-collected with the blobs
    no event references."""

    def sessions(self) -> list[SessionInfo]: ...
    def delete_session(self, session_id: str) -> None: ...
    def gc(self, older_than: float) -> GcReport: ...


@runtime_checkable
class ArchiveStore(Protocol):
    """Pruning's memory: every original tool result (the first kept), and what each pruned
    result became (its projection)."""

    def archive_put(self, session_id: str, call_id: str, text: str) -> None: ...
    def archive_get(self, call_id: str, session_id: str | None = None) -> str | None: ...
    def projection_put(
        self,
        session_id: str,
        call_id: str,
        tier: str,
        text: str,
        tokens_before: int = 0,
        tokens_after: int = 0,
    ) -> None: ...
    def projections(self, session_id: str) -> dict[str, tuple[str, str]]: ...
    def projection_records(self, session_id: str) -> list[Projection]: ...


@runtime_checkable
class LockStore(Protocol):
    """Named exclusive locks (across threads, processes and, for a shared store, machines) and
    the intents of writes that replace a file under them."""

    def lock(self, name: str) -> AbstractContextManager[None]: ...
    def put_intent(self, intent: Intent) -> None: ...
    def drop_intent(self, session_id: str, call_id: str) -> None: ...
    def intents(self, root: str | None = None) -> list[Intent]: ...


@runtime_checkable
class KvStore(Protocol):
    """A key-value cache in namespaces (outlines, token counts, seals, leases)."""

    def cache_get(self, namespace: str, key: str) -> str | None: ...
    def cache_put(self, namespace: str, key: str, value: str) -> None: ...


@runtime_checkable
class Store(EventStore, BlobStore, ArchiveStore, LockStore, KvStore, RetentionStore, Protocol):
    """What filecache needs from storage: every role, and ``close`` (also by ``with``)."""

    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None: ...


def compress(data: bytes) -> bytes:
    """Compress a blob for storage (zlib, fast level: blobs are read far more than written)."""
    return zlib.compress(data, 1)


def decompress(data: bytes) -> bytes:
    """Inverse of ``compress``; a corrupt blob is a ``StoreError``."""
    try:
        return zlib.decompress(data)
    except zlib.error as exc:
        raise StoreError(
            f"corrupt blob in the store ({exc}); delete the store to rebuild it"
        ) from exc


class ClosesOnExit:
    """``with store:`` closes the store at the end (every store class has it)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


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


_EVENT_FIELDS = tuple(f.name for f in fields(Event))[:-2]  # the row's order, deps/args apart


def _projection(call_id: str, tier: str, held: tuple[int, int, float]) -> Projection:
    before, after, created = held
    return Projection(
        call_id=call_id, tier=tier, tokens_before=before, tokens_after=after, created=created
    )


def event_of_row(row: Sequence[object]) -> Event:
    """A row of the ``events`` table (``sql_store.EVENT_COLUMNS``) as an ``Event``."""
    deps, args = str(row[-2]), str(row[-1])
    values = dict(zip(_EVENT_FIELDS, row[:-2], strict=True))
    return Event(**values, deps=tuple(deps.split()), args=tuple(args.split()))  # type: ignore[arg-type]


def check_sequence(session_id: str, expected_head: int, events: Sequence[Event]) -> None:
    """``events`` must belong to the session and continue its head without a gap (one list
    comparison; the events are walked only to name the one that does not)."""
    expected = [(session_id, expected_head + n) for n in range(1, len(events) + 1)]
    if [(e.session_id, e.seq) for e in events] == expected:
        return
    for offset, event in enumerate(events, start=1):
        if event.session_id != session_id or event.seq != expected_head + offset:
            raise StoreError(
                f"event {event.call_id!r} (session {event.session_id!r}, seq {event.seq}) does "
                f"not continue session {session_id!r} at seq {expected_head + offset}; an event's "
                "seq must be unique within its session"
            )


def _referenced_versions(events: Iterable[Event]) -> set[str]:
    live: set[str] = set()
    for e in events:
        if e.version:
            live.add(e.version)
        if e.base_version:
            live.add(e.base_version)
    return live


STORE_FILES = ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal", "paths.lock")
"""The files of a root's default store folder (besides its ``.gitignore``)."""


def refuse_links(folder: Path) -> None:
    """Refuse a root's store folder that is a symbolic link, or holds its store files as links:
    a repository that ships one could make filecache create or write its store anywhere.

    Raises:
        StoreError: saying which link, and what to do.
    """
    for path in (folder, *(folder / name for name in (*STORE_FILES, ".gitignore"))):
        if os.path.islink(path):
            raise StoreError(
                f"{path} is a symbolic link (to {os.readlink(path)}); filecache never keeps its "
                "store through a link (a repository could point it anywhere): remove the link, "
                "or name a store with --store or FILECACHE_STORE"
            )


def _create(path: Path, data: bytes) -> None:
    """Create ``path`` holding ``data``; never through a link, never over an existing file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def fallback_store_folder(root: Path) -> Path:
    """The user cache directory's folder for ``root`` (see ``default_store_path``)."""
    import xxhash

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "filecache"
    return base / xxhash.xxh3_64_hexdigest(str(root.resolve()).encode())


def default_store_path(root: Path) -> Path:
    """``<root>/.filecache/cache.db``, or a per-root file in the user cache dir if that fails.

    Creates the folder, and a ``.gitignore`` holding ``*`` inside it, on first use; a folder
    that is a symbolic link, or holds its files as links, is refused (``refuse_links``). The
    fallback (when the root is read-only) is ``$XDG_CACHE_HOME/filecache/<hash of root>/cache.db``,
    with ``~/.cache`` when ``XDG_CACHE_HOME`` is unset.

    Raises:
        StoreError: neither folder is writable, or the root's is a link.
    """
    folder = root / STORE_DIR
    refuse_links(folder)
    try:
        folder.mkdir(exist_ok=True)
        refuse_links(folder)  # made by someone else in between
        with contextlib.suppress(FileExistsError):
            _create(folder / ".gitignore", b"*\n")
        # A name of our own: processes probing the same folder must not unlink each other's.
        probe = folder / f".write-probe-{os.getpid()}-{threading.get_ident()}"
        _create(probe, b"")
        probe.unlink()
        return folder / "cache.db"
    except OSError as exc:
        local_error = exc
    fallback = fallback_store_folder(root)
    try:
        fallback.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create a store in {folder} ({local_error}) nor in {fallback} ({exc}); "
            "pass store=':memory:' or set FILECACHE_STORE to a writable path"
        ) from exc
    return fallback / "cache.db"
