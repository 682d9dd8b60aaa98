"""Content versions: tagged xxh3-128 hashes of exact bytes.

Invariant: a version is ``"xxh3:" + 32 hex digits`` of the bytes that were returned, never of a
second read of the file. The tag makes a future change of digest detectable.
"""

from __future__ import annotations

import xxhash

__all__ = ["args_hash", "short_version", "version_of"]

PREFIX = "xxh3:"


def version_of(data: bytes) -> str:
    """The version tag of ``data``: ``xxh3:<128-bit hex>``."""
    return PREFIX + xxhash.xxh3_128_hexdigest(data)


def short_version(version: str) -> str:
    """The first 8 hex digits of a version, for model-facing text."""
    return version.removeprefix(PREFIX)[:8]


def args_hash(text: str) -> str:
    """A short tag of a string a write/edit call carried (64-bit xxh3 hex)."""
    return xxhash.xxh3_64_hexdigest(text.encode("utf-8"))
