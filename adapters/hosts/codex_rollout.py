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
(the turn in progress: parallel calls whose hooks run now), and per call how it ended.

Cheap by construction: a line is JSON-decoded only when its text names a type this module needs
(the big ``session_meta`` and ``world_state`` lines are skipped by a substring test).
"""

from __future__ import annotations

import json
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
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)
    ended: dict[str, Ended] = field(default_factory=dict)
    compactions: int = 0

    @property
    def present(self) -> set[str]:
        """The ids a FileRef may rely on: results still held, and calls still in progress."""
        return self.held | self.pending


def _needed(line: str) -> bool:
    return (
        '"response_item"' in line
        or '"compacted"' in line
        or '"item_completed"' in line
        or '"thread_rolled_back"' in line
    )


def read_rollout(path: str | Path) -> Rollout | None:
    """The rollout at ``path`` as the model's context sees it, or None when it cannot be read
    (the caller then relies on nothing it cannot check)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    history: list[dict[str, Any]] = []
    found = Rollout()
    for raw in data.decode("utf-8", "replace").splitlines():
        if not _needed(raw):
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # a line being written as we read: the next hook sees it whole
        if not isinstance(line, dict):
            continue
        kind, payload = line.get("type"), line.get("payload")
        if not isinstance(payload, dict):
            continue
        if kind == "response_item":
            history.append(payload)
        elif kind == "compacted":
            replacement = payload.get("replacement_history")
            history = [i for i in replacement if isinstance(i, dict)] if replacement else []
            found.compactions += 1
        elif kind == "event_msg" and payload.get("type") == "thread_rolled_back":
            history = []
        elif kind == "event_msg" and payload.get("type") == "item_completed":
            _ended(found, payload.get("item"))
    outputs: dict[str, str] = {}
    calls: list[str] = []
    for item in history:
        kind, call_id = item.get("type"), item.get("call_id")
        if not isinstance(call_id, str):
            continue
        if kind in _OUTPUTS:
            outputs[call_id] = _text(item.get("output"))
        elif kind in _CALLS:
            calls.append(call_id)
            if kind == "function_call":
                found.arguments[call_id] = _arguments(item.get("arguments"))
    found.held = {cid for cid, text in outputs.items() if not truncated(text)}
    found.pending = {cid for cid in calls if cid not in outputs}
    return found


def _ended(found: Rollout, item: Any) -> None:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
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


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    if isinstance(output, dict):
        return _text(output.get("content"))
    return ""
