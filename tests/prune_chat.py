"""A small builder of OpenAI chat transcripts for the pruning tests, and a word counter.

``Chat`` appends one assistant message with one tool call and its ``tool`` result per call, and
returns the call id (``call_1``, ``call_2``, ...), so a test can name what it expects to change.
``words`` counts whitespace-separated words: exact token counts do not matter to the planner's
logic, and a word count makes every size in a test obvious from its text.
"""

from __future__ import annotations

import json
from typing import Any

from filecache.core.render import OUTLINE_TAG, PLACEHOLDER_MARKER, TRUNCATION_MARKER


def words(text: str) -> int:
    """A deterministic token counter: the number of whitespace-separated words."""
    return len(text.split())


def filler(n: int, word: str = "w") -> str:
    """``n`` words on lines of ten, so that head+tail truncation has lines to cut."""
    rows = [" ".join([word] * min(10, n - i)) for i in range(0, n, 10)]
    return "\n".join(rows) + "\n" if rows else ""


def numbered(n: int, start: int = 1, word: str = "x") -> str:
    """``cat -n`` style lines ``start..start+n-1``: four words per line (``1 x = 1``)."""
    return "".join(f"{i:6}\t{word} = {i}\n" for i in range(start, start + n))


def tier(text: str) -> str:
    """What a result body has become: keep / outline / truncate / clear."""
    if text.startswith(PLACEHOLDER_MARKER):
        return "clear"
    if text.startswith(OUTLINE_TAG):
        return "outline"
    if TRUNCATION_MARKER in text:
        return "truncate"
    return "keep"


class Chat:
    """An OpenAI chat transcript under construction (``messages`` is the list)."""

    def __init__(self, task: str = "fix the failing test") -> None:
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": task},
        ]
        self.serial = 0

    def call(self, name: str, args: dict[str, Any], result: str, call_id: str = "") -> str:
        """An assistant message calling ``name`` and the tool message answering it."""
        self.serial += 1
        cid = call_id or f"call_{self.serial}"
        self.messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": result})
        return cid

    def read(
        self,
        path: str,
        result: str,
        offset: int | None = None,
        limit: int | None = None,
        call_id: str = "",
    ) -> str:
        args: dict[str, Any] = {"path": path}
        if offset is not None:
            args["offset"] = offset
        if limit is not None:
            args["limit"] = limit
        return self.call("read_file", args, result, call_id)

    def edit(self, path: str, result: str = "edited", call_id: str = "") -> str:
        args = {"path": path, "old_string": "a", "new_string": "b"}
        return self.call("edit_file", args, result, call_id)

    def write(self, path: str, content: str = "new", call_id: str = "") -> str:
        return self.call("write_file", {"path": path, "content": content}, "written", call_id)

    def bash(self, command: str, result: str, call_id: str = "") -> str:
        return self.call("bash", {"command": command}, result, call_id)

    def say(self, text: str, role: str = "user") -> None:
        self.messages.append({"role": role, "content": text})


def bodies(messages: list[Any]) -> dict[str, str]:
    """OpenAI chat tool results by call id (string bodies)."""
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}
