"""Deprecated (kept for one release): the PostgreSQL store's schema is the one history of
``filecache.store.migrations``, which the SQLite store follows too; ``migrate`` is
``filecache.store.pg_store.migrate``.
"""

from __future__ import annotations

from filecache.store.migrations import CONFLICT_SQLSTATE, MIGRATIONS
from filecache.store.pg_store import Conn, migrate

__all__ = ["CONFLICT_SQLSTATE", "MIGRATIONS", "Conn", "migrate"]
