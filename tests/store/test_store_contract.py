"""The store contract: every store (memory, SQLite, PostgreSQL) runs every test here, by role.

``BlobStore``, ``EventStore`` (head / events(after) / commit: a compare-and-swap on the head, in
one transaction / views), ``RetentionStore``, ``KvStore``, ``ArchiveStore``, ``LockStore`` (locks
across threads and processes, intents). What only one store has (SQLite's file, WAL and
migrations; PostgreSQL's pool, reconnects and lock connections) is tested in ``test_store.py``,
``test_store_migrations.py``, ``test_pg_store.py`` and ``test_turns_pg.py``. The PostgreSQL runs
use a real server (``pg_server``); they skip, saying why, when none can start.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from filecache.errors import StoreConflictError, StoreError
from filecache.store.memory_store import MemoryStore
from filecache.store.opening import open_store
from filecache.store.sqlite_store import SqliteStore
from filecache.store.store import LAST_USED_SLACK, Event, GcReport, Intent, Store, is_store


@pytest.fixture(params=["memory", "sqlite", pytest.param("pg", marks=pytest.mark.pg)])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """How to open the store under test: ``:memory:``, a SQLite path or a PostgreSQL URL."""
    if request.param == "memory":
        return ":memory:"
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def store(spec: str) -> Iterator[Store]:
    made = open_store(Path("."), spec)
    try:
        yield made
    finally:
        made.close()


def event(seq: int, session: str = "s1", created: float = 1000.0, **fields: object) -> Event:
    values: dict[str, object] = {"call_id": f"c{seq}", "tool": "read", "path": "a.py"}
    values.update(fields)
    return Event(session_id=session, seq=seq, created=created, **values)  # type: ignore[arg-type]


def append(store: Store, event: Event, views: dict[str, str | None] | None = None) -> None:
    """Commit one event (and view changes) at its session's head (what a session's turn does)."""
    store.commit(event.session_id, store.head(event.session_id), [event], views or {})


def set_view(store: Store, session_id: str, path: str, state: str | None) -> None:
    """Commit a view change alone (a call that records no event, as ``forget`` does not)."""
    store.commit(session_id, store.head(session_id), [], {path: state})


def test_the_store_is_the_right_kind(store: Store, spec: str) -> None:
    kind = {":memory:": MemoryStore}.get(spec, SqliteStore)
    if spec.startswith("postgresql://"):
        from filecache.store.pg_store import PostgresStore

        kind = PostgresStore
    assert isinstance(store, kind)
    assert is_store(store)  # every member of every role (the protocols are static types only)
    assert not is_store(object())


# BlobStore --------------------------------------------------------------------------------------


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


# EventStore: events, commit, views --------------------------------------------------------------


def test_head_and_events_after(store: Store) -> None:
    assert store.head("s1") == 0
    assert store.events("s1", after=0) == []
    for seq in (1, 2, 3):
        append(store, event(seq))
    append(store, event(1, session="other"))
    assert store.head("s1") == 3
    assert [e.seq for e in store.events("s1")] == [1, 2, 3]
    assert [e.seq for e in store.events("s1", after=1)] == [2, 3]
    assert store.events("s1", after=3) == []


def test_commit_appends_events_and_views_and_touches_the_session(store: Store) -> None:
    set_view(store, "s1", "gone.py", "old")
    head = store.commit(
        "s1",
        0,
        [event(1, created=500.0), event(2, created=600.0, deps=("c1",), args=("xxh3:a",))],
        {"a.py": "state-a", "gone.py": None},
    )
    assert head == 2 == store.head("s1")
    got = store.events("s1")
    assert [(e.seq, e.call_id, e.created) for e in got] == [(1, "c1", 500.0), (2, "c2", 600.0)]
    assert got[1].deps == ("c1",) and got[1].args == ("xxh3:a",)
    assert store.load_views("s1") == {"a.py": "state-a"}
    (info,) = store.sessions()
    assert (info.session_id, info.last_used, info.events) == ("s1", 600.0, 2)
    assert store.commit("s1", 2, [event(3, created=700.0)], {"a.py": "state-b"}) == 3
    assert store.load_views("s1") == {"a.py": "state-b"}


def test_commit_keeps_last_used_within_the_slack_of_the_newest_event(store: Store) -> None:
    when = [500.0, 500.4, 502.0, 100.0]  # on by less than the slack, on by more, back
    for seq, created in enumerate(when, 1):
        store.commit("s1", seq - 1, [event(seq, created=created)], {})
        (info,) = store.sessions()
        assert abs(info.last_used - created) <= LAST_USED_SLACK
        assert info.last_used == created or created - info.last_used < LAST_USED_SLACK
    assert store.sessions()[0].last_used == 100.0
    store.touch_session("s1", now=100.2)
    assert store.sessions()[0].last_used == 100.2  # a touch sets it outright


def test_settled_events_are_the_committed_events(store: Store) -> None:
    assert store.settled_events("s1", 0) == []
    store.commit("s1", 0, [event(1), event(2)], {})
    assert store.settled_events("s1", 0) == store.events("s1")
    assert [e.seq for e in store.settled_events("s1", 1)] == [2]


def test_commit_without_events_changes_views_only(store: Store) -> None:
    append(store, event(1))
    assert store.commit("s1", 1, [], {"a.py": "v"}) == 1
    assert store.head("s1") == 1
    assert store.load_views("s1") == {"a.py": "v"}


def test_a_moved_head_is_a_conflict_and_nothing_is_written(store: Store) -> None:
    store.commit("s1", 0, [event(1, created=500.0)], {"a.py": "first"})
    with pytest.raises(StoreConflictError, match="s1"):
        store.commit("s1", 0, [event(1, created=900.0)], {"a.py": "second", "b.py": "x"})
    assert [(e.seq, e.created) for e in store.events("s1")] == [(1, 500.0)]
    assert store.load_views("s1") == {"a.py": "first"}
    assert store.sessions()[0].last_used == 500.0


def test_events_that_do_not_continue_the_head_are_a_store_error(store: Store) -> None:
    append(store, event(1))
    for bad in ([event(3)], [event(2), event(4)], [event(2, session="other")]):
        with pytest.raises(StoreError) as info:
            store.commit("s1", 1, bad, {"a.py": "x"})
        assert not isinstance(info.value, StoreConflictError)
    assert store.head("s1") == 1
    assert store.load_views("s1") == {}


def test_committers_racing_on_one_session_lose_no_event(store: Store) -> None:
    """8 threads commit 25 calls each, re-reading the head on a conflict: 200 events, 1..200."""
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(25):
                while True:
                    head = store.head("s1")
                    call = event(head + 1, call_id=f"t{t}-{i}")
                    try:
                        store.commit("s1", head, [call], {f"t{t}.py": str(i)})
                        break
                    except StoreConflictError:
                        continue
        except BaseException as exc:  # collected, asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    got = store.events("s1")
    assert [e.seq for e in got] == list(range(1, 201))
    expected = sorted(f"t{t}-{i}" for t in range(8) for i in range(25))
    assert sorted(e.call_id for e in got) == expected
    assert store.load_views("s1") == {f"t{t}.py": "24" for t in range(8)}


def test_events_come_back_in_seq_order_with_every_field(store: Store) -> None:
    full = Event(
        session_id="s1",
        seq=2,
        call_id="call-2",
        tool="edit",
        path="src/a.py",
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
    append(store, event(1))
    append(store, full)
    append(store, event(3))
    append(store, event(1, session="s2"))
    got = store.events("s1")
    assert [e.seq for e in got] == [1, 2, 3]
    assert got[1] == full
    assert [e.session_id for e in store.events("s2")] == ["s2"]
    assert store.events("nobody") == []


def test_duplicate_seq_is_a_store_error(store: Store) -> None:
    append(store, event(1))
    with pytest.raises(StoreError, match="seq"):
        append(store, event(1, call_id="again"))
    assert [e.call_id for e in store.events("s1")] == ["c1"]
    append(store, event(2))  # the store still works after the failed call
    assert len(store.events("s1")) == 2


def test_views_save_replace_delete_load(store: Store) -> None:
    assert store.load_views("s1") == {}
    set_view(store, "s1", "a.py", '{"v": 1}')
    set_view(store, "s1", "b.py", '{"v": 2}')
    set_view(store, "s1", "a.py", '{"v": 3}')
    set_view(store, "s2", "a.py", "other session")
    assert store.load_views("s1") == {"a.py": '{"v": 3}', "b.py": '{"v": 2}'}
    set_view(store, "s1", "a.py", None)
    set_view(store, "s1", "never-saved.py", None)
    assert store.load_views("s1") == {"b.py": '{"v": 2}'}
    assert store.load_views("s2") == {"a.py": "other session"}


def test_touch_session_defaults_to_now(store: Store) -> None:
    store.touch_session("s1")
    (info,) = store.sessions()
    assert info.created == info.last_used
    assert info.last_used > 1_600_000_000


def test_concurrent_threads(store: Store) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(1, 101):
                append(store, event(i, session=f"e{t}", tokens=1), {f"{i}.py": "s"})
                store.put_blob(f"v{i % 10}", b"x" * i)
                store.events(f"e{(t + 1) % 8}")
        except BaseException as exc:  # collected, asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    for t in range(8):
        assert [e.seq for e in store.events(f"e{t}")] == list(range(1, 101))
    infos = store.sessions()
    assert sorted(i.session_id for i in infos) == [f"e{t}" for t in range(8)]
    assert all(i.events == i.tokens == 100 for i in infos)
    assert all(len(store.load_views(f"e{t}")) == 100 for t in range(8))


# RetentionStore: sessions, delete, gc -----------------------------------------------------------


def test_sessions_lists_counts_and_sums_most_recent_first(store: Store) -> None:
    assert store.sessions() == []
    append(store, event(1, session="old", tokens=10, tokens_full=100, created=100.0))
    append(store, event(2, session="old", tokens=5, tokens_full=50, created=200.0))
    append(store, event(1, session="new", tokens=7, tokens_full=70, created=300.0))
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


def test_delete_session_removes_its_events_and_views_only(store: Store) -> None:
    store.put_blob("xxh3:v", b"data")
    append(store, event(1, version="xxh3:v"))
    set_view(store, "s1", "a.py", "state")
    append(store, event(1, session="s2"))
    set_view(store, "s2", "a.py", "state")
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
    append(store, event(1, session="old", version="only-old", created=100.0))
    append(store, event(2, session="old", version="shared", created=110.0), {"a.py": "state"})
    append(store, event(1, session="new", version="kept-version", created=500.0))
    append(store, event(2, session="new", base_version="kept-base", created=510.0))
    append(store, event(3, session="new", base_version="shared", created=520.0))
    append(store, event(4, session="new", tool="other", created=530.0))  # no versions at all

    assert store.gc(older_than=300.0) == GcReport(sessions_deleted=1, blobs_deleted=2)

    assert [s.session_id for s in store.sessions()] == ["new"]
    assert store.events("old") == []
    assert store.load_views("old") == {}
    assert not store.has_blob("only-old")
    assert not store.has_blob("orphan")
    for kept in ("shared", "kept-version", "kept-base"):
        assert store.get_blob(kept) == kept.encode()
    assert store.gc(older_than=300.0) == GcReport(sessions_deleted=0, blobs_deleted=0)


# KvStore ----------------------------------------------------------------------------------------


def test_cache_get_put(store: Store) -> None:
    assert store.cache_get("outline", "k") is None
    store.cache_put("outline", "k", "v1")
    store.cache_put("tokens", "k", "other namespace")
    assert store.cache_get("outline", "k") == "v1"
    store.cache_put("outline", "k", "v2")
    assert store.cache_get("outline", "k") == "v2"
    assert store.cache_get("tokens", "k") == "other namespace"


# ArchiveStore -----------------------------------------------------------------------------------


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


# LockStore: locks and intents -------------------------------------------------------------------


def test_lock_is_reentrant_within_a_thread(store: Store) -> None:
    with store.lock("session:a"), store.lock("session:a"), store.lock("path:/r\0a.py"):
        pass
    with store.lock("session:a"):  # released fully: taking it again does not block
        pass


def test_lock_excludes_other_threads(store: Store) -> None:
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(10):
            with store.lock("path:/r\0a.py"):
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.002)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert most == 1


def test_other_names_do_not_wait(store: Store) -> None:
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with store.lock("session:one"):
            held.set()
            release.wait(120)

    th = threading.Thread(target=holder)
    th.start()
    try:
        assert held.wait(120)
        with store.lock("session:two"):
            assert th.is_alive() and not release.is_set()  # taken while "one" is still held
    finally:
        release.set()
        th.join()


_COUNTER = """
import sys, time
from pathlib import Path
from filecache.store.opening import open_store
spec, counter, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
with open_store(Path("."), spec) as store:
    for _ in range(n):
        with store.lock("path:/counter"):
            value = int(counter.read_text())
            time.sleep(0.001)
            counter.write_text(str(value + 1))
"""


def test_lock_excludes_other_processes(spec: str, tmp_path: Path) -> None:
    if spec == ":memory:":
        pytest.skip("a memory store lives in one process")
    with open_store(Path("."), spec):
        pass  # migrated once, before the workers race
    counter = tmp_path / "counter"
    counter.write_text("0")
    procs = [
        subprocess.Popen([sys.executable, "-c", _COUNTER, spec, str(counter), "30"])
        for _ in range(3)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert counter.read_text() == "90"


def test_an_intent_of_the_same_call_replaces_the_first(store: Store) -> None:
    first = Intent(
        session_id="s1",
        call_id="c1",
        root="/r",
        path="a.py",
        before=None,
        after="xxh3:1",
        created=10.0,
    )
    again = Intent(
        session_id="s1",
        call_id="c1",
        root="/r2",
        path="b.py",
        before="xxh3:0",
        after="xxh3:2",
        created=11.0,
    )
    store.put_intent(first)
    store.put_intent(again)
    assert store.intents() == [again]
    assert store.intents(root="/r") == []


def test_intents_put_list_drop(store: Store) -> None:
    a = Intent(session_id="s1", call_id="c1", path="a.py", root="/r", before=None,
               after="xxh3:1", created=10.0)  # fmt: skip
    b = Intent(session_id="s2", call_id="c9", path="b.py", root="/other", before="xxh3:0",
               after="xxh3:2", created=20.0)  # fmt: skip
    store.put_intent(a)
    store.put_intent(b)
    assert store.intents() == [a, b]
    assert store.intents(root="/r") == [a]
    assert store.intents(root="/nowhere") == []
    store.drop_intent("s1", "c1")
    store.drop_intent("s1", "never")  # dropping what is not there is fine
    assert store.intents() == [b]
