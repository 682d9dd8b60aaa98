"""Checks of what a model API received, independent of filecache's code: the requests a scripted
Anthropic upstream recorded (``anthropic_server.ScriptedModel.requests``).

- ``pairing``: every tool_use of an assistant message is answered by a tool_result in the next
  message, and every tool_result answers a tool_use of the message before it;
- ``references``: each filecache FileRef or diff in a tool result, parsed from its first line,
  with the id it names; ``dangling`` lists those whose id is not a result of the same request
  sent as content;
- ``apply_diff``: a diff applied (``unidiff``) to the lines of the result it names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from anthropic_server import result_text, tool_results
from unidiff import PatchSet

_REFERENCE = re.compile(
    r"^\[filecache\] (\S+) (unchanged|changed) since your result (\S+) \(lines? (\d+)(?:-(\d+))?"
)
_NUMBERED = re.compile(r"^\s*(\d+)(?:\t|→)(.*)$")


@dataclass(frozen=True)
class Reference:
    """A FileRef (``changed`` False) or a diff in the result ``call``, naming ``base``."""

    call: str
    path: str
    changed: bool
    base: str
    first: int
    last: int
    text: str


def pairing(body: dict[str, Any]) -> list[str]:
    """What breaks tool_use/tool_result pairing in one Anthropic request ([] when intact)."""
    problems: list[str] = []
    messages = body.get("messages", [])
    for i, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        answered = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if answered:
            before = messages[i - 1].get("content") if i else None
            asked = {
                b.get("id") for b in (before if isinstance(before, list) else []) if
                b.get("type") == "tool_use"
            }  # fmt: skip
            problems += [
                f"result {c} answers no call before it" for c in answered if c not in asked
            ]
        if uses and i + 1 < len(messages):
            after = messages[i + 1].get("content")
            got = {
                b.get("tool_use_id") for b in (after if isinstance(after, list) else [])
                if b.get("type") == "tool_result"
            }  # fmt: skip
            problems += [f"call {c} has no result after it" for c in uses if c not in got]
    return problems


def references(body: dict[str, Any]) -> list[Reference]:
    """Every FileRef and diff in the request's tool results."""
    found: list[Reference] = []
    for call, block in tool_results(body).items():
        text = result_text(block)
        match = _REFERENCE.match(text)
        if match:
            first = int(match[4])
            found.append(
                Reference(call, match[1], match[2] == "changed", match[3], first,
                          int(match[5] or first), text)
            )  # fmt: skip
    return found


def dangling(body: dict[str, Any]) -> list[Reference]:
    """The references whose named result is not in the request as content."""
    results = tool_results(body)
    return [
        ref for ref in references(body)
        if ref.base not in results or _REFERENCE.match(result_text(results[ref.base]))
    ]  # fmt: skip


def numbered_lines(text: str) -> dict[int, str]:
    """A read's numbered lines (Claude Code's ``N\\t`` or ``N→``), by number."""
    lines: dict[int, str] = {}
    for line in text.split("\n"):
        match = _NUMBERED.match(line)
        if match:
            lines[int(match[1])] = match[2]
    return lines


def apply_diff(ref: Reference, base_lines: dict[int, str]) -> list[str]:
    """The lines ``ref.first..ref.last`` that the diff in ``ref`` says the file now has."""
    body = ref.text.split("\n", 1)[1].rsplit("\n(Apply this diff", 1)[0] + "\n"
    start = min(base_lines)
    out = [base_lines[n] for n in sorted(base_lines)]
    offset = 0
    for hunk in PatchSet(body)[0]:
        at = hunk.source_start - start + offset - (0 if hunk.source_length else -1)
        old = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_removed]
        new = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_added]
        assert out[at : at + len(old)] == old, (ref.call, old, out[at : at + len(old)])
        out[at : at + len(old)] = new
        offset += len(new) - len(old)
    return out
