"""What a read or a write answers: frozen records, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from filecache.core.records import record

__all__ = ["Kind", "ReadResult", "Source", "WriteResult"]


class Kind(StrEnum):
    """The kind of an answer (and of a ledger row); equal to its plain string value."""

    FULL = "full"
    PARTIAL = "partial"
    UNCHANGED = "unchanged"
    DIFF = "diff"
    OUTLINE = "outline"
    SYMBOL = "symbol"
    WRITTEN = "written"
    EDITED = "edited"
    CHANGED = "changed"
    ERROR = "error"
    WITHDRAWN = "withdrawn"  # a ``forget`` row: answers the caller did not send (``deps``)


@record(kw_only=True)
class ReadResult:
    """The answer to a read. ``text`` is what the model sees; the rest is for programs.

    Attributes:
        kind: ``full`` | ``partial`` | ``unchanged`` | ``diff`` (``outline``/``symbol`` too).
        text: the model-facing text.
        path: the path relative to the root.
        version: ``xxh3:<hex>`` of the whole file as read.
        call_id: this call's id (given or generated ``fc-…``).
        base_call_id: the newest earlier result an ``unchanged``/``diff`` answer relies on.
        tokens: tokens of ``text``.
        tokens_full: tokens the plain read (same range, same format) would have cost.
        start: first line of the range answered (1-based).
        end: last line of the range (inclusive; 0 for an empty file).
        line_count: lines in the file.
    """

    kind: str
    text: str
    path: str
    version: str
    call_id: str
    base_call_id: str | None
    tokens: int
    tokens_full: int
    start: int
    end: int
    line_count: int

    def __str__(self) -> str:
        return self.text


@record(kw_only=True)
class WriteResult:
    """The answer to a write or an edit: ``kind`` is ``written`` or ``edited``."""

    kind: str
    text: str
    path: str
    version: str
    base_version: str | None
    call_id: str
    tokens: int

    def __str__(self) -> str:
        return self.text


@record(kw_only=True)
class Source:
    """Text to answer from: a file as read, or a decorated tool's output."""

    key: str
    path: str
    version: str
    lines: Sequence[str]  # a ``text.LineWindow`` for a streamed range of a large file
    numbered: bool
    output: str | None = None  # a decorated tool's exact output (its content rendering)
