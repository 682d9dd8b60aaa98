"""The SQL store: every role of ``Store`` written once, over a ``Dialect`` and two ways to run work.

``SqliteStore`` and ``PostgresStore`` subclass ``SqlStore``; each supplies its connection
handling (``_connection``: a connection whose statements each commit on their own, for a
``with`` block here, so no code of this module is called back from a subclass; ``_transaction``:
work of several statements in one transaction, rolled back when it raises, and on PostgreSQL run
again on a serialization failure, which is why it takes the work as a function; every storage
error turned into a ``StoreError``) and what differs beyond SQL text: ``commit``, ``lock``,
``close`` (see ``dialect``). Everything else is here, with the SQL text once (``statements``).

Invariants:
- Blobs and archived originals are stored ``compress``-ed; blobs are keyed by their version
  (content-addressed: a second put is a no-op) and ``size`` is the uncompressed length.
- The archive keeps the first original of a call; a projection replaces the previous one but
  keeps the first ``tokens_before``.
- The event columns are listed once (``EVENT_COLUMNS``), in the order of ``Event``'s fields:
  ``Event``'s first 15 fields, then ``deps`` and ``args`` (space-separated).
- A write of a session's row other than ``commit``'s calls ``_forget_last_used`` first, inside
  the work (so under the SQLite store's lock): the SQLite ``commit`` skips rewriting a last use
  it wrote itself within ``LAST_USED_SLACK``.
"""

from __future__ import annotations

import contextlib
import functools
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import TypeVar

from filecache.core.records import record
from filecache.errors import StoreError
from filecache.store.dialect import Dialect
from filecache.store.migrations import Connection
from filecache.store.store import (
    ClosesOnExit,
    Event,
    GcReport,
    Intent,
    Projection,
    SessionInfo,
)

__all__ = [
    "EVENT_COLUMNS",
    "SqlStore",
    "Statements",
    "check_sequence",
    "compress",
    "decompress",
    "event_of_row",
    "statements",
]

T = TypeVar("T")

EVENT_COLUMNS = (
    'session_id, seq, call_id, tool, path, start, "end", version, base_version, kind, '
    "base_call_id, tokens, tokens_full, text_hash, created, deps, args"
)
_INTENT_COLUMNS = "session_id, call_id, root, path, before, after, created"
_SESSION_TABLES = ("events", "views", "archive", "projections", "intents", "sessions")
_NO_SEQ = -(2**62)  # ``events(after=None)``: every seq is above it


# What every store keeps: blobs packed by ``compress``, a commit's events checked by
# ``check_sequence`` (``MemoryStore`` too); the events table's rows read by ``event_of_row``.


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


_EVENT_FIELDS = tuple(f.name for f in fields(Event))[:-2]  # the row's order, deps/args apart


def event_of_row(row: Sequence[object]) -> Event:
    """A row of the ``events`` table (``sql_store.EVENT_COLUMNS``) as an ``Event``."""
    deps, args = str(row[-2]), str(row[-1])
    values = dict(zip(_EVENT_FIELDS, row[:-2], strict=True))
    # The row's columns by Event's field names: mypy cannot match a dict's values to fields.
    return Event(**values, deps=tuple(deps.split()), args=tuple(args.split()))  # type: ignore[arg-type]


@record
class Statements:
    """Every statement of the SQL store, in one dialect (constant text: the drivers' statement
    caches reuse what they prepared)."""

    upsert_session: str
    insert_event: str
    select_events: str
    head: str
    lock_session: str
    insert_blob: str
    select_blob: str
    has_blob: str
    upsert_view: str
    delete_view: str
    select_views: str
    select_sessions: str
    old_sessions: str
    delete_unreferenced_blobs: str
    delete_sessions: tuple[str, ...]
    select_cache: str
    upsert_cache: str
    insert_archive: str
    archive_newest: str
    archive_of: str
    upsert_projection: str
    select_projections: str
    select_projection_records: str
    upsert_intent: str
    drop_intent: str
    select_intents: str
    select_intents_of_root: str


@functools.cache
def statements(d: Dialect) -> Statements:
    """The store's SQL, written once with ``?`` placeholders, in dialect ``d``."""
    q = d.sql
    return Statements(
        upsert_session=q(
            "INSERT INTO sessions (session_id, created, last_used) VALUES (?, ?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET last_used = excluded.last_used"
        ),
        insert_event=q(f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join('?' * 17)})"),
        select_events=q(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq > ? ORDER BY seq"
        ),
        head=q("SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?"),
        lock_session=q("SELECT 1 FROM sessions WHERE session_id = ?" + d.lock_rows),
        insert_blob=q(
            "INSERT INTO blobs (version, size, data) VALUES (?, ?, ?) "
            "ON CONFLICT (version) DO NOTHING"
        ),
        select_blob=q("SELECT data FROM blobs WHERE version = ?"),
        has_blob=q("SELECT 1 FROM blobs WHERE version = ?"),
        upsert_view=q(
            "INSERT INTO views (session_id, path, state) VALUES (?, ?, ?) "
            "ON CONFLICT (session_id, path) DO UPDATE SET state = excluded.state"
        ),
        delete_view=q("DELETE FROM views WHERE session_id = ? AND path = ?"),
        select_views=q("SELECT path, state FROM views WHERE session_id = ?"),
        select_sessions="""
            SELECT s.session_id, s.created, s.last_used,
                   COUNT(e.seq), COALESCE(SUM(e.tokens), 0), COALESCE(SUM(e.tokens_full), 0)
            FROM sessions AS s LEFT JOIN events AS e ON e.session_id = s.session_id
            GROUP BY s.session_id
            ORDER BY s.last_used DESC, s.session_id
        """,
        old_sessions=q("SELECT session_id FROM sessions WHERE last_used < ?" + d.lock_rows),
        delete_unreferenced_blobs=d.delete_unreferenced_blobs,
        delete_sessions=tuple(
            q(f"DELETE FROM {table} WHERE session_id {'= ANY(?)' if d.arrays else '= ?'}")
            for table in _SESSION_TABLES
        ),
        select_cache=q("SELECT value FROM cache WHERE namespace = ? AND key = ?"),
        upsert_cache=q(
            "INSERT INTO cache (namespace, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value"
        ),
        insert_archive=q(
            "INSERT INTO archive (session_id, call_id, text, created) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (session_id, call_id) DO NOTHING"
        ),
        archive_newest=q(
            "SELECT text FROM archive WHERE call_id = ? ORDER BY created DESC LIMIT 1"
        ),
        archive_of=q("SELECT text FROM archive WHERE session_id = ? AND call_id = ?"),
        upsert_projection=q(
            "INSERT INTO projections (session_id, call_id, tier, text, created, "
            "tokens_before, tokens_after) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (session_id, call_id) DO UPDATE SET tier = excluded.tier, "
            "text = excluded.text, tokens_after = excluded.tokens_after, "
            "tokens_before = CASE WHEN projections.tokens_before = 0 "
            "THEN excluded.tokens_before ELSE projections.tokens_before END"
        ),
        select_projections=q("SELECT call_id, tier, text FROM projections WHERE session_id = ?"),
        select_projection_records=q(
            "SELECT call_id, tier, tokens_before, tokens_after, created FROM projections "
            "WHERE session_id = ? ORDER BY created, call_id"
        ),
        upsert_intent=q(
            f"INSERT INTO intents ({_INTENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (session_id, call_id) DO UPDATE SET root = excluded.root, "
            "path = excluded.path, before = excluded.before, after = excluded.after, "
            "created = excluded.created"
        ),
        drop_intent=q("DELETE FROM intents WHERE session_id = ? AND call_id = ?"),
        select_intents=(
            f"SELECT {_INTENT_COLUMNS} FROM intents ORDER BY created, session_id, call_id"
        ),
        select_intents_of_root=q(
            f"SELECT {_INTENT_COLUMNS} FROM intents WHERE root = ? "
            "ORDER BY created, session_id, call_id"
        ),
    )


class SqlStore(ClosesOnExit):
    """Every role of ``Store`` over SQL; subclasses run the work (see the module docstring)."""

    dialect: Dialect

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self._sql = statements(dialect)

    # How work runs: the subclass's connection handling.

    def _connection(self) -> contextlib.AbstractContextManager[Connection]:
        """A connection for statements that each commit on their own (``with``: the store's
        failures inside become ``StoreError``)."""
        raise NotImplementedError

    def _transaction(self, work: Callable[[Connection], T]) -> T:
        """``work`` in one transaction (rolled back if it raises)."""
        raise NotImplementedError

    def _forget_last_used(self, session_id: str | None) -> None:
        """A session's row (None: every row) is about to be written other than by ``commit``."""

    # Blobs -----------------------------------------------------------------------------------

    def put_blob(self, version: str, data: bytes) -> None:
        """Store ``data`` under ``version`` unless it is already there (content-addressed)."""
        if self.has_blob(version):
            return  # another session, process or machine stored it: skip compressing it again
        row = (version, len(data), compress(data))
        with self._connection() as c:
            c.execute(self._sql.insert_blob, row)

    def get_blob(self, version: str) -> bytes | None:
        """The bytes stored under ``version``, or None."""
        with self._connection() as c:
            found = c.execute(self._sql.select_blob, (version,)).fetchone()
        return None if found is None else decompress(bytes(found[0]))

    def has_blob(self, version: str) -> bool:
        """Whether a blob is stored under ``version``."""
        with self._connection() as c:
            found = c.execute(self._sql.has_blob, (version,)).fetchone()
        return found is not None

    # Events and views ------------------------------------------------------------------------

    def events(self, session_id: str, after: int | None = None) -> list[Event]:
        """The session's events with ``seq > after`` (None: all), in ``seq`` order."""
        since = _NO_SEQ if after is None else after
        with self._connection() as c:
            rows = c.execute(self._sql.select_events, (session_id, since)).fetchall()
        return [event_of_row(row) for row in rows]

    def head(self, session_id: str) -> int:
        """The session's newest ``seq``, 0 when it has no events."""
        with self._connection() as c:
            found = c.execute(self._sql.head, (session_id,)).fetchone()
        return 0 if found is None else int(found[0])

    def settled_events(self, session_id: str, after: int) -> list[Event]:
        """``events`` once no commit of the session is in flight. Where rows lock
        (PostgreSQL), the session's row is locked first, which waits for a commit still running
        on a connection whose reply was lost (``filecache_commit`` holds that row's lock); on
        SQLite a commit is over when its call returns or raises."""
        if not self.dialect.lock_rows:
            return self.events(session_id, after)

        def work(conn: Connection) -> list[Event]:
            conn.execute(self._sql.lock_session, (session_id,))
            rows = conn.execute(self._sql.select_events, (session_id, after)).fetchall()
            return [event_of_row(row) for row in rows]

        return self._transaction(work)

    def load_views(self, session_id: str) -> dict[str, str]:
        """Every saved view state of the session, by path."""
        with self._connection() as c:
            rows = c.execute(self._sql.select_views, (session_id,)).fetchall()
        return {str(p): str(s) for p, s in rows}

    def touch_session(self, session_id: str, now: float | None = None) -> None:
        """Create the session if needed and set its last use to ``now`` (default: the time)."""
        when = time.time() if now is None else now

        with self._connection() as conn:
            self._forget_last_used(session_id)
            conn.execute(self._sql.upsert_session, (session_id, when, when))

    # Sessions and retention ------------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        """Every session with its event count and token sums, most recently used first."""
        with self._connection() as c:
            rows = c.execute(self._sql.select_sessions).fetchall()
        return [
            SessionInfo(
                session_id=str(s),
                created=float(c),
                last_used=float(u),
                events=int(n),
                tokens=int(t),
                tokens_full=int(f),
            )
            for s, c, u, n, t, f in rows
        ]

    def _delete_sessions(self, conn: Connection, session_ids: list[str]) -> None:
        if not session_ids:
            return
        for statement in self._sql.delete_sessions:
            if self.dialect.arrays:
                conn.execute(statement, (session_ids,))
            else:
                for session_id in session_ids:
                    conn.execute(statement, (session_id,))

    def delete_session(self, session_id: str) -> None:
        """Forget the session, its events, views, archive and projections (blobs stay)."""

        def work(conn: Connection) -> None:
            self._forget_last_used(session_id)
            self._delete_sessions(conn, [session_id])

        self._transaction(work)

    def gc(self, older_than: float) -> GcReport:
        """Delete sessions last used before ``older_than``, then every unreferenced blob."""

        def work(conn: Connection) -> GcReport:
            rows = conn.execute(self._sql.old_sessions, (older_than,)).fetchall()
            old = [str(sid) for (sid,) in rows]
            self._forget_last_used(None)
            self._delete_sessions(conn, old)
            blobs = conn.execute(self._sql.delete_unreferenced_blobs).rowcount
            return GcReport(sessions_deleted=len(old), blobs_deleted=max(blobs, 0))

        return self._transaction(work)

    # The key-value cache (outlines, token counts, seals, leases) -----------------------------

    def cache_get(self, namespace: str, key: str) -> str | None:
        """The cached value, or None."""
        with self._connection() as c:
            found = c.execute(self._sql.select_cache, (namespace, key)).fetchone()
        return None if found is None else str(found[0])

    def cache_put(self, namespace: str, key: str, value: str) -> None:
        """Set the cached value, replacing any previous one."""
        with self._connection() as c:
            c.execute(self._sql.upsert_cache, (namespace, key, value))

    # Pruning's archive and projections -------------------------------------------------------

    def archive_put(self, session_id: str, call_id: str, text: str) -> None:
        """Keep the original text of a tool result; the first one stored wins."""
        row = (session_id, call_id, compress(text.encode("utf-8")), time.time())
        with self._connection() as c:
            c.execute(self._sql.insert_archive, row)

    def archive_get(self, call_id: str, session_id: str | None = None) -> str | None:
        """The archived original of ``call_id`` (in ``session_id``, or the newest anywhere)."""
        params: tuple[str, ...]
        if session_id is None:
            sql, params = self._sql.archive_newest, (call_id,)
        else:
            sql, params = self._sql.archive_of, (session_id, call_id)
        with self._connection() as c:
            found = c.execute(sql, params).fetchone()
        return None if found is None else decompress(bytes(found[0])).decode("utf-8")

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
        row = (session_id, call_id, tier, text, time.time(), tokens_before, tokens_after)
        with self._connection() as c:
            c.execute(self._sql.upsert_projection, row)

    def projections(self, session_id: str) -> dict[str, tuple[str, str]]:
        """Every recorded projection of the session: call id -> (tier, text)."""
        with self._connection() as c:
            rows = c.execute(self._sql.select_projections, (session_id,)).fetchall()
        return {str(c): (str(t), str(x)) for c, t, x in rows}

    def projection_records(self, session_id: str) -> list[Projection]:
        """The session's projections with their token counts, oldest first."""
        with self._connection() as c:
            rows = c.execute(self._sql.select_projection_records, (session_id,)).fetchall()
        return [
            Projection(
                call_id=str(c),
                tier=str(t),
                tokens_before=int(b),
                tokens_after=int(a),
                created=float(w),
            )
            for c, t, b, a, w in rows
        ]

    # Intents ---------------------------------------------------------------------------------

    def put_intent(self, intent: Intent) -> None:
        """Record a write about to replace a file (replacing one of the same call)."""
        i = intent
        row = (i.session_id, i.call_id, i.root, i.path, i.before, i.after, i.created)
        with self._connection() as c:
            c.execute(self._sql.upsert_intent, row)

    def drop_intent(self, session_id: str, call_id: str) -> None:
        """Forget the intent of a call (committed, or recovered)."""
        with self._connection() as c:
            c.execute(self._sql.drop_intent, (session_id, call_id))

    def intents(self, root: str | None = None) -> list[Intent]:
        """The intents left (of ``root``, or all), oldest first."""
        if root is None:
            with self._connection() as c:
                rows = c.execute(self._sql.select_intents).fetchall()
        else:
            with self._connection() as c:
                rows = c.execute(self._sql.select_intents_of_root, (root,)).fetchall()
        return [
            Intent(
                session_id=str(s),
                call_id=str(c),
                root=str(r),
                path=str(p),
                before=b,
                after=str(a),
                created=float(w),
            )
            for s, c, r, p, b, a, w in rows
        ]
