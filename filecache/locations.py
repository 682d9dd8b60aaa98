"""Where a path is in the root, and its lock: ``Root``, a part ``FileCache`` hands its sessions.

``Root.locate`` confines a path to the root and refuses the store's own files wherever they
are (``fsio.locate``, with the store's files decided once, here); ``Root.remembered`` is the
same, remembering link-free resolutions (a fifth of an unchanged re-read: ``realpath``, one
``lstat`` per component, a ``readlink`` for aliases), which sessions use: a call refused on a
remembered location (a link appeared on its way) is run once more on ``relocate``'s fresh
resolution, so its answer is what an unremembered call would have given (the invariants are
``fsio``'s). ``Root.path_lock(rel)`` is the lock every write and edit holds from reading a file
to replacing it (``store.locks.PathLocks``).
"""

from __future__ import annotations

import functools
from pathlib import Path

from filecache.fsio import Located, link_free, locate
from filecache.store.locks import PathLocks
from filecache.store.store import Store

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
        self.path_lock = PathLocks(root, store).hold
        """The lock of the file ``rel`` a write or edit holds from reading it to replacing it."""

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


def _store_files(store: Store) -> frozenset[Path]:
    """A SQLite store's database file and its journals (wherever the store lives)."""
    path = getattr(store, "path", None)
    if not isinstance(path, Path):
        return frozenset()
    base = path.resolve()
    suffixes = ("-wal", "-shm", "-journal", ".lock")
    return frozenset([base, *(base.with_name(base.name + s) for s in suffixes)])
