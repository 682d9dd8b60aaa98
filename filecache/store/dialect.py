"""Where the SQLite and the PostgreSQL stores differ: every difference named here, once.

The SQL of both stores is one text (``sql_store.statements``), written with ``?`` placeholders
and rendered for a dialect by ``Dialect.sql``. What is the same in both, on purpose:

- **Upserts** are ``INSERT ... ON CONFLICT (key) DO UPDATE SET col = excluded.col`` (or
  ``DO NOTHING``), which SQLite (3.24+) and PostgreSQL both speak; no ``INSERT OR REPLACE``.
- **No ``RETURNING`` and no ``now()``**: every time (``created``, ``last_used``) is the caller's
  clock, passed as a parameter, so a session's last use compares with its events' times whatever
  the server's clock says.
- **Column order** is never relied on: every statement names its columns.

The differences, each a field below or a place named here:

============================ ================================ ===================================
difference                   SQLite                           PostgreSQL
============================ ================================ ===================================
placeholders                 ``?``                            ``%s`` (``placeholder``)
float / integer / blob type  REAL / INTEGER / BLOB            DOUBLE PRECISION / BIGINT / BYTEA
a list of sessions           one statement per session        one statement: ``= ANY(%s)`` with
                             (no arrays, and ``json_each``    a list (``arrays``)
                             needs SQLite's JSON1)
unreferenced blobs (``gc``)  ``NOT IN`` a union (SQLite       ``NOT EXISTS`` twice (an anti-join)
                             hashes it once)                  (``delete_unreferenced_blobs``)
row locks                    none: ``BEGIN IMMEDIATE`` takes  ``FOR UPDATE`` (``lock_rows``)
                             the database's write lock
``commit``                   Python, in ``BEGIN IMMEDIATE``   one statement: the server-side
                             (``SqliteStore.commit``)         ``filecache_commit`` (migration
                                                              m009; ``server_commit``)
``settled_events``           ``events``: a commit is over     locks the session's row first,
                             when its call returns            which waits for a commit whose
                                                              reply was lost (``lock_rows``)
transactions                 ``BEGIN IMMEDIATE`` ... COMMIT   ``conn.transaction()``, retried on
                             on one connection, busy retried  serialization failures (pg_store)
                             (sqlite_store)
migrations                   each in its own ``BEGIN          all in one transaction under an
                             IMMEDIATE``, under the file's    advisory lock, each in a savepoint
                             open lock; ``user_version``      (pg_store.migrate)
                             skips a migrated store
                             (sqlite_store._migrate)
named locks (``lock``)       record locks on ``<db>.lock``    ``pg_advisory_lock`` on a pool of
                             (``locks.py``)                   lock connections (pg_store)
connections                  one, under an ``RLock``, WAL     a pool, checked before use,
                             (sqlite_store)                   reconnecting (pg_store)
============================ ================================ ===================================
"""

from __future__ import annotations

from filecache.core.records import record

__all__ = ["POSTGRESQL", "SQLITE", "Dialect"]


@record
class Dialect:
    """The SQL differences between the stores (see the module docstring's table).

    Attributes:
        name: ``sqlite`` | ``postgresql``.
        placeholder: a parameter's placeholder, replacing ``?`` in the shared SQL.
        real, integer, blob: column types for floats, integers and bytes.
        arrays: a list parameter matches with ``= ANY(?)``; else one statement per item.
        delete_unreferenced_blobs: ``gc``'s statement deleting blobs no event references.
        lock_rows: appended to a ``SELECT`` that must lock the rows it reads ('' when the
            transaction already holds the whole database).
        server_commit: ``commit`` runs on the server (``filecache_commit``), in one statement.
    """

    name: str
    placeholder: str
    real: str
    integer: str
    blob: str
    arrays: bool
    delete_unreferenced_blobs: str
    lock_rows: str
    server_commit: bool

    def sql(self, text: str) -> str:
        """``text`` (written with ``?`` placeholders) in this dialect."""
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)


SQLITE = Dialect(
    name="sqlite",
    placeholder="?",
    real="REAL",
    integer="INTEGER",
    blob="BLOB",
    arrays=False,
    # NOT IN over a set holding NULL is never true: both columns are filtered for NULL.
    delete_unreferenced_blobs="""
        DELETE FROM blobs WHERE version NOT IN (
            SELECT version FROM events WHERE version IS NOT NULL
            UNION SELECT base_version FROM events WHERE base_version IS NOT NULL
        )""",
    lock_rows="",
    server_commit=False,
)

POSTGRESQL = Dialect(
    name="postgresql",
    placeholder="%s",
    real="DOUBLE PRECISION",
    integer="BIGINT",
    blob="BYTEA",
    arrays=True,
    delete_unreferenced_blobs="""
        DELETE FROM blobs AS b
        WHERE NOT EXISTS (SELECT 1 FROM events AS e WHERE e.version = b.version)
          AND NOT EXISTS (SELECT 1 FROM events AS e WHERE e.base_version = b.version)""",
    lock_rows=" FOR UPDATE",
    server_commit=True,
)
