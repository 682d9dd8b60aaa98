"""Content versions: tagged xxh3-128 hashes of exact bytes; keyed ones for secrets.

Invariant: a version is ``"xxh3:" + 32 hex digits`` of the bytes that were returned, never of a
second read of the file. The tag makes a future change of digest detectable. A denied file's
version is ``"keyed:" + 32 hex digits``, a BLAKE2b keyed with the machine's secret key
(``filecache.secrecy.secret_key``): xxh3 is fast to invert by guessing for a low-entropy file
(a short ``.env``), a keyed hash is not without the key, which never reaches a store.
"""

from __future__ import annotations

import hashlib

import xxhash

__all__ = ["KEYED", "args_hash", "keyed_digest", "keyed_version", "short_version", "version_of"]

PREFIX = "xxh3:"
KEYED = "keyed:"


def version_of(data: bytes) -> str:
    """The version tag of ``data``: ``xxh3:<128-bit hex>``."""
    return PREFIX + xxhash.xxh3_128_hexdigest(data)


def keyed_version(data: bytes, key: bytes) -> str:
    """The version tag of a denied file's ``data``: ``keyed:<128-bit keyed BLAKE2b hex>``."""
    return KEYED + hashlib.blake2b(data, key=key, digest_size=16).hexdigest()


def keyed_digest(text: str, key: bytes) -> str:
    """``keyed_version`` of a string's UTF-8 (answers and arguments about a denied file)."""
    return keyed_version(text.encode("utf-8", "surrogatepass"), key)


def short_version(version: str) -> str:
    """The first 8 hex digits of a version (of either tag), for model-facing text."""
    return version.partition(":")[2][:8] if ":" in version else version[:8]


def args_hash(text: str) -> str:
    """A short tag of a string a write/edit call carried (64-bit xxh3 hex)."""
    return xxhash.xxh3_64_hexdigest(text.encode("utf-8"))
