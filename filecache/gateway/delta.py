"""Delta reads inside one request: a result whose lines an earlier result shows becomes a FileRef
naming it, or a diff from it (pure).

``plan_delta`` walks the request's tool results in order. For each result that shows lines of a
file (``shown.shown_by``) it asks, using only the results before it and their ORIGINAL text:

1. Is there an earlier result of the request, sent as content, that shows every one of these
   lines with the same text (compared line by line)? Then a FileRef naming the oldest such
   result (its bytes are the most stable), when the FileRef is clearly smaller.
2. Else, is there an earlier content result of the same file, asked the same way (the same range
   arguments or command), whose lines differ? Then a unified diff from that result's lines to
   these, when clearly smaller (``DIFF_RATIO``). Applying it to the earlier lines gives these.
3. Else the result stays as it is.

An edit's result that shows the model's own new text in a snippet of the file names those rows
instead (``edit_echo``; ``echoes``: the transform keeps those calls' inputs unpruned).

Escape hatch: a read that comes right after a FileRef or diff for the same file (the model read
again) is always left as content. A host's own dedup stub (Claude Code's "File unchanged since
last read", ...) names no id; ``pins`` maps it to the content result of its file it relies on,
so pruning keeps that one.

Invariants: the decision for a result depends only on the results before it, their original
text, and ``unusable`` (results whose content is not in the request as sent: pruned); decisions
are remembered (``DeltaMemo``) so they repeat byte for byte in later requests even when an
earlier base is pruned afterwards. Every FileRef/diff names a result of this request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

import xxhash

from filecache.core.diffing import Hunk, diff_lines, unified_hunks
from filecache.core.render import (
    gateway_bases,
    gateway_diff,
    gateway_file_ref,
    gateway_file_refs,
)
from filecache.gateway.edit_echo import Echo, echo_of
from filecache.gateway.shown import UNKNOWN, Shown, changed_path, shown_by
from filecache.prune.codecs.base import ToolCall, ToolResult, Transcript
from filecache.prune.file_tools import file_access

__all__ = ["DIFF_RATIO", "STUB_PREFIXES", "Delta", "DeltaMemo", "digest", "is_stub", "plan_delta"]

DIFF_RATIO = 0.5
"""A diff or FileRef replaces content only when at most this fraction of its length."""
MIN_LINES_TEXT = 200
"""Results shorter than this (characters) are never rewritten: nothing to win."""
STUB_PREFIXES = (
    "File unchanged since last read.",
    "Wasted call \u2014 file unchanged since your last Read.",
    "<system-reminder>This file is already in your context",
)
"""Claude Code's own answers to a re-read of an unchanged file (2.1.86+); they name no id."""


def is_stub(text: str) -> bool:
    """Whether ``text`` is a host's own "file unchanged" stub."""
    return text.startswith(STUB_PREFIXES)


def digest(*parts: str) -> str:
    """A short stable digest of texts (the memo keys; across processes and machines)."""
    h = xxhash.xxh3_64()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


class DeltaMemo(Protocol):
    """Remembered decisions of one conversation: call id + digest of its original -> the text
    sent instead ("" for "left as content"), or None when not decided yet."""

    def get(self, call_id: str, key: str) -> str | None: ...
    def put(self, call_id: str, key: str, text: str) -> None: ...


@dataclass
class Delta:
    """What ``plan_delta`` decided: call id -> text to send; call id -> the text the pruning
    planner should see (a reference without the host's frame); stub call id -> base call id;
    the counts."""

    sent: dict[str, str] = field(default_factory=dict)
    planned: dict[str, str] = field(default_factory=dict)
    pins: dict[str, str] = field(default_factory=dict)
    bases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # call id -> what it names
    kinds: dict[str, str] = field(default_factory=dict)  # call id -> "ref" | "diff" | "echo"
    reads: int = 0
    echoes: set[str] = field(default_factory=set)  # edits whose result names their own input


class _Lru:
    """A bounded memo shared by the threads of a server (one lock; values are immutable)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[object, object] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: object) -> tuple[bool, object]:
        with self.lock:
            if key not in self.items:
                return False, None
            self.items.move_to_end(key)
            return True, self.items[key]

    def put(self, key: object, value: object) -> None:
        with self.lock:
            self.items[key] = value
            if len(self.items) > self.size:
                self.items.popitem(last=False)


_SHOWN = _Lru(8192)  # (digest of call and result, cwd) -> Shown | None
_CHANGED = _Lru(8192)  # (name, arguments, cwd) -> changed_path
_ECHOES = _Lru(8192)  # digest of call and result -> Echo | None


def _shown(call: ToolCall, result: ToolResult, cwd: str | None, key: str) -> Shown | None:
    hit, found = _SHOWN.get((key, cwd))
    if not hit:
        found = shown_by(call, result.text, cwd)
        _SHOWN.put((key, cwd), found)
    return found if isinstance(found, Shown) else None


def _echo(call: ToolCall, result: ToolResult, key: str) -> Echo | None:
    """``edit_echo.echo_of``, memoised (a function of the call and its result)."""
    hit, found = _ECHOES.get(key)
    if not hit:
        found = echo_of(call, result.text)
        _ECHOES.put(key, found)
    return found if isinstance(found, Echo) else None


def _changed(call: ToolCall, cwd: str | None) -> str | None:
    """``changed_path``, memoised (a request repeats every call of the ones before)."""
    memo = (call.name, call.raw_arguments, cwd)
    hit, found = _CHANGED.get(memo)
    if not hit:
        found = changed_path(call, cwd)
        _CHANGED.put(memo, found)
    return found if isinstance(found, str) else None


def _same_lines(shown: Shown, base: Shown) -> bool:
    if shown.start < base.start or shown.end > base.end:
        return False
    k = shown.start - base.start
    return base.lines[k : k + len(shown.lines)] == shown.lines


@dataclass(frozen=True)
class _Answered:
    kind: str  # "ref" | "diff"
    window: str
    start: int
    end: int


def _again(last: _Answered | None, shown: Shown) -> bool:
    """Whether the model reads again what it was just given a FileRef or diff for (the way
    out: it gets the content): the same read again, or lines inside the FileRef's. A read of
    other lines (a whole file after a FileRef of a part, a part after a diff) may be answered
    with references."""
    if last is None:
        return False
    if (last.window, last.start, last.end) == (shown.window, shown.start, shown.end):
        return True
    return last.kind == "ref" and last.start <= shown.start and shown.end <= last.end


def _shift(hunks: list[Hunk], by: int) -> list[Hunk]:
    return [Hunk(h.a_start + by, h.a_len, h.b_start + by, h.b_len, h.lines) for h in hunks]


def _frame(shown: Shown, answer: str) -> str:
    """The answer inside the host's frame around the lines (opencode's header and footer, a
    reminder after a Read)."""
    if not shown.prefix and not shown.suffix:
        return answer
    return shown.prefix + answer.rstrip("\n") + shown.suffix


def _raw_lines(shown: Shown, text: str) -> tuple[str, ...] | None:
    """The result's own lines for ``shown.lines`` (in the host's form: numbered for a Read),
    or None when they do not map one to one."""
    if not text.startswith(shown.prefix) or not text.endswith(shown.suffix):
        return None
    body = text[len(shown.prefix) : len(text) - len(shown.suffix)]
    rows = body.split("\n")
    if rows and rows[-1] == "" and len(rows) == len(shown.lines) + 1:
        rows.pop()
    return tuple(rows) if len(rows) == len(shown.lines) else None


def _cover(shown: Shown, held: list[tuple[str, Shown]]) -> list[tuple[int, int, str | None]]:
    """Segments (first, last, base or None) of ``shown``'s lines: each run of lines an earlier
    content result shows with the same text at the same line numbers named by the result that
    shows the longest run from there (the oldest among equals: its bytes are the most stable);
    None for lines no earlier result shows so."""
    out: list[tuple[int, int, str | None]] = []
    n = shown.start
    while n <= shown.end:
        best, best_end = None, n - 1
        for base_id, base in held:  # oldest first: a later one must show a longer run
            m = n
            while m <= shown.end and base.line(m) == shown.line(m):
                m += 1
            if m - 1 > best_end:
                best, best_end = base_id, m - 1
        if best is None:
            if out and out[-1][2] is None:
                out[-1] = (out[-1][0], n, None)
            else:
                out.append((n, n, None))
            n += 1
        else:
            out.append((n, best_end, best))
            n = best_end + 1
    return out


def _decide(
    shown: Shown, held: list[tuple[str, Shown]], size: int, text: str
) -> tuple[str, tuple[str, ...]]:
    """The FileRef or diff to send instead (without the host's frame) and the results it
    names, or ("", ()) for content."""
    for base_id, base in held:  # oldest first
        if _same_lines(shown, base):
            ref = gateway_file_ref(shown.path, shown.start, shown.end, base_id)
            return (ref, (base_id,)) if len(ref) <= DIFF_RATIO * size else ("", ())
    for base_id, base in reversed(held):  # the newest content asked for the same way
        if base.window != shown.window or base.start != shown.start:
            continue
        ops = diff_lines(base.lines, shown.lines)
        hunks = _shift(unified_hunks(base.lines, shown.lines, ops), shown.start - 1)
        if not hunks:
            break
        diff = gateway_diff(shown.path, base_id, hunks, shown.start, shown.end)
        if len(diff) <= DIFF_RATIO * size:
            return diff, (base_id,)
        break
    return _several(shown, held, size, text)


def _several(
    shown: Shown, held: list[tuple[str, Shown]], size: int, text: str
) -> tuple[str, tuple[str, ...]]:
    """A FileRef naming several results, or naming results for some lines with the others as
    content (``render.gateway_file_refs``), when clearly smaller."""
    if not held:
        return "", ()
    segments = _cover(shown, held)
    bases = tuple(dict.fromkeys(b for _, _, b in segments if b is not None))
    if not bases:
        return "", ()
    content = ""
    if any(b is None for _, _, b in segments):
        rows = _raw_lines(shown, text)
        if rows is None:
            return "", ()
        content = "".join(
            "\n".join(rows[a - shown.start : b - shown.start + 1]) + "\n"
            for a, b, base in segments
            if base is None
        )
    ref = gateway_file_refs(shown.path, segments, content)
    return (ref, bases) if len(ref) <= DIFF_RATIO * size else ("", ())


def plan_delta(
    transcript: Transcript,
    *,
    cwd: str | None,
    unusable: frozenset[str] = frozenset(),
    memo: DeltaMemo | None = None,
) -> Delta:
    """The FileRefs and diffs of one request (module docstring)."""
    out = Delta()
    calls = transcript.calls_by_id()
    held: dict[str, list[tuple[str, Shown]]] = {}
    answered: dict[str, _Answered] = {}  # path -> our latest FileRef/diff of it
    last_read_of: dict[str, str] = {}  # a Read's path as the call gives it -> the result id
    for result in transcript.results():
        call = calls.get(result.call_id)
        if call is None or result.is_error or result.non_text_blocks:
            continue
        cid = result.call_id
        if is_stub(result.text):
            access = file_access(call)
            base = last_read_of.get(access.path) if access is not None else None
            if base is not None:
                out.pins[cid] = base
            continue
        key = digest(call.name, call.raw_arguments, result.text)
        shown = _shown(call, result, cwd, key)
        if shown is None:
            changed = _changed(call, cwd)
            if changed == UNKNOWN:
                answered.clear()
            elif changed is not None:
                answered.pop(changed, None)
                echo = _echo(call, result, key) if cid not in unusable else None
                if echo is not None:
                    out.sent[cid] = out.planned[cid] = echo.text
                    out.kinds[cid] = "echo"
                    out.echoes.add(cid)
            continue
        out.reads += 1
        access = file_access(call)
        remembered = memo.get(cid, key) if memo is not None else None
        if remembered is not None:
            text = remembered
        else:
            text = ""
            size = len(result.text)
            if (
                size >= MIN_LINES_TEXT
                and not _again(answered.get(shown.path), shown)
                and cid not in unusable
            ):
                usable = [(b, s) for b, s in held.get(shown.path, ()) if b not in unusable]
                text = _decide(shown, usable, size, result.text)[0]
            if memo is not None:
                memo.put(cid, key, text)
        kind, bases = gateway_bases(text) if text else ("", ())
        if bases:
            out.planned[cid] = text
            out.sent[cid] = _frame(shown, text)
            out.bases[cid] = bases
            out.kinds[cid] = "ref" if kind == "unchanged" else "diff"
            answered[shown.path] = _Answered(out.kinds[cid], shown.window, shown.start, shown.end)
        else:
            answered.pop(shown.path, None)
            if cid not in unusable:
                held.setdefault(shown.path, []).append((cid, shown))
                if access is not None:
                    last_read_of[access.path] = cid
    return out
