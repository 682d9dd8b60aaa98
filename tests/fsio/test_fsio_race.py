"""Root confinement under a racing folder/symlink swap, and temporary files after ``kill -9``.

The swap uses ``renameat2(RENAME_EXCHANGE)`` (Linux): the folder and a symbolic link to a folder
outside the root trade places atomically, so at every instant the name is one or the other.
Every write either lands inside the root or raises; none lands outside.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from filecache import FileCache, OutsideRootError, PathError
from filecache.fsio import TEMP_NAME, locate, sweep_temp_files

_LIBC = ctypes.CDLL(None, use_errno=True)
_EXCHANGE = hasattr(_LIBC, "renameat2") and sys.platform == "linux"
needs_exchange = pytest.mark.skipif(not _EXCHANGE, reason="needs Linux renameat2")

SWAPPER = textwrap.dedent(
    """
    import ctypes, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    a, b, seconds = sys.argv[1].encode(), sys.argv[2].encode(), float(sys.argv[3])
    end = time.monotonic() + seconds
    swaps = 0
    while time.monotonic() < end:
        if libc.renameat2(-100, a, -100, b, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
            sys.exit(f"renameat2 failed: errno {ctypes.get_errno()}")
        swaps += 1
    print(swaps)
    """
)


def _exchange(a: Path, b: Path) -> None:
    if _LIBC.renameat2(-100, bytes(a), -100, bytes(b), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


def _swap_in_thread(a: Path, b: Path, stop: threading.Event, counter: list[int]) -> None:
    while not stop.is_set():
        _exchange(a, b)
        counter[0] += 1


@needs_exchange
@pytest.mark.parametrize("swapper", ["thread", "process"])
def test_a_folder_racing_with_a_link_to_outside_never_gets_a_write_outside(
    tmp_path: Path, swapper: str
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "a.txt").write_text("inside\n")
    (outside / "a.txt").write_text("OUTSIDE\n")
    (root / "link").symlink_to(outside, target_is_directory=True)
    cache = FileCache(root, store=":memory:")
    shared = cache.session()
    stop, counter = threading.Event(), [0]
    if swapper == "thread":
        thread = threading.Thread(
            target=_swap_in_thread, args=(root / "sub", root / "link", stop, counter)
        )
        thread.start()
    else:
        proc = subprocess.Popen(
            [sys.executable, "-c", SWAPPER, str(root / "sub"), str(root / "link"), "600"],
            stdout=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 30
    while not (root / "sub").is_symlink() and time.monotonic() < deadline:
        time.sleep(0.001)  # until the swapper runs (an interpreter starts slowly under load)
    written, refused, reads = [], 0, 0
    i = 0
    try:
        # 300 rounds at least, on until both sides of the race were hit (a count, not a time:
        # a loaded machine makes the race no shorter); 200,000 rounds without both: a failure.
        while i < 300 or not (written and refused and reads):
            if i >= 200_000:
                break
            i += 1
            session = shared if i % 2 else FileCache(root, store=":memory:").session()
            try:
                session.write(f"sub/w{i}.txt", f"write {i}\n")
                written.append(f"w{i}.txt")
            except (OutsideRootError, PathError):
                refused += 1
            try:
                text = shared.read("sub/a.txt", fresh=True).text
                assert "OUTSIDE" not in text
                reads += 1
            except (OutsideRootError, PathError):
                pass
    finally:
        if swapper == "thread":
            stop.set()
            thread.join()
        else:
            proc.terminate()
            proc.wait(timeout=10)
        cache.close()
    # the real folder is now named sub or link; the link is the other one
    real = root / "sub" if not (root / "sub").is_symlink() else root / "link"
    landed = sorted(p.name for p in real.iterdir() if p.name.startswith("w"))
    assert [p.name for p in outside.iterdir()] == ["a.txt"], "a write landed outside the root"
    assert landed == sorted(written)  # every write reported as done is inside, none more
    assert written and refused, (len(written), refused)  # both sides of the race were hit
    assert reads > 0
    assert not [p for p in root.rglob(".fc-*.tmp")]


def test_a_link_put_in_place_of_a_folder_after_locate_is_refused_on_write(tmp_path: Path) -> None:
    """The deterministic form of the race: locate, then swap, then write."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    outside.mkdir()
    loc = locate(root, "a/b/new.txt")
    (root / "a" / "b").rename(root / "a" / "b.old")
    (root / "a" / "b").symlink_to(outside, target_is_directory=True)
    from filecache.fsio import write_bytes

    with pytest.raises(OutsideRootError, match="became a symbolic link"):
        write_bytes(loc, b"data\n")
    assert list(outside.iterdir()) == []


def test_a_missing_folder_swapped_for_a_link_is_not_created_through_it(tmp_path: Path) -> None:
    """Folders are made one at a time through descriptors: a link that appears where a folder
    is to be made is refused, not followed (``Path.mkdir(parents=True)`` would follow it)."""
    from filecache.fsio import write_bytes

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    loc = locate(root, "new/deeper/file.txt")
    (root / "new").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OutsideRootError):
        write_bytes(loc, b"data\n")
    assert list(outside.iterdir()) == []


# -- temporary files left by a killed writer ---------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from filecache import FileCache
    session = FileCache(sys.argv[1], store=":memory:").session()
    session.write("big.txt", "x" * 99 + "\\n")
    print("ready", flush=True)
    sys.stdin.readline()
    session.write("big.txt", ("y" * 99 + "\\n") * (int(sys.argv[2]) // 100))
    """
)


def _killed_mid_write(root: Path, size: int) -> tuple[Path, int] | None:
    """Run a writer of ``size`` bytes and SIGKILL it while its temporary file exists."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), str(size)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.stdin.write("go\n")
    proc.stdin.flush()
    found = None
    deadline = time.monotonic() + 30
    while found is None and proc.poll() is None and time.monotonic() < deadline:
        for temp in (p for p in root.iterdir() if TEMP_NAME.fullmatch(p.name)):
            try:
                if temp.stat().st_size > 0:  # mid-write
                    found = temp
                    os.kill(proc.pid, signal.SIGKILL)
            except FileNotFoundError:  # renamed into place just now: the writer won
                pass
    proc.wait(timeout=30)
    proc.stdin.close()
    proc.stdout.close()
    if found is None or proc.returncode != -signal.SIGKILL:
        return None
    return found, proc.pid


def test_a_temp_file_left_by_kill_9_mid_write_is_swept_on_open(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for _ in range(5):  # the writer may finish before it is seen; try again
        killed = _killed_mid_write(root, 64 * 1024 * 1024)
        if killed is not None:
            break
    else:
        pytest.fail("never caught the writer mid-write")
    temp, pid = killed
    assert temp.exists() and temp.name.startswith(f".fc-{pid}-")
    assert (root / "big.txt").read_text() == "x" * 99 + "\n"  # the old bytes, whole
    with FileCache(root, store=":memory:"):
        pass  # a minute has not passed: it could still be a slow writer on a shared folder
    assert temp.exists()
    old = time.time() - 120
    os.utime(temp, (old, old))
    with FileCache(root, store=":memory:"):
        pass
    assert not temp.exists()
    assert (root / "big.txt").read_text() == "x" * 99 + "\n"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _temp(pid: int | None, digit: str, folder: str = "") -> str:
    return f"{folder}.fc-{pid}-{digit * 12}.tmp" if pid is not None else f".fc-{digit * 12}.tmp"


def test_the_sweep_removes_only_stale_filecache_temp_files(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    dead, now = _dead_pid(), time.time()
    files = {
        _temp(dead, "a", "src/"): (now - 120, True),  # dead writer, quiet 2 min
        _temp(dead, "b", "src/"): (now - 5, False),  # dead writer, just now
        _temp(os.getpid(), "c", ""): (now - 3600, False),  # a live writer
        _temp(None, "d"): (now - 2 * 86400, True),  # an older release's name
        _temp(None, "e"): (now - 3600, False),  # ... not a day old
        ".fc-notes.tmp": (now - 10 * 86400, False),  # not filecache's pattern
        "src/notes.tmp": (now - 10 * 86400, False),
    }
    for rel, (mtime, _) in files.items():
        (root / rel).write_text("partial")
        os.utime(root / rel, (mtime, mtime))
    stale_outside = outside / (_temp(dead, "f", ""))
    stale_outside.write_text("partial")
    os.utime(stale_outside, (now - 120, now - 120))
    (root / "out").symlink_to(outside, target_is_directory=True)  # not followed
    (root / (_temp(dead, "9", ""))).symlink_to(stale_outside)  # a link: kept

    removed = sweep_temp_files(root, now=now)

    assert sorted(removed) == sorted(rel for rel, (_, gone) in files.items() if gone)
    for rel, (_, gone) in files.items():
        assert (root / rel).exists() is not gone, rel
    assert stale_outside.exists()
    assert sweep_temp_files(root, ["src"], now=now + 86400 * 2) == [_temp(dead, "b", "src/")]


def test_removing_a_file_through_a_folder_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    """``remove_file`` (a failed commit's undo) is confined like a write."""
    from filecache.fsio import remove_file

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "a.txt").write_text("new\n")
    (outside / "a.txt").write_text("keep\n")
    loc = locate(root, "sub/a.txt")
    (root / "sub").rename(root / "sub.old")
    (root / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OutsideRootError):
        remove_file(loc)
    assert (outside / "a.txt").read_text() == "keep\n"
    (root / "sub").unlink()
    (root / "sub.old").rename(root / "sub")
    remove_file(loc)
    remove_file(loc)  # already gone: nothing to do
    assert not (root / "sub" / "a.txt").exists()
