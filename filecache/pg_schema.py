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

__all__ = ["MIGRATIONS", "migrate"]

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
