"""Pure helpers of reads and edits: ranges, where an edit landed, markers, replacements.

Invariants: ``apply_edit`` replaces exactly what it reports (the pieces give every character's
provenance) and refuses an ``old_string`` that is empty, absent or (without ``replace_all``) not
unique; ``check_markers`` refuses new content that adds filecache's own answer markers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .diffing import diff_lines
from .errors import EditError, MarkerError, RangeError
from .render import MARKERS
from .views import Piece

__all__ = ["apply_edit", "changed_lines", "check_markers", "line_range", "old_span"]

_LONE_LF = re.compile(r"(?<!\r)\n")


def line_range(rel: str, total: int, offset: int | None, limit: int | None) -> tuple[int, int]:
    start = 1 if offset is None else offset
    if start < 1:
        raise RangeError(f"{rel}: offset must be 1 or more (the first line is 1), got {offset}")
    if limit is not None and limit < 1:
        raise RangeError(f"{rel}: limit must be 1 or more, got {limit}")
    if start > max(total, 1):
        raise RangeError(
            f"{rel}: offset {start} is past the end; the file has {total} line"
            f"{'s' if total != 1 else ''}"
        )
    end = total if limit is None else min(total, start + limit - 1)
    return start, end


def old_span(
    ops: Sequence[tuple[str, int, int, int, int]], start: int, end: int
) -> tuple[int, int]:
    """Lines ``start..end`` of the new side as a 1-based range of the old side."""

    def old_line(x: int, first: bool) -> int:
        for tag, a0, a1, b0, b1 in ops:
            if b0 <= x - 1 < b1:
                if tag == "equal":
                    return a0 + (x - 1 - b0) + 1
                return a0 + 1 if first else a1
        return 0

    return old_line(start, True), old_line(end, False)


def changed_lines(old: list[str], new: list[str]) -> str:
    """Where an edit landed, in the new file's line numbers (so the model can place it)."""
    spans = [(b0 + 1, b1) for tag, _, _, b0, b1 in diff_lines(old, new) if tag != "equal"]
    if not spans:
        return ""
    shown = [
        f"lines {s}-{e}" if e > s else (f"line {s}" if e == s else f"lines removed before line {s}")
        for s, e in spans
    ]
    more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
    return "; changed: " + ", ".join(shown[:3]) + more


def check_markers(rel: str, old: str, new: str) -> None:
    for marker in MARKERS:
        if new.count(marker) > old.count(marker):
            raise MarkerError(
                f"{rel}: the new content contains {marker!r}, filecache's own answer text; "
                "write the file's real content (read it with fresh=true to see it)"
            )


def apply_edit(
    rel: str, text: str, old: str, new: str, replace_all: bool
) -> tuple[str, list[Piece], int]:
    """Apply one replacement; returns the text, its pieces (provenance) and the count."""
    if not old:
        raise EditError(f"{rel}: old_string is empty; use write to create or replace a file")
    if old == new:
        raise EditError(f"{rel}: old_string and new_string are the same; nothing to change")
    if "\r\n" in text and text.count("\n") == text.count("\r\n"):
        # A CRLF file edited with LF strings: match and write CRLF, as the file has (also
        # for a new_string that adds lines to an old_string without any).
        old, new = _LONE_LF.sub("\r\n", old), _LONE_LF.sub("\r\n", new)
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # Mixed line endings: an LF old_string may still match a CRLF stretch.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise EditError(
            f"{rel}: old_string not found; read the file again (fresh=true) and copy the exact "
            "text, including whitespace"
        )
    if count > 1 and not replace_all:
        raise EditError(
            f"{rel}: old_string occurs {count} times; pass replace_all=true or include more "
            "context to make it unique"
        )
    pieces: list[Piece] = []
    out: list[str] = []
    pos = 0
    while True:
        at = text.find(old, pos)
        if at < 0:
            break
        pieces.append(Piece(at - pos, pos))
        pieces.append(Piece(len(new), None))
        out.append(text[pos:at])
        out.append(new)
        pos = at + len(old)
    pieces.append(Piece(len(text) - pos, pos))
    out.append(text[pos:])
    return "".join(out), pieces, count
