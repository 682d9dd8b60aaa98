"""Exclusive named locks held across the threads and the processes of one machine.

A lock file serves any number of names: each name hashes to one byte of the file, and a record
lock on that byte excludes other processes: an open-file-description lock (Linux
``F_OFD_SETLKW``), else a POSIX ``lockf``. The lock is shared by every thread of the process (one
descriptor), so a per-byte ``RLock`` excludes the other threads, and a hold count makes the lock
reentrant within a thread. OFD locks matter: the kernel checks POSIX record locks for deadlock
per *process*, so two processes whose threads wait on each other's locks in a way that is no
cycle between threads (process A's recovery holds a session lock and waits for a path; a thread
of B holds the path, another thread of B waits for that session) get a false ``EDEADLK``.

Ownership and invariants:
- One ``LockFile`` per file per process (``lock_file`` keeps the registry), with one descriptor,
  open while any of its locks is held or while it is pinned (``pin``: a store keeps its own lock
  file open while it is open, so that a hold costs two ``fcntl`` calls and no ``open``), and
  closed when neither (closing *any* descriptor of a file drops every POSIX record lock the
  process holds on it: it is closed only when it holds none).
- The record lock is taken when a byte's hold count goes 0 → 1 and released at 1 → 0, both while
  holding that byte's ``RLock``; a forked child starts with an empty registry and every
  ``LockFile`` it inherited forgets its descriptor and holds (it holds no record locks, whatever
  its parent's threads held; an open file description shared with the parent would not exclude
  it), keeping only its pins.
- Two names on one byte only serialise each other more; callers take locks in one order
  (session, then path), so no two callers wait on each other in a cycle.

``PathLocks`` is the lock of each file of a root that a write or edit holds from reading the
file to replacing it: a record lock on ``paths.lock`` in the root's store folder (whatever store
is used, so every filecache process on the root takes the same one), then an ``flock`` of the
file's folder (``folder_lock``: a root inside another, or around it, names the file otherwise
and has its own ``paths.lock``; the folder is the one thing they share), then the store's own
lock of the same name (a shared store extends it across machines).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import xxhash

from filecache.errors import StoreError
from filecache.store.store import default_store_path, fallback_store_folder

if TYPE_CHECKING:
    from filecache.store.store import LockStore

__all__ = ["LockFile", "PathLocks", "folder_lock", "lock_file"]

_SLOTS = 1 << 30  # bytes of the lock file that names hash to


class LockFile:
    """Named exclusive locks on one file (see the module docstring).

    The descriptor is open only while some lock of this file is held (opened by the first hold,
    closed by the last release): a long-lived process touching many roots or stores keeps no
    descriptor per lock file it ever used.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pins = 0  # ``pin`` calls not yet undone: the descriptor stays open
        self._reset()
        _LIVE.add(self)

    def _reset(self) -> None:
        """No descriptor, no holds (a new object, or a forked child's inherited one)."""
        self._meta = threading.Lock()  # guards the slots, the descriptor and its user count
        self._slots: dict[int, threading.RLock] = {}
        self._holds: dict[int, int] = {}
        self._fd: int | None = None
        self._users = 0  # bytes locked (or being locked) through the descriptor

    def pin(self) -> None:
        """Keep the descriptor open between holds, until as many ``unpin`` calls."""
        with self._meta:
            self._pins += 1

    def unpin(self) -> None:
        """Undo one ``pin``; the descriptor is closed if no lock is held through it."""
        with self._meta:
            self._pins = max(self._pins - 1, 0)
            self._close_if_unused()

    @contextlib.contextmanager
    def hold(self, name: str) -> Iterator[None]:
        """Hold the lock ``name`` (blocking) for the ``with`` block."""
        offset = _OFFSETS.get(name)
        if offset is None:
            offset = xxhash.xxh3_64_intdigest(name.encode("utf-8")) % _SLOTS
            if len(_OFFSETS) < 65536:  # the names a process uses: sessions and paths
                _OFFSETS[name] = offset
        slot = self._slots.get(offset)
        if slot is None:
            with self._meta:
                slot = self._slots.setdefault(offset, threading.RLock())
        with slot:
            count = self._holds.get(offset, 0)
            if count == 0:
                fd = self._open()
                try:
                    self._lock_byte(fd, offset)
                except BaseException:
                    self._close()
                    raise
            self._holds[offset] = count + 1
            try:
                yield
            finally:
                self._holds[offset] -= 1
                if self._holds[offset] == 0:
                    del self._holds[offset]
                    try:
                        assert self._fd is not None
                        _unlock(self._fd, offset)
                    finally:
                        self._close()

    def _open(self) -> int:
        with self._meta:
            if self._fd is None:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
                    self._fd = os.open(self.path, flags, 0o600)
                except OSError as exc:
                    raise StoreError(
                        f"cannot open the lock file {self.path} ({exc}); filecache needs a "
                        "writable store folder to coordinate writers"
                    ) from exc
            self._users += 1
            return self._fd

    def _close(self) -> None:
        with self._meta:
            self._users -= 1
            self._close_if_unused()

    def _close_if_unused(self) -> None:
        if self._users == 0 and self._pins == 0 and self._fd is not None:
            os.close(self._fd)  # no lock is held through it: nothing is dropped
            self._fd = None

    def _lock_byte(self, fd: int, offset: int) -> None:
        for attempt in range(10_000):
            try:
                _lock(fd, offset)
                return
            except OSError as exc:
                # EDEADLK (POSIX locks only): a false cycle between processes; wait and retry.
                if exc.errno not in (errno.EDEADLK, errno.EINTR, errno.ENOLCK):
                    raise StoreError(f"cannot lock {self.path}: {exc}") from exc
                time.sleep(min(0.001 * (attempt + 1), 0.02))
        raise StoreError(f"cannot lock {self.path}: gave up waiting")


_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", None)


def _flock(kind: int, offset: int) -> bytes:
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks)
    return struct.pack("hhqqi4x", kind, os.SEEK_SET, offset, 1, 0)


def _lock(fd: int, offset: int) -> None:
    if _OFD_SETLKW is not None:
        fcntl.fcntl(fd, _OFD_SETLKW, _flock(fcntl.F_WRLCK, offset))
    else:  # pragma: no cover - not Linux
        fcntl.lockf(fd, fcntl.LOCK_EX, 1, offset, os.SEEK_SET)


def _unlock(fd: int, offset: int) -> None:
    if _OFD_SETLKW is not None:
        fcntl.fcntl(fd, _OFD_SETLKW, _flock(fcntl.F_UNLCK, offset))
    else:  # pragma: no cover - not Linux
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset, os.SEEK_SET)


_OFFSETS: dict[str, int] = {}  # a name's byte in every lock file (a hash: the same everywhere)
_FILES: dict[str, LockFile] = {}  # by resolved path
_SPELLINGS: dict[str, LockFile] = {}  # by the path as given (resolved once: no lstat per call)
_FILES_LOCK = threading.Lock()
_LIVE: weakref.WeakSet[LockFile] = weakref.WeakSet()


def lock_file(path: Path) -> LockFile:
    """The process's one ``LockFile`` for ``path`` (opened on first use)."""
    spelled = os.fspath(path)
    found = _SPELLINGS.get(spelled)
    if found is not None:
        return found
    key = os.path.realpath(path)
    with _FILES_LOCK:
        found = _FILES.get(key)
        if found is None:
            found = _FILES[key] = LockFile(Path(key))
        if os.path.isabs(spelled):  # a relative one names another file once the cwd changes
            _SPELLINGS[spelled] = found
        return found


def _forget_after_fork() -> None:
    global _FILES_LOCK
    _FOLDERS.__dict__.clear()  # the parent's folder locks are its own (released by its LOCK_UN)
    _FILES.clear()  # the child holds no record locks; its descriptors are reopened on use
    _SPELLINGS.clear()
    _FILES_LOCK = threading.Lock()
    for inherited in list(_LIVE):  # one a store of the parent still refers to
        inherited._reset()  # not closed: the parent's descriptor, and its locks, stay its own


os.register_at_fork(after_in_child=_forget_after_fork)


_FOLDERS = threading.local()  # per thread: {(device, inode): holds} of the folders it locked


@contextlib.contextmanager
def folder_lock(file: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the folder of ``file`` for the ``with`` block: every root and
    store that can reach the file reaches this one folder (``paths.lock`` and the store's
    locks are per root: a root inside another named the file otherwise, and its edits raced
    the outer root's). Each hold opens the folder anew, so threads exclude each other too
    (``flock`` locks an open file description); a thread's nested hold of one folder only
    counts. A folder that cannot be opened (not made yet: a write makes it; or unreadable)
    is not locked: the root's own locks stand alone, as before. A forked child forgets what
    its parent's thread held; the parent releases with ``LOCK_UN``, which frees the shared
    description for both.
    """
    try:
        fd = os.open(file.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        fd = -1
    if fd < 0:
        yield
        return
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        held: dict[tuple[int, int], int] = _FOLDERS.__dict__.setdefault("held", {})
        if key in held:  # this thread holds the folder already
            held[key] += 1
            try:
                yield
            finally:
                held[key] -= 1
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        held[key] = 1
        try:
            yield
        finally:
            del held[key]
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class PathLocks:
    """The locks of a root's files (see the module docstring), for a write or edit."""

    def __init__(self, root: Path, store: LockStore) -> None:
        self.root = root
        self.store = store
        self._file: LockFile | None = None  # paths.lock: found on the first hold
        self._meta = threading.Lock()

    @contextlib.contextmanager
    def hold(self, rel: str) -> Iterator[None]:
        """Exclusive across threads and processes (and, with a shared store, machines) for the
        file ``rel``; and, through its folder's lock (``folder_lock``), against every root that
        holds the same file under another name (a root inside this one, or around it)."""
        name = f"path:{self.root}\0{rel}"
        with (self._file or self._find()).hold(name), folder_lock(self.root / rel):
            with self.store.lock(name):
                yield

    def _find(self) -> LockFile:
        """``paths.lock`` beside the root's default store, made on first use (so a root only
        read never gets a store folder), else in the user cache folder for the root."""
        with self._meta:
            if self._file is None:
                try:
                    where = default_store_path(self.root).with_name("paths.lock")
                except StoreError:  # a linked store folder (a store named elsewhere is used)
                    folder = fallback_store_folder(self.root)
                    folder.mkdir(parents=True, exist_ok=True)
                    where = folder / "paths.lock"
                self._file = lock_file(where)
            return self._file
