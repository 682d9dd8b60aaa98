"""Where a path is in the root, and its lock: ``Root``, a part ``FileCache`` hands its sessions.

``Root.locate`` confines a path to the root and refuses the store's own files wherever they
are (``fsio.locate``, with the store's files decided once, here); ``Root.remembered`` is the
same, remembering link-free resolutions (a fifth of an unchanged re-read: ``realpath``, one
``lstat`` per component, a ``readlink`` for aliases), which sessions use: a call refused on a
remembered location (a link appeared on its way) is run once more on ``relocate``'s fresh
resolution, so its answer is what an unremembered call would have given (the invariants are
``fsio``'s). ``Root.path_lock(rel)`` is the lock every write and edit holds from reading a file
to replacing it: a record lock on ``paths.lock`` in the root's store folder (whatever store is
used, so every filecache process on the root takes the same one), plus the store's own lock
of the same name (a shared store extends it across machines).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from pathlib import Path

from filecache.errors import StoreError
from filecache.fsio import Located, link_free, locate
from filecache.store.locks import lock_file
from filecache.store.store import Store, default_store_path, fallback_store_folder

__all__ = ["Root"]


class Root:
    """One root's paths: confined to it, the store's files refused, and their locks."""

    def __init__(self, root: Path, store: Store) -> None:
        self.root = root
        self.store = store
        self.protected = _store_files(store)
        refuse = frozenset(map(str, self.protected))
        self.known: dict[str, Located] = {}  # ``remembered``'s link-free resolutions
        self.locate = functools.partial(locate, root, refuse=refuse)
        """``path`` confined to the root, refusing the store's own files wherever they are."""
        self.remembered = functools.partial(locate, root, refuse=refuse, remember=self.known)
        """``locate``, answered from (and kept in) ``known`` when no link was on the way."""
        self._lock = threading.Lock()
        self._path_locks: Path | None = None

    def relocate(self, path: str | Path, stale: Located) -> Located | None:
        """After a call refused ``stale``, ``remembered``'s answer for ``path``: a fresh
        resolution (not remembered), or None when ``stale`` was resolved afresh already (the
        refusal stands). ``stale`` is forgotten, unless another thread remembered the path
        anew meanwhile (that call is then retried all the same)."""
        if not isinstance(path, str) or not link_free(stale, path):
            return None
        if self.known.get(path) is stale:
            self.known.pop(path, None)
        return self.locate(path)

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
