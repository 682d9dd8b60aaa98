"""OpenAI chat completions messages ⇄ the neutral transcript.

Calls are the entries of an assistant message's ``tool_calls`` (``type`` ``function`` with
``function.arguments`` as a JSON string, or ``custom`` with free-form ``custom.input``); a result
is a ``tool`` message whose ``tool_call_id`` names one, with a string or a list of text parts as
``content``. The legacy ``function_call`` / ``function`` role (no ids) is kept as plain messages.

Invariant (``filecache.prune.codecs.base``): ``render`` changes only the ``content`` of replaced
``tool`` messages; every other message is the input's own object.
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
from filecache.prune.message_blocks import body_text, expect_string, json_object, type_name

__all__ = ["CODEC", "FORMAT", "parse", "render", "set_input"]

FORMAT = Format.OPENAI


def _arguments(raw: object, where: str) -> tuple[dict[str, Any], str, bool]:
    """Parsed arguments, the raw string, and whether it is a JSON object.

    Arguments given as an object (some OpenAI-compatible servers do) are accepted as such.
    """
    if isinstance(raw, dict):
        try:
            text = json.dumps(raw, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TranscriptError(f"{where}: arguments are not JSON ({exc})") from None
        return json.loads(text), text, True
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise TranscriptError(f"{where}: arguments must be a JSON string, got {type_name(raw)}")
    parsed = json_object(raw)
    return (parsed, raw, True) if parsed is not None else ({}, raw, False)


def _call(index: int, j: int, entry: object) -> ToolCall:
    where = f"message {index}: tool call {j}"
    if not isinstance(entry, dict):
        raise TranscriptError(f"{where} must be an object, got {type_name(entry)}")
    call_id = expect_string(entry.get("id"), where, "id")
    kind = entry.get("type", "function")
    if kind == "custom":
        custom = entry.get("custom")
        if not isinstance(custom, dict):
            raise TranscriptError(f"{where}: custom must be an object, got {type_name(custom)}")
        text = custom.get("input", "")
        if not isinstance(text, str):
            raise TranscriptError(f"{where}: input must be a string, got {type_name(text)}")
        name = expect_string(custom.get("name"), where, "name")
        return ToolCall(call_id, name, {}, text, False, index, j)
    if kind != "function":
        raise TranscriptError(f"{where}: unknown type {kind!r} (expected function or custom)")
    function = entry.get("function")
    if not isinstance(function, dict):
        raise TranscriptError(f"{where}: function must be an object, got {type_name(function)}")
    name = expect_string(function.get("name"), where, "name")
    arguments, raw, valid = _arguments(function.get("arguments"), where)
    return ToolCall(call_id, name, arguments, raw, valid, index, j)


def _message(index: int, raw: object) -> Message:
    where = f"message {index}"
    if not isinstance(raw, dict):
        raise TranscriptError(f"{where}: must be an object, got {type_name(raw)}")
    role = expect_string(raw.get("role"), where, "role")
    if role == "tool":
        call_id = expect_string(raw.get("tool_call_id"), where, "tool_call_id")
        text, non_text = body_text(raw.get("content"), where)
        return Message(
            index, role, "", results=(ToolResult(call_id, text, False, index, None, non_text),)
        )
    text, _ = body_text(raw.get("content"), where, sep="\n")
    entries = raw.get("tool_calls")
    if entries is None:
        return Message(index, role, text)
    if role != "assistant":
        raise TranscriptError(f"{where}: only assistant messages make tool calls, not {role}")
    if not isinstance(entries, list):
        raise TranscriptError(f"{where}: tool_calls must be a list, got {type_name(entries)}")
    calls = tuple(_call(index, j, entry) for j, entry in enumerate(entries))
    return Message(index, role, text, tool_calls=calls)


def parse(messages: object) -> Transcript:
    """Parse a chat completions message list.

    Raises:
        TranscriptError: naming the message index (wrong types, a result without an earlier
            call, a call id used twice, a second result for a call).
    """
    items = message_list(messages)
    return link([_message(i, m) for i, m in enumerate(items)], FORMAT, items)


def render(transcript: Transcript, replacements: Mapping[str, str]) -> list[Any]:
    """``transcript.raw`` with the ``content`` of each replaced ``tool`` message replaced."""
    return render_replaced(transcript, FORMAT, replacements, "content", "text")


def set_input(message: Any, call: ToolCall, arguments: dict[str, Any]) -> None:
    """A function call's new ``arguments``: a JSON string (an object where it was one)."""
    function = message["tool_calls"][call.block_index]["function"]
    given = function.get("arguments")
    function["arguments"] = (
        arguments if isinstance(given, dict) else json.dumps(arguments, ensure_ascii=False)
    )


CODEC = register_format(FORMAT, parse, render, set_input)
