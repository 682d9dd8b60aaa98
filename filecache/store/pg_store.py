"""The shared store of a fleet: one PostgreSQL database serving many processes and machines.

Chosen by a ``postgresql://`` (or ``postgres://``) URL wherever a store is named; needs the
``[postgres]`` extra (psycopg 3 and psycopg-pool).

Invariants:
- Connections come from a ``psycopg_pool.ConnectionPool`` (autocommit; each is checked before it
  is handed out, with a round trip only when its socket shows the server closed it, so a server
  that restarted costs a reconnect, not an error; a pool that failed to connect retries for
  ``timeout`` seconds, not psycopg_pool's five minutes of growing back-offs, so a store that
  comes back is used again within seconds). A statement that
  stands alone commits on its own; work of several statements runs in one transaction.
- The SQL is ``sql_store``'s (every role written once over ``dialect.POSTGRESQL``); this module
  is the connection handling that is PostgreSQL's own, ``commit``, ``lock`` and ``migrate``.
- The schema is built only by ``migrations.MIGRATIONS``, applied on open by ``migrate``: in one
  transaction holding an advisory lock (processes opening one database at once apply each
  exactly once), each migration in a savepoint.
- ``commit`` is a compare-and-swap on the session's head, in one round trip (the server-side
  ``filecache_commit`` of migration ``m009``): it upserts the session's row first (a row lock that
  serialises the session's committers), then reads the head in the same transaction, so sequence
  numbers are assigned against what is stored, on every machine.
- ``lock(name)`` is ``pg_advisory_lock`` on a hash of the name, on a connection of a second pool
  that the thread holds while it holds any lock: exclusive across threads, processes and
  machines, reentrant within a thread (a hold count per name). A lock whose connection dies
  (server restart, ``pg_terminate_backend``) is gone with it, and so is every other lock the
  thread held on it: their releases then do nothing (they never raise), and what ran under them
  stays correct through the compare-and-swaps that do not rely on the lock (the session's head
  in ``commit``, the file's bytes in ``Session._change`` under the root's local path lock).
- Blobs (``compress``-ed, content-addressed), outlines and token counts (the ``cache`` table) are
  shared by every session of the database: a version parsed once serves the fleet.
- Serialization failures and deadlocks are retried inside the store (bounded, with backoff);
  every other ``psycopg`` or pool error becomes a ``StoreError`` in ``_store_error`` and nowhere
  else. A transaction that fails is rolled back before the error surfaces.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import select
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
import psycopg.errors
import xxhash
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from filecache.errors import StoreConflictError, StoreError
from filecache.store import migrations
from filecache.store.dialect import POSTGRESQL
from filecache.store.migrations import CONFLICT_SQLSTATE
from filecache.store.sql_store import SqlStore, check_sequence
from filecache.store.store import Event

__all__ = ["Conn", "PostgresStore", "describe_url", "event_json", "migrate"]

Conn = psycopg.Connection[tuple[Any, ...]]

# psycopg_pool logs a warning for every failed connection attempt (several per outage, a
# traceback's worth each); filecache reports an outage once, as a StoreError. A handler of our
# own keeps Python's last-resort handler from printing them to stderr, while an application that
# configures logging still receives them (propagation is left on).
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

T = TypeVar("T")

_LOCK_WAIT = 60.0  # seconds a call waits for a lock (and for a connection to hold it on)
_RETRIES = 8  # attempts of a transaction that hit a serialization failure or a deadlock
_RETRYABLE = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)


def describe_url(url: str) -> str:
    """``host:port/dbname`` of a PostgreSQL URL, without user or password (for messages)."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        return "(unparsable URL)"
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    return f"{host}:{port}/{parts.get('dbname') or parts.get('user') or ''}"


def _store_error(exc: BaseException, where: str, *, opening: bool = False) -> StoreError:
    """The one place where a PostgreSQL failure becomes a ``StoreError`` that says what to do."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, PoolClosed):
        return StoreError(f"the PostgreSQL store at {where} was closed; open a new one")
    if isinstance(exc, psycopg.errors.UniqueViolation):
        hint = "an event's seq must be unique within its session"
    elif isinstance(exc, (PoolTimeout, psycopg.OperationalError)):
        hint = "check that the server is running and reachable, and the store URL"
    elif isinstance(exc, psycopg.errors.LockNotAvailable):
        hint = "another process held a filecache lock for over a minute; retry"
    else:
        hint = "if this persists, check the server's log"
    what = (
        f"cannot open the PostgreSQL store at {where}"
        if opening
        else (f"the PostgreSQL store at {where} failed")
    )
    return StoreError(f"{what}: {detail}; {hint}")


def _advisory_key(name: str) -> int:
    """A signed 64-bit key for ``pg_advisory_lock`` from a lock name."""
    return xxhash.xxh3_64_intdigest(name.encode("utf-8")) - (1 << 63)


class _Held(threading.local):
    conn: Conn | None = None
    counts: dict[str, int]

    def __init__(self) -> None:
        self.counts = {}


class PostgresStore(SqlStore):
    """The ``Store`` on a PostgreSQL database, shared by the threads, processes and machines
    that name the same URL.

    Args:
        url: a ``postgresql://`` URL (libpq's; ``postgres://`` too).
        max_connections: the pool's size for work (locks have a pool of their own this size).
        timeout: seconds to wait for a connection (also when the server is down) before a
            ``StoreError``.

    Raises:
        StoreError: the server cannot be reached, or the schema cannot be migrated.
    """

    def __init__(self, url: str, *, max_connections: int = 8, timeout: float = 5.0) -> None:
        super().__init__(POSTGRESQL)
        self.url = url
        self.where = describe_url(url)
        self._timeout = timeout
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in url:
            kwargs["connect_timeout"] = max(1, int(timeout))
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            kwargs=kwargs,
            min_size=1,
            max_size=max_connections,
            open=False,
            check=_check_connection,
            timeout=timeout,
            reconnect_timeout=timeout,
            name="filecache",
        )
        self._lock_pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            kwargs=kwargs,
            min_size=0,
            max_size=max_connections,
            open=False,
            check=_check_connection,
            timeout=timeout,
            reconnect_timeout=timeout,
            name="filecache-locks",
            configure=_configure_lock_conn,
        )
        self._held = _Held()
        try:
            self._pool.open(wait=True, timeout=timeout)
            self._lock_pool.open()
            with self._pool.connection() as conn:
                migrate(conn)
        except (psycopg.Error, PoolTimeout) as exc:
            self._pool.close()
            self._lock_pool.close()
            if isinstance(exc, PoolTimeout):  # the pool does not say why: one attempt does
                try:
                    psycopg.connect(url, **kwargs).close()
                except psycopg.Error as reason:
                    exc = reason
            raise _store_error(exc, self.where, opening=True) from exc

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    # The two ways to run work: one statement, or a transaction retried on serialization.

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Conn]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except (psycopg.Error, PoolTimeout, PoolClosed) as exc:
            raise _store_error(exc, self.where) from exc

    def _transaction(self, work: Callable[[Conn], T], *, begin: bool = True) -> T:
        """``work`` in a transaction (``begin=False``: one statement, its own transaction),
        run again on a serialization failure or a deadlock."""
        for attempt in range(_RETRIES):
            try:
                with self._pool.connection() as conn:
                    if not begin:
                        return work(conn)
                    with conn.transaction():
                        return work(conn)
            except _RETRYABLE as exc:
                if attempt == _RETRIES - 1:
                    raise StoreError(
                        f"the PostgreSQL store at {self.where} failed: gave up after {_RETRIES} "
                        f"attempts ({exc.sqlstate}: {str(exc).strip()}); retry later"
                    ) from exc
                time.sleep(random.uniform(0, 0.005 * 2**attempt))
            except (psycopg.Error, PoolTimeout, PoolClosed) as exc:
                raise _store_error(exc, self.where) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # The ledger: commit is one round trip -----------------------------------------------------

    def commit(
        self,
        session_id: str,
        expected_head: int,
        events: Sequence[Event],
        views: Mapping[str, str | None],
    ) -> int:
        """In one transaction, if the head is still ``expected_head``: append ``events``, apply
        ``views`` (None deletes) and touch the session; return the new head.

        Raises:
            StoreConflictError: the head moved; nothing was written.
            StoreError: ``events`` do not continue the head, or the store failed.
        """
        check_sequence(session_id, expected_head, events)
        when = events[-1].created if events else time.time()
        rows = json.dumps([event_json(e) for e in events])
        changes = json.dumps(dict(views))

        def work(conn: Conn) -> int:
            row = conn.execute(
                "SELECT filecache_commit(%s, %s, %s, %s::jsonb, %s::jsonb)",
                (session_id, expected_head, when, rows, changes),
            ).fetchone()
            return int(row[0]) if row is not None else expected_head + len(events)

        try:
            return self._transaction(work, begin=False)
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, psycopg.Error) and cause.sqlstate == CONFLICT_SQLSTATE:
                detail = cause.diag.message_primary or "the session's head moved"
                raise StoreConflictError(detail) from None
            raise

    # Locks ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Hold the exclusive lock ``name`` (across machines) for the ``with`` block."""
        held = self._held
        count = held.counts.get(name, 0)
        if count:
            held.counts[name] = count + 1  # reentrant: this thread already holds it
            try:
                yield
            finally:
                if name in held.counts:  # else the connection died, and the lock with it
                    held.counts[name] -= 1
            return
        self._acquire(name)
        try:
            yield
        finally:
            self._release(name)

    def _acquire(self, name: str) -> None:
        held = self._held
        try:
            if held.conn is None:
                held.conn = self._lock_connection()
            held.conn.execute("SELECT pg_advisory_lock(%s)", (_advisory_key(name),))
        except (psycopg.Error, PoolTimeout, PoolClosed) as exc:
            self._drop_lock_conn(broken=True)
            raise _store_error(exc, self.where) from exc
        held.counts[name] = 1

    def _lock_connection(self) -> Conn:
        """A connection to hold locks on. While every one is held by a lock holder, waiting for
        one is waiting for a lock (up to a lock wait); a pool that cannot connect fails fast."""
        deadline = time.monotonic() + _LOCK_WAIT
        while True:
            try:
                return self._lock_pool.getconn(timeout=self._timeout)
            except PoolTimeout:
                stats = self._lock_pool.get_stats()
                busy = stats.get("pool_size", 0) >= self._lock_pool.max_size
                if not busy or stats.get("pool_available", 0) or time.monotonic() > deadline:
                    raise

    def _release(self, name: str) -> None:
        held = self._held
        if held.counts.pop(name, None) is None:
            return  # its connection died while it was held (``_drop_lock_conn``): nothing to do
        conn = held.conn
        if conn is None:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_advisory_key(name),))
        except psycopg.Error:
            # The connection died, and its advisory locks with it: nothing left to release.
            self._drop_lock_conn(broken=True)
            return
        if not held.counts:
            self._drop_lock_conn(broken=False)

    def _drop_lock_conn(self, *, broken: bool) -> None:
        held = self._held
        conn, held.conn = held.conn, None
        if broken:
            held.counts.clear()
        if conn is None:
            return
        if broken:
            conn.close()  # the pool sees it closed and replaces it
        with contextlib.suppress(PoolClosed):
            self._lock_pool.putconn(conn)

    # Lifetime --------------------------------------------------------------------------------

    def close(self) -> None:
        """Close both pools; later calls raise ``StoreError``. Closing twice is fine."""
        self._lock_pool.close()
        self._pool.close()


def _check_connection(conn: Conn) -> None:
    """Before a pooled connection is handed out: a round trip only when the server has said
    something since it was last used (an idle connection's socket is readable only once the
    server closed it or sent an error, e.g. when it restarted); else a local check for free."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        ConnectionPool.check_connection(conn)


def _configure_lock_conn(conn: Conn) -> None:
    conn.execute(f"SET lock_timeout = '{_LOCK_WAIT:g}s'")  # a lock wait that long: StoreError
    # A holder whose machine vanished (no FIN) must not keep its advisory locks for the
    # kernel's two-hour keepalive default: the server gives up on it after about 25 s.
    conn.execute("SET tcp_keepalives_idle = 10")
    conn.execute("SET tcp_keepalives_interval = 5")
    conn.execute("SET tcp_keepalives_count = 3")


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


_MIGRATION_LOCK = 0x66696C6563616368  # "filecach": the advisory key that serialises migrations


def migrate(conn: Conn) -> None:
    """Apply the migrations not yet recorded (``migrations``), under an advisory lock, in one
    transaction, each in a savepoint; a store of the old PostgreSQL history is adopted first."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations "
            "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        applied = {str(n) for (n,) in conn.execute("SELECT name FROM _migrations").fetchall()}
        record = (
            "INSERT INTO _migrations (name, applied_at) VALUES (%s, %s) "
            "ON CONFLICT (name) DO NOTHING"
        )
        for name in migrations.adopted(applied, POSTGRESQL):
            conn.execute(record, (name, time.time()))
            applied.add(name)
        for migration in migrations.pending(applied, migrations.MIGRATIONS):
            with conn.transaction():  # a savepoint: a failed migration leaves none of itself
                migration(conn, POSTGRESQL)
                for name in (
                    migration.__name__,
                    *migrations.aliases(migration.__name__, POSTGRESQL),
                ):
                    conn.execute(record, (name, time.time()))
