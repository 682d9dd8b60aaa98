"""Edit grounding: whether the model could see the old text of each edit it made.

For every recorded edit (``edit_file``: SWE-agent's ``str_replace``, Claude Code's ``Edit`` and
``MultiEdit``, OpenHands' ``str_replace``), the request the model answered when it made the
edit (the one before the assistant message that holds the call) is read the way
``replay_check`` reads it, and the edit is *grounded* when every line its old text spans in the
file as it was then is visible there:

- lines the model can rebuild from the request as sent (``replay_check.ModelView``: content,
  diffs applied to what it holds, FileRefs to results still there, its own writes and edits);
- lines a tool result as sent shows literally: numbered lines (``cat -n``, ``nl -ba``,
  filecache's content, SWE-agent's abbreviated view and edit snippets), a write's content, a
  shell read's output, and the signature lines of an outline (an outline that holds the lines
  counts). A cleared placeholder shows nothing.

A line is visible when a source shows it at its line number with the text it has on disk, or
when the old text's lines appear one after the other in one source (a view whose numbers an
edit above it has since moved).

An edit grounded in the recording but not in a run is *lost* there: a live model would have
read those lines again before editing. ``GroundingMeter`` charges each lost edit with that
re-read: the old text's lines, numbered as filecache's content is, in every request from the
edit's on until the edit's own call is pruned (billed: written to the cache once at 1.25x, then
read at 0.1x): the *net* prompt and billed figures.

Invariants:
- Pure: lines and texts in, counts out; the disk is read by ``replay.py`` (``EditTarget`` holds
  the file's lines as they were when the model made the edit).
- An edit whose old text is not in the file (it fails, or it follows another edit of the same
  call) is not counted.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from filecache.core.kinds import Kind
from filecache.errors import RequestError
from filecache.replay.policy_runs import Grounding
from filecache.replay.replay_check import FileCall, RecordedView
from filecache.replay.replay_metrics import CACHE_READ, CACHE_WRITE, MESSAGE_OVERHEAD
from filecache.replay.trace_format import edit_pairs

__all__ = [
    "EditTarget", "Grounding", "GroundingMeter", "edit_target", "grounded", "shown_lines",
]  # fmt: skip

Lines = dict[int, str]  # line number -> text without its "\n"

_ARROW_ROW = re.compile(r"^ *(\d+)\u2192(.*)$", re.M)
_OUTLINE_ROW = re.compile(r"^\s*(\d+)(?:-\d+)? (.*)$", re.M)  # "  12-40 def f(x):"


def shown_lines(call: FileCall, text: str) -> Lines:
    """The lines one tool result shows literally, as sent (``text``): see the module docstring.
    ``call.inner`` (a shell read's own output) is used only while ``text`` is the answer."""
    if text != call.text and call.inner is not None:
        call = dataclasses.replace(call, inner=None)
    view = RecordedView()
    view.feed(call, text)
    out = dict(view.lines.get(call.path, {}))
    for match in _ARROW_ROW.finditer(text):  # Claude Code's Read: "     1→text"
        out.setdefault(int(match.group(1)), match.group(2))
    first = text.partition("\n")[0]
    if call.kind == Kind.OUTLINE or " outline (" in first:
        for match in _OUTLINE_ROW.finditer(text):
            out.setdefault(int(match.group(1)), match.group(2))
    return out


@dataclass(frozen=True)
class EditTarget:
    """One edit call and what it needs to be grounded.

    Attributes:
        call_id, path: the edit call.
        blocks: per old text found in the file, its first line number and the file's lines
            it spans (without ``\\n``).
        tokens: what re-reading those lines costs (numbered as filecache's content, plus a
            message's overhead).
    """

    call_id: str
    path: str
    blocks: tuple[tuple[int, tuple[str, ...]], ...]
    tokens: int


def edit_target(
    call_id: str, args: Mapping[str, Any], lines: Sequence[str], count: Callable[[str], int]
) -> EditTarget | None:
    """The target of an edit of a file whose lines (each with its ``\\n``) are ``lines``;
    None when no old text of it is in the file."""
    try:
        pairs: Sequence[tuple[object, str]]
        pairs = edit_pairs(args)[0] if "edits" in args else [(args.get("old_string"), "")]
    except RequestError:
        return None
    text = "".join(lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    blocks: list[tuple[int, tuple[str, ...]]] = []
    spanned: set[int] = set()
    for old, _new in pairs:
        if not isinstance(old, str) or not old.strip():
            continue
        at = text.find(old)
        if at < 0:
            continue
        first = next(n for n in range(len(lines)) if starts[n + 1] > at)
        last = next(n for n in range(first, len(lines)) if starts[n + 1] >= at + len(old))
        blocks.append((first + 1, tuple(lines[n].rstrip("\n") for n in range(first, last + 1))))
        spanned.update(range(first, last + 1))
    if not blocks:
        return None
    numbered = "".join(f"{n + 1}\t{lines[n]}" for n in sorted(spanned))
    return EditTarget(call_id, str(args.get("path", "")), tuple(blocks),
                      count(numbered) + MESSAGE_OVERHEAD)  # fmt: skip


def _same(shown: str, disk: str) -> bool:
    disk = disk.rstrip("\r")
    return shown in (disk, disk.expandtabs()) or (
        bool(shown.strip()) and shown.strip() == disk.strip()
    )


def _contiguous(block: Sequence[str], source: Lines) -> bool:
    """The block's lines one after the other somewhere in ``source``."""
    for start in source:
        if all(
            start + k in source and _same(source[start + k], line) for k, line in enumerate(block)
        ):
            return True
    return False


def grounded(target: EditTarget, sources: Iterable[Lines]) -> bool:
    """Whether every old text of ``target`` is visible in ``sources`` (line -> text maps)."""
    sources = [s for s in sources if s]
    merged: Lines = {}
    for source in sources:
        merged.update(source)
    for first, block in target.blocks:
        at_place = all(
            first + k in merged and _same(merged[first + k], line) for k, line in enumerate(block)
        )
        if not at_place and not any(_contiguous(block, s) for s in sources):
            return False
    return True


class GroundingMeter:
    """Counts one run's edits and charges its lost ones, request by request."""

    def __init__(self) -> None:
        self.edits = self.grounded = self.lost = 0
        self.tokens = 0
        self.billed = 0.0
        self.ungrounded: list[str] = []
        self._pending: dict[str, tuple[int, bool]] = {}  # lost edit -> (tokens, charged once)

    def edit(self, target: EditTarget, seen: bool, seen_recorded: bool) -> None:
        """One edit at the coming request: ``seen`` here, ``seen_recorded`` in the recording."""
        self.edits += 1
        if seen:
            self.grounded += 1
            return
        lost = seen_recorded
        self.ungrounded.append(f"{'lost: ' if lost else ''}{target.call_id} ({target.path})")
        if lost:
            self.lost += 1
            self._pending[target.call_id] = (target.tokens, False)

    def request(self, pruned: Collection[str]) -> None:
        """One request: every lost edit's re-read is in it unless the edit's call is pruned."""
        for cid, (tokens, charged) in list(self._pending.items()):
            if cid in pruned:
                del self._pending[cid]
                continue
            self.tokens += tokens
            self.billed += tokens * (CACHE_READ if charged else CACHE_WRITE)
            self._pending[cid] = (tokens, True)

    def result(self) -> Grounding:
        return Grounding(
            self.edits, self.grounded, self.lost, self.tokens, self.billed, tuple(self.ungrounded)
        )
