"""Storage behind small role protocols: the records a store keeps, and the roles.

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

Three implementations: ``memory_store.MemoryStore``, and ``SqliteStore`` and ``PostgresStore``,
one SQL implementation (``sql_store.SqlStore``) over a ``dialect``; every one checks a commit's
events by ``sql_store.check_sequence``.
``filecache.store.opening.open_store`` picks one from what the caller passed.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import field
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from filecache.core.records import record
from filecache.errors import StoreError
from filecache.fsio import STORE_DIR

__all__ = [
    "LAST_USED_SLACK",
    "ArchiveStore",
    "BlobStore",
    "Event",
    "EventStore",
    "GcReport",
    "is_store",
    "make_private",
    "say_once",
    "Intent",
    "KvStore",
    "LockStore",
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


@record(kw_only=True)
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


@record(kw_only=True)
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


@record(kw_only=True)
class SessionInfo:
    """A summary of one stored session."""

    session_id: str
    created: float
    last_used: float
    events: int
    tokens: int
    tokens_full: int


@record(kw_only=True)
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


@record(kw_only=True)
class GcReport:
    """What a garbage collection removed."""

    sessions_deleted: int
    blobs_deleted: int


class BlobStore(Protocol):
    """Content blobs keyed by their version (content-addressed: a second put is a no-op)."""

    def put_blob(self, version: str, data: bytes) -> None: ...
    def get_blob(self, version: str) -> bytes | None: ...
    def has_blob(self, version: str) -> bool: ...


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


class RetentionStore(Protocol):
    """The stored sessions: listed with their sums, deleted, garbage-collected with the blobs
    no event references."""

    def sessions(self) -> list[SessionInfo]: ...
    def delete_session(self, session_id: str) -> None: ...
    def gc(self, older_than: float) -> GcReport: ...


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


class LockStore(Protocol):
    """Named exclusive locks (across threads, processes and, for a shared store, machines) and
    the intents of writes that replace a file under them."""

    def lock(self, name: str) -> AbstractContextManager[None]: ...
    def put_intent(self, intent: Intent) -> None: ...
    def drop_intent(self, session_id: str, call_id: str) -> None: ...
    def intents(self, root: str | None = None) -> list[Intent]: ...


class KvStore(Protocol):
    """A key-value cache in namespaces (outlines, token counts, seals, leases)."""

    def cache_get(self, namespace: str, key: str) -> str | None: ...
    def cache_put(self, namespace: str, key: str, value: str) -> None: ...


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


def is_store(obj: object) -> bool:
    """Whether ``obj`` has every member of ``Store`` (an object given as a store is checked
    by its members, as ``isinstance`` on a runtime-checkable protocol would)."""
    return all(hasattr(obj, name) for name in _STORE_MEMBERS)


_STORE_MEMBERS = frozenset(
    name
    for role in Store.__mro__
    if role not in (Protocol, object) and role.__module__ == __name__
    for name in (*vars(role), *getattr(role, "__annotations__", {}))
    if not name.startswith("_") or name in ("__enter__", "__exit__")
)


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


_SAID: set[str] = set()
_SAID_LOCK = threading.Lock()


def say_once(message: str) -> None:
    """One warning line (logger ``filecache``), once per process for the same message."""
    with _SAID_LOCK:
        if message in _SAID:
            return
        _SAID.add(message)
    import logging  # on first use

    logging.getLogger("filecache").warning("filecache: %s", message)


def make_private(path: Path, mode: int) -> None:
    """Tighten ``path`` (a store file or folder of this user; never through a link) to
    ``mode`` when others may read or enter it, saying so once: the store keeps copies of what
    the model read, and must not be readable by anyone who can reach the project."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if os.path.islink(path) or st.st_uid != os.getuid() or not st.st_mode & 0o077:
        return
    try:
        os.chmod(path, mode, follow_symlinks=False)
    except OSError as exc:
        say_once(f"{path} is mode {st.st_mode & 0o777:o} and cannot be made {mode:o} ({exc})")
        return
    say_once(f"{path} was mode {st.st_mode & 0o777:o}, readable by others; made it {mode:o}")


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


def existing_store_path(root: Path) -> Path:
    """Where ``default_store_path`` put ``root``'s store, found without creating anything (for
    commands that only read a store): ``<root>/.filecache/cache.db`` unless only the user cache
    folder's file exists. The path may not exist: the caller says so."""
    local = root / STORE_DIR / "cache.db"
    if local.exists():
        return local
    fallback = fallback_store_folder(root) / "cache.db"
    return fallback if fallback.exists() else local


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
        folder.mkdir(mode=0o700, exist_ok=True)
        refuse_links(folder)  # made by someone else in between
        make_private(folder, 0o700)
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
        fallback.mkdir(parents=True, exist_ok=True, mode=0o700)
        make_private(fallback, 0o700)
    except OSError as exc:
        raise StoreError(
            f"cannot create a store in {folder} ({local_error}) nor in {fallback} ({exc}); "
            "pass store=':memory:' or set FILECACHE_STORE to a writable path"
        ) from exc
    return fallback / "cache.db"
