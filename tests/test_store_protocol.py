"""The store protocol of the concurrency issue, on every store: memory, SQLite and PostgreSQL.

head / events(after) / commit (compare-and-swap on the head, one transaction) / lock / intents.
The PostgreSQL runs use a real server (``pg_server``); they skip, saying why, when none can start.
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
from filecache.store.opening import open_store
from filecache.store.sqlite_store import SqliteStore
from filecache.store.store import LAST_USED_SLACK, Event, Intent, MemoryStore, Store


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
    return Event(session, seq, created=created, **values)  # type: ignore[arg-type]


def test_the_store_is_the_right_kind(store: Store, spec: str) -> None:
    kind = {":memory:": MemoryStore}.get(spec, SqliteStore)
    if spec.startswith("postgresql://"):
        from filecache.store.pg_store import PostgresStore

        kind = PostgresStore
    assert isinstance(store, kind)
    assert isinstance(store, Store)


def test_head_and_events_after(store: Store) -> None:
    assert store.head("s1") == 0
    assert store.events("s1", after=0) == []
    for seq in (1, 2, 3):
        store.add_event(event(seq))
    store.add_event(event(1, session="other"))
    assert store.head("s1") == 3
    assert [e.seq for e in store.events("s1")] == [1, 2, 3]
    assert [e.seq for e in store.events("s1", after=1)] == [2, 3]
    assert store.events("s1", after=3) == []


def test_commit_appends_events_and_views_and_touches_the_session(store: Store) -> None:
    store.save_view("s1", "gone.py", "old")
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


def test_commit_without_events_changes_views_only(store: Store) -> None:
    store.add_event(event(1))
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
    store.add_event(event(1))
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
