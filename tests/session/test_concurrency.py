"""Concurrency: threads, processes and objects sharing one root, one store and one session.

The acceptance stress test of "Trust under concurrency": every edit that returned success is in
the file, no edit that raised is, no answer names a call that raised, no store error reaches a
caller, and the store passes ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from filecache import FileCache, StoreError
from filecache.store.memory_store import MemoryStore

WORKER = r"""
import json, sys, threading
from pathlib import Path
from filecache import FileCache

root, store, tag, plan = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
caches = [FileCache(root, store=store) for _ in range(plan["caches"])]
out = {"ok": [], "failed": [], "answers": []}
lock = threading.Lock()

def work(cache_no, session_id, thread_no, edits):
    session = caches[cache_no].session(session_id)
    for k in range(edits):
        cid = f"{tag}-c{cache_no}-{session_id}-t{thread_no}-{k}"
        marker = cid + "\n"
        try:
            session.edit("shared.txt", "END\n", marker + "END\n", call_id=cid)
            with lock:
                out["ok"].append([session_id, cid])
        except Exception as exc:
            with lock:
                out["failed"].append([session_id, cid, type(exc).__name__, str(exc)])
        if k % 5 == 0:
            rid = cid + "-read"
            try:
                r = session.read("shared.txt", call_id=rid)
                with lock:
                    out["ok"].append([session_id, rid])
                    out["answers"].append([session_id, rid, r.kind, r.base_call_id])
            except Exception as exc:
                with lock:
                    out["failed"].append([session_id, rid, type(exc).__name__, str(exc)])

threads = [
    threading.Thread(target=work, args=(c, sid, t, n))
    for c, sid, t, n in plan["threads"]
]
for th in threads:
    th.start()
for th in threads:
    th.join()
for cache in caches:
    cache.close()
print(json.dumps(out))
"""


def _run_workers(root: Path, store: Path, plans: list[dict[str, object]]) -> list[dict[str, list]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(root), str(store), f"p{i}", json.dumps(plan)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, plan in enumerate(plans)
    ]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        outs.append(json.loads(stdout))
    return outs


def test_stress_no_lost_edits_no_answer_from_a_failed_call(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "shared.txt").write_text("START\nEND\n")
    store = tmp_path / "store" / "cache.db"
    # Process 0 and 1: two sessions each (a0/a1, b0/b1), 150 edits per session; both also run a
    # thread on the one session id "both" (two processes on one session id); process 0 has two
    # caches, each with a thread on "twin" (two objects for one id in one process).
    plans: list[dict[str, object]] = [
        {
            "caches": 2,
            "threads": [
                [0, "a0", 0, 150],
                [0, "a1", 1, 150],
                [0, "both", 2, 60],
                [0, "twin", 3, 40],
                [1, "twin", 4, 40],
            ],
        },  # fmt: skip
        {
            "caches": 1,
            "threads": [[0, "b0", 0, 150], [0, "b1", 1, 150], [0, "both", 2, 60]],
        },
    ]
    outs = _run_workers(root, store, plans)
    ok = {cid for out in outs for _, cid in out["ok"]}
    failed = [f for out in outs for f in out["failed"]]
    text = (root / "shared.txt").read_text()
    lines = set(text.splitlines())
    edits_ok = {cid for cid in ok if not cid.endswith("-read")}
    assert failed == [], failed[:5]  # no store error (nor anything else) reached a caller
    assert len(edits_ok) == 2 * 150 * 2 + 2 * 60 + 2 * 40
    assert edits_ok - lines == set(), "edits that returned success are missing from the file"
    applied = {line for line in lines if line.startswith("p")}
    assert applied == edits_ok, "an edit that did not succeed is in the file"
    assert text.startswith("START\n") and text.endswith("END\n")
    for out in outs:
        for _sid, _rid, kind, base in out["answers"]:
            assert base is None or base in ok, (
                f"a {kind} answer names {base}, which did not succeed"
            )
    conn = sqlite3.connect(store)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        for sid in ("a0", "a1", "b0", "b1", "both", "twin"):
            seqs = [s for (s,) in conn.execute(
                "SELECT seq FROM events WHERE session_id = ? ORDER BY seq", (sid,))]  # fmt: skip
            assert seqs == list(range(1, len(seqs) + 1)), sid
            recorded = {c for (c,) in conn.execute(
                "SELECT call_id FROM events WHERE session_id = ?", (sid,))}  # fmt: skip
            assert recorded == {cid for out in outs for s, cid in out["ok"] if s == sid}, sid
        assert conn.execute("SELECT COUNT(*) FROM intents").fetchone() == (0,)
    finally:
        conn.close()


def test_same_id_twice_is_the_same_session(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("".join(f"line {i}\n" for i in range(50)))
    with FileCache(tmp_path, store=":memory:") as cache:
        first, second = cache.session("x"), cache.session("x")
        assert first is second
        first.read("a.txt", call_id="c1")
        assert second.read("a.txt", call_id="c2").base_call_id == "c1"


def test_two_caches_one_store_share_the_session(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(50)))
    store = tmp_path / "cache.db"
    with FileCache(root, store=store) as one, FileCache(root, store=store) as two:
        a, b = one.session("s"), two.session("s")
        assert a.read("a.txt", call_id="r1").kind == "full"
        assert b.read("a.txt", call_id="r2").base_call_id == "r1"  # caught up with the store
        b.edit("a.txt", "line 3\n", "line three\n", call_id="e1")
        answer = a.read("a.txt", call_id="r3")
        assert answer.kind == "unchanged"  # a knows of b's edit: the model wrote it
        assert [e.seq for e in one.engine.store.events("s")] == [1, 2, 3, 4]


class _FailingCommits(MemoryStore):
    """A real memory store whose commits fail on demand (as SQLITE_BUSY past its timeout)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = False

    def commit(self, *args: object, **kwargs: object) -> int:
        if self.fail:
            raise StoreError("the store at x failed: database is locked; retry")
        return super().commit(*args, **kwargs)  # type: ignore[arg-type]


def test_a_read_whose_commit_fails_leaves_no_trace(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("".join(f"line {i}\n" for i in range(50)))
    store = _FailingCommits()
    with FileCache(tmp_path, store=store) as cache:
        s = cache.session("s")
        store.fail = True
        with pytest.raises(StoreError):
            s.read("a.txt", call_id="c1")
        store.fail = False
        assert s.held_call_ids() == set()
        again = s.read("a.txt", call_id="c2")
        assert again.kind == "full" and again.base_call_id is None
        assert [e.call_id for e in store.events("s")] == ["c2"]


def test_an_edit_whose_commit_fails_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    body = "".join(f"line {i}\n" for i in range(40))
    (tmp_path / "a.txt").write_text(body + "alpha\nbeta\n")
    store = _FailingCommits()
    with FileCache(tmp_path, store=store) as cache:
        s = cache.session("s")
        s.read("a.txt", call_id="r1")
        store.fail = True
        with pytest.raises(StoreError):
            s.edit("a.txt", "beta", "gamma", call_id="e1")
        assert (tmp_path / "a.txt").read_text() == body + "alpha\nbeta\n"
        with pytest.raises(StoreError):
            s.write("new.txt", "fresh\n", call_id="w1")
        assert not (tmp_path / "new.txt").exists()
        store.fail = False
        assert store.intents() == []
        answer = s.read("a.txt", call_id="r2")
        assert answer.kind == "unchanged" and answer.base_call_id == "r1"
        assert [e.call_id for e in store.events("s")] == ["r1", "r2"]


def test_threads_of_one_session_never_lose_an_edit(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("END\n")
    errors: list[BaseException] = []
    with FileCache(tmp_path, store=tmp_path / "store.db") as cache:
        sessions = [cache.session("one"), cache.session("other")]

        def work(t: int) -> None:
            try:
                for k in range(40):
                    sessions[t % 2].edit("f.txt", "END\n", f"t{t}-{k}\nEND\n")
                    if k % 7 == 0:
                        sessions[t % 2].read("f.txt")
            except BaseException as exc:  # collected and asserted empty below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert errors == []
    lines = (tmp_path / "f.txt").read_text().splitlines()
    assert sorted(lines[:-1]) == sorted(f"t{t}-{k}" for t in range(4) for k in range(40))


KILLED_WRITER = r"""
import sys, os
from filecache import FileCache
from filecache import session as session_module

root, store = sys.argv[1], sys.argv[2]
cache = FileCache(root, store=store)
s = cache.session("s")
s.read("a.txt", call_id="r1")
real = session_module.write_bytes

def write_then_die(loc, data):
    real(loc, data)
    os._exit(9)  # killed between the replace and the commit

session_module.write_bytes = write_then_die
s.edit("a.txt", "beta", "gamma", call_id="e1")
"""


def test_a_write_killed_before_its_commit_is_recovered_as_a_change(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("alpha\nbeta\n")
    store = tmp_path / "cache.db"
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(root), str(store)], capture_output=True
    )
    assert proc.returncode == 9, proc.stderr
    assert (root / "a.txt").read_text() == "alpha\ngamma\n"  # replaced, never committed
    with FileCache(root, store=store) as cache:
        assert cache.engine.store.intents() == []
        events = cache.engine.store.events("s")
        assert [(e.tool, e.kind) for e in events] == [("read", "full"), ("change", "changed")]
        answer = cache.session("s").read("a.txt", call_id="r2")
        assert answer.kind in ("diff", "full") and "gamma" in answer.text  # never "unchanged"


def test_concurrent_cli_reads_of_one_session_all_succeed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(80)))
    cmd = [sys.executable, "-m", "filecache", "read", "a.txt", "--root", str(root)]
    procs = [
        subprocess.Popen(
            [*cmd, "--session", "shared", "--call-id", f"c{i}", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    kinds = sorted(r["kind"] for r in results)
    assert kinds == ["full"] + ["unchanged"] * 5  # one saw it first; the others refer to it
    ids = {r["call_id"] for r in results}
    assert all(r["base_call_id"] in ids for r in results if r["kind"] == "unchanged")
    with FileCache(root) as cache:
        assert [e.seq for e in cache.engine.store.events("shared")] == [1, 2, 3, 4, 5, 6]


OPENER = """
import sys
from pathlib import Path
from filecache.store.sqlite_store import SqliteStore
SqliteStore(Path(sys.argv[1])).close()
"""


def test_processes_creating_one_new_store_at_once(tmp_path: Path) -> None:
    for round_no in range(3):
        db = tmp_path / f"r{round_no}" / "cache.db"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, str(db)], stderr=subprocess.PIPE, text=True
            )
            for _ in range(6)
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            conn.close()
