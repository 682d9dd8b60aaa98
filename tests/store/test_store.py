"""What only the SQLite store has (its file, WAL, processes on one file, its migrations' runner,
its errors), ``open_store`` and ``default_store_path``. What every store does is the contract,
``test_store_contract.py``."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from filecache.errors import StoreError
from filecache.store import migrations
from filecache.store.dialect import SQLITE, Dialect
from filecache.store.memory_store import MemoryStore
from filecache.store.migrations import MIGRATIONS
from filecache.store.opening import open_store
from filecache.store.sqlite_store import SqliteStore
from filecache.store.store import (
    Event,
    Store,
    default_store_path,
)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "cache.db"


@pytest.fixture
def open_sqlite(db_path: Path) -> Iterator[Callable[[], SqliteStore]]:
    """Opens ``SqliteStore``s on one file (as separate processes would) and closes them all."""
    opened: list[SqliteStore] = []

    def make() -> SqliteStore:
        opened.append(SqliteStore(db_path))
        return opened[-1]

    yield make
    for s in opened:
        s.close()


def event(seq: int, session: str = "s1", **fields: object) -> Event:
    values: dict[str, object] = {"call_id": f"c{seq}", "tool": "read", "path": "a.py"}
    values.update(fields)
    return Event(session_id=session, seq=seq, **values)  # type: ignore[arg-type]


def append(store: Store, event: Event, views: dict[str, str | None] | None = None) -> None:
    """Commit one event (and view changes) at its session's head (what a session's turn does)."""
    store.commit(event.session_id, store.head(event.session_id), [event], views or {})


def set_view(store: Store, session_id: str, path: str, state: str | None) -> None:
    """Commit a view change alone (a call that records no event, as ``forget`` does not)."""
    store.commit(session_id, store.head(session_id), [], {path: state})


def raw_rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_context_manager_closes(tmp_path: Path) -> None:
    with MemoryStore() as mem:
        append(mem, event(1))
    with SqliteStore(tmp_path / "c.db") as db:
        append(db, event(1))
    with pytest.raises(StoreError, match="closed"):
        db.events("s1")


# SQLite only --------------------------------------------------------------------------------


def test_sqlite_store_compresses_blobs(
    open_sqlite: Callable[[], SqliteStore], db_path: Path
) -> None:
    data = b"def handler(request):\n    return respond(request)\n" * 2000
    open_sqlite().put_blob("xxh3:big", data)
    ((size, stored),) = raw_rows(db_path, "SELECT size, length(data) FROM blobs")
    assert size == len(data)
    assert isinstance(stored, int) and stored < len(data) // 10


def test_sqlite_store_pragmas(open_sqlite: Callable[[], SqliteStore], db_path: Path) -> None:
    s = open_sqlite()
    conn = s._conn
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert conn.execute("PRAGMA busy_timeout").fetchone() == (5000,)
    assert conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
    assert db_path.parent.is_dir()  # created on open


def test_reopen_continues_the_session(open_sqlite: Callable[[], SqliteStore]) -> None:
    first = open_sqlite()
    first.put_blob("xxh3:v", b"content")
    append(first, event(1, version="xxh3:v", created=100.0))
    append(first, event(2, created=200.0), {"a.py": "state"})
    first.cache_put("ns", "k", "value")
    first.close()

    second = open_sqlite()
    assert [e.seq for e in second.events("s1")] == [1, 2]
    assert second.events("s1")[0].version == "xxh3:v"
    assert second.load_views("s1") == {"a.py": "state"}
    assert second.cache_get("ns", "k") == "value"
    assert second.get_blob("xxh3:v") == b"content"
    assert [(s.session_id, s.events, s.last_used) for s in second.sessions()] == [("s1", 2, 200.0)]
    append(second, event(3))
    assert [e.seq for e in second.events("s1")] == [1, 2, 3]


def test_migrations_recorded_and_not_reapplied(
    open_sqlite: Callable[[], SqliteStore], db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_sqlite().close()
    first = raw_rows(db_path, "SELECT name, applied_at FROM _migrations ORDER BY rowid")
    assert [name for name, _ in first] == [m.__name__ for m in MIGRATIONS]
    assert "m001_initial" in {name for name, _ in first}

    open_sqlite().close()  # m001 would fail ("table sessions already exists") if run again
    assert raw_rows(db_path, "SELECT name, applied_at FROM _migrations ORDER BY rowid") == first

    calls: list[str] = []

    def m999_test_extra(conn: migrations.Connection, dialect: Dialect) -> None:
        calls.append("ran")
        conn.execute("CREATE TABLE extra (x)")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, m999_test_extra])
    open_sqlite().close()
    open_sqlite().close()
    assert calls == ["ran"]
    names = [name for (name,) in raw_rows(db_path, "SELECT name FROM _migrations ORDER BY rowid")]
    assert names == [m.__name__ for m in MIGRATIONS] + ["m999_test_extra"]


def test_failed_migration_rolls_back(
    open_sqlite: Callable[[], SqliteStore], db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def m999_broken(conn: migrations.Connection, dialect: Dialect) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        conn.execute("THIS IS NOT SQL")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, m999_broken])
    with pytest.raises(StoreError, match="cannot open the store"):
        open_sqlite()
    tables = {name for (name,) in raw_rows(db_path, "SELECT name FROM sqlite_master")}
    assert "half_done" not in tables
    assert "m999_broken" not in {n for (n,) in raw_rows(db_path, "SELECT name FROM _migrations")}


def test_two_stores_on_one_file_both_write(open_sqlite: Callable[[], SqliteStore]) -> None:
    a, b = open_sqlite(), open_sqlite()
    for i in range(1, 51):
        append(a if i % 2 else b, event(i))
    a.put_blob("from-a", b"a")
    set_view(b, "s1", "b.py", "from b")
    assert [e.seq for e in a.events("s1")] == list(range(1, 51))
    assert [e.seq for e in b.events("s1")] == list(range(1, 51))
    assert b.get_blob("from-a") == b"a"
    assert a.load_views("s1") == {"b.py": "from b"}


_WRITER = """
import sys
from pathlib import Path
from filecache.store.sqlite_store import SqliteStore
from filecache.store.store import Event

worker = int(sys.argv[2])
with SqliteStore(Path(sys.argv[1])) as store:
    for i in range(1, 101):
        event = Event(session_id=f"w{worker}", seq=i, call_id=f"c{i}", tool="read", path="a.py")
        store.commit(f"w{worker}", i - 1, [event], {})
        store.put_blob(f"v{worker}-{i}", b"x" * 100)
"""


def test_several_processes_write_one_file(db_path: Path) -> None:
    SqliteStore(db_path).close()  # create the schema first, as the first process would
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(db_path), str(w)]) for w in range(4)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    with SqliteStore(db_path) as store:
        assert [len(store.events(f"w{w}")) for w in range(4)] == [100] * 4
        assert store.has_blob("v3-100")


def test_corrupt_file_is_a_store_error(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"\x00garbage, not an SQLite database\xff" * 200)
    with pytest.raises(StoreError, match="not a filecache store or is corrupt") as info:
        SqliteStore(db_path)
    assert str(db_path) in str(info.value)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


def test_another_programs_database_is_refused_untouched(db_path: Path) -> None:
    """``--store`` naming some other SQLite file added filecache's nine tables to it (and
    switched its journal to WAL)."""
    db_path.parent.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        conn.commit()
    before = db_path.read_bytes()
    with pytest.raises(StoreError, match=r"other tables \(users\), not a filecache store"):
        SqliteStore(db_path)
    assert db_path.read_bytes() == before
    assert sorted(p.name for p in db_path.parent.iterdir()) == [db_path.name]
    with SqliteStore(db_path.with_name("empty.db")) as store:  # an empty file or none: made
        assert store.events("s") == []


def test_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="FILECACHE_STORE"):
        SqliteStore(blocker / "cache.db")  # the parent cannot be created: OSError
    with pytest.raises(StoreError, match="cannot open the store"):
        SqliteStore(tmp_path)  # a directory


def test_closed_store_raises_store_error(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "c.db")
    s.close()
    s.close()  # twice is fine
    with pytest.raises(StoreError, match="closed"):
        append(s, event(1))
    with pytest.raises(StoreError, match="closed"):
        s.get_blob("v")


# open_store and default_store_path -----------------------------------------------------------


def test_open_store_none_uses_the_default_path(tmp_path: Path) -> None:
    s = open_store(tmp_path, None)
    try:
        assert isinstance(s, SqliteStore)
        assert s.path == tmp_path / ".filecache" / "cache.db"
        append(s, event(1))
    finally:
        s.close()
    assert (tmp_path / ".filecache" / ".gitignore").read_text() == "*\n"
    assert (tmp_path / ".filecache" / "cache.db").is_file()
    assert sorted(p.name for p in (tmp_path / ".filecache").iterdir() if "probe" in p.name) == []


def test_open_store_memory_path_and_object(tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path, ":memory:"), MemoryStore)
    for given in (tmp_path / "x" / "a.db", str(tmp_path / "b.db")):
        s = open_store(tmp_path, given)
        try:
            assert isinstance(s, SqliteStore)
            assert s.path == Path(given)
        finally:
            s.close()
    mine = MemoryStore()
    assert open_store(tmp_path, mine) is mine
    with pytest.raises(StoreError, match="store must be a path"):
        open_store(tmp_path, 42)  # type: ignore[arg-type]


def test_default_store_path_falls_back_when_root_is_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    cache_home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    root.chmod(0o555)
    try:
        if os.access(root, os.W_OK):
            pytest.skip("chmod does not stop this user (root) from writing")
        path = default_store_path(root)
        assert path.name == "cache.db"
        assert path.parent.parent == cache_home / "filecache"
        assert path.parent.is_dir()
        assert not (root / ".filecache").exists()
        assert default_store_path(root) == path  # stable per root
        with SqliteStore(path) as s:
            append(s, event(1))
    finally:
        root.chmod(0o755)


def test_default_store_path_is_inside_a_writable_root(tmp_path: Path) -> None:
    path = default_store_path(tmp_path)
    assert path == tmp_path / ".filecache" / "cache.db"
    assert (tmp_path / ".filecache" / ".gitignore").read_text() == "*\n"
    assert default_store_path(tmp_path) == path


def test_default_store_path_falls_back_when_the_folder_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A regular file where the folder should be blocks it even for root (unlike chmod).
    (tmp_path / ".filecache").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    path = default_store_path(tmp_path)
    assert path.parent.parent == tmp_path / "xdg-cache" / "filecache"
    assert path.parent.is_dir()


def test_default_store_path_with_nowhere_to_write_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".filecache").write_text("not a folder")
    (tmp_path / "xdg-file").write_text("not a folder either")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-file"))
    with pytest.raises(StoreError, match="FILECACHE_STORE"):
        default_store_path(tmp_path)


def test_archive_and_projections_survive_reopen(open_sqlite: Callable[[], SqliteStore]) -> None:
    with open_sqlite() as first:
        first.archive_put("s1", "c", "kept")
        first.projection_put("s1", "c", "clear", "gone")
    with open_sqlite() as second:
        assert second.archive_get("c", "s1") == "kept"
        assert second.projections("s1") == {"c": ("clear", "gone")}


def test_migration_m003_adds_projection_tokens_to_an_older_store(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    for migration in MIGRATIONS[:2]:  # a store made before m003
        migration(conn, SQLITE)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (migration.__name__,))
    conn.execute("INSERT INTO projections VALUES ('s1', 'c', 'clear', 'gone', 0)")
    conn.commit()
    conn.close()
    with SqliteStore(db_path) as opened:
        [record] = opened.projection_records("s1")
        assert (record.tier, record.tokens_before, record.tokens_after) == ("clear", 0, 0)
        assert opened.projections("s1") == {"c": ("clear", "gone")}
    names = [n for (n,) in raw_rows(db_path, "SELECT name FROM _migrations ORDER BY rowid")]
    assert names[:3] == ["m001_initial", "m002_archive_and_projections", "m003_projection_tokens"]
