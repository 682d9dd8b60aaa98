"""A tool result as the prune planner sees it: ``ResultInfo``.

Pure, a record only. ``pruning.collect`` makes one of each result of a transcript (with the
ledger's answer); ``pruning`` (what becomes of results) and ``input_pruning`` (what becomes of
the model's own inputs) both decide from it, each by itself: neither hands the other a function
to call back, and neither restates the record as a protocol. When two of its paths name one
file: ``file_tools.same_path`` and ``same_written``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ResultInfo"]


@dataclass(frozen=True, kw_only=True)
class ResultInfo:
    """A tool result as the planner sees it."""

    call_id: str
    message_index: int
    tool: str
    kind: str  # read / write / edit / change / other
    path: str | None
    start: int
    end: int | None
    version: str | None
    answer: str  # the ledger's kind of answer (full, unchanged, ...), "" when unknown
    base_call_id: str | None
    tokens: int
    text: str
    tier: str  # what it already is: keep / outline / truncate / clear
    command: str = ""  # a short form of the call's arguments, for placeholders
    original: str = ""  # the result's text in the transcript, when ``text`` is a projection
    deps: tuple[str, ...] = ()  # every result an unchanged/diff answer relies on (ledger)
