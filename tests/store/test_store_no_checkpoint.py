"""A one-call process ends without SQLite's checkpoint (``sqlite_store.defer_checkpoints`` and
``filecache.entry``'s ``os._exit``): what it committed survives, the log it leaves is synced and
read by the next opener, and the database stays whole under concurrent CLI processes, a library
reader beside them and a process killed mid-write."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from filecache.errors import StoreError
from filecache.store.sqlite_store import SqliteStore

# A process that commits N events through a store, closes it after defer_checkpoints() and
# ends as the entry does (os._exit), or normally (argv[3] == "normal").
COMMIT_AND_EXIT = """
import os, sys
from filecache.store import sqlite_store
from filecache.store.store import Event
sqlite_store.defer_checkpoints()
store = sqlite_store.SqliteStore(sys.argv[1])
head = store.head("s")
for seq in range(head + 1, head + 1 + int(sys.argv[2])):
    event = Event(session_id="s", seq=seq, call_id=f"c{seq}", tool="read", path="a.py")
    store.commit("s", seq - 1, [event], {})
store.close()
if sys.argv[3] == "exit":
    assert sqlite_store.left_open()
    os._exit(0)
"""


def _commit(db: Path, n: int, end: str) -> None:
    subprocess.run([sys.executable, "-c", COMMIT_AND_EXIT, str(db), str(n), end], check=True,
                   timeout=120)  # fmt: skip


def _check(db: Path) -> list[tuple[str, int]]:
    """The database is whole; every session's events, as (session, seq), in order."""
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        sql = "SELECT session_id, seq FROM events ORDER BY session_id, seq"
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_what_a_process_committed_before_os_exit_is_there_and_the_log_was_left(
    tmp_path: Path,
) -> None:
    db = tmp_path / "cache.db"
    _commit(db, 3, "exit")
    wal = db.with_name("cache.db-wal")
    assert wal.exists() and wal.stat().st_size > 0  # not checkpointed: the log is still there
    _commit(db, 2, "exit")  # the next process rebuilds the log's index and continues
    assert _check(db) == [("s", seq) for seq in range(1, 6)]
    _commit(db, 1, "normal")  # exits without os._exit: closed at exit, checkpointed
    assert not wal.exists()
    assert _check(db) == [("s", seq) for seq in range(1, 7)]


def test_a_closed_store_refuses_calls_after_a_deferred_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filecache.store import sqlite_store

    monkeypatch.setattr(sqlite_store, "_deferred", True)
    monkeypatch.setattr(sqlite_store, "_left_open", [])
    store = SqliteStore(tmp_path / "cache.db")
    store.cache_put("meta", "k", "v")
    store.close()
    store.close()  # twice is fine
    assert sqlite_store.left_open()
    with pytest.raises(StoreError, match="closed"):
        store.cache_get("meta", "k")
    reopened = SqliteStore(tmp_path / "cache.db")  # the same process opens it again
    assert reopened.cache_get("meta", "k") == "v"
    reopened.close()
    for conn in sqlite_store._left_open:
        conn.close()


def test_cli_processes_at_once_beside_a_library_reader_keep_every_call(tmp_path: Path) -> None:
    """Edits and reads from 2 x 12 CLI processes at once, on 2 sessions, while a library
    cache in this process reads the same files: every call is recorded once, in order."""
    from filecache.cache import FileCache

    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("x = 0\n")
    fc = [str(Path(sys.executable).with_name("filecache"))]
    if not Path(fc[0]).exists():
        fc = [sys.executable, "-m", "filecache"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FILECACHE_")}

    def calls(session: str, name: str) -> int:
        for i in range(6):
            for args in (["read", name], ["write", name, "--content", f"x = {i}\n"]):
                proc = subprocess.run([*fc, *args, "--session", session], cwd=tmp_path, env=env,
                                      capture_output=True, text=True, timeout=120)  # fmt: skip
                assert proc.returncode == 0, proc.stderr
        return 12

    with FileCache(tmp_path) as cache, ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(calls, s, n) for s, n in (("one", "a.py"), ("two", "b.py"))]
        reader = cache.session("reader")
        while not all(f.done() for f in futures):
            for name in ("a.py", "b.py"):
                text = reader.read(name, fresh=True).text  # a whole file: one of the writes
                assert re.fullmatch(rf"\[{name}: 1 line, xxh3 [0-9a-f]{{8}}\]\n1\tx = \d\n", text)
            time.sleep(0.01)
        assert [f.result() for f in futures] == [12, 12]
    rows = _check(tmp_path / ".filecache" / "cache.db")
    for session in ("one", "two"):
        assert [seq for s, seq in rows if s == session] == list(range(1, 13))


def test_a_process_killed_while_committing_leaves_a_whole_database(tmp_path: Path) -> None:
    db = tmp_path / "cache.db"
    _commit(db, 1, "exit")
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", COMMIT_AND_EXIT, str(db), "100000", "exit"])
        deadline = time.monotonic() + 60
        while len(_check(db)) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)  # let it commit some, then kill it mid-stream
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    seqs = [seq for _, seq in _check(db)]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 20
    _commit(db, 1, "exit")  # a later process goes on from there
    assert [seq for _, seq in _check(db)][-1] == len(seqs) + 1
