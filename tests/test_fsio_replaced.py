"""``fsio``: a file replaced (or removed) between its open and the place check is still read.

Found by the concurrency stress test on PostgreSQL: a read racing an atomic write of the same
file saw ``/proc/self/fd`` name ``<path> (deleted)`` and refused with "moved while being opened".
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from filecache import fsio
from filecache.errors import OutsideRootError


def test_an_open_file_replaced_or_removed_is_still_in_the_right_place(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    loc = fsio.locate(tmp_path, "a.txt")
    fd = os.open(loc.real, os.O_RDONLY)
    try:
        fsio.write_bytes(loc, b"new\n")  # an atomic replace: the open inode is now unlinked
        fsio._same_place(loc, fd, loc.real)
        assert os.read(fd, 100) == b"old\n"
    finally:
        os.close(fd)
    fd = os.open(loc.real, os.O_RDONLY)
    try:
        os.unlink(loc.real)
        fsio._same_place(loc, fd, loc.real)
    finally:
        os.close(fd)


def test_an_open_file_elsewhere_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "b.txt").write_text("b\n")
    loc = fsio.locate(tmp_path, "a.txt")
    fd = os.open(tmp_path / "b.txt", os.O_RDONLY)
    try:
        with pytest.raises(OutsideRootError, match="moved while being opened"):
            fsio._same_place(loc, fd, loc.real)
    finally:
        os.close(fd)
