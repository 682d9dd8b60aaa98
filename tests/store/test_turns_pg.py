"""Turns against a PostgreSQL store that fails under them: a lock connection that dies during an
edit, backends terminated in a loop, a reply to a committed transaction that never arrives
(``pg_proxy.Proxy``), a retried call on another replica, and an outage's one-line error.

The promise under test: a call that raised changed nothing the model relies on (no file replaced,
no fact), a call that returned is recorded, and every failure is a ``FileCacheError``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from filecache import FileCache
from filecache.errors import FileCacheError, StoreError

psycopg = pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

from pg_proxy import Proxy  # noqa: E402  (it needs psycopg: after the skip)

from filecache.store.pg_store import PostgresStore  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")
BODY = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 41))


def terminate(url: str, where: str = "") -> int:
    """``pg_terminate_backend`` every other backend of the test's database (``where``: an extra
    condition on ``pg_stat_activity``); returns how many."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = current_database() AND pid <> pg_backend_pid() {where}"
        ).fetchall()
    return len(rows)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "value.txt").write_text("value = 0\n" + BODY, encoding="utf-8")
    return root


def after_outage(call: Callable[[], T]) -> T:
    """``call`` once the store is reachable again: its pools may need a few attempts (each
    waits up to the store timeout) to reconnect after an outage."""
    for attempt in range(6):
        try:
            return call()
        except StoreError:
            if attempt == 5:
                raise
    raise AssertionError("unreachable")


def value_on_disk(root: Path) -> int:
    return int((root / "value.txt").read_text(encoding="utf-8").split("\n", 1)[0].split()[-1])


# The lock connection dies during an edit -----------------------------------------------------


def test_a_lock_connection_killed_under_an_edit_is_a_store_error_not_a_key_error(
    pg_url: str, tree: Path
) -> None:
    with FileCache(tree, store=pg_url) as cache:
        session = cache.session("x")
        session.read("value.txt")
        with pytest.raises(FileCacheError):  # on 114493c: KeyError: 'session:x'
            with session.lock:  # the session's advisory lock, on the thread's lock connection
                assert terminate(pg_url, "AND query LIKE '%pg_advisory_lock%'") >= 1
                session.edit("value.txt", "value = 0", "value = 1")  # its path lock: same conn
        assert value_on_disk(tree) == 0  # reported failed: not applied
        # the session goes on: a new lock connection, and the edit lands once
        done = session.edit("value.txt", "value = 0", "value = 1")
        assert done.kind == "edited" and value_on_disk(tree) == 1
        assert session.read("value.txt").kind in ("unchanged", "diff")


def test_edits_under_backend_terminations_are_applied_exactly_when_reported(
    pg_url: str, tree: Path
) -> None:
    """Every backend of the database terminated at random moments while one session edits: each
    edit either returns (and is on disk, once) or raises a FileCacheError (and is not).

    Half the edits (a seeded choice) run under the storm: their backends are terminated just
    before and at random moments during them. The others run in calm, so some edits succeed
    however slow the machine is (a storm on a timer alone let none through under load)."""
    stop, storm = threading.Event(), threading.Event()
    kills = [0]

    def killer() -> None:
        rng = random.Random(19)
        while not stop.wait(rng.uniform(0.0, 0.03)):
            if not storm.is_set():
                continue
            try:
                kills[0] += terminate(pg_url)
            except psycopg.Error:
                pass

    outcomes: dict[str, int] = {}
    # A store timeout of 2 s, not the default 5: most stormy edits wait that long for a
    # connection before their StoreError (40 edits took over two minutes at 5 s); what is
    # checked does not depend on how long a call waits.
    with FileCache(tree, store=PostgresStore(pg_url, timeout=2.0)) as cache:
        session = cache.session("x")
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            stormy = random.Random(23)
            for _ in range(40):
                now = value_on_disk(tree)
                storm.clear()
                if stormy.random() < 0.5:
                    try:  # the pools' connections die before use
                        kills[0] += terminate(pg_url)
                    except psycopg.Error:  # the killer's last round ended this one
                        pass
                    storm.set()
                try:
                    session.edit("value.txt", f"value = {now}", f"value = {now + 1}")
                except FileCacheError as exc:  # anything else fails the test
                    outcomes[type(exc).__name__] = outcomes.get(type(exc).__name__, 0) + 1
                    assert value_on_disk(tree) == now, f"reported failed but applied: {exc}"
                else:
                    outcomes["ok"] = outcomes.get("ok", 0) + 1
                    assert value_on_disk(tree) == now + 1
        finally:
            storm.clear()
            stop.set()
            thread.join()
        # after the storm (its pools may need a few attempts to reconnect): view equals disk
        for attempt in range(6):
            try:
                final = session.read("value.txt", fresh=True)
                break
            except StoreError:
                if attempt == 5:
                    raise
        assert final.text.split("\n", 2)[1].endswith(f"value = {value_on_disk(tree)}")
        again = session.read("value.txt")
        assert again.kind == "unchanged"
    assert kills[0] > 0 and outcomes.get("ok", 0) > 0, outcomes


# An outage is one line ------------------------------------------------------------------------


def test_a_store_outage_prints_one_line(tree: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FILECACHE_")}
    done = subprocess.run(
        [sys.executable, "-m", "filecache", "read", "value.txt", "--root", str(tree),
         "--store", f"postgresql://postgres@127.0.0.1:{port}/postgres"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == StoreError.exit_code
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # on 114493c: psycopg_pool's warnings first
    assert (
        lines[0].startswith("filecache: cannot open the PostgreSQL store") and "refused" in lines[0]
    )


@pytest.fixture
def proxy(pg_url: str) -> Iterator[Proxy]:
    with Proxy(pg_url) as running:
        yield running


# A reply to a committed transaction is lost --------------------------------------------------


def test_a_read_whose_commit_reply_was_lost_returns_its_answer(proxy: Proxy, tree: Path) -> None:
    with FileCache(tree, store=proxy.url) as cache:
        session = cache.session("x")
        session.read("value.txt", call_id="c1")
        proxy.lose_reply_to(b"c2-lost")
        second = session.read("value.txt", offset=1, limit=3, call_id="c2-lost")
        assert proxy.lost.is_set()  # the reply was thrown away: the turn landed
        assert second.kind == "unchanged" and second.base_call_id == "c1"
        calls = session.ledger().calls
        assert "c2-lost" in calls  # on 114493c: StoreError, yet this row exists
        third = session.read("value.txt", call_id="c3")
        assert third.kind == "unchanged"


def test_an_edit_whose_commit_reply_was_lost_is_reported_applied(proxy: Proxy, tree: Path) -> None:
    with FileCache(tree, store=proxy.url) as cache:
        session = cache.session("x")
        session.read("value.txt", call_id="r1")
        proxy.lose_reply_to(b'"call_id": "e2-lost"')  # the commit's events (JSON), not the intent
        done = session.edit("value.txt", "value = 0", "value = 1", call_id="e2-lost")
        assert proxy.lost.is_set()
        # on 114493c: StoreError, the file put back, and the ledger saying it was edited
        assert done.kind == "edited" and value_on_disk(tree) == 1
        after = session.read("value.txt", call_id="r3")
        assert "no longer on disk" not in after.text
        assert after.kind == "unchanged"
    with FileCache(tree, store=proxy.url) as other:  # another process agrees
        assert other.session("x").read("value.txt", call_id="r4").kind == "unchanged"


def test_a_read_whose_outcome_is_unknown_is_never_relied_on(proxy: Proxy, tree: Path) -> None:
    """The reply is lost and the server is then unreachable: the caller gets a StoreError, and
    once the server is back, the read that landed unseen is forgotten, not named."""
    with FileCache(tree, store=proxy.url) as cache:
        session = cache.session("x")
        session.read("value.txt", call_id="c1")
        session.forget(["c1"])
        proxy.lose_reply_to(b"c2-lost", then_down=True)
        with pytest.raises(StoreError):
            session.read("value.txt", call_id="c2-lost")
        proxy.up()
        landed = after_outage(lambda: {e.call_id for e in cache.engine.store.events("x")})
        assert "c2-lost" in landed  # it did land
        after = after_outage(lambda: session.read("value.txt", call_id="c3"))
        # on 114493c: "unchanged" naming c2-lost, a read the caller saw fail
        assert after.kind == "full" and after.base_call_id is None


def test_an_edit_whose_outcome_is_unknown_was_not_applied(proxy: Proxy, tree: Path) -> None:
    with FileCache(tree, store=proxy.url) as cache:
        session = cache.session("x")
        session.read("value.txt", call_id="r1")
        proxy.lose_reply_to(b'"call_id": "e2-lost"', then_down=True)
        with pytest.raises(StoreError):
            session.edit("value.txt", "value = 0", "value = 1", call_id="e2-lost")
        assert value_on_disk(tree) == 0  # reported failed: put back
        proxy.up()
        after = after_outage(lambda: session.read("value.txt", call_id="r3"))
        assert "no longer on disk" not in after.text  # never about an edit the caller saw fail
        assert after.kind in ("unchanged", "full")
        assert after.base_call_id in (None, "r1")


def test_an_edit_whose_intent_reply_was_lost_changed_nothing_and_can_be_retried(
    proxy: Proxy, tree: Path
) -> None:
    with FileCache(tree, store=proxy.url) as cache:
        session = cache.session("x")
        proxy.lose_reply_to(b"e2-lost")  # the first message naming it: the intent's insert
        with pytest.raises(StoreError):
            session.edit("value.txt", "value = 0", "value = 1", call_id="e2-lost")
        assert proxy.lost.is_set() and value_on_disk(tree) == 0
        done = session.edit("value.txt", "value = 0", "value = 1", call_id="e2-lost")
        assert done.kind == "edited" and value_on_disk(tree) == 1
        assert cache.engine.store.intents() == []


# A retried call on another replica ------------------------------------------------------------


KILLED_REPLICA = r"""
import os, sys
from filecache import FileCache
from filecache import session as session_module

root, store = sys.argv[1], sys.argv[2]
s = FileCache(root, store=store).session("x")
real = session_module.write_bytes

def write_then_die(loc, data):
    real(loc, data)
    os._exit(9)  # the replica dies between the replace and the commit

session_module.write_bytes = write_then_die
s.edit("value.txt", "value = 0", "value = 0\nvalue = 0", call_id="e1")
"""


def test_an_edit_retried_on_another_replica_is_applied_once(pg_url: str, tree: Path) -> None:
    with FileCache(tree, store=pg_url) as replica_b:  # up before the other dies
        replica_b.session("x").read("value.txt", call_id="r1")
        killed = subprocess.run(
            [sys.executable, "-c", KILLED_REPLICA, str(tree), pg_url], capture_output=True
        )
        assert killed.returncode == 9, killed.stderr
        retried = replica_b.session("x").edit(
            "value.txt", "value = 0", "value = 0\nvalue = 0", call_id="e1"
        )
        text = (tree / "value.txt").read_text(encoding="utf-8")
        assert text.count("value = 0\n") == 2  # on 114493c: 3, the edit applied twice
        assert "not applied again" in retried.text
        assert replica_b.engine.store.intents() == []
