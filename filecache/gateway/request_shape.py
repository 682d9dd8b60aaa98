"""What the transform reads of a request besides its messages (pure): where the message list is,
which conversation it belongs to, what it must leave alone.

Invariants: nothing here changes the payload; headers are read for a conversation id only (never
an auth header); a request without an id of its own is keyed by its stable prefix (the system
prompt or instructions and the first message), which every later request of the conversation
repeats until the host compacts it (and a compacted conversation is a new one: nothing in it
can be referred to from before).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from filecache.core.kinds import Format
from filecache.gateway.delta import digest

__all__ = [
    "MESSAGES_KEY",
    "conversation_key",
    "has_thinking",
    "message_thinking",
    "message_untouched",
    "untouched_blocks",
    "untouched_outside",
]

MESSAGES_KEY = {Format.ANTHROPIC: "messages", Format.OPENAI: "messages", Format.RESPONSES: "input"}
_SESSION = re.compile(r"session[_\"':\s]*([0-9A-Za-z][0-9A-Za-z_-]{7,})")
_ID_HEADERS = ("x-claude-code-session-id", "session_id", "session-id", "conversation_id")
_UNTOUCHED = frozenset(
    {"thinking", "redacted_thinking", "image", "document", "input_image", "input_file",
     "image_url", "input_audio", "reasoning"}
)  # fmt: skip


def _first_message(messages: list[Any]) -> Any:
    for message in messages:
        if isinstance(message, dict) and message.get("role") in ("user", "developer"):
            return message
    return messages[0] if messages else None


def conversation_key(
    fmt: str, payload: Mapping[str, Any], messages: list[Any], headers: Mapping[str, str] | None
) -> str:
    """The conversation a request belongs to: the host's own id (Claude Code's
    ``metadata.user_id`` session part, ``prompt_cache_key``, a session header) plus the first
    message (a subagent of the same session is its own conversation), else the stable prefix."""
    first = digest(json.dumps(_first_message(messages), ensure_ascii=False, sort_keys=True))
    metadata = payload.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    if isinstance(user, str) and (found := _SESSION.search(user)):
        return f"session:{found[1]}:{first}"
    cache_key = payload.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key:
        return f"cache-key:{digest(cache_key)}:{first}"
    for name, value in (headers or {}).items():
        if name.lower() in _ID_HEADERS and value:
            return f"header:{digest(value)}:{first}"
    system = payload.get("system", payload.get("instructions"))
    head = json.dumps(system, ensure_ascii=False, sort_keys=True)
    return f"prefix:{fmt}:{digest(head)}:{first}"


def _blocks(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def has_thinking(messages: list[Any]) -> bool:
    """Whether any message carries a thinking block or a reasoning item (their signatures
    cover the turn: the calls beside them are left as they are)."""
    return any(message_thinking(m) for m in messages)


def message_thinking(message: Any) -> bool:
    """Whether one message or item is or carries a thinking block or reasoning item."""
    if not isinstance(message, dict):
        return False
    if message.get("type") == "reasoning":
        return True
    for block in _blocks(message.get("content")):
        if isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking"):
            return True
    return False


def untouched_blocks(payload: Mapping[str, Any], messages: list[Any]) -> int:
    """Blocks the transform passes through as they are: system blocks, tool definitions,
    thinking/reasoning, images, documents and files."""
    return untouched_outside(payload) + sum(message_untouched(m) for m in messages)


def untouched_outside(payload: Mapping[str, Any]) -> int:
    """The system blocks and tool definitions of a request (``untouched_blocks``)."""
    count = len(_blocks(payload.get("tools")))
    system = payload.get("system", payload.get("instructions"))
    return count + (len(system) if isinstance(system, list) else int(bool(system)))


def message_untouched(message: Any) -> int:
    """The thinking/reasoning, image, document and file blocks of one message or item."""
    if not isinstance(message, dict):
        return 0
    count = int(message.get("type") in _UNTOUCHED)
    for block in _blocks(message.get("content")):
        if not isinstance(block, dict):
            continue
        if block.get("type") in _UNTOUCHED:
            count += 1
        for inner in _blocks(block.get("content")):
            if isinstance(inner, dict) and inner.get("type") in _UNTOUCHED:
                count += 1
    for part in _blocks(message.get("output")):
        if isinstance(part, dict) and part.get("type") in _UNTOUCHED:
            count += 1
    return count
