"""Roots whose tree the temporary-file sweep cannot walk whole (``fsio.sweep_temp_files``, run
when a cache opens): folders it cannot list are skipped, a deep tree is no recursion, and
``--root /`` works. Nothing crashes."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from filecache.cli import main
from filecache.fsio import sweep_temp_files

STALE = ".fc-999999-aaaaaaaaaaaa.tmp"  # filecache's temp name; pid 999999 is not running
HEADROOM = 150  # Python frames the deep-tree test leaves above the caller's own
DEPTH = 300  # folders nested in one another: past that headroom (os.fwalk recursed per level)


def stale_temp(folder: Path) -> None:
    """A day-old temporary file of a dead process in ``folder``: one the sweep removes."""
    (folder / STALE).write_text("partial")
    old = time.time() - 2 * 86400
    os.utime(folder / STALE, (old, old))


@contextlib.contextmanager
def recursion_headroom(frames: int) -> Iterator[None]:
    """Python's recursion limit set ``frames`` above the current depth: a walk that recurses
    once per folder fails on a tree deeper than that (as one 1,000 deep fails by default)."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def test_a_tree_deeper_than_the_recursion_limit_is_swept_to_the_bottom(tmp_path: Path) -> None:
    bottom = tmp_path.joinpath("deep", *["d"] * DEPTH)
    bottom.mkdir(parents=True)
    stale_temp(bottom)
    with recursion_headroom(HEADROOM):
        removed = sweep_temp_files(tmp_path / "deep")  # on 35ed230: RecursionError
    assert removed == ["/".join(["d"] * DEPTH + [STALE])]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any folder")
def test_a_folder_without_permissions_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "closed").mkdir(parents=True)
    (root / "open").mkdir()
    for folder in ("closed", "open"):
        stale_temp(root / folder)
    (root / "closed").chmod(0)
    try:
        assert sweep_temp_files(root) == [f"open/{STALE}"]
    finally:
        (root / "closed").chmod(0o700)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_a_proc_tree_is_swept_without_error() -> None:
    # /proc/1/fd can be opened but not listed by root in a container (no ptrace access to
    # pid 1): os.fwalk raised PermissionError there, ending every open of a root above it.
    assert sweep_temp_files(Path("/proc/1")) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux file system root")
def test_read_with_the_root_at_the_file_system_root(tmp_path: Path) -> None:
    target = tmp_path / "x.txt"
    target.write_text("from the top\n", encoding="utf-8")
    store = tmp_path / "cache.db"  # not /.filecache
    made = Path("/.filecache").exists()
    result = CliRunner().invoke(
        main, ["read", str(target), "--raw", "--root", "/", "--store", str(store)]
    )
    assert result.exception is None, result.exception
    assert result.exit_code == 0 and result.stdout == "from the top\n"
    assert Path("/.filecache").exists() == made  # the store given is the one used
