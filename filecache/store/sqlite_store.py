"""The durable store: one SQLite file shared by the threads and processes working on a root.

The SQL is ``sql_store``'s (every role written once over ``dialect.SQLITE``); this module is the
connection handling that is SQLite's own, ``commit`` and ``lock``.

Invariants:
- One connection per ``SqliteStore``, opened with ``check_same_thread=False`` and used only while
  holding the store's ``RLock``; processes sharing the file rely on WAL and a 5 s busy timeout.
- The connection is in autocommit mode: a single statement commits on its own, and work of several
  statements runs between an explicit ``BEGIN IMMEDIATE`` and ``COMMIT`` (immediate, so that a
  reader never has to upgrade to a writer, which WAL cannot wait for).
- The schema is built only by ``migrations.MIGRATIONS``, applied on open, in order, each in its
  own transaction, under the open lock of ``<database>.lock``, and recorded by name in
  ``_migrations``; a recorded one never runs again.
- Every ``sqlite3.Error`` (and the ``OSError`` of opening) becomes a ``StoreError`` in
  ``_store_error`` and nowhere else; a failed transaction is rolled back before it surfaces.
- ``commit`` checks the session's head and appends under one ``BEGIN IMMEDIATE``: no other
  connection can append between the check and the insert. A busy database is retried (the
  5 s busy timeout, then up to three more attempts) before it surfaces.
- ``lock(name)`` is a record lock on ``<database>.lock`` (``filecache.store.locks``): exclusive
  across the threads and processes that use this database.
- Closing the last connection to a database makes SQLite checkpoint its write-ahead log into the
  database, sync both and delete the log (two fsyncs and a copy; the next process creates the
  log again): most of a one-call CLI process's end. After ``defer_checkpoints()`` (called by a
  process that ends with ``os._exit`` as soon as its call is done: ``filecache.entry``),
  ``close`` syncs the log instead (what was committed is then as durable as the checkpoint
  would have made it) and leaves the connection open; ``os._exit`` then ends the process the
  way a killed one ends, which a WAL database is built to survive: the next opener rebuilds its
  index of the log, and SQLite's automatic checkpoint (every 1000 pages) still bounds the log.
  A process that exits normally instead closes those connections at exit: correct, only
  slower. ``_deferred`` and ``_left_open`` are the process's, set by the main thread before
  any store is opened.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from filecache.errors import StoreConflictError, StoreError
from filecache.store import migrations
from filecache.store.dialect import SQLITE
from filecache.store.locks import lock_file
from filecache.store.migrations import Connection
from filecache.store.sql_store import SqlStore, check_sequence, statements
from filecache.store.store import LAST_USED_SLACK, Event, make_private

__all__ = ["SqliteStore", "defer_checkpoints", "left_open"]

_T = TypeVar("_T")

# ``commit``'s: the row must exist (events reference it), but its last use is rewritten only
# when it moves on by over a second (a call that leaves the page unchanged writes no WAL frame).
_COMMIT_SESSION = statements(SQLITE).upsert_session + (
    f" WHERE excluded.last_used > sessions.last_used + {LAST_USED_SLACK!r}"
    " OR excluded.last_used < sessions.last_used"
)
_WRITABLE_HINT = "pass store=':memory:' or set FILECACHE_STORE to a writable path"

_deferred = False  # ``defer_checkpoints()`` was called: ``close`` leaves connections open
_left_open: list[sqlite3.Connection] = []  # what ``close`` left open, for ``os._exit``


def defer_checkpoints() -> None:
    """Make every later ``SqliteStore.close`` in this process sync the write-ahead log and leave
    the connection open, for a process that ends with ``os._exit`` (``left_open``): no
    checkpoint at the end of each one-call process (see the module's invariants)."""
    global _deferred
    _deferred = True


def left_open() -> bool:
    """Whether ``close`` left connections open: the process should end with ``os._exit``."""
    return bool(_left_open)


def _sync_log(path: Path) -> bool:
    """Sync the write-ahead log of the database at ``path`` and its folder (its directory
    entry: the log may be new); False if there is no log or it cannot be synced."""
    for name in (path.name + "-wal", "."):
        try:
            fd = os.open(path.parent / name, os.O_RDONLY)
        except OSError:
            return False
        try:
            os.fsync(fd)
        except OSError:
            if name != ".":  # some systems cannot sync a folder; the log itself is synced
                return False
        finally:
            os.close(fd)
    return True


def _store_error(exc: BaseException, path: Path, *, opening: bool) -> StoreError:
    """The one place where a storage failure becomes a ``StoreError`` that says what to do."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    if primary in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        hint = f"the file is not a filecache store or is corrupt; delete {path} to start afresh"
    elif primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        hint = "another process held the store for over 5 s; retry, or " + _WRITABLE_HINT
    elif primary == sqlite3.SQLITE_FULL:
        hint = "the disk is full; free some space or delete old sessions"
    elif primary == sqlite3.SQLITE_CONSTRAINT:
        hint = "an event's seq must be unique within its session"
    elif isinstance(exc, sqlite3.ProgrammingError) and "closed" in str(exc):
        hint = "the store was closed; open a new one"
    elif opening or primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN):
        hint = _WRITABLE_HINT
    else:
        hint = f"if this persists, delete {path} to start afresh, or " + _WRITABLE_HINT
    what = f"cannot open the store at {path}" if opening else f"the store at {path} failed"
    return StoreError(f"{what}: {exc}; {hint}")


class _Guard:
    """Holds the store's lock around one operation and turns its failures into ``StoreError``."""

    __slots__ = ("_store",)

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Connection:
        self._store._lock.acquire()
        return self._store._conn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        store = self._store
        try:
            if exc is not None:
                conn = store._conn
                try:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # closed or already rolled back: the original error is what matters
                if isinstance(exc, sqlite3.Error):
                    raise _store_error(exc, store.path, opening=False) from exc
        finally:
            store._lock.release()


class SqliteStore(SqlStore):
    """The ``Store`` on an SQLite file, safe for threads (one lock) and processes (WAL).

    Args:
        path: the database file; its folder is created if missing.

    Raises:
        StoreError: the file cannot be opened, is not an SQLite database, or cannot be migrated.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(SQLITE)
        self.path = Path(path)
        self._lock = threading.RLock()
        self._guard = _Guard(self)
        self._conn = _retry_busy(lambda: self._open(), self.path, opening=True)
        # Sessions' last use as this object last wrote it (``commit`` skips a rewrite within
        # ``LAST_USED_SLACK``); any other write of a session's row forgets it.
        self._last_used: dict[str, float] = {}
        # Kept open while the store is: a session's turn then costs two fcntl calls, no open
        self._locks = lock_file(self.lock_path)
        self._locks.pin()
        self._pinned = True

    def _open(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._private()
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 5000")
            # ``PRAGMA user_version`` holds how many migrations a store has once all of them
            # ran: a current store opens with this one read and no migration work (the CLI's
            # start); another's, or an older one, is checked and migrated.
            migrated = conn.execute("PRAGMA user_version").fetchone()[0] == len(
                migrations.MIGRATIONS
            )
            if not migrated:
                _refuse_foreign(conn)
            # Processes creating a new store at once: the first to switch to WAL wins, the
            # others wait for it here (one holds the open lock while it migrates).
            with lock_file(self.lock_path).hold("open"):
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                if not migrated:
                    _migrate(conn)
            return conn
        except BaseException:
            if conn is not None:
                conn.close()
            raise

    def _private(self) -> None:
        """The database is created 0600 (SQLite gives its journals the database's mode), and
        an existing store file others may read is tightened (``make_private``)."""
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                             0o600))  # fmt: skip
        except FileExistsError:
            pass
        except OSError:
            return  # sqlite3 says what is wrong
        for suffix in ("", "-wal", "-shm", "-journal", ".lock"):
            make_private(self.path.with_name(self.path.name + suffix), 0o600)

    @property
    def lock_path(self) -> Path:
        """The record-lock file beside the database (``lock``)."""
        return self.path.with_name(self.path.name + ".lock")

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def _connection(self) -> _Guard:
        return self._guard

    def _transaction(self, work: Callable[[Connection], _T]) -> _T:
        with self._guard as conn:
            conn.execute("BEGIN IMMEDIATE")
            result = work(conn)
            conn.execute("COMMIT")
            return result

    def _forget_last_used(self, session_id: str | None) -> None:
        if session_id is None:
            self._last_used.clear()
        else:
            self._last_used.pop(session_id, None)

    def commit(
        self,
        session_id: str,
        expected_head: int,
        events: Sequence[Event],
        views: Mapping[str, str | None],
    ) -> int:
        """Append ``events`` and apply ``views`` in one transaction if the head is
        ``expected_head``; else ``StoreConflictError`` and nothing written. Returns the head."""
        check_sequence(session_id, expected_head, events)
        rows = [  # in the order of ``sql_store.EVENT_COLUMNS``
            (e.session_id, e.seq, e.call_id, e.tool, e.path, e.start, e.end, e.version,
             e.base_version, e.kind, e.base_call_id, e.tokens, e.tokens_full, e.text_hash,
             e.created, " ".join(e.deps), " ".join(e.args))
            for e in events
        ]  # fmt: skip
        when = events[-1].created if events else time.time()
        sql = self._sql

        def attempt() -> int:
            with self._guard as conn:
                conn.execute("BEGIN IMMEDIATE")
                head = int(conn.execute(sql.head, (session_id,)).fetchone()[0])
                if head != expected_head:
                    conn.execute("ROLLBACK")
                    raise StoreConflictError(
                        f"session {session_id!r} moved on to seq {head} (expected "
                        f"{expected_head}); nothing was written"
                    )
                known = self._last_used.get(session_id)
                # The row exists (its events do); only a last use that moves on needs writing
                if expected_head == 0 or known is None or not 0 <= when - known < LAST_USED_SLACK:
                    conn.execute(_COMMIT_SESSION, (session_id, when, when))
                    known = when
                conn.executemany(sql.insert_event, rows)
                for path, state in views.items():
                    if state is None:
                        conn.execute(sql.delete_view, (session_id, path))
                    else:
                        conn.execute(sql.upsert_view, (session_id, path, state))
                conn.execute("COMMIT")
                if known is not None:
                    self._last_used[session_id] = known
                return expected_head + len(events)

        return _retry_busy(attempt, self.path, opening=False)

    def lock(self, name: str) -> AbstractContextManager[None]:
        """Hold ``name`` exclusively across this database's threads and processes."""
        return self._locks.hold(name)

    def close(self) -> None:
        """Close the connection; later calls raise ``StoreError``. Closing twice is fine.

        After ``defer_checkpoints()``: sync the write-ahead log and leave the connection open
        for ``os._exit`` instead (a log that cannot be synced: closed as usual)."""
        with self._guard as conn:
            if _deferred and _is_open(conn):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")  # as closing would
                if _sync_log(self.path):
                    _left_open.append(conn)
                    self._conn = _closed_connection()
                    conn = self._conn
            conn.close()
            if self._pinned:
                self._pinned = False
                self._locks.unpin()


def _is_open(conn: sqlite3.Connection) -> bool:
    try:
        return conn.total_changes >= 0
    except sqlite3.ProgrammingError:
        return False  # closed


def _closed_connection() -> sqlite3.Connection:
    """A closed connection: what a closed store's calls use (they raise "closed")."""
    conn = sqlite3.connect(":memory:")
    conn.close()
    return conn


def _retry_busy(attempt: Callable[[], _T], path: Path, *, opening: bool) -> _T:
    """Run ``attempt``, retrying a busy or locked database (beyond its busy timeout) 3 times."""
    for tries in range(4):
        try:
            return attempt()
        except StoreConflictError:
            raise
        except StoreError as exc:
            cause = exc.__cause__
            if tries == 3 or not _is_busy(cause):
                raise
        except (sqlite3.Error, OSError) as exc:
            if tries == 3 or not _is_busy(exc):
                raise _store_error(exc, path, opening=opening) from exc
        time.sleep(0.05 * (tries + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def _is_busy(exc: BaseException | None) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _refuse_foreign(conn: sqlite3.Connection) -> None:
    """Refuse a database of other tables before changing anything in it (its journal mode
    included): every store this history made holds ``_migrations`` first."""
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    if tables and "_migrations" not in tables:
        shown = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
        raise sqlite3.DatabaseError(
            f"a database of other tables ({shown}), not a filecache store; give filecache a "
            "path of its own"
        )


def _migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations not yet recorded, each in its own immediate transaction (at once
    done when another process finished them while this one waited for the open lock)."""
    history = migrations.MIGRATIONS
    current = len(history)
    if conn.execute("PRAGMA user_version").fetchone()[0] == current:
        return
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    applied = {name for (name,) in conn.execute("SELECT name FROM _migrations").fetchall()}
    for migration in migrations.pending(applied, history):
        name = migration.__name__
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it since we looked: check under the write lock.
            done = conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone()
            if done is None:
                migration(conn, SQLITE)
                conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, time.time())
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    conn.execute(f"PRAGMA user_version = {current}")  # every migration is recorded by now
