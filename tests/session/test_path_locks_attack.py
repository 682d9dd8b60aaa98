"""The path lock (``store.locks.PathLocks``) alone serialises edits of one file: caches with
*different* stores (whose own locks exclude nothing of each other), the root and the file spelled
differently (a link to the root, a link to the file, absolute, ``./``), in threads and in
processes: no edit that returned is lost."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from filecache import FileCache, Session

WORKER = r"""
import json, sys
from filecache import FileCache

root, store, tag, path, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
ok = []
with FileCache(root, store=store) as cache:
    session = cache.session(tag)
    for k in range(n):
        line = f"{tag}-{k}"
        session.edit(path, "END\n", line + "\nEND\n", call_id=line)
        ok.append(line)
print(json.dumps(ok))
"""


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    root.mkdir()
    (root / "shared.txt").write_text("START\nEND\n")
    (root / "alias.txt").symlink_to("shared.txt")
    spelled = tmp_path / "root-link"
    spelled.symlink_to(root)  # the same root by another name
    return root, spelled


def test_processes_with_their_own_stores_and_spellings_never_lose_an_edit(tmp_path: Path) -> None:
    root, spelled = _tree(tmp_path)
    plans = [
        (str(root), "shared.txt"),
        (str(spelled), "alias.txt"),
        (str(root), str(root / "shared.txt")),
        (str(spelled), "./shared.txt"),
    ]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                where,
                str(tmp_path / f"store{i}.db"),
                f"p{i}",
                path,
                "40",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, (where, path) in enumerate(plans)
    ]
    done: list[str] = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        done += json.loads(stdout)
    lines = (root / "shared.txt").read_text().splitlines()
    assert len(done) == 4 * 40
    assert sorted(lines[1:-1]) == sorted(done), "an edit that returned is not in the file"
    assert (lines[0], lines[-1]) == ("START", "END")


def test_threads_of_two_caches_with_their_own_stores_never_lose_an_edit(tmp_path: Path) -> None:
    root, spelled = _tree(tmp_path)
    with (
        FileCache(root, store=":memory:") as first,
        FileCache(spelled, store=":memory:") as second,  # a lock of its own, nothing shared
    ):
        sessions = [first.session("a"), second.session("b")]
        paths = ["shared.txt", "alias.txt", "./shared.txt", str(spelled / "shared.txt")]
        _edit_in_threads([(sessions[t % 2], paths[t]) for t in range(4)], root / "shared.txt")


def _edit_in_threads(plans: list[tuple[Session, str]], real: Path) -> None:
    """One thread per (session, path) plan, 40 edits each; every edit that returned is in
    ``real`` (the file they all name), none twice, and none raised."""
    errors: list[BaseException] = []

    def work(t: int) -> None:
        session, path = plans[t]
        try:
            for k in range(40):
                session.edit(path, "END\n", f"t{t}-{k}\nEND\n")
        except BaseException as exc:  # collected and asserted empty below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(plans))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    lines = real.read_text().splitlines()
    expected = [f"t{t}-{k}" for t in range(len(plans)) for k in range(40)]
    assert sorted(lines[1:-1]) == sorted(expected), "an edit that returned is not in the file"


def _nested(tmp_path: Path) -> tuple[Path, Path]:
    outer = tmp_path / "outer"
    inner = outer / "sub"
    inner.mkdir(parents=True)
    (inner / "shared.txt").write_text("START\nEND\n")
    return outer, inner


def test_processes_on_nested_roots_never_lose_an_edit(tmp_path: Path) -> None:
    """A root inside another names the same file otherwise (``sub/shared.txt`` and
    ``shared.txt``), so the roots' own locks (``paths.lock`` per root, a store each) exclude
    nothing of each other: the file's folder lock does (``store.locks.folder_lock``). Without
    it, threads lost 31-40 of 160 edits here."""
    outer, inner = _nested(tmp_path)
    plans = [(outer, "sub/shared.txt"), (inner, "shared.txt")] * 2
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(where),
                str(tmp_path / f"store{i}.db"),
                f"p{i}",
                path,
                "40",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i, (where, path) in enumerate(plans)
    ]
    done: list[str] = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        done += json.loads(stdout)
    lines = (inner / "shared.txt").read_text().splitlines()
    assert sorted(lines[1:-1]) == sorted(done), "an edit that returned is not in the file"


def test_threads_on_nested_roots_never_lose_an_edit(tmp_path: Path) -> None:
    outer, inner = _nested(tmp_path)
    with FileCache(outer, store=":memory:") as big, FileCache(inner, store=":memory:") as small:
        plans = [(big.session("a"), "sub/shared.txt"), (small.session("b"), "shared.txt")] * 2
        _edit_in_threads(plans, inner / "shared.txt")


def test_a_nested_hold_of_one_folder_in_one_thread_does_not_wait_on_itself(tmp_path: Path) -> None:
    from filecache.store.locks import folder_lock

    (tmp_path / "a.txt").write_text("x")
    with folder_lock(tmp_path / "a.txt"), folder_lock(tmp_path / "b.txt"):
        entered = True
    assert entered
