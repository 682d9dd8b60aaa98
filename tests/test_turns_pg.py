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
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_proxy import Proxy

from filecache import FileCache
from filecache.errors import FileCacheError, StoreError

psycopg = pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

REPO = Path(__file__).resolve().parent.parent
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
    edit either returns (and is on disk, once) or raises a FileCacheError (and is not)."""
    stop = threading.Event()
    kills = [0]

    def killer() -> None:
        rng = random.Random(19)
        while not stop.wait(rng.uniform(0.0, 0.03)):
            try:
                kills[0] += terminate(pg_url)
            except psycopg.Error:
                pass

    outcomes: dict[str, int] = {}
    with FileCache(tree, store=pg_url) as cache:
        session = cache.session("x")
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            for _ in range(40):
                now = value_on_disk(tree)
                try:
                    session.edit("value.txt", f"value = {now}", f"value = {now + 1}")
                except FileCacheError as exc:  # anything else fails the test
                    outcomes[type(exc).__name__] = outcomes.get(type(exc).__name__, 0) + 1
                    assert value_on_disk(tree) == now, f"reported failed but applied: {exc}"
                else:
                    outcomes["ok"] = outcomes.get("ok", 0) + 1
                    assert value_on_disk(tree) == now + 1
        finally:
            stop.set()
            thread.join()
        # after the storm: the session's view still equals disk
        final = session.read("value.txt", fresh=True)
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
