"""Codex's rollout file (``transcript_path``): what the model's context still holds (pure).

Codex records every session as JSON lines under ``$CODEX_HOME/sessions/…/rollout-….jsonl`` and
rebuilds the model's input from it on resume. The lines that shape the context:

- ``{"type": "response_item", "payload": ITEM}``: ITEM joins the history (``function_call``,
  ``custom_tool_call``, their ``*_output``, messages).
- ``{"type": "compacted", "payload": {"replacement_history": [ITEM…]}}``: compaction replaced
  the whole history with those items (a summary; no tool output unless Codex kept it there).
- ``{"type": "event_msg", "payload": {"type": "thread_rolled_back", …}}``: a rewind; what stays
  is not recomputed here, so everything before it counts as gone (the safe side).
- ``{"type": "event_msg", "payload": {"type": "item_completed", "item": …}}``: how a call ended
  (a ``CommandExecution`` carries ``exit_code``, ``status``, ``cwd``; a ``FileChange`` its
  ``status``). It is written before Codex runs the PostToolUse hooks of that call.

``read_rollout`` gives the ids whose results the model still holds (an output in the current
history that Codex did not truncate), the calls of the history still waiting for their output
(the turn in progress: parallel calls whose hooks run now), and how the calls asked about ended.

Cheap by construction (a long session's rollout is hundreds of MB, and a hook runs for every
call): a ``response_item`` line is matched on its bytes (its type and call id, and a substring
test for Codex's truncation marks), never decoded; a line is JSON-decoded only when it is a
compaction, a rewind, the end of a call, or does not have the compact shape Codex writes. The
file is read a line at a time (``regular_files.complete_lines``: a line over ``MAX_LINE`` is
skipped like a malformed one, a line being written is left for the next call), and a process
that reads the same rollout again (the resident hook server) reads only what was appended since
(``_Reader``, kept per file: the history's call ids and the ends of the latest calls, never the
outputs); a rollout rewritten, truncated or replaced (other inode, or other bytes at the probe
points: ``regular_files.probe``) is read again from its start.

Concurrency: one reader per file, used under its own lock (parallel calls of one context read
their rollout in turn: the second reads only what the first left); the table of readers under
``_READERS_LOCK``.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["Rollout", "read_rollout", "truncated"]

_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_CALLS = ("function_call", "custom_tool_call")
# What Codex puts into an output it shortened for the model (codex-rs truncation):
# "Warning: truncated output (original token count: N)" and "…N tokens truncated…".
_TRUNCATION_MARKS = ("tokens truncated…", "Warning: truncated output", "chars truncated…")


def truncated(output: str) -> bool:
    """Codex cut this output before the model saw it: it backs no fact."""
    return any(mark in output for mark in _TRUNCATION_MARKS)


@dataclass(frozen=True)
class Ended:
    """How a call ended, from its ``item_completed`` event."""

    status: str
    exit_code: int | None
    cwd: str | None


@dataclass
class Rollout:
    """What ``read_rollout`` found (see the module docstring)."""

    held: set[str] = field(default_factory=set)
    pending: set[str] = field(default_factory=set)
    ended: dict[str, Ended] = field(default_factory=dict)
    compactions: int = 0

    @property
    def present(self) -> set[str]:
        """The ids a FileRef may rely on: results still held, and calls still in progress."""
        return self.held | self.pending


# Codex writes each line as compact JSON with the payload's "type" first: these find what is
# needed without decoding a line (a line they do not fit is decoded in full instead).
_RESPONSE_ITEM = re.compile(
    rb'^\{(?:"timestamp":"[^"]*",)?(?:"ordinal":\d+,)?"type":"response_item",'
    rb'"payload":\{"type":"(\w+)"'
)
_GROWTH = 16 << 20  # bytes read past the size at the open, at most (a rollout still growing)
_CALL_ID = re.compile(rb'"call_id":"([^"\\]*)"')
# As the bytes of a JSON line: raw UTF-8 (serde_json) or \u-escaped.
_MARKS = tuple({mark.encode(), json.dumps(mark)[1:-1].encode()} for mark in _TRUNCATION_MARKS)
_MARK_BYTES = tuple(b for marks in _MARKS for b in marks)


def read_rollout(path: str | Path, calls: Iterable[str] = ()) -> Rollout | None:
    """The rollout at ``path`` as the model's context sees it, with how each call of ``calls``
    ended, or None when it cannot be read (the caller then relies on nothing it cannot check).
    """
    from filecache.adapters.hosts.regular_files import open_regular

    key = os.fsdecode(os.path.abspath(path))
    try:
        rollout, size = open_regular(path)  # a FIFO or a device: refused at once
        with rollout:
            st = os.fstat(rollout.fileno())
            with _READERS_LOCK:
                reader = _READERS.pop(key, None) or _Reader()
                _READERS[key] = reader  # the newest last: the oldest goes first
                while len(_READERS) > _MAX_READERS:
                    _READERS.pop(next(iter(_READERS)))
            with reader.lock:
                # Codex may still be appending this call's end: read a little past the size.
                reader.update(rollout, st, size + _GROWTH)
                return reader.rollout(calls)
    except OSError:
        return None


class _Reader:
    """What was read of one rollout: the history's calls and outputs (call ids and whether
    Codex truncated the output), the ends of the latest calls, and where reading stopped."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        self.offset = 0
        self.inode: tuple[int, int] | None = None
        self.probe: list[str] = []
        self.calls: dict[str, None] = {}  # the history's calls, in order
        self.outputs: dict[str, bool] = {}  # the history's outputs: truncated by Codex
        self.ended: dict[str, Ended] = {}  # the latest _MAX_ENDED calls' ends
        self.compactions = 0

    def update(self, rollout: BinaryIO, st: os.stat_result, end: int) -> None:
        from filecache.adapters.hosts.regular_files import complete_lines, probe

        inode = (st.st_dev, st.st_ino)
        if self.offset and (
            inode != self.inode
            or self.offset > st.st_size
            or probe(rollout, self.offset) != self.probe
        ):
            self._start()  # rewritten or replaced: read from its start
        self.inode = inode
        offset = self.offset
        for line, after in complete_lines(rollout, offset, end):
            if line is not None:
                self._line(line)
            self.offset = after
        if self.offset != offset:
            self.probe = probe(rollout, self.offset)

    def _history(self, items: list[tuple[str, str, bool]]) -> None:
        for kind, call_id, cut in items:
            if kind in _OUTPUTS:
                self.outputs[call_id] = cut
            else:
                self.calls[call_id] = None

    def _line(self, raw: bytes) -> None:
        fast = _RESPONSE_ITEM.match(raw)
        if fast is not None:
            kind = fast.group(1).decode()
            if kind in _OUTPUTS or kind in _CALLS:
                cid = _CALL_ID.search(raw, fast.end())
                if cid is not None:
                    cut = (
                        kind in _OUTPUTS
                        and b"truncat" in raw
                        and any(mark in raw for mark in _MARK_BYTES)
                    )
                    self._history([(kind, cid.group(1).decode(), cut)])
            return
        if not (
            b'"response_item"' in raw
            or b'"compacted"' in raw
            or b'"thread_rolled_back"' in raw
            or b'"item_completed"' in raw
        ):
            return
        try:
            line = json.loads(raw)
        except ValueError:
            return  # not JSON: skipped
        if not isinstance(line, dict) or not isinstance(line.get("payload"), dict):
            return
        kind, payload = line.get("type"), line["payload"]
        if kind == "response_item":
            self._history(_items([payload]))
        elif kind == "compacted":
            replacement = payload.get("replacement_history")
            self.calls, self.outputs = {}, {}
            self._history(_items(replacement) if isinstance(replacement, list) else [])
            self.compactions += 1
        elif kind == "event_msg" and payload.get("type") == "thread_rolled_back":
            self.calls, self.outputs = {}, {}
        elif kind == "event_msg" and payload.get("type") == "item_completed":
            _ended(self.ended, payload.get("item"))
            while len(self.ended) > _MAX_ENDED:
                self.ended.pop(next(iter(self.ended)))

    def rollout(self, calls: Iterable[str]) -> Rollout:
        found = Rollout(compactions=self.compactions)
        found.held = {c for c, cut in self.outputs.items() if not cut}
        found.pending = {c for c in self.calls if c not in self.outputs}
        found.ended = {c: self.ended[c] for c in calls if c in self.ended}
        return found


_READERS: dict[str, _Reader] = {}
_READERS_LOCK = threading.Lock()
_MAX_READERS = 16  # a reader holds a long session's call ids (a few MB at 50k calls)
_MAX_ENDED = 4096


def _items(items: list[Any]) -> list[tuple[str, str, bool]]:
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("call_id"), str):
            continue
        kind = item.get("type")
        if kind in _OUTPUTS:
            out.append((kind, item["call_id"], truncated(_text(item.get("output")))))
        elif kind in _CALLS:
            out.append((kind, item["call_id"], False))
    return out


def _ended(ended: dict[str, Ended], item: Any) -> None:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        return
    code = item.get("exit_code")
    cwd = item.get("cwd")
    if isinstance(cwd, str) and cwd.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        cwd = unquote(urlsplit(cwd).path)
    ended.pop(item["id"], None)  # the newest last
    ended[item["id"]] = Ended(
        str(item.get("status", "")),
        code if isinstance(code, int) else None,
        cwd if isinstance(cwd, str) else None,
    )


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    if isinstance(output, dict):
        return _text(output.get("content"))
    return ""
