"""A neutral transcript: parsing a message list in the format it is in, and its wrappers.

The transcript itself (``Transcript``, ``Message``, ``ToolCall``, ``ToolResult``), the
invariants every codec keeps and the codec registry are in ``filecache.prune.codecs.base``; the
built-in codecs are ``filecache.prune.codecs.openai_chat`` (OpenAI chat completions),
``.openai_responses`` (Responses input items), ``.anthropic_messages`` (Anthropic Messages) and
``.gemini_contents`` (the Gemini API's ``contents``),
imported here so that their formats are registered whenever a transcript is parsed. An adapter
adds a format with ``register_format``; it is then accepted by ``parse_transcript(messages,
format)`` (detection knows only the built-in four).

This module detects a list's format (``detect_format``) and accepts the wrappers requests come
in (``unwrap``: a bare list, ``{"messages": [...]}``, ``{"input": [...]}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from filecache.core.json_input import check_json
from filecache.core.kinds import Format
from filecache.errors import TranscriptError
from filecache.prune.codecs import (
    anthropic_messages,
    gemini_contents,
    openai_chat,
    openai_responses,
)
from filecache.prune.codecs.base import (
    Codec,
    Transcript,
    codec_for,
    register_format,
    registered_formats,
    render_transcript,
)
from filecache.prune.file_tools import FILE_TOOLS, FileAccess, FileTool, file_access
from filecache.prune.message_blocks import type_name

__all__ = [
    "FILE_TOOLS",
    "FORMATS",
    "Codec",
    "Envelope",
    "FileAccess",
    "FileTool",
    "detect_format",
    "file_access",
    "is_langchain_dump",
    "parse_transcript",
    "register_format",
    "registered_formats",
    "render_transcript",
    "needs_convert",
    "unwrap",
]

FORMATS = tuple(Format)
"""The built-in formats: OpenAI chat completions, OpenAI Responses input items, Anthropic
Messages, Gemini ``contents`` (``registered_formats()`` adds any an adapter registered)."""
BUILT_IN = (
    openai_chat.CODEC,
    openai_responses.CODEC,
    anthropic_messages.CODEC,
    gemini_contents.CODEC,
)
"""The built-in codecs (importing them here registers them)."""


def parse_transcript(messages: object, format: str | None = None) -> Transcript:
    """Parse a message list (not a wrapper: see ``unwrap``) in ``format``, or the detected one.

    Nesting deeper than ``json_input.MAX_JSON_DEPTH`` is refused first (``TranscriptError``):
    the adapters and the pruner walk it recursively.
    """
    check_json(messages, "messages")
    return codec_for(format or detect_format(messages)).parse(messages)


# -- format detection and wrappers ------------------------------------------------------------

_BLOCK_FORMATS = {  # content block types that only one format uses
    **dict.fromkeys(("tool_use", "tool_result", "thinking", "redacted_thinking"), Format.ANTHROPIC),
    **dict.fromkeys(("image", "document"), Format.ANTHROPIC),
    **dict.fromkeys(("input_text", "output_text", "input_image", "input_file"), Format.RESPONSES),
    **dict.fromkeys(("image_url", "input_audio"), Format.OPENAI),
}


_LANGCHAIN_TYPES = frozenset({"human", "ai", "tool", "system", "chat", "function"})
_LANGCHAIN_KEYS = frozenset({"additional_kwargs", "response_metadata", "tool_call_id"})


def is_langchain_dump(item: object) -> bool:
    """A LangChain message's ``model_dump()``: its ``type`` and LangChain's own keys (in none
    of the formats: ``sdk_messages`` converts such lists)."""
    return (
        isinstance(item, dict)
        and isinstance(item.get("type"), str)  # a list or an object is no type (unhashable)
        and item["type"] in _LANGCHAIN_TYPES
        and "content" in item
        and bool(_LANGCHAIN_KEYS & item.keys())
    )


def needs_convert(messages: list[Any]) -> bool:
    """Whether a message list is not plain message dicts of the formats: it holds objects (SDK
    messages, LangChain's, pydantic-ai's) or LangChain dumps (``sdk_messages.convert``)."""
    return not all(isinstance(m, dict) and not is_langchain_dump(m) for m in messages)


def _item_format(item: Mapping[str, Any]) -> str | None:
    if isinstance(item.get("parts"), list) and "content" not in item:
        return Format.GEMINI
    kind = item.get("type")
    if isinstance(kind, str) and kind != "message":
        return Format.RESPONSES
    if item.get("role") in ("tool", "function") or "tool_calls" in item:
        return Format.OPENAI
    content = item.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") in _BLOCK_FORMATS:
                return _BLOCK_FORMATS[block["type"]]
    return None


def detect_format(obj: object) -> str:
    """The format of a message list (or of a wrapper that ``unwrap`` accepts).

    A list with nothing format-specific (plain role/content strings) is the same in every
    format and is reported as ``"openai"``; in a wrapper, an ``input`` key means Responses.

    Raises:
        TranscriptError: not a list or wrapper, or messages that look like different formats.
    """
    envelope = unwrap(obj)
    seen: dict[str, int] = {}
    for index, item in enumerate(envelope.messages):
        if is_langchain_dump(item):  # its "type" would read as a Responses item: never guess
            raise TranscriptError(
                f"message {index}: a LangChain message (type {item['type']!r}), not one of "
                f"{', '.join(FORMATS)}; prune_messages accepts LangChain lists as they are"
            )
        found = _item_format(item) if isinstance(item, dict) else None
        if found is not None:
            seen.setdefault(found, index)
    if len(seen) > 1:
        (a, i), (b, j) = sorted(seen.items(), key=lambda kv: kv[1])[:2]
        raise TranscriptError(
            f"message {j}: looks like {b} but message {i} looks like {a}; pass the format"
        )
    if seen:
        return next(iter(seen))
    return Format.RESPONSES if envelope.key == "input" else Format.OPENAI


@dataclass(frozen=True)
class Envelope:
    """Where a message list came from: a bare list, or an object's ``messages``/``input`` key.

    ``wrap(new_messages)`` gives the same shape back: the same object keys in the same order,
    with only the list replaced.
    """

    messages: list[Any]
    key: str | None = None
    container: Mapping[str, Any] | None = field(default=None, repr=False)

    def wrap(self, messages: list[Any]) -> Any:
        """``messages`` in the shape the original list came in."""
        if self.key is None or self.container is None:
            return messages
        return {k: (messages if k == self.key else v) for k, v in self.container.items()}


def unwrap(obj: object) -> Envelope:
    """Accept a bare message list, ``{"messages": [...], ...}`` or ``{"input": [...], ...}``.

    Raises:
        TranscriptError: anything else (a Responses ``input`` given as a string included).
    """
    if isinstance(obj, list):
        return Envelope(obj)
    if not isinstance(obj, dict):
        raise TranscriptError(f"expected a list of messages, got {type_name(obj)}")
    keys = [k for k in ("messages", "input") if k in obj]
    if len(keys) != 1:
        raise TranscriptError(
            'expected a list of messages or an object with one "messages" or "input" list; '
            f"got an object with keys {', '.join(map(str, obj)) or '(none)'}"
        )
    key = keys[0]
    if not isinstance(obj[key], list):
        raise TranscriptError(f'"{key}" must be a list, got {type_name(obj[key])}')
    return Envelope(obj[key], key, obj)
