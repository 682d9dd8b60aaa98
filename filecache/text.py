"""Lines of text: splitting, decoding checks and the plain content rendering.

Invariants:
- ``split_lines`` splits on ``\\n`` only: ``join_lines(split_lines(t)) == t``. A ``\\r`` stays
  part of its line, so CRLF files round-trip byte-exact. The last line may lack ``\\n``.
- ``render_lines`` is the one content format, shared by filecache's answers and the plain
  baseline: a one-line header, then ``cat -n`` style lines (number right-aligned in 6 columns,
  a TAB, the line).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from .errors import BinaryFileError, EncodingError
from .hashing import short_version

__all__ = [
    "NO_NEWLINE",
    "EOF_MARK",
    "decode_text",
    "join_lines",
    "render_lines",
    "split_lines",
]

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


_PREFIXES: list[str] = []


def _prefixes(start: int, end: int) -> list[str]:
    """The ``cat -n`` prefixes of lines ``start..end`` (built once, sliced after)."""
    if end > len(_PREFIXES):
        _PREFIXES.extend(f"{n:6d}\t" for n in range(len(_PREFIXES) + 1, max(end, 1024) + 1))
    return _PREFIXES[start - 1 : end]


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
