"""Lines of text: splitting, decoding checks and the plain content rendering.

Invariants:
- ``split_lines`` splits on ``\\n`` only: ``join_lines(split_lines(t)) == t``. A ``\\r`` stays
  part of its line, so CRLF files round-trip byte-exact. The last line may lack ``\\n``.
- ``render_lines`` is the one content format, shared by filecache's answers and the plain
  baseline: a one-line header, then ``cat -n`` style lines (number right-aligned in 6 columns,
  a TAB, the line).
- ``scan_window`` sees every byte of a stream (hash, binary and UTF-8 checks: the version
  ``version_of`` gives and the refusal ``decode_text`` gives on the whole) but keeps only the
  lines asked for, each cut at ``MAX_LINE_CHARS`` with ``cut_marker`` saying how long it was.
- ``encode_text`` is the only way new content becomes bytes: text a later read would refuse
  (a NUL byte) or that has no UTF-8 form (a lone surrogate) is refused before any write.
"""

from __future__ import annotations

import codecs
import hashlib
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import xxhash

from filecache.core.hashing import KEYED, PREFIX, short_version
from filecache.core.records import record
from filecache.core.results import Source
from filecache.errors import BinaryFileError, EncodingError, FileTooLargeError, InvalidContentError

__all__ = [
    "EOF_MARK",
    "MAX_LINE_CHARS",
    "NO_NEWLINE",
    "LineWindow",
    "Window",
    "content_text",
    "cut_marker",
    "decode_text",
    "encode_text",
    "join_lines",
    "render_lines",
    "scan_window",
    "split_lines",
]

MAX_LINE_CHARS = 2000
"""A streamed (ranged) read of a file over ``max_file_bytes`` shows at most this many characters
of one line (as Claude Code's Read tool does), then ``cut_marker``."""

NO_NEWLINE = "\\ No newline at end of file"

_SIGNATURES = (
    (b"\x89PNG", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"%PDF", "PDF document"),
    (b"PK\x03\x04", "zip archive"),
    (b"\x7fELF", "ELF executable"),
    (b"\x1f\x8b", "gzip data"),
    (b"SQLite format 3\x00", "SQLite database"),
)


EOF_MARK = "\x00"
"""Ends the last line of a file that lacks a final newline (a NUL cannot occur in text we serve)."""


def split_lines(text: str) -> list[str]:
    """Split into lines *without* their ``\\n``; an unterminated last line ends in ``EOF_MARK``.

    ``join_lines(split_lines(t)) == t`` for every text without NUL bytes. Comparing two such
    lists line by line compares the files exactly, including a missing final newline.
    """
    if not text:
        return []
    lines = text.split("\n")
    last = lines.pop()
    if last:
        lines.append(last + EOF_MARK)
    return lines


def join_lines(lines: Sequence[str]) -> str:
    """Inverse of ``split_lines``."""
    if not lines:
        return ""
    text = "\n".join(lines)
    return text[:-1] if text.endswith(EOF_MARK) else text + "\n"


def describe_binary(data: bytes) -> str | None:
    """A short description if ``data`` looks binary (a known signature or a NUL byte), else None."""
    for magic, name in _SIGNATURES:
        if data.startswith(magic):
            return name
    if b"\x00" in data:  # anywhere: a NUL in served text would read as ``EOF_MARK``
        return "binary data (NUL bytes)"
    return None


def decode_text(data: bytes, path: str) -> str:
    """Decode UTF-8 text, refusing binary and undecodable content with a clear error."""
    kind = describe_binary(data)
    if kind is not None:
        raise BinaryFileError(
            f"{path}: {kind}, {len(data):,} bytes; filecache serves text files only"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EncodingError(
            f"{path}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start:,}); "
            "filecache serves UTF-8 text only — convert the file or read it with another tool"
        ) from exc


def encode_text(text: str, path: str) -> bytes:
    """``text`` as UTF-8, refusing what filecache could not serve back as that same text."""
    nul = text.find("\x00")
    if nul >= 0:
        raise InvalidContentError(
            f"{path}: the new content has a NUL byte at character {nul:,}; filecache writes text "
            "only (a file with NUL bytes reads as binary): remove it, or use another tool"
        )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidContentError(
            f"{path}: the new content has a lone surrogate (U+{ord(text[exc.start]):04X}) at "
            f"character {exc.start:,}, which has no UTF-8 form; send valid Unicode text"
        ) from exc


def cut_marker(total_chars: int) -> str:
    """Ends a line cut at ``MAX_LINE_CHARS`` in a streamed read: how long the line really is."""
    return f"… [line truncated: {total_chars:,} chars; first {MAX_LINE_CHARS:,} shown]"


class LineWindow(Sequence[str]):
    """The lines of a file seen through a window: ``len`` is the file's line count, but only
    lines ``start..start+len(kept)-1`` (1-based) can be read; any other index raises."""

    def __init__(self, total: int, start: int, kept: list[str]) -> None:
        self.total, self.start, self.kept = total, start, kept

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        first = self.start - 1
        if isinstance(index, slice):
            lo, hi, step = index.indices(self.total)
            if step != 1:
                raise IndexError("a line window is sliced in order only")
            if lo < hi and (lo < first or hi > first + len(self.kept)):
                raise IndexError(f"lines {lo + 1}-{hi} are outside the window that was read")
            return self.kept[lo - first : hi - first] if lo < hi else []
        at = index + self.total if index < 0 else index
        if not first <= at < first + len(self.kept):
            raise IndexError(f"line {at + 1} is outside the window that was read")
        return self.kept[at - first]

    def __iter__(self) -> Iterator[str]:
        raise TypeError("a line window holds only the lines that were asked for; slice it")


@record
class Window:
    """What a streamed read kept: the version of all the bytes, and the lines asked for."""

    version: str
    size: int
    lines: LineWindow


def scan_window(
    chunks: Iterable[bytes],
    path: str,
    start: int,
    stop: int | None,
    *,
    line_chars: int = MAX_LINE_CHARS,
    budget: int,
    key: bytes | None = None,
) -> Window:
    """Stream ``chunks`` (a file's bytes in order), keeping lines ``start..stop`` (1-based;
    ``stop=None``: to the end), each cut at ``line_chars`` characters. With ``key`` (a denied
    file) the version is keyed (``hashing.keyed_version`` of the same bytes).

    Raises:
        BinaryFileError, EncodingError: as ``decode_text`` would on the whole.
        FileTooLargeError: the kept lines pass ``budget`` characters (ask for fewer lines).
    """
    hasher: Any = xxhash.xxh3_128() if key is None else hashlib.blake2b(key=key, digest_size=16)
    decoder = codecs.getincrementaldecoder("utf-8")()
    size = 0
    line = 1  # the line the next character belongs to
    kept: list[str] = []
    parts: list[str] = []  # the kept start of the current line
    held = length = 0  # characters in ``parts``; characters of the current line so far
    used = 0
    last = ""

    def finish(eof: bool) -> None:
        nonlocal used
        text = "".join(parts)
        if length > line_chars:
            text = text[:line_chars] + cut_marker(length)
        kept.append(text + EOF_MARK if eof else text)
        used += len(text) + 1
        if used > budget:
            span = f"{start}-{stop}" if stop is not None else f"{start} to the end"
            raise FileTooLargeError(
                f"{path}: lines {span} come to more than {budget:,} characters; "
                "read fewer lines (a smaller limit)"
            )

    bad: EncodingError | None = None  # reported at the end: a NUL later makes it binary
    for chunk in chunks:
        if size == 0:
            _refuse_signature(chunk, path)
        hasher.update(chunk)
        nul = chunk.find(b"\x00")
        if nul >= 0:
            raise BinaryFileError(
                f"{path}: binary data (NUL bytes, the first at byte {size + nul:,}); filecache "
                "serves text files only"
            )
        if bad is not None:
            size += len(chunk)
            continue
        try:
            text = decoder.decode(chunk)
        except UnicodeDecodeError as exc:  # offsets count from the decoder's buffered bytes
            held_back = len(exc.object) - len(chunk)
            bad = _not_utf8(path, exc.object[exc.start], size - held_back + exc.start)
            size += len(chunk)
            continue
        size += len(chunk)
        if not text:
            continue
        last = text[-1]
        pos = 0
        if stop is not None and line > stop:  # past the window: count lines only
            line += text.count("\n")
            continue
        if line < start:  # before the window: skip whole lines cheaply
            skip = start - line
            count = text.count("\n")
            if count < skip:
                line += count
                continue
            for _ in range(skip):
                pos = text.index("\n", pos) + 1
            line = start
        while pos < len(text):
            newline = text.find("\n", pos)
            piece_end = len(text) if newline < 0 else newline
            if held < line_chars:
                parts.append(text[pos : min(piece_end, pos + line_chars - held)])
                held += len(parts[-1])
            length += piece_end - pos
            if newline < 0:
                break
            finish(False)
            parts, held, length = [], 0, 0
            line += 1
            pos = newline + 1
            if stop is not None and line > stop:
                line += text.count("\n", pos)
                break
    if bad is not None:
        raise bad
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, None, size - len(exc.object) + exc.start) from exc
    total = line - 1 if last in ("\n", "") else line
    if last not in ("\n", "") and (stop is None or line <= stop) and line >= start:
        finish(True)
    tag = PREFIX if key is None else KEYED
    return Window(tag + hasher.hexdigest(), size, LineWindow(total, start, kept))


def _refuse_signature(head: bytes, path: str) -> None:
    for magic, name in _SIGNATURES:
        if head.startswith(magic):
            raise BinaryFileError(f"{path}: {name}; filecache serves text files only")


def _not_utf8(path: str, byte: int | None, offset: int) -> EncodingError:
    what = f"byte 0x{byte:02x}" if byte is not None else "a truncated character"
    return EncodingError(
        f"{path}: not valid UTF-8 ({what} at offset {offset:,}); filecache serves UTF-8 text "
        "only — convert the file or read it with another tool"
    )


def content_header(
    path: str,
    start: int,
    end: int,
    total: int,
    version: str | None = None,
    label: str | None = None,
) -> str:
    """The one-line header above content: path, range, and the version's short hash.

    The hash lets the model match a later ``unchanged``/``diff`` answer to this text.
    """
    tag = f", xxh3 {short_version(version)}" if version else ""
    if label:
        return f"[{path}: {label}, lines {start}-{end} of {total}{tag}]"
    if total == 0:
        return f"[{path}: empty file{tag}]"
    if start == 1 and end == total:
        return f"[{path}: {total} line{'s' if total != 1 else ''}{tag}]"
    return f"[{path}: lines {start}-{end} of {total}{tag}]"


_PREFIXES: dict[int, list[str]] = {}  # width -> the prefixes of lines 1.. at that width
_PREFIXES_KEPT = 1 << 17  # prefixes cached up to this line number; deeper ones are made


def _prefixes(start: int, end: int) -> list[str]:
    """The prefixes of lines ``start..end``: the number right-aligned to the width of ``end``,
    then a TAB (``cat -n``'s style without its six-column padding: 1.6 tokens a line fewer on
    the 10,546 lines of ``fixtures/delta``, o200k and cl100k, ``bench/bench_read.py
    --tokens-only``).

    Built once per width and sliced after; a longer list replaces the cached one whole, so a
    thread that reads the cache meanwhile slices a complete list, never one being extended."""
    width = len(str(end))
    if end > _PREFIXES_KEPT:  # a range deep in a huge file: not worth keeping
        return [f"{n:{width}d}\t" for n in range(start, end + 1)]
    made = _PREFIXES.get(width, [])
    if end > len(made):
        top = min(max(end, 2 * len(made), 1024), 10**width - 1)
        made = [f"{n:{width}d}\t" for n in range(1, top + 1)]
        _PREFIXES[width] = made
    return made[start - 1 : end]


def render_lines(
    path: str,
    lines: Sequence[str],
    start: int,
    end: int,
    *,
    numbered: bool = True,
    version: str | None = None,
    label: str | None = None,
) -> str:
    """Render lines ``start..end`` (1-based, inclusive) of a file.

    ``numbered=False`` gives the raw lines, byte-exact, with no header.
    """
    chosen = lines[start - 1 : end]
    if not numbered:
        return join_lines(chosen) if end == len(lines) else "\n".join(chosen) + "\n" * bool(chosen)
    body = "\n".join(map(operator.add, _prefixes(start, end), chosen))
    header = content_header(path, start, end, len(lines), version, label)
    if body.endswith(EOF_MARK):
        return f"{header}\n{body[:-1]}\n{NO_NEWLINE}\n"
    return f"{header}\n{body}\n" if chosen else header + "\n"


def content_text(src: Source, start: int, end: int, label: str | None = None) -> str:
    """The content rendering of ``start..end`` of ``src``: what a read answers when it sends
    content, and what the plain baseline counts (so savings compare like with like)."""
    if src.output is not None:
        return src.output
    return render_lines(
        src.path, src.lines, start, end, numbered=src.numbered, version=src.version, label=label
    )
