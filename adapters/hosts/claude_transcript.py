"""What a Claude Code model context still holds, read from its transcript (``transcript_path``).

Claude Code appends one JSON object a line to ``~/.claude/projects/<project>/<session>.jsonl``.
The conversation is a chain: each message entry (``user``, ``assistant``, ``attachment``,
``system``) has a ``uuid`` and a ``parentUuid``; the model's context is the chain from the
newest entry back to the root, and a compaction writes a ``system``/``compact_boundary`` entry
whose ``parentUuid`` is null (its ``logicalParentUuid`` names the old chain), so the walk stops
there. ``/rewind`` starts a new branch from an earlier message: the abandoned branch is no
longer on the chain. Parallel tool calls of one assistant turn are written as one assistant
entry per ``tool_use``, chained, with each ``tool_result`` entry parented to its own
``tool_use`` entry: a result is on the live context when its entry or its parent is on the
chain.

A call's result is held when all of these hold (anything else: not held, so filecache sends
content again, never a FileRef to it):
- its ``tool_use`` is on the live chain (after the last compaction, not on a rewound branch);
- its ``tool_result`` is there, not an error, and not replaced by Claude Code: the cleared
  placeholder (``[Old tool result content cleared]``), a ``<persisted-output>`` preview, or
  Claude Code's own "file unchanged" stub (which holds no content of its own);
- no ``microcompact_boundary`` entry lists it in ``compactedToolIds``;
- the requests are not sent with API-side tool-result clearing (``context_management`` edit
  ``clear_tool_uses_*``): then the server may drop any old result without a trace here, and
  only the calls of the turn in progress are held.

Calls of the turn in progress (a ``tool_use`` after the last prompt whose result is not written
yet: the hook runs before Claude Code writes it, and parallel calls run together) count as
held: their results are on their way to the model.

Pure: bytes in, a frozen ``Held`` out (``held_calls``); ``read_held`` is the file edge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CLEARED", "STUB_PREFIXES", "Held", "held_calls", "is_stub", "read_held"]

CLEARED = "[Old tool result content cleared]"
PERSISTED = "<persisted-output>"
# Claude Code's own answers to a re-read of an unchanged file (2.1.86+ dedup): they point at an
# earlier result and carry no content themselves.
STUB_PREFIXES = (
    "File unchanged since last read.",
    "Wasted call \u2014 file unchanged since your last Read.",
    "<system-reminder>This file is already in your context",
)
_MESSAGE_TYPES = frozenset({"user", "assistant", "attachment", "system"})


@dataclass(frozen=True)
class Held:
    """The call ids whose results the model's context holds, and those of the turn in progress
    (``pending``: included in ``ids``). ``complete``: the transcript was read and understood
    (False: nothing can be known to be held but the pending calls)."""

    ids: frozenset[str]
    pending: frozenset[str]
    complete: bool = True


def is_stub(text: str) -> bool:
    """Claude Code's own "file unchanged" stub (it holds no content)."""
    return text.startswith(STUB_PREFIXES)


def read_held(path: str | Path | None, *, current: str | None = None) -> Held:
    """``held_calls`` of the transcript file at ``path``; an unreadable or missing one holds
    only ``current``."""
    extra = frozenset({current} if current else ())
    if not path:
        return Held(extra, extra, complete=False)
    try:
        data = Path(path).read_bytes()
    except OSError:
        return Held(extra, extra, complete=False)
    held = held_calls(data.splitlines())
    return Held(held.ids | extra, held.pending | extra, held.complete)


def _result_holds(block: dict[str, Any]) -> bool:
    if block.get("is_error"):
        return False
    content = block.get("content")
    if isinstance(content, str):
        return not (content == CLEARED or content.startswith(PERSISTED) or is_stub(content))
    if isinstance(content, list):
        texts = [str(part.get("text", "")) for part in content if isinstance(part, dict)]
        first = texts[0] if texts else ""
        return not (first == CLEARED or first.startswith(PERSISTED) or is_stub(first))
    return content is None


def _blocks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _message_id(entry: dict[str, Any]) -> str | None:
    message = entry.get("message")
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str) and value else None


def _is_prompt(entry: dict[str, Any]) -> bool:
    """A user entry that starts a turn (typed text, not a tool result or Claude Code's own)."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isCompactSummary"):
        return False
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return True
    return isinstance(content, list) and not any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def _clears_tool_results(entry: dict[str, Any]) -> bool:
    params = entry.get("params")
    management = params.get("context_management") if isinstance(params, dict) else None
    edits = management.get("edits") if isinstance(management, dict) else None
    return isinstance(edits, list) and any(
        isinstance(e, dict) and "clear_tool_uses" in str(e.get("type", "")) for e in edits
    )


def held_calls(lines: Iterable[bytes | str]) -> Held:
    """What the model's context holds, from the transcript's lines (see the module docstring).
    Lines that are not JSON objects are skipped (a line being written is cut short)."""
    entries: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    compacted: set[str] = set()
    clearing = False
    for line in lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind == "api-request":
            clearing = _clears_tool_results(entry)  # the newest request's settings
            continue
        if kind == "system" and entry.get("subtype") == "microcompact_boundary":
            meta = entry.get("microcompactMetadata")
            ids = meta.get("compactedToolIds") if isinstance(meta, dict) else None
            if isinstance(ids, list):
                compacted.update(str(i) for i in ids)
        uuid = entry.get("uuid")
        if kind not in _MESSAGE_TYPES or not isinstance(uuid, str) or entry.get("isSidechain"):
            continue
        if uuid not in entries:
            order.append(uuid)
        entries[uuid] = entry
    if not order:
        return Held(frozenset(), frozenset())

    chain: list[str] = []  # leaf first
    on_chain: set[str] = set()
    cursor: str | None = order[-1]
    while cursor is not None and cursor in entries and cursor not in on_chain:
        chain.append(cursor)
        on_chain.add(cursor)
        parent = entries[cursor].get("parentUuid")
        cursor = parent if isinstance(parent, str) else None

    # Parallel calls: one assistant entry per tool_use of one response (same message id),
    # chained; the next message hangs under whichever result was written last, so a sibling
    # may be off the walked chain. Each sibling whose parent is on the chain is on it too.
    position_of = {uuid: pos for pos, uuid in enumerate(reversed(chain))}
    responses = {
        _message_id(entries[uuid]): pos
        for uuid, pos in position_of.items()
        if entries[uuid].get("type") == "assistant" and _message_id(entries[uuid])
    }
    for uuid in order:
        entry = entries[uuid]
        if uuid in on_chain or entry.get("type") != "assistant":
            continue
        response = _message_id(entry)
        if response in responses and entry.get("parentUuid") in on_chain:
            on_chain.add(uuid)
            position_of[uuid] = responses[response]

    uses: dict[str, int] = {}  # tool_use id -> position on the chain (0: oldest)
    last_prompt = -1
    for uuid, position in position_of.items():
        entry = entries[uuid]
        if _is_prompt(entry):
            last_prompt = max(last_prompt, position)
        if entry.get("type") == "assistant":
            for block in _blocks(entry):
                if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    uses[block["id"]] = position

    results: dict[str, bool] = {}
    for uuid in order:
        entry = entries[uuid]
        if entry.get("type") != "user":
            continue
        live = uuid in on_chain or entry.get("parentUuid") in on_chain
        for block in _blocks(entry):
            if block.get("type") != "tool_result":
                continue
            call = block.get("tool_use_id")
            if isinstance(call, str) and call in uses:
                holds = live and _result_holds(block)
                results[call] = holds and results.get(call, True)

    pending = frozenset(c for c, pos in uses.items() if c not in results and pos > last_prompt)
    if clearing:
        return Held(pending, pending)
    done = frozenset(c for c, holds in results.items() if holds and c not in compacted)
    return Held(done | pending, pending)
