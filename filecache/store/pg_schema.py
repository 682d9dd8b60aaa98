"""The PostgreSQL store's schema: named migrations, applied on open (see ``pg_store``).

Invariants: the schema is built only by the functions in ``MIGRATIONS``, in order, each recorded
by name in ``_migrations``; ``migrate`` runs them in one transaction holding an advisory lock, so
processes opening one database at once apply each exactly once, and each migration in a
savepoint. Append new migrations; never edit or reorder applied ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg

__all__ = ["CONFLICT_SQLSTATE", "MIGRATIONS", "migrate"]

Conn = psycopg.Connection[tuple[Any, ...]]
Migration = Callable[[Conn], None]

_MIGRATION_LOCK = 0x66696C6563616368  # "filecach": the advisory key that serialises migrations

MIGRATIONS: list[Migration] = []
"""The PostgreSQL schema's history, oldest first; each is recorded under its function name."""


def _migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


@_migration
def m001_initial(conn: Conn) -> None:
    """Sessions, the event ledger, blobs, views, the key-value cache, archive and projections."""
    conn.execute(
        """CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            created DOUBLE PRECISION NOT NULL,
            last_used DOUBLE PRECISION NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
            seq BIGINT NOT NULL,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            path TEXT NOT NULL,
            start BIGINT,
            "end" BIGINT,
            version TEXT,
            base_version TEXT,
            kind TEXT NOT NULL,
            base_call_id TEXT,
            tokens BIGINT NOT NULL,
            tokens_full BIGINT NOT NULL,
            text_hash TEXT,
            created DOUBLE PRECISION NOT NULL,
            deps TEXT NOT NULL DEFAULT '',
            args TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (session_id, seq)
        )"""
    )
    conn.execute("CREATE INDEX events_session_call ON events(session_id, call_id)")
    conn.execute(
        """CREATE TABLE blobs (
            version TEXT PRIMARY KEY,
            size BIGINT NOT NULL,
            data BYTEA NOT NULL
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
    conn.execute(
        """CREATE TABLE archive (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            text BYTEA NOT NULL,
            created DOUBLE PRECISION NOT NULL,
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
            created DOUBLE PRECISION NOT NULL,
            tokens_before BIGINT NOT NULL DEFAULT 0,
            tokens_after BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (session_id, call_id)
        )"""
    )


@_migration
def m002_intents(conn: Conn) -> None:
    """Writes about to replace a file (recorded before, dropped after their commit)."""
    conn.execute(
        """CREATE TABLE intents (
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            path TEXT NOT NULL,
            root TEXT NOT NULL,
            before TEXT,
            after TEXT NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (session_id, call_id)
        )"""
    )
    conn.execute("CREATE INDEX intents_root ON intents(root)")


CONFLICT_SQLSTATE = "FC409"
"""What ``filecache_commit`` raises when the session's head moved (``StoreConflictError``)."""


@_migration
def m003_commit_function(conn: Conn) -> None:
    """``filecache_commit``: ``PostgresStore.commit`` in one round trip (a compare-and-swap on the
    session's head, the events and the views, in the statement's own transaction)."""
    conn.execute(
        """CREATE FUNCTION filecache_commit(
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
    )


def migrate(conn: Conn) -> None:
    """Apply the migrations not yet recorded, under an advisory lock, each in a transaction."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations "
            "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        applied = {str(n) for (n,) in conn.execute("SELECT name FROM _migrations").fetchall()}
        for migration in MIGRATIONS:
            name = migration.__name__
            if name in applied:
                continue
            with conn.transaction():  # a savepoint: a failed migration leaves none of itself
                migration(conn)
                conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (%s, %s)",
                    (name, time.time()),
                )
