"""The schema's one history, which the SQLite and the PostgreSQL stores both follow.

Invariants:
- The schema is built only by the named functions in ``MIGRATIONS``, oldest first, each taking
  the connection and the ``Dialect`` (its column types); each is recorded by its function name in
  ``_migrations`` and never runs again. Append new migrations; never edit or reorder applied ones.
- The runners (``sqlite_store._migrate``, ``pg_store.migrate``) differ only in how they make a
  migration atomic and exclusive (see ``dialect``); both run ``pending(applied, dialect)``.
- A migration that has nothing to do in one dialect is still recorded there (``m009``: the
  server-side commit exists on PostgreSQL only), so both stores list the same names.
- PostgreSQL stores made before this history (their own ``m001_initial``, ``m002_intents``,
  ``m003_commit_function``) are adopted: ``adopted`` names the migrations of this history
  their schema already holds, which the runner records without running them; and a store this
  history makes on PostgreSQL records the old names too (``aliases``), so the previous release
  still opens it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from filecache.store.dialect import Dialect

__all__ = [
    "CONFLICT_SQLSTATE",
    "MIGRATIONS",
    "Connection",
    "Migration",
    "adopted",
    "aliases",
    "pending",
]


class Cursor(Protocol):
    """What the stores use of a DB-API cursor (``sqlite3`` and ``psycopg`` alike)."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What the stores use of a connection: ``execute(sql, params)``."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Cursor: ...


Migration = Callable[[Connection, Dialect], None]

MIGRATIONS: list[Migration] = []
"""The schema's history, oldest first; each is recorded under its function name."""


def _migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


@_migration
def m001_initial(conn: Connection, d: Dialect) -> None:
    """Sessions, the event ledger, content blobs, views and the key-value cache."""
    conn.execute(
        f"""CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            created {d.real} NOT NULL,
            last_used {d.real} NOT NULL
        )"""
    )
    conn.execute(
        f"""CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
            seq {d.integer} NOT NULL,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            path TEXT NOT NULL,
            start {d.integer},
            "end" {d.integer},
            version TEXT,
            base_version TEXT,
            kind TEXT NOT NULL,
            base_call_id TEXT,
            tokens {d.integer} NOT NULL,
            tokens_full {d.integer} NOT NULL,
            text_hash TEXT,
            created {d.real} NOT NULL,
            PRIMARY KEY (session_id, seq)
        )"""
    )
    conn.execute("CREATE INDEX events_session_call ON events(session_id, call_id)")
    conn.execute(
        f"""CREATE TABLE blobs (
            version TEXT PRIMARY KEY,
            size {d.integer} NOT NULL,
            data {d.blob} NOT NULL
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
def m002_archive_and_projections(conn: Connection, d: Dialect) -> None:
    """Pruning: every original tool result archived, and what each pruned result became."""
    conn.execute(
        f"""CREATE TABLE archive (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            text {d.blob} NOT NULL,
            created {d.real} NOT NULL,
            PRIMARY KEY (session_id, call_id)
        )"""
    )
    conn.execute("CREATE INDEX archive_call ON archive(call_id)")
    conn.execute(
        f"""CREATE TABLE projections (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            tier TEXT NOT NULL,
            text TEXT NOT NULL,
            created {d.real} NOT NULL,
            PRIMARY KEY (session_id, call_id)
        )"""
    )


@_migration
def m003_projection_tokens(conn: Connection, d: Dialect) -> None:
    """Pruning: the tokens a pruned result took originally and takes now (for stats)."""
    for column in ("tokens_before", "tokens_after"):
        conn.execute(f"ALTER TABLE projections ADD COLUMN {column} {d.integer} NOT NULL DEFAULT 0")


@_migration
def m004_event_deps(conn: Connection, d: Dialect) -> None:
    """Every call id a FileRef/diff answer relies on (space-separated), for exact keep-alive."""
    conn.execute("ALTER TABLE events ADD COLUMN deps TEXT NOT NULL DEFAULT ''")


@_migration
def m005_event_args(conn: Connection, d: Dialect) -> None:
    """Hashes of what a write/edit call wrote (its content, its new strings), for ``sync``."""
    conn.execute("ALTER TABLE events ADD COLUMN args TEXT NOT NULL DEFAULT ''")


@_migration
def m006_intents(conn: Connection, d: Dialect) -> None:
    """Writes about to replace a file (record-intent -> replace -> commit), for recovery."""
    conn.execute(
        f"""CREATE TABLE intents (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            root TEXT NOT NULL,
            path TEXT NOT NULL,
            before TEXT,
            after TEXT NOT NULL,
            created {d.real} NOT NULL,
            PRIMARY KEY (session_id, call_id)
        )"""
    )


@_migration
def m007_drop_event_call_index(conn: Connection, d: Dialect) -> None:
    """No query looks events up by call id: the index cost a random B-tree leaf per event."""
    conn.execute("DROP INDEX IF EXISTS events_session_call")


@_migration
def m008_intents_root_index(conn: Connection, d: Dialect) -> None:
    """Recovery lists a root's intents (``intents(root)``) on every open."""
    conn.execute("CREATE INDEX IF NOT EXISTS intents_root ON intents(root)")


CONFLICT_SQLSTATE = "FC409"
"""What ``filecache_commit`` raises when the session's head moved (``StoreConflictError``)."""

_COMMIT_FUNCTION = """CREATE OR REPLACE FUNCTION filecache_commit(
    p_session TEXT, p_expected BIGINT, p_when DOUBLE PRECISION,
    p_events JSONB, p_views JSONB
) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    head BIGINT;
BEGIN
    -- The upsert locks the session's row: committers of one session queue here, and
    -- the head read below (a new snapshot under READ COMMITTED) sees the one before.
    INSERT INTO sessions (session_id, created, last_used)
        VALUES (p_session, p_when, p_when)
        ON CONFLICT (session_id) DO UPDATE SET last_used = excluded.last_used;
    SELECT COALESCE(MAX(seq), 0) INTO head FROM events WHERE session_id = p_session;
    IF head <> p_expected THEN
        RAISE EXCEPTION 'session % moved on to seq % (expected %)',
            quote_literal(p_session), head, p_expected
            USING ERRCODE = 'FC409';
    END IF;
    INSERT INTO events (session_id, seq, call_id, tool, path, start, "end", version,
                        base_version, kind, base_call_id, tokens, tokens_full,
                        text_hash, created, deps, args)
        SELECT p_session, e.seq, e.call_id, e.tool, e.path, e.start, e."end",
               e.version, e.base_version, e.kind, e.base_call_id, e.tokens,
               e.tokens_full, e.text_hash, e.created, e.deps, e.args
        FROM jsonb_to_recordset(p_events) AS e(
            seq BIGINT, call_id TEXT, tool TEXT, path TEXT, start BIGINT,
            "end" BIGINT, version TEXT, base_version TEXT, kind TEXT,
            base_call_id TEXT, tokens BIGINT, tokens_full BIGINT, text_hash TEXT,
            created DOUBLE PRECISION, deps TEXT, args TEXT
        );
    DELETE FROM views WHERE session_id = p_session AND path IN (
        SELECT key FROM jsonb_each(p_views) WHERE jsonb_typeof(value) = 'null'
    );
    INSERT INTO views (session_id, path, state)
        SELECT p_session, key, value #>> '{}' FROM jsonb_each(p_views)
        WHERE jsonb_typeof(value) <> 'null'
        ON CONFLICT (session_id, path) DO UPDATE SET state = excluded.state;
    RETURN p_expected + jsonb_array_length(p_events);
END
$$"""


@_migration
def m009_commit_function(conn: Connection, d: Dialect) -> None:
    """PostgreSQL: ``filecache_commit``, the store's ``commit`` in one round trip (a
    compare-and-swap on the session's head, the events and the views, in the statement's own
    transaction). SQLite commits in Python (``SqliteStore.commit``): nothing to build."""
    if d.server_commit:
        conn.execute(_COMMIT_FUNCTION)


# What the PostgreSQL store's own history (before this one) had built, by its names.
_POSTGRES_BEFORE = {
    "m001_initial": (  # its sessions, events (deps and args included), blobs, views, cache,
        "m002_archive_and_projections",  # archive and projections (tokens included)
        "m003_projection_tokens",
        "m004_event_deps",
        "m005_event_args",
    ),
    "m002_intents": ("m006_intents", "m008_intents_root_index"),
    "m003_commit_function": ("m009_commit_function",),
}


def adopted(applied: set[str], dialect: Dialect) -> list[str]:
    """The migrations of this history that a PostgreSQL store made by the old PostgreSQL
    history already holds (to record, not run); none for any other store.

    Such a store is one with ``m001_initial`` but not ``m002_archive_and_projections``: this
    history's runner applies and records every pending migration in one transaction, so a store
    it made never has the one without the other.
    """
    if dialect.name != "postgresql" or "m001_initial" not in applied:
        return []
    if "m002_archive_and_projections" in applied:
        return []
    names = [n for old, new in _POSTGRES_BEFORE.items() if old in applied for n in new]
    return [n for n in names if n not in applied]


def aliases(name: str, dialect: Dialect) -> tuple[str, ...]:
    """The old PostgreSQL history's names recorded beside ``name`` when it is applied, so that
    the previous release, which knows only those, opens the store without running them again."""
    if dialect.name != "postgresql":
        return ()
    return {
        "m006_intents": ("m002_intents",),
        "m009_commit_function": ("m003_commit_function",),
    }.get(name, ())


def pending(applied: set[str], migrations: Sequence[Migration]) -> list[Migration]:
    """The migrations not yet recorded, in order."""
    return [m for m in migrations if m.__name__ not in applied]
