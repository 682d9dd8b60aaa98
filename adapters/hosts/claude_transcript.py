"""What a Claude Code model context still holds, read from its transcript (``transcript_path``).

Claude Code appends one JSON object a line to ``~/.claude/projects/<project>/<session>.jsonl``.
The conversation is a chain: each message entry (``user``, ``assistant``, ``attachment``,
``system``) has a ``uuid`` and a ``parentUuid``; the model's context is the chain from the
newest entry back to the root, and a compaction writes a ``system``/``compact_boundary`` entry
whose ``parentUuid`` is null (its ``logicalParentUuid`` names the old chain), so the walk stops
there. Entries between messages that are not messages (``progress`` of hooks, Bash and agents,
on the chain in 2.1.12-2.1.42) pass the chain on to their parent. ``/rewind`` starts a new
branch from an earlier message: the abandoned branch is no longer on the chain. Parallel tool
calls of one assistant turn are written as one assistant entry per ``tool_use``, chained, with
each ``tool_result`` entry parented to its own ``tool_use`` entry: a result is on the live
context when its entry or its parent is on the chain.

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

Pure: lines in, a frozen ``Held`` out (``held_calls``; ``scan`` then ``held_of`` when the
scan is kept between hooks); ``claude_index.read_held`` is the file edge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "CLEARED",
    "STUB_PREFIXES",
    "Held",
    "Parsed",
    "State",
    "held_calls",
    "held_of",
    "is_stub",
    "new_state",
    "parse_line",
    "scan",
]

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
    (``pending``: included in ``ids``). ``known``: every call id the transcript names (on the
    chain or not): an id it does not name yet may be a parallel call whose entry Claude Code
    has not written when this hook reads it (it runs tools while the response still streams).
    ``complete``: the transcript was read and understood (False: nothing can be known to be
    held but the pending calls). ``asked``: the ids the sets were computed for (the index
    answers only for the ids a caller relies on: ``claude_index.read_held(among=...)``), None
    for every id the transcript names; ask again about an id outside it."""

    ids: frozenset[str]
    pending: frozenset[str]
    complete: bool = True
    known: frozenset[str] = frozenset()
    asked: frozenset[str] | None = None

    def answers(self, call: str) -> bool:
        """Whether ``call``'s status is in these sets (it was asked, or everything was)."""
        return self.asked is None or call in self.asked


def is_stub(text: str) -> bool:
    """Claude Code's own "file unchanged" stub (it holds no content)."""
    return text.startswith(STUB_PREFIXES)


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


def held_calls(lines: Iterable[bytes | str], *, sidechain: bool = False) -> Held:
    """What the model's context holds, from the transcript's lines (see the module docstring).
    Lines that are not JSON objects are skipped (a line being written is cut short).
    ``sidechain``: the transcript is a subagent's (``subagents/agent-ID.jsonl``, every entry
    ``isSidechain``); in a main transcript, sidechain entries are another context's."""
    return held_of(scan(lines, new_state(sidechain=sidechain)))


State = dict[str, Any]
"""What ``held_of`` needs of a transcript, built line by line by ``scan`` and kept as JSON
(``claude_index``), so a hook reads only what Claude Code appended since the last one:
``entries`` (uuid -> summary, in first-seen order: ``t`` type, ``p`` parent, ``m`` message id,
``u`` tool_use ids, ``r`` [tool_use id, holds] of results, ``q`` a prompt), ``compacted``
(ids a microcompaction cleared), ``clearing`` (the newest request clears tool results),
``sidechain`` (a subagent's transcript: its entries are the ones to read), ``bridges``
(uuid -> parent of the entries between messages, such as ``progress``: the chain runs through
them)."""


def new_state(*, sidechain: bool = False) -> State:
    return {
        "entries": {}, "compacted": [], "clearing": False, "sidechain": sidechain, "bridges": {},
    }  # fmt: skip


class Parsed(NamedTuple):
    """What one transcript line says (``parse_line``): ``clearing`` (an ``api-request``: whether
    the newest request clears tool results), ``compacted`` (ids a microcompaction cleared), and
    for an entry of this context its ``uuid`` with either its ``summary`` (a message) or, for
    an entry between messages (``summary`` None), the ``parent`` it passes the chain on to."""

    clearing: bool | None = None
    compacted: tuple[str, ...] = ()
    uuid: str | None = None
    summary: dict[str, Any] | None = None
    parent: str | None = None


def parse_line(line: bytes | str, *, sidechain: bool = False) -> Parsed | None:
    """One line of the transcript (None: not a JSON object, or nothing ``held_of`` needs)."""
    if not line.strip():
        return None
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    kind = entry.get("type")
    if kind == "api-request":
        return Parsed(clearing=_clears_tool_results(entry))  # the newest request's settings
    compacted: tuple[str, ...] = ()
    if kind == "system" and entry.get("subtype") == "microcompact_boundary":
        meta = entry.get("microcompactMetadata")
        ids = meta.get("compactedToolIds") if isinstance(meta, dict) else None
        if isinstance(ids, list):
            compacted = tuple(str(i) for i in ids)
    uuid = entry.get("uuid")
    if not isinstance(uuid, str) or bool(entry.get("isSidechain")) != sidechain:
        return Parsed(compacted=compacted)  # no entry of this context
    raw_parent = entry.get("parentUuid")
    parent = raw_parent if isinstance(raw_parent, str) else None
    if kind not in _MESSAGE_TYPES:  # progress (hook, bash, agent: 2.1.12-2.1.42) on the chain
        return Parsed(compacted=compacted, uuid=uuid, parent=parent)
    summary: dict[str, Any] = {"t": kind, "p": parent}
    if kind == "assistant":
        summary["m"] = _message_id(entry)
        summary["u"] = [
            b["id"] for b in _blocks(entry)
            if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
        ]  # fmt: skip
    elif kind == "user":
        summary["q"] = _is_prompt(entry)
        summary["r"] = [
            [b["tool_use_id"], _result_holds(b)] for b in _blocks(entry)
            if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)
        ]  # fmt: skip
    return Parsed(compacted=compacted, uuid=uuid, summary=summary, parent=parent)


def scan(lines: Iterable[bytes | str], state: State) -> State:
    """``state`` updated with ``lines`` (in place; returned)."""
    entries: dict[str, dict[str, Any]] = state["entries"]
    compacted: list[str] = state["compacted"]
    sidechain = bool(state.get("sidechain"))
    for line in lines:
        parsed = parse_line(line, sidechain=sidechain)
        if parsed is None:
            continue
        if parsed.clearing is not None:
            state["clearing"] = parsed.clearing
        compacted.extend(parsed.compacted)
        if parsed.uuid is None:
            continue
        if parsed.summary is None:
            state.setdefault("bridges", {})[parsed.uuid] = parsed.parent
        else:
            entries[parsed.uuid] = parsed.summary  # a rewritten entry keeps its place
    return state


def held_of(state: State) -> Held:
    """What the model's context holds, from a scanned transcript (see the module docstring)."""
    entries: dict[str, dict[str, Any]] = state["entries"]
    if not entries:
        return Held(frozenset(), frozenset())
    order = list(entries)
    known = frozenset(
        call
        for entry in entries.values()
        for call in [*entry.get("u", ()), *(r[0] for r in entry.get("r", ()))]
    )

    bridges: dict[str, str | None] = state.get("bridges") or {}

    def parent(uuid: str) -> str | None:
        """An entry's parent message, through the progress entries between them."""
        found: str | None = entries[uuid]["p"]
        hops = 0
        while found is not None and found not in entries and found in bridges:
            found, hops = bridges[found], hops + 1
            if hops > len(bridges):
                return None  # a loop: a damaged transcript
        return found

    chain: list[str] = []  # leaf first
    on_chain: set[str] = set()
    cursor: str | None = order[-1]
    while cursor is not None and cursor in entries and cursor not in on_chain:
        chain.append(cursor)
        on_chain.add(cursor)
        cursor = parent(cursor)

    # Parallel calls: one assistant entry per tool_use of one response (same message id),
    # chained; the next message hangs under whichever result was written last, so a sibling
    # may be off the walked chain. Each sibling whose parent is on the chain is on it too.
    position_of = {uuid: pos for pos, uuid in enumerate(reversed(chain))}
    responses = {
        entries[uuid]["m"]: pos
        for uuid, pos in position_of.items()
        if entries[uuid]["t"] == "assistant" and entries[uuid].get("m")
    }
    for uuid in order:
        entry = entries[uuid]
        if uuid in on_chain or entry["t"] != "assistant":
            continue
        if entry.get("m") in responses and parent(uuid) in on_chain:
            on_chain.add(uuid)
            position_of[uuid] = responses[entry["m"]]

    uses: dict[str, int] = {}  # tool_use id -> position on the chain (0: oldest)
    last_prompt = -1
    for uuid, position in position_of.items():
        entry = entries[uuid]
        if entry.get("q"):
            last_prompt = max(last_prompt, position)
        for call in entry.get("u", ()):
            uses[call] = position

    results: dict[str, bool] = {}
    for uuid in order:
        entry = entries[uuid]
        if entry["t"] != "user":
            continue
        live = uuid in on_chain or parent(uuid) in on_chain
        for call, holds in entry.get("r", ()):
            if call in uses:
                results[call] = live and holds and results.get(call, True)

    pending = frozenset(c for c, pos in uses.items() if c not in results and pos > last_prompt)
    if state["clearing"]:
        return Held(pending, pending, known=known)
    compacted = set(state["compacted"])
    done = frozenset(c for c, holds in results.items() if holds and c not in compacted)
    return Held(done | pending, pending, known=known)
