"""The durable store: one SQLite file shared by the threads and processes working on a root.

Invariants:
- One connection per ``SqliteStore``, opened with ``check_same_thread=False`` and used only while
  holding the store's ``RLock``; processes sharing the file rely on WAL and a 5 s busy timeout.
- The connection is in autocommit mode: a single statement commits on its own, and work of several
  statements runs between an explicit ``BEGIN IMMEDIATE`` and ``COMMIT`` (immediate, so that a
  reader never has to upgrade to a writer, which WAL cannot wait for).
- The schema is built only by the named functions in ``MIGRATIONS``, applied on open, in order,
  each in its own transaction and recorded by name in ``_migrations``; a recorded one never runs
  again. Append new migrations; never edit or reorder applied ones.
- Blobs are stored ``compress``-ed, keyed by their version (content-addressed,
  ``INSERT OR IGNORE``); ``size`` is the uncompressed length.
- Every ``sqlite3.Error`` (and the ``OSError`` of opening) becomes a ``StoreError`` in
  ``_store_error`` and nowhere else; a failed transaction is rolled back before it surfaces.
- ``commit`` checks the session's head and appends under one ``BEGIN IMMEDIATE``: no other
  connection can append between the check and the insert. A busy database is retried (the
  5 s busy timeout, then up to three more attempts) before it surfaces.
- ``lock(name)`` is a record lock on ``<database>.lock`` (``filecache.store.locks``): exclusive
  across the threads and processes that use this database.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from filecache.errors import StoreConflictError, StoreError
from filecache.store.locks import lock_file
from filecache.store.store import (
    LAST_USED_SLACK,
    ClosesOnExit,
    Event,
    GcReport,
    Intent,
    Projection,
    SessionInfo,
    check_sequence,
    compress,
    decompress,
    event_of_row,
    event_row,
)

__all__ = ["MIGRATIONS", "SqliteStore"]

Migration = Callable[[sqlite3.Connection], None]
_T = TypeVar("_T")

MIGRATIONS: list[Migration] = []
"""The schema's history, oldest first; each is recorded under its function name."""


def _migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


@_migration
def m001_initial(conn: sqlite3.Connection) -> None:
    """Sessions, the event ledger, content blobs, views and the key-value cache."""
    conn.execute(
        """CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            last_used REAL NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            path TEXT NOT NULL,
            start INTEGER,
            "end" INTEGER,
            version TEXT,
            base_version TEXT,
            kind TEXT NOT NULL,
            base_call_id TEXT,
            tokens INTEGER NOT NULL,
            tokens_full INTEGER NOT NULL,
            text_hash TEXT,
            created REAL NOT NULL,
            PRIMARY KEY (session_id, seq)
        )"""
    )
    conn.execute("CREATE INDEX events_session_call ON events(session_id, call_id)")
    conn.execute(
        """CREATE TABLE blobs (
            version TEXT PRIMARY KEY,
            size INTEGER NOT NULL,
            data BLOB NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE views (
            session_id TEXT NOT NULL,
            path TEXT NOT NULL,
            state TEXT NOT NULL,
            PRIMARY KEY (session_id, path)
        )"""
    )
    conn.execute(
        """CREATE TABLE cache (
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (namespace, key)
        )"""
    )


@_migration
def m002_archive_and_projections(conn: sqlite3.Connection) -> None:
    """Pruning: every original tool result archived, and what each pruned result became."""
    conn.execute(
        """CREATE TABLE archive (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            text BLOB NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (session_id, call_id)
        )"""
    )
    conn.execute("CREATE INDEX archive_call ON archive(call_id)")
    conn.execute(
        """CREATE TABLE projections (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            tier TEXT NOT NULL,
            text TEXT NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (session_id, call_id)
        )"""
    )


@_migration
def m003_projection_tokens(conn: sqlite3.Connection) -> None:
    """Pruning: the tokens a pruned result took originally and takes now (for stats)."""
    conn.execute("ALTER TABLE projections ADD COLUMN tokens_before INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE projections ADD COLUMN tokens_after INTEGER NOT NULL DEFAULT 0")


@_migration
def m004_event_deps(conn: sqlite3.Connection) -> None:
    """Every call id a FileRef/diff answer relies on (space-separated), for exact keep-alive."""
    conn.execute("ALTER TABLE events ADD COLUMN deps TEXT NOT NULL DEFAULT ''")


@_migration
def m005_event_args(conn: sqlite3.Connection) -> None:
    """Hashes of what a write/edit call wrote (its content, its new strings), for ``sync``."""
    conn.execute("ALTER TABLE events ADD COLUMN args TEXT NOT NULL DEFAULT ''")


@_migration
def m006_intents(conn: sqlite3.Connection) -> None:
    """Writes about to replace a file (record-intent -> replace -> commit), for recovery."""
    conn.execute(
        """CREATE TABLE intents (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            root TEXT NOT NULL,
            path TEXT NOT NULL,
            before TEXT,
            after TEXT NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (session_id, call_id)
        )"""
    )


@_migration
def m007_drop_event_call_index(conn: sqlite3.Connection) -> None:
    """No query looks events up by call id: the index cost a random B-tree leaf per event."""
    conn.execute("DROP INDEX IF EXISTS events_session_call")


# Constant SQL text, so that sqlite3's statement cache reuses the prepared statements.
_UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, created, last_used) VALUES (?, ?, ?) "
    "ON CONFLICT (session_id) DO UPDATE SET last_used = excluded.last_used"
)
# ``commit``'s: the row must exist (events reference it), but its last use is rewritten only
# when it moves on by over a second (a call that leaves the page unchanged writes no WAL frame).
_COMMIT_SESSION = _UPSERT_SESSION + (
    f" WHERE excluded.last_used > sessions.last_used + {LAST_USED_SLACK!r}"
    " OR excluded.last_used < sessions.last_used"
)
_EVENT_COLUMNS = (
    'session_id, seq, call_id, tool, path, start, "end", version, base_version, kind, '
    "base_call_id, tokens, tokens_full, text_hash, created, deps, args"
)
_INSERT_EVENT = f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES ({', '.join('?' * 17)})"
_SELECT_EVENTS = (
    f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq > ? ORDER BY seq"
)
_HEAD = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?"
_INTENT_COLUMNS = "session_id, call_id, root, path, before, after, created"
_INSERT_BLOB = "INSERT OR IGNORE INTO blobs (version, size, data) VALUES (?, ?, ?)"
_SELECT_BLOB = "SELECT data FROM blobs WHERE version = ?"
_HAS_BLOB = "SELECT 1 FROM blobs WHERE version = ?"
_UPSERT_VIEW = (
    "INSERT INTO views (session_id, path, state) VALUES (?, ?, ?) "
    "ON CONFLICT (session_id, path) DO UPDATE SET state = excluded.state"
)
_DELETE_VIEW = "DELETE FROM views WHERE session_id = ? AND path = ?"
_SELECT_VIEWS = "SELECT path, state FROM views WHERE session_id = ?"
_SELECT_SESSIONS = """
    SELECT s.session_id, s.created, s.last_used,
           COUNT(e.seq), COALESCE(SUM(e.tokens), 0), COALESCE(SUM(e.tokens_full), 0)
    FROM sessions AS s LEFT JOIN events AS e ON e.session_id = s.session_id
    GROUP BY s.session_id
    ORDER BY s.last_used DESC, s.session_id
"""
_OLD_SESSIONS = "SELECT session_id FROM sessions WHERE last_used < ?"
# NOT IN over a set holding NULL is never true: both columns are filtered for NULL.
_DELETE_UNREFERENCED_BLOBS = """
    DELETE FROM blobs WHERE version NOT IN (
        SELECT version FROM events WHERE version IS NOT NULL
        UNION SELECT base_version FROM events WHERE base_version IS NOT NULL
    )
"""
_SELECT_CACHE = "SELECT value FROM cache WHERE namespace = ? AND key = ?"
_UPSERT_CACHE = (
    "INSERT INTO cache (namespace, key, value) VALUES (?, ?, ?) "
    "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value"
)

_WRITABLE_HINT = "pass store=':memory:' or set FILECACHE_STORE to a writable path"


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


class SqliteStore(ClosesOnExit):
    """The ``Store`` on an SQLite file, safe for threads (one lock) and processes (WAL).

    Args:
        path: the database file; its folder is created if missing.

    Raises:
        StoreError: the file cannot be opened, is not an SQLite database, or cannot be migrated.
    """

    def __init__(self, path: Path) -> None:
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
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 5000")
            # Processes creating a new store at once: the first to switch to WAL wins, the
            # others wait for it here (one holds the open lock while it migrates).
            with lock_file(self.lock_path).hold("open"):
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                _migrate(conn)
            return conn
        except BaseException:
            if conn is not None:
                conn.close()
            raise

    @property
    def lock_path(self) -> Path:
        """The record-lock file beside the database (``lock``)."""
        return self.path.with_name(self.path.name + ".lock")

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def put_blob(self, version: str, data: bytes) -> None:
        """Store ``data`` under ``version`` unless it is already there (content-addressed)."""
        if self.has_blob(version):
            return  # skip compressing what is already stored
        packed = compress(data)
        with self._guard as conn:
            conn.execute(_INSERT_BLOB, (version, len(data), packed))

    def get_blob(self, version: str) -> bytes | None:
        """The bytes stored under ``version``, or None."""
        with self._guard as conn:
            row = conn.execute(_SELECT_BLOB, (version,)).fetchone()
        return None if row is None else decompress(row[0])

    def has_blob(self, version: str) -> bool:
        """Whether a blob is stored under ``version``."""
        with self._guard as conn:
            return conn.execute(_HAS_BLOB, (version,)).fetchone() is not None

    def head(self, session_id: str) -> int:
        """The session's newest ``seq`` (0 for none)."""
        with self._guard as conn:
            return int(conn.execute(_HEAD, (session_id,)).fetchone()[0])

    def settled_events(self, session_id: str, after: int) -> list[Event]:
        """``events``: a commit on this file is over when its call returns or raises."""
        return self.events(session_id, after)

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
        rows = [event_row(e) for e in events]
        when = events[-1].created if events else time.time()

        def attempt() -> int:
            with self._guard as conn:
                conn.execute("BEGIN IMMEDIATE")
                head = int(conn.execute(_HEAD, (session_id,)).fetchone()[0])
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
                conn.executemany(_INSERT_EVENT, rows)
                for path, state in views.items():
                    if state is None:
                        conn.execute(_DELETE_VIEW, (session_id, path))
                    else:
                        conn.execute(_UPSERT_VIEW, (session_id, path, state))
                conn.execute("COMMIT")
                if known is not None:
                    self._last_used[session_id] = known
                return expected_head + len(events)

        return _retry_busy(attempt, self.path, opening=False)

    def lock(self, name: str) -> AbstractContextManager[None]:
        """Hold ``name`` exclusively across this database's threads and processes."""
        return self._locks.hold(name)

    def put_intent(self, intent: Intent) -> None:
        """Record a write about to replace a file (replacing one of the same call)."""
        i = intent
        with self._guard as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO intents ({_INTENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (i.session_id, i.call_id, i.root, i.path, i.before, i.after, i.created),
            )

    def drop_intent(self, session_id: str, call_id: str) -> None:
        """Forget a recorded intent (its write was committed or rolled back)."""
        with self._guard as conn:
            conn.execute(
                "DELETE FROM intents WHERE session_id = ? AND call_id = ?", (session_id, call_id)
            )

    def intents(self, root: str | None = None) -> list[Intent]:
        """Intents left behind (of ``root``, or all), oldest first."""
        with self._guard as conn:
            if root is None:
                rows = conn.execute(
                    f"SELECT {_INTENT_COLUMNS} FROM intents ORDER BY created"
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {_INTENT_COLUMNS} FROM intents WHERE root = ? ORDER BY created",
                    (root,),
                ).fetchall()
        return [Intent(*row) for row in rows]

    def events(self, session_id: str, after: int | None = None) -> list[Event]:
        """The session's events after ``seq`` ``after`` (None: all), in ``seq`` order."""
        with self._guard as conn:
            rows = conn.execute(
                _SELECT_EVENTS, (session_id, -(2**62) if after is None else after)
            ).fetchall()
        return [event_of_row(row) for row in rows]

    def save_view(self, session_id: str, path: str, state: str | None) -> None:
        """Record the view state of ``path`` in the session; None forgets it."""
        with self._guard as conn:
            if state is None:
                conn.execute(_DELETE_VIEW, (session_id, path))
            else:
                conn.execute(_UPSERT_VIEW, (session_id, path, state))

    def load_views(self, session_id: str) -> dict[str, str]:
        """Every saved view state of the session, by path."""
        with self._guard as conn:
            return dict(conn.execute(_SELECT_VIEWS, (session_id,)).fetchall())

    def touch_session(self, session_id: str, now: float | None = None) -> None:
        """Create the session if needed and set its last use to ``now`` (default: the time)."""
        when = time.time() if now is None else now
        with self._guard as conn:
            self._last_used.pop(session_id, None)
            conn.execute(_UPSERT_SESSION, (session_id, when, when))

    def sessions(self) -> list[SessionInfo]:
        """Every session with its event count and token sums, most recently used first."""
        with self._guard as conn:
            rows = conn.execute(_SELECT_SESSIONS).fetchall()
        return [SessionInfo(*row) for row in rows]

    def delete_session(self, session_id: str) -> None:
        """Forget the session, its events and its views (blobs stay until ``gc``)."""
        with self._guard as conn:
            self._last_used.pop(session_id, None)
            conn.execute("BEGIN IMMEDIATE")
            _delete_sessions(conn, [session_id])
            conn.execute("COMMIT")

    def gc(self, older_than: float) -> GcReport:
        """Delete sessions last used before ``older_than``, then every unreferenced blob."""
        with self._guard as conn:
            conn.execute("BEGIN IMMEDIATE")
            old = [sid for (sid,) in conn.execute(_OLD_SESSIONS, (older_than,)).fetchall()]
            self._last_used.clear()
            _delete_sessions(conn, old)
            blobs = conn.execute(_DELETE_UNREFERENCED_BLOBS).rowcount
            conn.execute("COMMIT")
        return GcReport(len(old), blobs)

    def cache_get(self, namespace: str, key: str) -> str | None:
        """The cached value, or None."""
        with self._guard as conn:
            row = conn.execute(_SELECT_CACHE, (namespace, key)).fetchone()
        return None if row is None else str(row[0])

    def cache_put(self, namespace: str, key: str, value: str) -> None:
        """Set the cached value, replacing any previous one."""
        with self._guard as conn:
            conn.execute(_UPSERT_CACHE, (namespace, key, value))

    def archive_put(self, session_id: str, call_id: str, text: str) -> None:
        """Keep the original text of a tool result; the first one stored wins."""
        with self._guard as conn:
            conn.execute(
                "INSERT OR IGNORE INTO archive (session_id, call_id, text, created) "
                "VALUES (?, ?, ?, ?)",
                (session_id, call_id, compress(text.encode("utf-8")), time.time()),
            )

    def archive_get(self, call_id: str, session_id: str | None = None) -> str | None:
        """The archived original of ``call_id`` (in ``session_id``, or the newest anywhere)."""
        with self._guard as conn:
            if session_id is None:
                row = conn.execute(
                    "SELECT text FROM archive WHERE call_id = ? ORDER BY created DESC LIMIT 1",
                    (call_id,),
                ).fetchone()
            else:
                row = conn.execute(
                    "SELECT text FROM archive WHERE session_id = ? AND call_id = ?",
                    (session_id, call_id),
                ).fetchone()
        return None if row is None else decompress(bytes(row[0])).decode("utf-8")

    def projection_put(
        self,
        session_id: str,
        call_id: str,
        tier: str,
        text: str,
        tokens_before: int = 0,
        tokens_after: int = 0,
    ) -> None:
        """Record what a pruned result became (replacing a lower tier); the original's
        ``tokens_before`` is kept from the first projection."""
        with self._guard as conn:
            conn.execute(
                "INSERT INTO projections (session_id, call_id, tier, text, created, "
                "tokens_before, tokens_after) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (session_id, call_id) DO UPDATE SET tier = excluded.tier, "
                "text = excluded.text, tokens_after = excluded.tokens_after, "
                "tokens_before = CASE WHEN projections.tokens_before = 0 "
                "THEN excluded.tokens_before ELSE projections.tokens_before END",
                (session_id, call_id, tier, text, time.time(), tokens_before, tokens_after),
            )

    def projections(self, session_id: str) -> dict[str, tuple[str, str]]:
        """Every recorded projection of the session: call id -> (tier, text)."""
        with self._guard as conn:
            rows = conn.execute(
                "SELECT call_id, tier, text FROM projections WHERE session_id = ?", (session_id,)
            ).fetchall()
        return {str(c): (str(t), str(x)) for c, t, x in rows}

    def projection_records(self, session_id: str) -> list[Projection]:
        """The session's projections with their token counts, oldest first."""
        with self._guard as conn:
            rows = conn.execute(
                "SELECT call_id, tier, tokens_before, tokens_after, created FROM projections "
                "WHERE session_id = ? ORDER BY created, call_id",
                (session_id,),
            ).fetchall()
        return [Projection(str(c), str(t), int(b), int(a), float(w)) for c, t, b, a, w in rows]

    def close(self) -> None:
        """Close the connection; later calls raise ``StoreError``. Closing twice is fine."""
        with self._guard as conn:
            conn.close()
            if self._pinned:
                self._pinned = False
                self._locks.unpin()


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


def _delete_sessions(conn: sqlite3.Connection, session_ids: list[str]) -> None:
    params = [(sid,) for sid in session_ids]
    conn.executemany("DELETE FROM events WHERE session_id = ?", params)
    conn.executemany("DELETE FROM views WHERE session_id = ?", params)
    conn.executemany("DELETE FROM archive WHERE session_id = ?", params)
    conn.executemany("DELETE FROM projections WHERE session_id = ?", params)
    conn.executemany("DELETE FROM intents WHERE session_id = ?", params)
    conn.executemany("DELETE FROM sessions WHERE session_id = ?", params)


def _migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations not yet recorded, each in its own immediate transaction.

    ``PRAGMA user_version`` holds how many migrations a store has once all of them ran: when it
    equals ``len(MIGRATIONS)`` the open does one read and no migration work (the CLI's start).
    """
    current = len(MIGRATIONS)
    if conn.execute("PRAGMA user_version").fetchone()[0] == current:
        return
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    applied = {name for (name,) in conn.execute("SELECT name FROM _migrations").fetchall()}
    for migration in MIGRATIONS:
        name = migration.__name__
        if name in applied:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it since we looked: check under the write lock.
            done = conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone()
            if done is None:
                migration(conn)
                conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, time.time())
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    conn.execute(f"PRAGMA user_version = {current}")  # every migration is recorded by now
