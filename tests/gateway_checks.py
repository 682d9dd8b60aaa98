"""What the model saw through the gateway, checked from the requests the upstream received alone.

Independent of filecache's records and code: each request body (Anthropic Messages, OpenAI Chat
Completions, Responses or the Gemini API's ``contents``) is reduced to its tool calls and
results in order (``exchange``), and the checks read those:
- ``check_pairing``: every call has exactly one result after it, every result answers a call
  before it (Anthropic: in the very next message);
- ``references``: every ``[filecache] ... since your result ID`` line a result carries, and
  ``check_no_dangling``: each named result is in the same request, before it, as content (not a
  cleared placeholder, not a reference itself);
- ``shown_lines``: the file lines a result shows by number (Claude Code's ``N→``, ``cat -n``'s
  ``N<TAB>``, opencode's ``N: ``);
- ``apply_diff``: a unified diff's hunks applied to lines (a strict applier: context and removed
  lines must match, or AssertionError);
- ``check_sticky``: a result whose text changed after its first request (pruned) keeps the
  same bytes in every later request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

REFERENCE = re.compile(
    r"\[filecache\] (\S+) (?:outline )?(unchanged|changed|changed outside the agent) "
    r"since your results? (\S+?(?: and \S+?)*) \(([^)]*)\)"
)
CLEARED = "[cleared tool result"
_NUMBERED = re.compile(r"^\s*(\d+)(?:\u2192|\t|: )(.*)$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Item:
    kind: str  # "calls" (one assistant turn's tool calls) or "results"
    ids: tuple[str, ...]
    texts: tuple[str, ...] = ()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    if isinstance(content, dict):
        return str(content.get("content", ""))
    return ""


def _gemini_text(response: dict[str, Any]) -> str:
    body = response.get("response") or {}
    value = body.get("output", body.get("error", "")) if isinstance(body, dict) else ""
    return value if isinstance(value, str) else json.dumps(value)


def _gemini(body: dict[str, Any]) -> list[Item]:
    items: list[Item] = []
    for content in body["contents"]:
        parts = content.get("parts") or []
        calls = [p["functionCall"] for p in parts if "functionCall" in p]
        answers = [p["functionResponse"] for p in parts if "functionResponse" in p]
        for fn in calls:
            _extend(items, "calls", fn["id"])
        for fn in answers:
            _extend(items, "results", fn["id"], _gemini_text(fn))
        if not calls and not answers:
            items.append(Item("text", ()))
    return items


def exchange(body: dict[str, Any]) -> list[Item]:
    """The request's tool calls and results, in order, whatever its API."""
    if isinstance(body.get("contents"), list):  # Gemini
        return _gemini(body)
    items: list[Item] = []
    if "input" in body and isinstance(body["input"], list):  # Responses
        for entry in body["input"]:
            kind = entry.get("type")
            if kind in ("function_call", "custom_tool_call", "local_shell_call"):
                _extend(items, "calls", entry["call_id"])
            elif kind in ("function_call_output", "custom_tool_call_output"):
                _extend(items, "results", entry["call_id"], _text(entry.get("output")))
        return items
    for message in body.get("messages", []):
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            for call in message.get("tool_calls") or []:  # Chat Completions
                _extend(items, "calls", call["id"])
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_use":
                    _extend(items, "calls", block["id"])
            if not message.get("tool_calls") and not any(
                isinstance(b, dict) and b.get("type") == "tool_use"
                for b in (content if isinstance(content, list) else [])
            ):
                items.append(Item("text", ()))
        elif role == "tool":
            _extend(items, "results", message["tool_call_id"], _text(content))
        elif role == "user":
            results = [
                b for b in (content if isinstance(content, list) else [])
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]  # fmt: skip
            for block in results:
                _extend(items, "results", block["tool_use_id"], _text(block.get("content")))
            if not results:
                items.append(Item("text", ()))
    return items


def _extend(items: list[Item], kind: str, call_id: str, text: str = "") -> None:
    if items and items[-1].kind == kind:
        last = items[-1]
        items[-1] = Item(kind, (*last.ids, call_id), (*last.texts, text))
    else:
        items.append(Item(kind, (call_id,), (text,)))


def results(body: dict[str, Any]) -> dict[str, str]:
    """Every result's text in the request, by call id."""
    found: dict[str, str] = {}
    for item in exchange(body):
        if item.kind == "results":
            found.update(zip(item.ids, item.texts, strict=True))
    return found


def check_pairing(body: dict[str, Any], strict_next: bool = True) -> None:
    items = exchange(body)
    called: list[str] = []
    answered: list[str] = []
    for index, item in enumerate(items):
        if item.kind == "calls":
            called += item.ids
            nxt = items[index + 1] if index + 1 < len(items) else None
            if strict_next and nxt is not None:
                assert nxt.kind == "results" and set(nxt.ids) == set(item.ids), (item, nxt)
        elif item.kind == "results":
            for cid in item.ids:
                assert cid in called, f"result {cid} answers no call before it"
                assert cid not in answered, f"two results for {cid}"
                answered.append(cid)
    trailing = items[-1] if items else None
    unanswered = set(called) - set(answered)
    if trailing is not None and trailing.kind == "calls":
        unanswered -= set(trailing.ids)
    assert not unanswered, f"calls without a result: {unanswered}"


def references(text: str) -> list[tuple[str, str, list[str], str]]:
    """(path, kind, the named result ids, the parenthesis) of each reference line."""
    return [(m[1], m[2], m[3].split(" and "), m[4]) for m in REFERENCE.finditer(text)]


def check_no_dangling(body: dict[str, Any]) -> int:
    """Every reference names an earlier result of the same request that holds content; the
    count of references checked."""
    order: list[tuple[str, str]] = []
    for item in exchange(body):
        if item.kind == "results":
            order += list(zip(item.ids, item.texts, strict=True))
    position = {cid: i for i, (cid, _) in enumerate(order)}
    count = 0
    for index, (cid, text) in enumerate(order):
        for _path, _kind, named, _span in references(text):
            for base in named:
                count += 1
                assert base in position, f"{cid} names {base}, not in this request"
                assert position[base] < index, f"{cid} names {base}, which comes after it"
                base_text = order[position[base]][1]
                assert not base_text.lstrip().startswith(CLEARED), f"{cid} names cleared {base}"
                assert not references(base_text), f"{cid} names {base}, itself a reference"
    return count


def shown_lines(text: str) -> dict[int, str]:
    """The file lines a result shows by their numbers."""
    shown: dict[int, str] = {}
    for line in text.split("\n"):
        found = _NUMBERED.match(line)
        if found:
            shown[int(found[1])] = found[2]
    return shown


def diff_body(text: str) -> list[str]:
    """The unified diff lines of a diff answer (from its ``---`` line to its last hunk line)."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("--- "))
    out = []
    for line in lines[start:]:
        if line[:1] in ("-", "+", " ", "@", "\\") or line.startswith("--- "):
            out.append(line)
        else:
            break
    return out


def apply_diff(old: list[str], diff: list[str]) -> list[str]:
    """``old`` (lines without their ends) with the hunks applied; AssertionError on a mismatch."""
    new: list[str] = []
    at = 0  # index into old
    lines = iter(diff[2:])  # past --- and +++
    for line in lines:
        hunk = _HUNK.match(line)
        if hunk:
            start = int(hunk[1]) - (0 if hunk[2] == "0" else 1)
            assert start >= at, "hunks out of order"
            new += old[at:start]
            at = start
        elif line.startswith(" "):
            assert old[at] == line[1:], (at, old[at], line)
            new.append(line[1:])
            at += 1
        elif line.startswith("-"):
            assert old[at] == line[1:], (at, old[at], line)
            at += 1
        elif line.startswith("+"):
            new.append(line[1:])
    return new + old[at:]


def check_sticky(bodies: list[dict[str, Any]]) -> dict[str, str]:
    """Every result that a later request sends shorter than in its first request, and not as a
    reference (pruned), is byte-identical in every request after that; the pruned texts by id.
    (A reference that turns back into content, when its base was pruned, grows: allowed.)"""
    first: dict[str, str] = {}
    pruned: dict[str, str] = {}
    for number, body in enumerate(bodies):
        for cid, text in results(body).items():
            if cid in pruned:
                assert text == pruned[cid], f"request {number}: pruned {cid} changed again"
            elif len(text) < len(first.setdefault(cid, text)) and not references(text):
                pruned[cid] = text
    return pruned


def dump(bodies: list[dict[str, Any]]) -> str:
    """The requests' results, for a failing assert's message."""
    return json.dumps([results(b) for b in bodies], indent=1)[-6000:]
