"""The one migration history (``filecache.store.migrations``): stores that main's code made, with
its two histories, open and migrate; the schema both dialects build is the same.

The old schemas are fixtures (``fixtures/store/main-*-schema.sql``): the DDL that main's
``sqlite_store.MIGRATIONS`` and ``pg_schema.MIGRATIONS`` ran, recorded as they ran, with their
``_migrations`` rows. Each test fills such a store with a row of every kind, through main's column
lists, then opens it with this code and reads and writes every role.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_store import event

from filecache.store import migrations
from filecache.store.dialect import POSTGRESQL, SQLITE
from filecache.store.migrations import MIGRATIONS
from filecache.store.sql_store import EVENT_COLUMNS, compress
from filecache.store.sqlite_store import SqliteStore
from filecache.store.store import Intent, Store

FIXTURES = Path(__file__).parents[2] / "fixtures" / "store"

# A row of every table, as main's code wrote them (its column lists; intents in each dialect's
# own column order, named).
_ROWS: list[tuple[str, tuple[object, ...]]] = [
    ("INSERT INTO sessions (session_id, created, last_used) VALUES (?, ?, ?)", ("s1", 10.0, 20.0)),
    (
        f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join('?' * 17)})",
        (
            "s1",
            1,
            "c1",
            "read",
            "a.py",
            1,
            3,
            "xxh3:a",
            None,
            "full",
            None,
            30,
            30,
            "xxh3:t",
            10.0,
            "",
            "",
        ),
    ),  # fmt: skip
    (
        f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({', '.join('?' * 17)})",
        (
            "s1",
            2,
            "c2",
            "edit",
            "a.py",
            None,
            None,
            "xxh3:b",
            "xxh3:a",
            "edited",
            None,
            5,
            40,
            None,
            20.0,
            "c1",
            "xxh3:new",
        ),
    ),  # fmt: skip
    ("INSERT INTO blobs (version, size, data) VALUES (?, ?, ?)", ("xxh3:a", 3, compress(b"old"))),
    ("INSERT INTO views (session_id, path, state) VALUES (?, ?, ?)", ("s1", "a.py", "state")),
    ("INSERT INTO cache (namespace, key, value) VALUES (?, ?, ?)", ("outline", "k", "v")),
    (
        "INSERT INTO archive (session_id, call_id, text, created) VALUES (?, ?, ?, ?)",
        ("s1", "c1", compress(b"original"), 11.0),
    ),
    (
        "INSERT INTO projections (session_id, call_id, tier, text, created, tokens_before, "
        "tokens_after) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("s1", "c1", "clear", "[cleared]", 12.0, 30, 4),
    ),
    (
        "INSERT INTO intents (session_id, call_id, path, root, before, after, created) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("s1", "c3", "a.py", "/root", "xxh3:b", "xxh3:c", 21.0),
    ),
]


def _check_every_role(store: Store) -> None:
    """Main's rows read back through every role, and the session goes on."""
    assert [(e.call_id, e.deps, e.args) for e in store.events("s1")] == [
        ("c1", (), ()),
        ("c2", ("c1",), ("xxh3:new",)),
    ]
    assert store.head("s1") == 2
    assert store.get_blob("xxh3:a") == b"old"
    assert store.load_views("s1") == {"a.py": "state"}
    assert store.cache_get("outline", "k") == "v"
    assert store.archive_get("c1", "s1") == "original"
    assert store.projections("s1") == {"c1": ("clear", "[cleared]")}
    [record] = store.projection_records("s1")
    assert (record.tokens_before, record.tokens_after) == (30, 4)
    assert store.intents("/root") == [
        Intent(
            session_id="s1",
            call_id="c3",
            root="/root",
            path="a.py",
            before="xxh3:b",
            after="xxh3:c",
            created=21.0,
        )
    ]
    [info] = store.sessions()
    assert (info.session_id, info.events, info.tokens, info.tokens_full) == ("s1", 2, 35, 70)
    assert store.commit("s1", 2, [event(3, tool="write", created=30.0)], {}) == 3
    store.put_intent(
        Intent(
            session_id="s1",
            call_id="c4",
            root="/root",
            path="b.py",
            before=None,
            after="xxh3:d",
            created=31.0,
        )
    )
    assert [(i.root, i.path) for i in store.intents("/root")][-1] == ("/root", "b.py")
    store.drop_intent("s1", "c3")
    store.delete_session("s1")
    assert store.gc(older_than=1e12).blobs_deleted == 1


def _sqlite_tables(path: Path) -> dict[str, list[tuple[str, str]]]:
    conn = sqlite3.connect(path)
    try:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            n: sorted((str(c[1]), str(c[2])) for c in conn.execute(f"PRAGMA table_info({n})"))
            for n in names
        }
    finally:
        conn.close()


def _sqlite_store_of_main(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.executescript((FIXTURES / "main-sqlite-schema.sql").read_text(encoding="utf-8"))
        for sql, row in _ROWS:
            conn.execute(sql, row)
        conn.commit()
    finally:
        conn.close()


def test_an_sqlite_store_made_by_main_opens_and_migrates(tmp_path: Path) -> None:
    db = tmp_path / "cache.db"
    _sqlite_store_of_main(db)
    with SqliteStore(db) as store:
        conn = sqlite3.connect(db)
        names = [n for (n,) in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]
        indexes = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
        assert names == [m.__name__ for m in MIGRATIONS]
        assert version == len(MIGRATIONS)
        assert "intents_root" in indexes and "events_session_call" not in indexes
        _check_every_role(store)


def test_a_new_sqlite_store_has_the_schema_a_migrated_one_has(tmp_path: Path) -> None:
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    _sqlite_store_of_main(old)
    SqliteStore(old).close()
    SqliteStore(new).close()
    assert _sqlite_tables(old) == _sqlite_tables(new)


def test_both_dialects_follow_one_history() -> None:
    """Every migration runs in both dialects (one that has nothing to do in one is recorded
    there all the same); only the column types differ in what they build."""

    class Recorder:
        def __init__(self) -> None:
            self.recorded: list[str] = []

        def execute(self, sql: str, params: Any = (), /) -> Any:
            self.recorded.append(" ".join(sql.split()))

    built: dict[str, list[str]] = {}
    for dialect in (SQLITE, POSTGRESQL):
        recorder = Recorder()
        for migration in MIGRATIONS:
            migration(recorder, dialect)
        built[dialect.name] = recorder.recorded
    sqlite, pg = built["sqlite"], built["postgresql"]
    assert pg[: len(sqlite)] == [
        s.replace("REAL", "DOUBLE PRECISION").replace("INTEGER", "BIGINT").replace("BLOB", "BYTEA")
        for s in sqlite
    ]
    assert len(pg) == len(sqlite) + 1 and "FUNCTION filecache_commit" in pg[-1]
    names = [m.__name__ for m in MIGRATIONS]
    assert names == sorted(names) and len(set(names)) == len(names)


# PostgreSQL --------------------------------------------------------------------------------


@pytest.fixture
def pg_store_of_main(pg_url: str) -> Callable[[], None]:
    """Makes the (fresh) database of ``pg_url`` a store of main's PostgreSQL history, filled."""
    import psycopg

    def make() -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute((FIXTURES / "main-postgres-schema.sql").read_text(encoding="utf-8"))
            for sql, row in _ROWS:
                conn.execute(POSTGRESQL.sql(sql), row)

    return make


def _pg_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def test_a_postgresql_store_made_by_main_opens_and_migrates(
    pg_url: str, pg_store_of_main: Callable[[], None]
) -> None:
    from filecache.store.pg_store import PostgresStore

    pg_store_of_main()
    with PostgresStore(pg_url) as store:
        names = {n for (n,) in _pg_rows(pg_url, "SELECT name FROM _migrations")}
        old = {"m001_initial", "m002_intents", "m003_commit_function"}  # main's: kept
        assert names == {m.__name__ for m in MIGRATIONS} | old
        indexes = {
            n for (n,) in _pg_rows(pg_url, "SELECT indexname FROM pg_indexes WHERE schemaname "
                                   "= current_schema()")
        }  # fmt: skip
        assert "intents_root" in indexes and "events_session_call" not in indexes
        _check_every_role(store)


def test_main_opens_a_postgresql_store_this_history_made(pg_url: str) -> None:
    """The previous release knows only its own names: they are recorded beside this history's,
    so it finds nothing to run (its m002_intents would fail: the table exists)."""
    from filecache.store.pg_store import PostgresStore

    PostgresStore(pg_url).close()
    names = {n for (n,) in _pg_rows(pg_url, "SELECT name FROM _migrations")}
    assert {"m001_initial", "m002_intents", "m003_commit_function"} <= names
    assert migrations.adopted(names, POSTGRESQL) == []


def test_only_a_store_of_main_postgresql_history_is_adopted() -> None:
    main = {"m001_initial", "m002_intents", "m003_commit_function"}
    adopted = migrations.adopted(main, POSTGRESQL)
    assert "m007_drop_event_call_index" not in adopted  # main's schema still has that index
    assert (
        set(adopted) | main | {"m007_drop_event_call_index"}
        == {m.__name__ for m in MIGRATIONS} | main
    )
    assert migrations.adopted({"m001_initial"}, POSTGRESQL)[-1] == "m005_event_args"
    assert migrations.adopted(main, SQLITE) == []  # SQLite's names were always this history's
    ours = {m.__name__ for m in MIGRATIONS} | main
    assert migrations.adopted(ours, POSTGRESQL) == []
