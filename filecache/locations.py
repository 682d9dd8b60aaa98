"""Where a path is in the root, and its lock: ``Root`` (a part ``FileCache`` hands its
sessions), and remembered resolutions of the paths a session asks for (``Locations``).

``Root.locate`` confines a path to the root and refuses the store's own files wherever they
are; ``Root.path_lock(rel)`` is the lock every write and edit holds from reading a file to
replacing it: a record lock on ``paths.lock`` in the root's store folder (whatever store is
used, so every filecache process on the root takes the same one), plus the store's own lock
of the same name (a shared store extends it across machines).

Resolving a path (``fsio.locate``: ``realpath``, one ``lstat`` per component from ``/``, and a
``readlink`` for aliases) is a fifth of an unchanged re-read. A resolution is remembered only
when no symbolic link was on the way: the path as asked, normalised lexically, *is* the resolved
path, and it has no ``..`` (which a link before it would change) and no aliases.

Invariants:
- A remembered ``Located`` is never followed through a link: every open, stat and rename of
  ``fsio`` walks ``rel`` from the root with ``O_NOFOLLOW``, so a component that has become a
  link since is refused (``OutsideRootError``), never followed, and the file read is the one
  at ``rel``. ``Locations.retry`` then forgets the path and runs the call once more on a fresh
  resolution: the answer is what an unremembered call would have given (the link followed,
  inside the root, with its aliases for the deny-list; or refused).
- Bounded: at most ``MAX_REMEMBERED`` paths (then it starts afresh). Thread-safe: a dict
  read or written whole under the GIL; two threads resolving one path store equal values.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from filecache.errors import OutsideRootError, StoreError
from filecache.fsio import Located, locate
from filecache.store.locks import lock_file
from filecache.store.store import Store, default_store_path, fallback_store_folder

__all__ = ["MAX_REMEMBERED", "Locations", "Root"]

MAX_REMEMBERED = 4096
_T = TypeVar("_T")


class Root:
    """One root's paths: confined to it, the store's files refused, and their locks."""

    def __init__(self, root: Path, store: Store) -> None:
        self.root = root
        self.store = store
        self.protected = _store_files(store)
        self._protected_names = frozenset(map(str, self.protected))  # str: no Path hash per call
        self._lock = threading.Lock()
        self._path_locks: Path | None = None

    def locate(self, path: str | Path) -> Located:
        """``path`` confined to the root, refusing the store's own files wherever they are."""
        loc = locate(self.root, path)
        if str(loc.real) in self._protected_names:
            raise OutsideRootError(f"{loc.rel}: filecache's own store is not served or written")
        return loc

    @contextlib.contextmanager
    def path_lock(self, rel: str) -> Iterator[None]:
        """Exclusive across threads and processes (and, with a shared store, machines) for the
        file ``rel``: held by a write or edit from reading the file to replacing it."""
        with self._lock:
            if self._path_locks is None:
                try:
                    self._path_locks = default_store_path(self.root).with_name("paths.lock")
                except StoreError:  # a linked store folder (a store named elsewhere is used)
                    folder = fallback_store_folder(self.root)
                    folder.mkdir(parents=True, exist_ok=True)
                    self._path_locks = folder / "paths.lock"
            where = self._path_locks
        name = f"path:{self.root}\0{rel}"
        with lock_file(where).hold(name), self.store.lock(name):
            yield


def _store_files(store: Store) -> frozenset[Path]:
    """A SQLite store's database file and its journals (wherever the store lives)."""
    path = getattr(store, "path", None)
    if not isinstance(path, Path):
        return frozenset()
    base = path.resolve()
    suffixes = ("-wal", "-shm", "-journal", ".lock")
    return frozenset([base, *(base.with_name(base.name + s) for s in suffixes)])


class Locations:
    """Resolutions of the paths asked through ``locate`` (the cache's ``locate``)."""

    def __init__(self, locate: Callable[[str | Path], Located]) -> None:
        self._locate = locate
        self._known: dict[str, Located] = {}

    def locate(self, path: str | Path) -> Located:
        """``path`` confined to the root: remembered, else resolved (and remembered when no
        link was on the way)."""
        if isinstance(path, str):
            known = self._known.get(path)
            if known is not None:
                return known
        loc = self._locate(path)
        if isinstance(path, str) and _link_free(loc, path):
            if len(self._known) >= MAX_REMEMBERED:
                self._known.clear()
            self._known[path] = loc
        return loc

    def retry(self, path: str | Path, call: Callable[[Located], _T]) -> _T:
        """``call(loc)``; if it refuses a remembered location (a link appeared on its way),
        forget it and call once more with a fresh resolution."""
        known = self._known.get(path) if isinstance(path, str) else None
        loc = known if known is not None else self.locate(path)
        try:
            return call(loc)
        except OutsideRootError:
            if known is None:
                raise  # resolved afresh already: the refusal stands
            # a remembered location refused: forget it (unless another thread remembered the
            # path anew meanwhile) and resolve afresh, whatever the memory holds now
            if self._known.get(str(path)) is known:
                self._known.pop(str(path), None)
        return call(self._locate(path))


def _link_free(loc: Located, asked: str) -> bool:
    """Whether ``asked`` resolved to itself: no ``..``, no alias, lexically the real path."""
    if loc.aliases or ".." in asked.split("/"):
        return False
    return str(loc.real) == os.path.normpath(os.path.join(loc.root, asked))
