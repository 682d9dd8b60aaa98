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

MESSAGES_KEY = {
    Format.ANTHROPIC: "messages",
    Format.OPENAI: "messages",
    Format.RESPONSES: "input",
    Format.GEMINI: "contents",
}
_SESSION = re.compile(r"session[_\"':\s]*([0-9A-Za-z][0-9A-Za-z_-]{7,})")
_ID_HEADERS = ("x-claude-code-session-id", "session_id", "session-id", "conversation_id")
_GEMINI_UNTOUCHED = ("thought", "inlineData", "fileData", "executableCode", "codeExecutionResult")
_UNTOUCHED = frozenset(
    {"thinking", "redacted_thinking", "image", "document", "input_image", "input_file",
     "image_url", "input_audio", "reasoning"}
)  # fmt: skip


def _first_message(messages: list[Any]) -> Any:
    for k, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") in ("user", "developer"):
            after = messages[k + 1] if k + 1 < len(messages) else None
            if "parts" in message and isinstance(after, dict) and after.get("role") == "user":
                # Gemini: a session context (the same for every session in a folder on one
                # day) may come as a content of its own, the user's first prompt next to it.
                return [message, after]
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
    system = _system(payload)
    head = json.dumps(system, ensure_ascii=False, sort_keys=True)
    return f"prefix:{fmt}:{digest(head)}:{first}"


def _system(payload: Mapping[str, Any]) -> Any:
    """The system prompt: Anthropic's ``system``, Responses' ``instructions``, Gemini's
    ``systemInstruction``."""
    for key in ("system", "instructions", "systemInstruction"):
        if key in payload:
            return payload[key]
    return None


def _blocks(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _gemini_part_thinking(part: Any) -> bool:
    return isinstance(part, dict) and (bool(part.get("thought")) or "thoughtSignature" in part)


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
    if any(_gemini_part_thinking(p) for p in _blocks(message.get("parts"))):
        return True  # Gemini: a thought, or a signature over the turn's calls
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
    system = _system(payload)
    if isinstance(system, dict) and isinstance(system.get("parts"), list):  # Gemini
        return count + len(system["parts"])
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
    for part in _blocks(message.get("parts")):  # Gemini
        if not isinstance(part, dict):
            continue
        count += int(any(part.get(key) for key in _GEMINI_UNTOUCHED))
        response = part.get("functionResponse")
        if isinstance(response, dict):
            count += len(_blocks(response.get("parts")))
    return count
