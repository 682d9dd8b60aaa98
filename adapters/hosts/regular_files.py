"""Opening a host's record (a transcript, a rollout) without ever blocking on it.

A payload names its transcript by path, and a path may name a FIFO (an open blocks until a
writer comes), a device (``/dev/zero`` never ends) or a socket. ``open_regular`` opens without
blocking (``O_NONBLOCK``) and refuses anything but a regular file at once; ``size`` is the file's
length at the open, and readers read no further than that, so a file that keeps growing while it
is read costs what it held when the call began.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["open_regular"]


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
