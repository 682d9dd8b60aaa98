"""Superseded shell output: a command's old result once the same command ran again (pure).

Agents that work through a shell re-run the same commands: the test suite after each fix, the
same ``grep`` or ``ls`` after an edit. The older output of a command run again later is stale
history (the later run shows what holds now), so ``superseded_outputs`` names it a candidate of
the supersession pass, with the later run as its reason; whether clearing it pays for the
cache it invalidates is the cost gate's decision, as for every other candidate.

Invariants:
- Only results of tools that are no file tool (``Tool.OTHER``) and whose call has a command
  argument (``command``/``cmd``); the same command means the same text once whitespace runs
  are folded, in a later call of the same tool whose result is not an error.
- A command that changes files, or whose output is a file's content that filecache served
  (a FileRef or diff names the result: keep-alive), is judged like any other here; the planner's
  keep-alive pass keeps what a later answer relies on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from filecache.core.kinds import Kind, Tool
from filecache.prune.codecs.base import ToolCall
from filecache.prune.results import ResultInfo

__all__ = ["command_of", "superseded_outputs"]

_COMMAND_KEYS = ("command", "cmd")


def command_of(call: ToolCall) -> str | None:
    """The call's command line, whitespace folded (None: no command argument)."""
    for key in _COMMAND_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = " ".join(value)  # Codex's exec: an argv list
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def superseded_outputs(
    infos: Sequence[ResultInfo], calls: Mapping[str, ToolCall]
) -> dict[str, str]:
    """call id -> why its output is superseded: the same command ran again later."""
    latest: dict[tuple[str, str], str] = {}  # (tool, command) -> the newest run's call id
    why: dict[str, str] = {}
    for info in reversed(infos):
        call = calls.get(info.call_id)
        if call is None or info.kind != Tool.OTHER:
            continue
        command = command_of(call)
        if command is None:
            continue
        key = (call.name, command)
        later = latest.get(key)
        if later is not None and info.tier != "clear":
            why[info.call_id] = f"superseded by a later run of the same command {later}"
        if info.answer != Kind.ERROR:
            latest[key] = info.call_id
    return why
