"""A read racing an atomic replace of the same file is not refused (found by ``bench_soak.py``).

Known broken: ``fsio.read_bytes`` opens the file, then ``_same_place`` compares
``/proc/self/fd/N`` with the resolved path. When another process replaces the file in between
(filecache's own writes and edits do: temp file + rename), the descriptor still names the old
inode, which the kernel shows as ``<path> (deleted)``; the read is refused with
``OutsideRootError: c.txt: moved while being opened (now …/c.txt (deleted))`` although nothing
moved. In the soak: 1 read in 8,000 ops; here a writer process replacing in a loop.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from filecache import OutsideRootError
from filecache.fsio import locate, read_bytes

WRITER = r"""
import os, sys
root = sys.argv[1]
i = 0
while True:
    tmp = os.path.join(root, ".w.tmp")
    with open(tmp, "w") as fh:
        fh.write(f"{i}\n" * 50)
    os.replace(tmp, os.path.join(root, "c.txt"))
    i += 1
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="the check needs /proc")
def test_a_read_racing_a_replace_is_never_refused(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("0\n" * 50)
    loc = locate(tmp_path, "c.txt")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)])
    refused: list[str] = []
    seen: set[bytes] = set()
    reads = 0
    try:
        # Until the reads have met 200 of the writer's replacements (each version read is one):
        # a count, not a time, so a loaded machine makes the race no shorter.
        while len(seen) < 200 and not refused and writer.poll() is None:
            try:
                seen.add(read_bytes(loc))
                reads += 1
            except OutsideRootError as exc:
                refused.append(str(exc))
    finally:
        writer.kill()
        writer.wait()
    assert refused == []
    assert len(seen) >= 200, f"the writer stopped early (exit {writer.returncode})"
