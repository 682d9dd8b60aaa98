"""Exclusive named locks held across the threads and the processes of one machine.

A lock file serves any number of names: each name hashes to one byte of the file, and a POSIX
record lock (``fcntl.lockf``) on that byte excludes other processes. Record locks belong to the
process, not the thread, so a per-byte ``RLock`` excludes the other threads of this process, and
a hold count makes the lock reentrant within a thread.

Ownership and invariants:
- One ``LockFile`` per file per process (``lock_file`` keeps the registry), with one descriptor
  that stays open while the process runs: closing *any* descriptor of a file drops every record
  lock the process holds on it.
- The record lock is taken when a byte's hold count goes 0 → 1 and released at 1 → 0, both while
  holding that byte's ``RLock``; a forked child starts with an empty registry (it holds no
  record locks, whatever its parent's threads held).
- Two names on one byte only serialise each other more; callers take locks in one order
  (session, then path), so no two callers wait on each other in a cycle.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import xxhash

from .errors import StoreError

__all__ = ["LockFile", "lock_file"]

_SLOTS = 1 << 30  # bytes of the lock file that names hash to


class LockFile:
    """Named exclusive locks on one file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            raise StoreError(
                f"cannot open the lock file {path} ({exc}); filecache needs a writable store "
                "folder to coordinate writers"
            ) from exc
        self._meta = threading.Lock()
        self._slots: dict[int, threading.RLock] = {}
        self._holds: dict[int, int] = {}

    @contextlib.contextmanager
    def hold(self, name: str) -> Iterator[None]:
        """Hold the lock ``name`` (blocking) for the ``with`` block."""
        offset = xxhash.xxh3_64_intdigest(name.encode("utf-8")) % _SLOTS
        with self._meta:
            slot = self._slots.setdefault(offset, threading.RLock())
        with slot:
            count = self._holds.get(offset, 0)
            if count == 0:
                self._lock_byte(offset)
            self._holds[offset] = count + 1
            try:
                yield
            finally:
                self._holds[offset] -= 1
                if self._holds[offset] == 0:
                    del self._holds[offset]
                    fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, offset, os.SEEK_SET)

    def _lock_byte(self, offset: int) -> None:
        for attempt in range(1000):
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_EX, 1, offset, os.SEEK_SET)
                return
            except OSError as exc:
                # EDEADLK: the kernel saw a cycle through a hash collision; back off and retry.
                if exc.errno not in (errno.EDEADLK, errno.EINTR, errno.ENOLCK):
                    raise StoreError(f"cannot lock {self.path}: {exc}") from exc
                time.sleep(min(0.001 * (attempt + 1), 0.05))
        raise StoreError(f"cannot lock {self.path}: gave up after 1000 attempts")


_FILES: dict[str, LockFile] = {}
_FILES_LOCK = threading.Lock()


def lock_file(path: Path) -> LockFile:
    """The process's one ``LockFile`` for ``path`` (opened on first use)."""
    key = os.path.realpath(path)
    with _FILES_LOCK:
        found = _FILES.get(key)
        if found is None:
            found = _FILES[key] = LockFile(Path(key))
        return found


def _forget_after_fork() -> None:
    global _FILES_LOCK
    _FILES.clear()  # the child holds no record locks; its descriptors are reopened on use
    _FILES_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
