"""Opening a host's record (a transcript, a rollout) without ever blocking on it.

A payload names its transcript by path, and a path may name a FIFO (an open blocks until a
writer comes), a device (``/dev/zero`` never ends) or a socket. ``open_regular`` opens without
blocking (``O_NONBLOCK``) and refuses anything but a regular file at once; ``size`` is the file's
length at the open, and readers read no further than that, so a file that keeps growing while it
is read costs what it held when the call began.

``complete_lines`` reads such a record a line at a time between two offsets, in chunks, so
the memory a call needs does not grow with the record: a line over ``MAX_LINE`` bytes is not
kept (the caller skips it as it skips a malformed line: the host's own output stands for what
relied on it), and a last line without its newline (being written) is left for the next call.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["MAX_LINE", "complete_lines", "open_regular", "probe"]

MAX_LINE = 8 << 20  # bytes: a longer line is skipped (a transcript line holds one entry)
_CHUNK = 1 << 20
_PROBE = 4096  # bytes hashed at each probe point


def open_regular(path: str | Path) -> tuple[BinaryIO, int]:
    """``path`` opened for reading and its size, if it is a regular file.

    Raises:
        OSError: it cannot be opened, or is not a regular file (a FIFO, a device, a folder).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def complete_lines(
    file: BinaryIO, start: int, end: int, cap: int = MAX_LINE
) -> Iterator[tuple[bytes | None, int]]:
    """The complete lines of ``file`` from offset ``start`` (a line's start) to ``end``: each
    line without its newline, or None for one of more than ``cap`` bytes (its bytes are not
    kept), with the offset just after its newline. A last line without its newline is not
    given. Memory: one chunk and at most ``cap`` bytes of one line."""
    file.seek(start)
    pos = start
    parts: list[bytes] = []  # the line so far, while it is within the cap
    size, over = 0, False
    while pos < end:
        chunk = file.read(min(_CHUNK, end - pos))
        if not chunk:
            return  # shorter than at the open: what was complete has been given
        base, pos = pos, pos + len(chunk)
        i = 0
        while True:
            j = chunk.find(b"\n", i)
            if j < 0:
                if not over and i < len(chunk):
                    size += len(chunk) - i
                    over = size > cap
                    parts = [] if over else [*parts, chunk[i:]]
                break
            if over or size + (j - i) > cap:
                yield None, base + j + 1
            else:
                yield (b"".join([*parts, chunk[i:j]]) if parts else chunk[i:j]), base + j + 1
            parts, size, over = [], 0, False
            i = j + 1


def probe(file: BinaryIO, offset: int) -> list[str]:
    """Hashes of the bytes of ``file`` at its start, at three points inside and just before
    ``offset``: what a reader that read up to ``offset`` compares to know that the file still
    starts with what it read (a rewrite in place, a truncation, a replacement that kept the
    inode). A rewrite that keeps every probed byte goes unseen: the probes are the price of
    not reading the whole prefix again."""
    from filecache.core.hashing import version_of

    out = []
    for at in (0, offset // 4, offset // 2, 3 * offset // 4, max(0, offset - _PROBE)):
        file.seek(at)
        out.append(version_of(file.read(min(_PROBE, offset - at))))
    return out
