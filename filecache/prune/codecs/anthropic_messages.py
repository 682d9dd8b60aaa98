"""Anthropic Messages ⇄ the neutral transcript.

Calls are ``tool_use`` blocks of assistant messages (``id``, ``name``, ``input`` object); results
are ``tool_result`` blocks of user messages (``tool_use_id``; ``content`` a string, a list of
``text`` / ``image`` / ``document`` blocks, or absent; optional ``is_error``). Server-side tools
(``server_tool_use`` with its ``*_tool_result`` in the same assistant message, ``mcp_tool_use``)
are kept as other blocks are: they are not results the planner can replace. Extra message keys
(a Claude Code transcript's ``id``, ``model``, ``usage``) are kept as they are.

Invariant (``filecache.prune.codecs.base``): ``render`` changes only the ``content`` of replaced
``tool_result`` blocks; every other message, and every other block, keeps its exact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from filecache.core.kinds import Format
from filecache.errors import TranscriptError
from filecache.prune.codecs.base import (
    Message,
    ToolCall,
    ToolResult,
    Transcript,
    link,
    message_list,
    register_format,
    render_replaced,
)
from filecache.prune.message_blocks import body_text, expect_string, type_name

__all__ = ["CODEC", "FORMAT", "parse", "render", "set_input"]

FORMAT = Format.ANTHROPIC


def _tool_use(index: int, j: int, block: Mapping[str, Any], role: str) -> ToolCall:
    where = f"message {index}: block {j}"
    if role != "assistant":
        raise TranscriptError(f"{where}: a tool_use block belongs in an assistant message")
    call_id = expect_string(block.get("id"), where, "id")
    name = expect_string(block.get("name"), where, "name")
    given = block.get("input", {})
    if not isinstance(given, dict):
        raise TranscriptError(f"{where}: input must be an object, got {type_name(given)}")
    try:
        raw = json.dumps(given, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TranscriptError(f"{where}: input is not JSON ({exc})") from None
    return ToolCall(call_id, name, json.loads(raw), raw, True, index, j)


def _tool_result(index: int, j: int, block: Mapping[str, Any], role: str) -> ToolResult:
    where = f"message {index}: block {j}"
    if role != "user":
        raise TranscriptError(f"{where}: a tool_result block belongs in a user message")
    call_id = expect_string(block.get("tool_use_id"), where, "tool_use_id")
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise TranscriptError(f"{where}: is_error must be true or false, got {type_name(is_error)}")
    text, non_text = body_text(block.get("content"), f"{where} (tool_result for {call_id})")
    return ToolResult(call_id, text, is_error, index, j, non_text)


def _message(index: int, raw: object) -> Message:
    where = f"message {index}"
    if not isinstance(raw, dict):
        raise TranscriptError(f"{where}: must be an object, got {type_name(raw)}")
    role = expect_string(raw.get("role"), where, "role")
    content = raw.get("content")
    if isinstance(content, str):
        return Message(index, role, content)
    if not isinstance(content, list):
        raise TranscriptError(
            f"{where}: content must be a string or a list of blocks, got {type_name(content)}"
        )
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            raise TranscriptError(f"{where}: block {j} must be an object, got {type_name(block)}")
        kind = block.get("type")
        if kind == "tool_use":
            calls.append(_tool_use(index, j, block, role))
        elif kind == "tool_result":
            results.append(_tool_result(index, j, block, role))
        elif kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise TranscriptError(
                    f"{where}: text of block {j} must be a string, got {type_name(text)}"
                )
            texts.append(text)
        elif not isinstance(kind, str):
            raise TranscriptError(f"{where}: block {j} has no type")
    return Message(index, role, "\n".join(texts), tuple(calls), tuple(results))


def parse(messages: object) -> Transcript:
    """Parse an Anthropic Messages list.

    Raises:
        TranscriptError: naming the message index (wrong types, a result without an earlier
            call, a call id used twice, a second result for a call, a block in the wrong role).
    """
    items = message_list(messages)
    return link([_message(i, m) for i, m in enumerate(items)], FORMAT, items)


def render(transcript: Transcript, replacements: Mapping[str, str]) -> list[Any]:
    """``transcript.raw`` with the ``content`` of each replaced ``tool_result`` block replaced."""
    return render_replaced(transcript, FORMAT, replacements, "content", "text")


def set_input(message: Any, call: ToolCall, arguments: dict[str, Any]) -> None:
    """A ``tool_use`` block's new ``input`` (an object, as the API requires)."""
    message["content"][call.block_index]["input"] = arguments


CODEC = register_format(FORMAT, parse, render, set_input)
