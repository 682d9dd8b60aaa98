"""Which store ``FileCache(root, store=...)`` and the CLI open: a path, ``":memory:"``, a URL.

Kept apart from ``store.py`` (the protocol and ``MemoryStore``), which every implementation
imports: this module imports the implementations (SQLite here, PostgreSQL through
``store_url``), so no store module imports back the module that picks it.
"""

from __future__ import annotations

import os
from pathlib import Path

from filecache.errors import StoreError
from filecache.store.store import Store, default_store_path, existing_store_path, is_store
from filecache.store.store_url import is_store_url, open_url_store, refuse_url_path

__all__ = ["open_store", "store_files", "store_location"]


def open_store(root: Path, store: str | os.PathLike[str] | Store | None) -> Store:
    """The store for ``FileCache(root, store=...)``: a path, ``":memory:"``, a store URL
    (``postgresql://…``), an object or None."""
    if store is None:
        from filecache.store.sqlite_store import SqliteStore  # on first use: sqlite3 costs

        return SqliteStore(default_store_path(root))
    if isinstance(store, str) and store == ":memory:":
        from filecache.store.memory_store import MemoryStore  # not on a read's start

        return MemoryStore()
    if isinstance(store, str) and is_store_url(store):
        return open_url_store(store)  # a URL is never a file name; unknown schemes are refused
    if isinstance(store, os.PathLike):
        refuse_url_path(store)
    if isinstance(store, (str, os.PathLike)):
        from filecache.store.sqlite_store import SqliteStore

        return SqliteStore(Path(store))
    if is_store(store):
        return store
    raise StoreError(
        f"store must be a path, ':memory:' or a Store object, not {type(store).__name__}"
    )


def store_location(root: Path, given: str | None = None, *, create: bool = True) -> str:
    """Where every command's store is, in one order: ``given`` (a ``--store`` flag), then
    ``FILECACHE_STORE``, then ``[tool.filecache] store`` in the root's pyproject.toml, then
    ``<root>/.filecache/cache.db`` (or its user-cache fallback: ``default_store_path``).
    ``create`` False (a command that only reads a store): the default folder is not made;
    the path returned may not exist."""
    if given:
        return given
    from filecache.settings import load_settings  # on first use: tomllib

    configured = load_settings(root).store
    if configured:
        return configured
    return str(default_store_path(root) if create else existing_store_path(root))


def store_files(store: Store) -> frozenset[Path]:
    """A SQLite store's database file and its journals (wherever the store lives): the files
    ``fsio.Paths`` refuses to serve or write; none for another store."""
    path = getattr(store, "path", None)
    if not isinstance(path, Path):
        return frozenset()
    base = path.resolve()
    suffixes = ("-wal", "-shm", "-journal", ".lock")
    return frozenset([base, *(base.with_name(base.name + s) for s in suffixes)])
