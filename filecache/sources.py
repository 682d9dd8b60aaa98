"""A root's versions as the read path needs them: their lines, what they cost, their outlines.

Three small objects a ``FileCache`` makes and hands to its sessions:

- ``Versions``: decoded versions in memory (an LRU bounded by ``Settings.memory_mb``; blobs are
  written to the store off the read path, by ``BlobWriter``'s thread or on ``flush``).
  ``source_of`` decodes the bytes of one read once per version; ``lines_of`` gives a held
  version's lines from memory or the store's blob.
- ``Counts``: token counts, per text and per (version, range) (``plain_tokens``).
- ``Outlines``: a version's outline (parsed once) and its rendering (cached in the store).

``read_lookups`` is what the read planner may ask of a version (``planner.ReadLookups``),
answered from them.

Invariants: a version's lines in memory are the decoded bytes of that version (keyed by its
hash); token counts are cached per (version, range, format); nothing here decides an answer.
Everything goes through the root's ``Secrets``: a denied version is keyed, and no blob, outline
or token count of a secret version is written to the store.

Concurrency: ``Versions._lock`` owns the LRU, its sizes and the pending/stored sets;
``Counts._lock`` its memo. Neither is held while waiting for a store, session or path lock.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from itertools import filterfalse
from typing import TYPE_CHECKING

from filecache.core.planner import ReadLookups
from filecache.core.results import Source
from filecache.core.text import content_header, content_text, decode_text, join_lines, split_lines
from filecache.core.tokens import ESTIMATE_MARGIN, TokenCounter, fast_estimate, fast_estimate_text
from filecache.errors import RequestError
from filecache.fsio import Located
from filecache.secrecy import Secrets
from filecache.settings import Settings
from filecache.store.blob_writer import BlobWriter
from filecache.store.seal import Seal
from filecache.store.store import Store

if TYPE_CHECKING:
    from filecache.outline.outline import Outline

__all__ = ["Counts", "Outlines", "Versions", "read_lookups"]

_TOKEN_COUNTS_MAX = 100_000  # (version, range) token counts kept in memory (the store has all)


class Versions:
    """Decoded versions in memory, their blobs in the store (module docstring).

    Args:
        store, seal: where blobs go, and the seal that tags them.
        secrets: the root's denied files (a secret version is never stored).
        max_file_bytes: files over it are never stored.
        budget: bytes of decoded lines kept in memory.
        needed: asked, off the read path, whether a version that left memory is worth its blob.
    """

    def __init__(
        self,
        store: Store,
        seal: Seal,
        secrets: Secrets,
        *,
        max_file_bytes: int,
        budget: int,
        needed: Callable[[str], bool],
    ) -> None:
        self.store = store
        self.seal = seal
        self.secrets = secrets
        self.max_file_bytes = max_file_bytes
        self._lock = threading.RLock()
        self._lines: OrderedDict[str, list[str]] = OrderedDict()
        self._shapes: dict[str, _Shape] = {}  # per held version: chars, extra bytes, memory
        self._lines_size = 0
        self._budget = budget
        self._needed = needed
        self._writer = BlobWriter(store, max(budget // 4, 1 << 20), self._still_needed, seal)
        self._stored: set[str] = set()
        self._pending: set[str] = set()

    def source_of(self, loc: Located, data: bytes, numbered: bool) -> Source:
        """The ``Source`` of the bytes ``data`` read at ``loc`` (decoded once per version)."""
        version = self.secrets.version_for(loc, data)  # keyed for a denied file
        secret = self.secrets.secret(version)
        lines = self.held_lines(version)
        if lines is None:  # decoded once per version (in memory): only then is it kept
            lines = split_lines(decode_text(data, loc.rel))
            storable = len(data) <= self.max_file_bytes and not secret
            self.remember(version, lines, storable)
        return Source(key=loc.rel, path=loc.rel, version=version, lines=lines, numbered=numbered)

    def remember(self, version: str, lines: list[str], storable: bool) -> None:
        """Keep a version's lines in memory; a storable one reaches the store's blobs later.

        Blobs are written off the read path: by ``BlobWriter``'s thread when a version leaves
        memory (past ``memory_mb``) and a live session still holds it (``needed``), and on
        ``flush()`` and ``close()`` for every version still in memory. A blob lost to a crash
        only costs content instead of a diff later.
        """
        evicted: list[tuple[str, list[str], int]] = []
        with self._lock:
            if version in self._lines:
                self._lines.move_to_end(version)
                return
        shape = _shape_of(lines)  # a pass over the lines: outside the lock
        with self._lock:
            if version not in self._lines:
                self._lines[version] = lines
                self._shapes[version] = shape
                self._lines_size += shape.memory
                if storable and version not in self._stored and not self.secrets.marked(version):
                    self._pending.add(version)
                while self._lines_size > self._budget and len(self._lines) > 1:
                    old_version, old = self._lines.popitem(last=False)
                    size = self._shapes.pop(old_version).memory
                    self._lines_size -= size
                    if old_version in self._pending:  # its blob is written off the read path
                        self._pending.discard(old_version)
                        if not self.secrets.marked(old_version):  # secret since: never stored
                            self._stored.add(old_version)
                            evicted.append((old_version, old, size))
            else:
                self._lines.move_to_end(version)
        for old_version, old, size in evicted:
            self._writer.put(old_version, old, size)

    def _still_needed(self, version: str) -> bool:
        """Whether a version that left memory is worth its blob (the writer's thread asks,
        holding no lock of ours). One that none needs is dropped, and may be stored again if
        it comes back; a session continued later from the store then gets content instead of
        a diff from it (as for any lost blob)."""
        if self._needed(version):
            return True
        with self._lock:
            self._stored.discard(version)
        return False

    def flush(self) -> None:
        """Write the blobs of versions seen so far to the store (and wait for queued ones)."""
        with self._lock:
            marked = self.secrets.marked  # a version that became secret since is never stored
            pending = [(v, self._lines[v]) for v in self._pending if not marked(v)]
            self._pending.clear()
            self._stored.update(v for v, _ in pending)
        for version, lines in pending:
            data = join_lines(lines).encode("utf-8")
            if self.seal.check_tag(self.store, "blob", version, data) and self.store.has_blob(
                version
            ):
                continue  # an earlier process stored both (each CLI call would rewrite the tag)
            self.store.put_blob(version, data)
            self.seal.put_tag(self.store, "blob", version, data)
        self._writer.drain()

    def close(self) -> None:
        """Stop the blob writer (after ``flush``)."""
        self._writer.close()

    def held_lines(self, version: str) -> list[str] | None:
        """A version's lines if they are in memory (the store is not asked), else None."""
        with self._lock:
            lines = self._lines.get(version)
            if lines is not None:
                self._lines.move_to_end(version)
            return lines

    def lines_of(self, version: str) -> list[str] | None:
        """A held version's lines: from memory, else from the store's blob, else None."""
        lines = self.held_lines(version) or self._writer.lines(version)
        if lines is not None:
            return lines
        blob = self.store.get_blob(version)
        if blob is None or not self.seal.check_tag(self.store, "blob", version, blob):
            return None  # absent, or not what a process with our key stored: no diff from it
        lines = split_lines(blob.decode("utf-8"))
        self.remember(version, lines, False)
        return lines

    def shape(self, version: str) -> _Shape | None:
        """What estimates need of a held version's lines (None: not in memory)."""
        with self._lock:
            return self._shapes.get(version)

    @property
    def memory_used(self) -> int:
        """Bytes of decoded versions held in memory (what ``memory_mb`` bounds)."""
        with self._lock:
            return self._lines_size


class Counts:
    """Token counts: of a text, and of the plain read of a version's range (cached)."""

    def __init__(
        self, settings: Settings, store: Store, seal: Seal, versions: Versions, secrets: Secrets
    ) -> None:
        self.settings = settings
        self.store = store
        self.seal = seal
        self.versions = versions
        self.secrets = secrets
        self.tokens = TokenCounter(settings.tokenizer)  # no vocabulary loaded yet
        self._lock = threading.Lock()
        self._token_counts: dict[tuple[str | int | bool, ...], int] = {}
        exact = settings.exact_counts  # decided once: each count goes straight to its counter
        self.count: Callable[[str], int] = (
            self.tokens.count
            if exact
            else functools.partial(fast_estimate_text, encoding=self.tokens.encoding)
        )
        """Tokens of a text: exact with ``exact_counts``, else ``fast_estimate_text``."""
        self.margin = 1.0 if exact else ESTIMATE_MARGIN
        """The fraction of estimated content an estimated answer may cost to replace it: 1 with
        exact counts, else ``tokens.ESTIMATE_MARGIN``."""

    def plain_tokens(self, src: Source, start: int, end: int) -> int:
        """Tokens of the plain read of ``start..end`` (counted once per version and range).

        Without ``exact_counts`` an estimate from the range's characters, non-ASCII bytes and
        lines: the rendering is never built, so a new version costs no join and no count. Both
        are kept in memory: a re-read of the range (an ``unchanged`` answer) costs a lookup.
        """
        exact = self.settings.exact_counts
        key: tuple[str | int | bool, ...] = (src.version, start, end, src.numbered)
        if not exact:  # an estimate's header names the path (an exact count's key is as stored)
            key += (src.path,)
        with self._lock:
            cached = self._token_counts.get(key)
        if cached is not None:
            return cached
        if not exact:
            return self._keep(key, self._estimate_plain(src, start, end))
        skey = f"{src.version}:{start}:{end}:{int(src.numbered)}:{self.tokens.encoding}"
        secret = self.secrets.marked(src.version)  # a count reveals little; still, not stored
        stored = None if secret else self.seal.get(self.store, "tokens", skey)
        if stored is not None and stored.isdigit():
            n = int(stored)
        else:
            n = self.tokens.count(content_text(src, start, end))
            if not secret:
                self.seal.put(self.store, "tokens", skey, str(n))
        return self._keep(key, n)

    def _keep(self, key: tuple[str | int | bool, ...], n: int) -> int:
        with self._lock:
            if len(self._token_counts) >= _TOKEN_COUNTS_MAX:  # a long-lived server: bound it
                self._token_counts.clear()
            self._token_counts[key] = n
        return n

    def _estimate_plain(self, src: Source, start: int, end: int) -> int:
        encoding = self.tokens.encoding
        if src.output is not None:  # a decorated tool's output is its own rendering
            return fast_estimate_text(src.output, encoding)
        total = len(src.lines)
        if end < start:
            chars = extra = lines = 0
        else:
            if start == 1 and end == total and isinstance(src.lines, list):
                shape = self.versions.shape(src.version)
                if shape is None:
                    shape = _shape_of(src.lines)
            else:  # only the range (a streamed window of a huge file holds nothing else)
                shape = _shape_of(src.lines[start - 1 : end])
            chars, extra = shape.chars, shape.extra
            lines = end - start + 1
        body = fast_estimate(chars, extra, lines, numbered=src.numbered, encoding=encoding)
        if not src.numbered:
            return body
        header = content_header(src.path, start, end, total, src.version)
        return body + fast_estimate_text(header, encoding)


class Outlines:
    """A version's outline and its rendering (the outline package is imported on first use:
    tree-sitter and the outline revision are not needed to import filecache or to read)."""

    def __init__(self, store: Store, seal: Seal, versions: Versions, secrets: Secrets) -> None:
        self.store = store
        self.seal = seal
        self.versions = versions
        self.secrets = secrets

    def outline_of(self, version: str, path: str, lines: Sequence[str] | None = None) -> Outline:
        """The outline of a version (parsed once per version and outline code revision)."""
        from filecache.outline.outline import cached_outline, language_for_path

        held = lines if lines is not None else self.versions.lines_of(version)
        if held is None:
            raise RequestError(f"{path}: version {version} is no longer stored; read the file")
        return cached_outline(
            version, lambda: join_lines(held).encode("utf-8"), language_for_path(path)
        )

    def outline_text(
        self,
        version: str,
        path: str,
        lines: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """The rendered outline of a stored version.

        ``max_tokens`` is the budget of the text (o200k tokens), for the outlines docs/design.md
        sizes: an auto-mode outline sent instead of a large file's content, and the pruner's
        middle tier. ``None`` (an explicit ``mode="outline"``) follows ``render_outline``'s own
        rule: every detail for a file of at most ``SMALL_FILE_LINES`` lines, else a fifth of the
        numbered file. Cached in the store by everything the text depends on: the version, the
        outline revision (code, renderer, grammars, queries), the path (its language and the
        header), the budget and the tokenizer that measured it. A denied file's outline is
        shown (it is what a read would show) but never stored.
        """
        from filecache.outline.outline import OUTLINE_VERSION, language_for_path, render_outline
        from filecache.outline.outline_text import count_tokens_encoding

        secret = self.secrets.mark_if_denied(path, version)
        budget = "default" if max_tokens is None else str(max_tokens)
        key = (  # the path last: it may hold ':'
            f"{version}:{OUTLINE_VERSION}:{language_for_path(path)}:{budget}:"
            f"{count_tokens_encoding()}:{path}"
        )
        cached = None if secret else self.seal.get(self.store, "outline", key)
        if cached is not None:
            return cached
        outline = self.outline_of(version, path, lines)
        text = render_outline(outline, path, max_tokens)
        if not secret:
            self.seal.put(self.store, "outline", key, text)
        return text


def read_lookups(
    versions: Versions,
    counts: Counts,
    outlines: Outlines,
    src: Source,
    seal: Callable[[], str],
) -> ReadLookups:
    """What the read planner may ask of ``src``'s version, answered from these parts (and
    ``seal``: the root's seal, ``Secrets.ref_seal``)."""
    lines: Sequence[str] = src.lines

    def symbol(name: str) -> tuple[int, int, str]:
        from filecache.outline.outline import find_symbol  # on first use (see Outlines)

        found = find_symbol(outlines.outline_of(src.version, src.path, lines), name)
        return found.start_line, found.end_line, found.qualified_name

    def definitions() -> list[tuple[int, int]]:
        outline = outlines.outline_of(src.version, src.path, lines)
        return [(d.start_line, d.end_line) for d in outline.definitions]

    return ReadLookups(
        definitions=definitions,
        count=counts.count,
        plain=lambda start, end: counts.plain_tokens(src, start, end),
        outline=lambda budget: outlines.outline_text(src.version, src.path, lines, budget),
        symbol=symbol,
        lines=versions.lines_of,
        seal=seal,
    )


class _Shape:
    """What estimates and the memory bound need of a version's lines, computed once."""

    __slots__ = ("chars", "extra", "memory")

    def __init__(self, chars: int, extra: int, memory: int) -> None:
        self.chars = chars  # characters, without the newlines
        self.extra = extra  # UTF-8 bytes beyond one per character
        self.memory = memory  # bytes of the str objects and the list


_STR_ASCII = sys.getsizeof("")  # an ASCII str's size is this plus its length (CPython)
_LIST_SLOT = 8


def _shape_of(lines: Sequence[str]) -> _Shape:
    chars = sum(map(len, lines))
    count = len(lines)
    memory = chars + count * (_STR_ASCII + _LIST_SLOT) + 56  # as if every line were ASCII
    wide = list(filterfalse(str.isascii, lines))  # str.isascii is O(1): one C-level pass
    if not wide:
        return _Shape(chars, 0, memory)
    wide_chars = sum(map(len, wide))
    extra = sum(len(line.encode("utf-8", "surrogatepass")) for line in wide) - wide_chars
    memory += sum(map(sys.getsizeof, wide)) - wide_chars - len(wide) * _STR_ASCII
    return _Shape(chars, extra, memory)
