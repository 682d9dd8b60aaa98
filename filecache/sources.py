"""The lines of one read's bytes, and of the versions a diff may start from, via the cache.

``source_of`` decodes a version once per process (the cache keeps its lines in memory, and
stores them when allowed); ``diff_base_lines`` gathers the lines of the held versions a diff to
a new version may start from; ``read_lookups`` is what the read planner may ask of a version
(``planner.ReadLookups``), answered from the cache. All go through the cache's deny-list: a
denied version is keyed, marked secret on every read and never stored.
"""

from __future__ import annotations

from collections.abc import Sequence

from filecache.core.planner import ReadLookups, diff_bases
from filecache.core.results import Source
from filecache.core.text import decode_text, split_lines
from filecache.core.views import PathView
from filecache.fsio import Located
from filecache.hosts import CacheHost

__all__ = ["diff_base_lines", "read_lookups", "source_of"]


def source_of(cache: CacheHost, loc: Located, data: bytes, numbered: bool) -> Source:
    """The ``Source`` of the bytes ``data`` read at ``loc`` (decoded once per version)."""
    version = cache.version_for(loc, data)  # keyed for a denied file (name, identity, bytes)
    secret = cache.secret(version)
    lines = cache.held_lines(version)
    if lines is None:  # decoded once per version (in memory): only then is it kept
        lines = split_lines(decode_text(data, loc.rel))
        storable = len(data) <= cache.settings.max_file_bytes and not secret
        cache.remember(version, lines, storable)
    return Source(loc.rel, loc.rel, version, lines, numbered)


def diff_base_lines(cache: CacheHost, view: PathView | None, version: str) -> dict[str, list[str]]:
    """The lines of the held versions a diff to ``version`` may start from (when stored)."""
    out = {}
    for held in diff_bases(view, version):
        lines = cache.lines_of(held)
        if lines is not None:
            out[held] = lines
    return out


def read_lookups(cache: CacheHost, src: Source, view: PathView | None) -> ReadLookups:
    """What the read planner may ask of ``src``'s version, answered from ``cache``."""
    lines: Sequence[str] = src.lines

    def symbol(name: str) -> tuple[int, int, str]:
        from filecache.outline.outline import find_symbol  # on first use (FileCache.outline_of)

        found = find_symbol(cache.outline_of(src.version, src.path, lines), name)
        return found.start_line, found.end_line, found.qualified_name

    return ReadLookups(
        count=cache.count,
        plain=lambda start, end: cache.plain_tokens(src, start, end),
        outline=lambda budget: cache.outline_text(src.version, src.path, lines, budget),
        symbol=symbol,
        bases=lambda: diff_base_lines(cache, view, src.version),
    )
