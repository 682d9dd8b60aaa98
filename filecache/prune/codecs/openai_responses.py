"""OpenAI Responses API input items ⇄ the neutral transcript. Each item is one ``Message``.

Calls are ``function_call`` items (``arguments`` a JSON string) and ``custom_tool_call`` items
(free-form ``input``); results are ``function_call_output`` / ``custom_tool_call_output`` items
whose ``call_id`` names one, with ``output`` a string or a list of ``input_text`` /
``input_image`` / ``input_file`` parts. Messages (``type: message`` or the short
``{"role", "content"}`` form), ``reasoning`` and every other item (hosted tools such as
``web_search_call`` or ``mcp_call``, ``item_reference``) are kept as they are; their outputs are
not results the planner can replace.

Invariant (``filecache.prune.codecs.base``): ``render`` changes only the ``output`` of replaced
output items; every other item is the input's own object.
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

FORMAT = Format.RESPONSES
_CALLS = ("function_call", "custom_tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def _call(index: int, kind: str, item: Mapping[str, Any]) -> ToolCall:
    where = f"message {index}"
    call_id = expect_string(item.get("call_id"), where, "call_id")
    name = expect_string(item.get("name"), where, "name")
    field = "arguments" if kind == "function_call" else "input"
    raw = item.get(field, "")
    if not isinstance(raw, str):
        raise TranscriptError(f"{where}: {field} must be a string, got {type_name(raw)}")
    parsed = json_object(raw) if kind == "function_call" else None
    return ToolCall(call_id, name, parsed or {}, raw, parsed is not None, index, None)


def _summary(item: Mapping[str, Any], where: str) -> str:
    summary = item.get("summary")
    if summary is None:
        return ""
    if not isinstance(summary, list):
        raise TranscriptError(f"{where}: summary must be a list, got {type_name(summary)}")
    return "\n".join(
        part["text"]
        for part in summary
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    )


def _message(index: int, item: object) -> Message:
    where = f"message {index}"
    if not isinstance(item, dict):
        raise TranscriptError(f"{where}: must be an object, got {type_name(item)}")
    kind = item.get("type")
    role = item.get("role")
    if kind is None or kind == "message":
        role = expect_string(role, where, "role")
        text, _ = body_text(item.get("content"), where, sep="\n")
        return Message(index, role, text)
    if not isinstance(kind, str):
        raise TranscriptError(f"{where}: type must be a string, got {type_name(kind)}")
    if kind in _CALLS:
        return Message(index, "assistant", "", tool_calls=(_call(index, kind, item),))
    if kind in _OUTPUTS:
        call_id = expect_string(item.get("call_id"), where, "call_id")
        text, non_text = body_text(item.get("output"), where, "output")
        result = ToolResult(call_id, text, False, index, None, non_text)
        return Message(index, "tool", "", results=(result,))
    if kind == "reasoning":
        return Message(index, "assistant", _summary(item, where))
    if isinstance(role, str):
        return Message(index, role, "")
    return Message(index, "tool" if kind.endswith("_output") else "assistant", "")


def parse(messages: object) -> Transcript:
    """Parse a Responses ``input`` item list.

    Raises:
        TranscriptError: naming the item index (wrong types, an output without an earlier
            call, a call id used twice, a second output for a call).
    """
    items = message_list(messages, "input items")
    return link([_message(i, m) for i, m in enumerate(items)], FORMAT, items)


def render(transcript: Transcript, replacements: Mapping[str, str]) -> list[Any]:
    """``transcript.raw`` with the ``output`` of each replaced output item replaced."""
    return render_replaced(transcript, FORMAT, replacements, "output", "input_text")


def set_input(item: Any, call: ToolCall, arguments: dict[str, Any]) -> None:
    """A ``function_call`` item's new ``arguments`` (a JSON string)."""
    if item.get("type") != "function_call":
        raise TranscriptError(f"message {call.message_index}: only a function_call's input")
    item["arguments"] = json.dumps(arguments, ensure_ascii=False)


CODEC = register_format(FORMAT, parse, render, set_input)
