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

Cheap by construction (a long session's rollout is megabytes, read on every hook): a
``response_item`` line is matched on its bytes (its type and call id, and a substring test for
Codex's truncation marks), never decoded; a line is JSON-decoded only when it is a compaction, a
rewind, the end of a call asked about, or does not have the compact shape Codex writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
_SEPS = ((",", ":"), (", ", ": "))  # how an "id" key may be written: compact, or spaced
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

    try:
        rollout, size = open_regular(path)  # a FIFO or a device: refused at once
        with rollout:
            data = rollout.read(size + _GROWTH)  # Codex may still be appending this call's end
    except OSError:
        return None
    wanted = set(calls)
    ids = [json.dumps({"id": c}, separators=sep)[1:-1].encode() for c in wanted for sep in _SEPS]
    history: list[tuple[str, str, bool]] = []  # (item type, call id, truncated output)
    found = Rollout()
    for raw in data.split(b"\n"):
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
                    history.append((kind, cid.group(1).decode(), cut))
            continue
        if not (
            b'"response_item"' in raw
            or b'"compacted"' in raw
            or b'"thread_rolled_back"' in raw
            or (b'"item_completed"' in raw and any(c in raw for c in ids))
        ):
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # a line being written as we read: the next hook sees it whole
        if not isinstance(line, dict) or not isinstance(line.get("payload"), dict):
            continue
        kind, payload = line.get("type"), line["payload"]
        if kind == "response_item":
            history.extend(_items([payload]))
        elif kind == "compacted":
            replacement = payload.get("replacement_history")
            history = _items(replacement) if isinstance(replacement, list) else []
            found.compactions += 1
        elif kind == "event_msg" and payload.get("type") == "thread_rolled_back":
            history = []
        elif kind == "event_msg" and payload.get("type") == "item_completed":
            _ended(found, payload.get("item"), wanted)
    outputs: dict[str, bool] = {}
    for item, call_id, cut in history:
        if item in _OUTPUTS:
            outputs[call_id] = cut
    found.held = {c for c, cut in outputs.items() if not cut}
    found.pending = {c for item, c, _ in history if item in _CALLS and c not in outputs}
    return found


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


def _ended(found: Rollout, item: Any, wanted: set[str]) -> None:
    if not isinstance(item, dict) or item.get("id") not in wanted:
        return
    code = item.get("exit_code")
    cwd = item.get("cwd")
    if isinstance(cwd, str) and cwd.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        cwd = unquote(urlsplit(cwd).path)
    found.ended[item["id"]] = Ended(
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
