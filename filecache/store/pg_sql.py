"""The statements the PostgreSQL store runs, and its rows to and from ``Event`` (see ``pg_store``).

Constant SQL text (psycopg prepares a statement after a few runs of the same text). The event
columns are listed once, in ``Event``'s field order: the first 15 are ``Event``'s first 15
fields, then ``deps`` and ``args`` (space-separated).
"""

from __future__ import annotations

from filecache.store.pg_schema import Conn
from filecache.store.store import Event, event_of_row, event_row

__all__ = [
    "DELETE_UNREFERENCED_BLOBS",
    "DELETE_VIEW",
    "EVENT_COLUMNS",
    "HEAD",
    "INSERT_EVENT",
    "INTENT_COLUMNS",
    "SELECT_EVENTS",
    "SELECT_SESSIONS",
    "UPSERT_SESSION",
    "UPSERT_VIEW",
    "delete_sessions",
    "event_of_row",
    "event_json",
    "event_row",
]

UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, created, last_used) VALUES (%s, %s, %s) "
    "ON CONFLICT (session_id) DO UPDATE SET last_used = excluded.last_used"
)
EVENT_COLUMNS = (
    'session_id, seq, call_id, tool, path, start, "end", version, base_version, kind, '
    "base_call_id, tokens, tokens_full, text_hash, created, deps, args"
)
INSERT_EVENT = f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join(['%s'] * 17)})"
SELECT_EVENTS = (
    f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = %s AND seq > %s ORDER BY seq"
)
HEAD = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = %s"
UPSERT_VIEW = (
    "INSERT INTO views (session_id, path, state) VALUES (%s, %s, %s) "
    "ON CONFLICT (session_id, path) DO UPDATE SET state = excluded.state"
)
DELETE_VIEW = "DELETE FROM views WHERE session_id = %s AND path = %s"
SELECT_SESSIONS = """
    SELECT s.session_id, s.created, s.last_used,
           COUNT(e.seq), COALESCE(SUM(e.tokens), 0), COALESCE(SUM(e.tokens_full), 0)
    FROM sessions AS s LEFT JOIN events AS e ON e.session_id = s.session_id
    GROUP BY s.session_id
    ORDER BY s.last_used DESC, s.session_id
"""
DELETE_UNREFERENCED_BLOBS = """
    DELETE FROM blobs AS b
    WHERE NOT EXISTS (SELECT 1 FROM events AS e WHERE e.version = b.version)
      AND NOT EXISTS (SELECT 1 FROM events AS e WHERE e.base_version = b.version)
"""
INTENT_COLUMNS = "session_id, call_id, path, root, before, after, created"


def event_json(e: Event) -> dict[str, object]:
    """An event as ``filecache_commit`` reads it (``jsonb_to_recordset``)."""
    return {
        "seq": e.seq,
        "call_id": e.call_id,
        "tool": e.tool,
        "path": e.path,
        "start": e.start,
        "end": e.end,
        "version": e.version,
        "base_version": e.base_version,
        "kind": e.kind,
        "base_call_id": e.base_call_id,
        "tokens": e.tokens,
        "tokens_full": e.tokens_full,
        "text_hash": e.text_hash,
        "created": e.created,
        "deps": " ".join(e.deps),
        "args": " ".join(e.args),
    }


def delete_sessions(conn: Conn, session_ids: list[str]) -> None:
    if not session_ids:
        return
    for table in ("events", "views", "archive", "projections", "intents", "sessions"):
        conn.execute(f"DELETE FROM {table} WHERE session_id = ANY(%s)", (session_ids,))
