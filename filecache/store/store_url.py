"""Store URLs: ``postgresql://…`` names a shared store; any other ``scheme://`` is refused.

Invariant: a string that looks like a URL (``scheme://``, the scheme two characters or more, so
that ``C://`` stays a Windows path) is never taken as a file path, and neither is a path object
whose text is a URL collapsed by ``pathlib`` (``postgresql:/host/db``).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from filecache.errors import ConfigError, StoreError
from filecache.extras import install_hint

if TYPE_CHECKING:
    from filecache.store.store import Store

__all__ = ["POSTGRES_INSTALL_HINT", "is_store_url", "open_url_store", "refuse_url_path"]

POSTGRES_SCHEMES = ("postgresql", "postgres")
POSTGRES_INSTALL_HINT = f"the PostgreSQL store needs psycopg: {install_hint('postgres')}"

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
_COLLAPSED = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?!/)")


def is_store_url(store: str) -> bool:
    """Whether ``store`` is a URL (``scheme://…``) rather than a path."""
    return _URL.match(store) is not None


def refuse_url_path(store: os.PathLike[str]) -> None:
    """A path object made from a store URL (``Path("postgresql://h/db")``) is refused."""
    text = os.fspath(store)
    match = _COLLAPSED.match(text)
    if match is not None and match.group(1).lower() in POSTGRES_SCHEMES:
        raise ConfigError(
            f"store {text!r} is a URL made into a path (pathlib drops a '/'); "
            "pass the URL as a string"
        )


def open_url_store(url: str) -> Store:
    """The store a URL names: ``postgresql://`` / ``postgres://`` → ``PostgresStore``.

    Raises:
        ConfigError: an unknown scheme.
        StoreError: psycopg is not installed, or the server cannot be reached.
    """
    match = _URL.match(url)
    scheme = match.group(1).lower() if match else ""
    if scheme not in POSTGRES_SCHEMES:
        raise ConfigError(
            f"unknown store URL scheme {scheme + '://'!r}; a store is a file path, ':memory:' "
            "or a postgresql:// URL"
        )
    try:
        from filecache.store.pg_store import PostgresStore
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("psycopg", "psycopg_pool"):
            raise
        raise StoreError(POSTGRES_INSTALL_HINT) from exc
    return PostgresStore(url)
