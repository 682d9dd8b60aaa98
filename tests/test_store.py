"""Tests for ``filecache.store.store`` and ``filecache.store.sqlite_store``: both stores behave the
same."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from filecache.errors import StoreError
from filecache.store import sqlite_store
from filecache.store.opening import open_store
from filecache.store.sqlite_store import MIGRATIONS, SqliteStore
from filecache.store.store import (
    Event,
    GcReport,
    MemoryStore,
    Store,
    default_store_path,
)


@pytest.fixture(params=["memory", "sqlite", pytest.param("pg", marks=pytest.mark.pg)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each shared test runs on a ``MemoryStore``, a fresh ``SqliteStore`` and a fresh
    PostgreSQL database (``pg_url``: skipped, saying why, when no server can start)."""
    made: Store
    if request.param == "pg":
        made = open_store(tmp_path, request.getfixturevalue("pg_url"))
    else:
        made = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")
    try:
        yield made
    finally:
        made.close()


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
    return Event(session, seq, **values)  # type: ignore[arg-type]


def raw_rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# Shared behaviour ---------------------------------------------------------------------------


def test_both_stores_satisfy_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)


def test_blob_round_trip(store: Store) -> None:
    data = b"line one\nline two\n" * 50 + bytes(range(256))
    assert store.get_blob("xxh3:1") is None
    assert not store.has_blob("xxh3:1")
    store.put_blob("xxh3:1", data)
    assert store.has_blob("xxh3:1")
    assert store.get_blob("xxh3:1") == data
    assert store.get_blob("xxh3:2") is None


def test_blob_put_is_idempotent(store: Store) -> None:
    store.put_blob("xxh3:1", b"first")
    store.put_blob("xxh3:1", b"first")
    store.put_blob("xxh3:1", b"other bytes under the same version are ignored")
    assert store.get_blob("xxh3:1") == b"first"


def test_empty_blob(store: Store) -> None:
    store.put_blob("xxh3:empty", b"")
    assert store.has_blob("xxh3:empty")
    assert store.get_blob("xxh3:empty") == b""


def test_events_come_back_in_seq_order_with_every_field(store: Store) -> None:
    full = Event(
        "s1",
        2,
        "call-2",
        "edit",
        "src/a.py",
        start=3,
        end=9,
        version="xxh3:new",
        base_version="xxh3:old",
        kind="edited",
        base_call_id="call-1",
        tokens=12,
        tokens_full=340,
        text_hash="xxh3:text",
        created=1234.5,
    )
    store.add_event(event(3))
    store.add_event(full)
    store.add_event(event(1))
    store.add_event(event(1, session="s2"))
    got = store.events("s1")
    assert [e.seq for e in got] == [1, 2, 3]
    assert got[1] == full
    assert [e.session_id for e in store.events("s2")] == ["s2"]
    assert store.events("nobody") == []


def test_duplicate_seq_is_a_store_error(store: Store) -> None:
    store.add_event(event(1))
    with pytest.raises(StoreError, match="seq"):
        store.add_event(event(1, call_id="again"))
    assert [e.call_id for e in store.events("s1")] == ["c1"]
    store.add_event(event(2))  # the store still works after the failed call
    assert len(store.events("s1")) == 2


def test_views_save_replace_delete_load(store: Store) -> None:
    assert store.load_views("s1") == {}
    store.save_view("s1", "a.py", '{"v": 1}')
    store.save_view("s1", "b.py", '{"v": 2}')
    store.save_view("s1", "a.py", '{"v": 3}')
    store.save_view("s2", "a.py", "other session")
    assert store.load_views("s1") == {"a.py": '{"v": 3}', "b.py": '{"v": 2}'}
    store.save_view("s1", "a.py", None)
    store.save_view("s1", "never-saved.py", None)
    assert store.load_views("s1") == {"b.py": '{"v": 2}'}
    assert store.load_views("s2") == {"a.py": "other session"}


def test_sessions_lists_counts_and_sums_most_recent_first(store: Store) -> None:
    assert store.sessions() == []
    store.add_event(event(1, session="old", tokens=10, tokens_full=100, created=100.0))
    store.add_event(event(2, session="old", tokens=5, tokens_full=50, created=200.0))
    store.add_event(event(1, session="new", tokens=7, tokens_full=70, created=300.0))
    store.touch_session("empty", now=250.0)
    infos = store.sessions()
    assert [s.session_id for s in infos] == ["new", "empty", "old"]
    old = infos[2]
    assert (old.created, old.last_used) == (100.0, 200.0)
    assert (old.events, old.tokens, old.tokens_full) == (2, 15, 150)
    assert (infos[1].events, infos[1].tokens, infos[1].tokens_full) == (0, 0, 0)
    store.touch_session("old", now=400.0)
    infos = store.sessions()
    assert infos[0].session_id == "old"
    assert (infos[0].created, infos[0].last_used) == (100.0, 400.0)


def test_touch_session_defaults_to_now(store: Store) -> None:
    store.touch_session("s1")
    (info,) = store.sessions()
    assert info.created == info.last_used
    assert info.last_used > 1_600_000_000


def test_delete_session_removes_its_events_and_views_only(store: Store) -> None:
    store.put_blob("xxh3:v", b"data")
    store.add_event(event(1, version="xxh3:v"))
    store.save_view("s1", "a.py", "state")
    store.add_event(event(1, session="s2"))
    store.save_view("s2", "a.py", "state")
    store.delete_session("s1")
    store.delete_session("never-existed")
    assert store.events("s1") == []
    assert store.load_views("s1") == {}
    assert [s.session_id for s in store.sessions()] == ["s2"]
    assert len(store.events("s2")) == 1
    assert store.load_views("s2") == {"a.py": "state"}
    assert store.has_blob("xxh3:v")  # blobs wait for gc


def test_gc_removes_old_sessions_and_unreferenced_blobs(store: Store) -> None:
    for version in ("only-old", "shared", "kept-version", "kept-base", "orphan"):
        store.put_blob(version, version.encode())
    store.add_event(event(1, session="old", version="only-old", created=100.0))
    store.add_event(event(2, session="old", version="shared", created=110.0))
    store.save_view("old", "a.py", "state")
    store.add_event(event(1, session="new", version="kept-version", created=500.0))
    store.add_event(event(2, session="new", base_version="kept-base", created=510.0))
    store.add_event(event(3, session="new", base_version="shared", created=520.0))
    store.add_event(event(4, session="new", tool="other", created=530.0))  # no versions at all

    assert store.gc(older_than=300.0) == GcReport(sessions_deleted=1, blobs_deleted=2)

    assert [s.session_id for s in store.sessions()] == ["new"]
    assert store.events("old") == []
    assert store.load_views("old") == {}
    assert not store.has_blob("only-old")
    assert not store.has_blob("orphan")
    for kept in ("shared", "kept-version", "kept-base"):
        assert store.get_blob(kept) == kept.encode()
    assert store.gc(older_than=300.0) == GcReport(0, 0)


def test_cache_get_put(store: Store) -> None:
    assert store.cache_get("outline", "k") is None
    store.cache_put("outline", "k", "v1")
    store.cache_put("tokens", "k", "other namespace")
    assert store.cache_get("outline", "k") == "v1"
    store.cache_put("outline", "k", "v2")
    assert store.cache_get("outline", "k") == "v2"
    assert store.cache_get("tokens", "k") == "other namespace"


def test_concurrent_threads(store: Store) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(100):
                store.add_event(event(t * 1000 + i, tokens=1))
                store.put_blob(f"v{i % 10}", b"x" * i)
                store.save_view(f"t{t}", f"{i}.py", "s")
                store.events("s1")
        except BaseException as exc:  # collected, asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert [e.seq for e in store.events("s1")] == sorted(
        t * 1000 + i for t in range(8) for i in range(100)
    )
    (info,) = store.sessions()
    assert info.events == info.tokens == 800
    assert all(len(store.load_views(f"t{t}")) == 100 for t in range(8))


def test_context_manager_closes(tmp_path: Path) -> None:
    with MemoryStore() as mem:
        mem.add_event(event(1))
    with SqliteStore(tmp_path / "c.db") as db:
        db.add_event(event(1))
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
    first.add_event(event(1, version="xxh3:v", created=100.0))
    first.add_event(event(2, created=200.0))
    first.save_view("s1", "a.py", "state")
    first.cache_put("ns", "k", "value")
    first.close()

    second = open_sqlite()
    assert [e.seq for e in second.events("s1")] == [1, 2]
    assert second.events("s1")[0].version == "xxh3:v"
    assert second.load_views("s1") == {"a.py": "state"}
    assert second.cache_get("ns", "k") == "value"
    assert second.get_blob("xxh3:v") == b"content"
    assert [(s.session_id, s.events, s.last_used) for s in second.sessions()] == [("s1", 2, 200.0)]
    second.add_event(event(3))
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

    def m999_test_extra(conn: sqlite3.Connection) -> None:
        calls.append("ran")
        conn.execute("CREATE TABLE extra (x)")

    monkeypatch.setattr(sqlite_store, "MIGRATIONS", [*MIGRATIONS, m999_test_extra])
    open_sqlite().close()
    open_sqlite().close()
    assert calls == ["ran"]
    names = [name for (name,) in raw_rows(db_path, "SELECT name FROM _migrations ORDER BY rowid")]
    assert names == [m.__name__ for m in MIGRATIONS] + ["m999_test_extra"]


def test_failed_migration_rolls_back(
    open_sqlite: Callable[[], SqliteStore], db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def m999_broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        conn.execute("THIS IS NOT SQL")

    monkeypatch.setattr(sqlite_store, "MIGRATIONS", [*MIGRATIONS, m999_broken])
    with pytest.raises(StoreError, match="cannot open the store"):
        open_sqlite()
    tables = {name for (name,) in raw_rows(db_path, "SELECT name FROM sqlite_master")}
    assert "half_done" not in tables
    assert "m999_broken" not in {n for (n,) in raw_rows(db_path, "SELECT name FROM _migrations")}


def test_two_stores_on_one_file_both_write(open_sqlite: Callable[[], SqliteStore]) -> None:
    a, b = open_sqlite(), open_sqlite()
    for i in range(50):
        (a if i % 2 else b).add_event(event(i))
    a.put_blob("from-a", b"a")
    b.save_view("s1", "b.py", "from b")
    assert [e.seq for e in a.events("s1")] == list(range(50))
    assert [e.seq for e in b.events("s1")] == list(range(50))
    assert b.get_blob("from-a") == b"a"
    assert a.load_views("s1") == {"b.py": "from b"}


_WRITER = """
import sys
from pathlib import Path
from filecache.store.sqlite_store import SqliteStore
from filecache.store.store import Event

worker = int(sys.argv[2])
with SqliteStore(Path(sys.argv[1])) as store:
    for i in range(100):
        store.add_event(Event("shared", worker * 1000 + i, f"c{i}", "read", "a.py"))
        store.put_blob(f"v{worker}-{i}", b"x" * 100)
"""


def test_several_processes_write_one_file(db_path: Path) -> None:
    SqliteStore(db_path).close()  # create the schema first, as the first process would
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(db_path), str(w)]) for w in range(4)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    with SqliteStore(db_path) as store:
        assert len(store.events("shared")) == 400
        assert store.has_blob("v3-99")


def test_corrupt_file_is_a_store_error(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"\x00garbage, not an SQLite database\xff" * 200)
    with pytest.raises(StoreError, match="not a filecache store or is corrupt") as info:
        SqliteStore(db_path)
    assert str(db_path) in str(info.value)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


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
        s.add_event(event(1))
    with pytest.raises(StoreError, match="closed"):
        s.get_blob("v")


# open_store and default_store_path -----------------------------------------------------------


def test_open_store_none_uses_the_default_path(tmp_path: Path) -> None:
    s = open_store(tmp_path, None)
    try:
        assert isinstance(s, SqliteStore)
        assert s.path == tmp_path / ".filecache" / "cache.db"
        s.add_event(event(1))
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
            s.add_event(event(1))
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


def test_archive_keeps_the_first_original(store: Store) -> None:
    store.archive_put("s1", "call_1", "the original\n" * 50)
    store.archive_put("s1", "call_1", "a placeholder")  # a second put never overwrites
    store.archive_put("s2", "call_1", "another session's call_1")
    assert store.archive_get("call_1", "s1") == "the original\n" * 50
    assert store.archive_get("call_1", "s2") == "another session's call_1"
    assert store.archive_get("call_1") is not None  # any session
    assert store.archive_get("nope") is None and store.archive_get("call_1", "s3") is None


def test_projections_replace_and_die_with_their_session(store: Store) -> None:
    store.touch_session("s1")
    store.projection_put("s1", "call_1", "outline", "outline text")
    store.projection_put("s1", "call_1", "clear", "[cleared tool result: ...]")
    store.projection_put("s1", "call_2", "truncate", "head ... tail")
    assert store.projections("s1") == {
        "call_1": ("clear", "[cleared tool result: ...]"),
        "call_2": ("truncate", "head ... tail"),
    }
    store.archive_put("s1", "call_1", "original")
    store.delete_session("s1")
    assert store.projections("s1") == {} and store.archive_get("call_1", "s1") is None


def test_archive_and_projections_survive_reopen(open_sqlite: Callable[[], SqliteStore]) -> None:
    with open_sqlite() as first:
        first.archive_put("s1", "c", "kept")
        first.projection_put("s1", "c", "clear", "gone")
    with open_sqlite() as second:
        assert second.archive_get("c", "s1") == "kept"
        assert second.projections("s1") == {"c": ("clear", "gone")}


def test_projections_keep_the_original_tokens_as_they_escalate(store: Store) -> None:
    store.touch_session("s1")
    store.projection_put("s1", "call_1", "outline", "outline text", 900, 120)
    store.projection_put("s1", "call_1", "clear", "[cleared tool result: ...]", 120, 20)
    store.projection_put("s1", "call_2", "truncate", "head ... tail")  # tokens not given
    records = {p.call_id: p for p in store.projection_records("s1")}
    assert (records["call_1"].tier, records["call_1"].tokens_before) == ("clear", 900)
    assert records["call_1"].tokens_after == 20 and records["call_1"].created > 0
    assert (records["call_2"].tokens_before, records["call_2"].tokens_after) == (0, 0)
    assert store.projection_records("other") == []
    store.delete_session("s1")
    assert store.projection_records("s1") == []


def test_migration_m003_adds_projection_tokens_to_an_older_store(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    for migration in MIGRATIONS[:2]:  # a store made before m003
        migration(conn)
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
