"""Bodies of provider messages: the text of a string or block list, and its replacement.

Helpers for the adapters; the contract they implement is in ``filecache.prune.transcript`` (a body's
text is the concatenation of its text blocks; a replaced block list keeps one text block).
Errors name where they happened (``"message 3: block 1"``).
"""

from __future__ import annotations

import json
from typing import Any

from filecache.core.json_input import check_json
from filecache.errors import TranscriptError

__all__ = [
    "TEXT_BLOCK_TYPES",
    "body_text",
    "expect_string",
    "json_object",
    "replaced_body",
    "type_name",
]

TEXT_BLOCK_TYPES = frozenset({"text", "input_text", "output_text"})
"""Block types whose ``text`` is body text (Anthropic and chat ``text``; Responses parts)."""


def type_name(value: object) -> str:
    """A JSON-ish name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def expect_string(value: object, where: str, what: str) -> str:
    """``value`` if it is a non-empty string; else a ``TranscriptError`` naming ``where``."""
    if not isinstance(value, str) or not value:
        raise TranscriptError(f"{where}: {what} must be a non-empty string, got {type_name(value)}")
    return value


def json_object(raw: str) -> dict[str, Any] | None:
    """``raw`` parsed, if it is a JSON object (a call's arguments) that ``json_input.check_json``
    accepts (depth, no lone surrogate); else ``None`` (kept as raw text)."""
    try:
        parsed = json.loads(raw)
        check_json(parsed, "arguments")
    except (ValueError, RecursionError, TranscriptError):
        return None
    return parsed if isinstance(parsed, dict) else None


def body_text(content: object, where: str, what: str = "content", sep: str = "") -> tuple[str, int]:
    """``(text, non_text_blocks)`` of a body given as a string, a list of blocks, or null.

    The text is the text blocks joined with ``sep`` ("" for a tool-result body, as the
    transcript contract says; a newline for a message's own text).
    """
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        raise TranscriptError(
            f"{where}: {what} must be a string or a list of blocks, got {type_name(content)}"
        )
    parts: list[str] = []
    other = 0
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            raise TranscriptError(f"{where}: block {j} must be an object, got {type_name(block)}")
        if block.get("type") in TEXT_BLOCK_TYPES:
            text = block.get("text")
            if not isinstance(text, str):
                raise TranscriptError(
                    f"{where}: text of block {j} must be a string, got {type_name(text)}"
                )
            parts.append(text)
        else:
            other += 1
    return sep.join(parts), other


def replaced_body(content: object, text: str, text_type: str) -> str | list[Any]:
    """The new body for a replacement: a string stays a string; a block list keeps one text
    block (the first, with its other keys; else a new ``text_type`` block), or none if empty.

    ``content`` must be the caller's own copy: its first text block is reused.
    """
    if not isinstance(content, list):
        return text
    if not text:
        return []
    first = next((b for b in content if b.get("type") in TEXT_BLOCK_TYPES), None)
    block: dict[str, Any] = first if first is not None else {"type": text_type}
    block["text"] = text
    return [block]
