"""LangChain messages ⇄ OpenAI chat dicts, for pruning a LangChain history.

``to_chat`` converts messages (``langchain_core.messages`` objects, or their ``model_dump()``
dicts) to OpenAI chat dicts, which ``openai_chat`` parses; ``replaced`` puts pruned result texts
back: the list with only the pruned ``ToolMessage`` contents replaced (``model_copy``, or a new
dict for a dump).

``replaced_inputs`` puts a superseded call's new arguments back (the ``args`` of that entry of an
``AIMessage``'s ``tool_calls``).

Invariant: a replaced ``ToolMessage`` keeps its ``tool_call_id``, ``name``, ``id`` and position;
every other message is the input's own object.

Imports ``langchain_core`` (``filecache.prune.sdk_messages`` loads this module only when a list
holds LangChain messages); pure otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from filecache.extras import requires

with requires("langchain_core", "langchain-core", "pruning LangChain messages"):
    from langchain_core.messages import BaseMessage

__all__ = ["replaced", "replaced_inputs", "to_chat"]

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _fields(message: Any) -> dict[str, Any]:
    if isinstance(message, BaseMessage):
        return {
            "type": message.type,
            "content": message.content,
            "tool_calls": getattr(message, "tool_calls", None) or [],
            "tool_call_id": getattr(message, "tool_call_id", None),
        }
    if isinstance(message, dict):
        return message
    raise TypeError(f"not a LangChain message: {type(message).__name__}")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b if isinstance(b, str) else str(b.get("text", "")) if isinstance(b, dict) else ""
            for b in content
        )
    return str(content)


def to_chat(messages: list[Any]) -> list[dict[str, Any]]:
    """LangChain messages (objects or ``model_dump()`` dicts) as OpenAI chat dicts."""
    chat: list[dict[str, Any]] = []
    for message in messages:
        fields = _fields(message)
        kind = fields.get("type")
        role = _ROLES.get(kind if isinstance(kind, str) else "", "user")
        entry: dict[str, Any] = {"role": role, "content": _text(fields.get("content"))}
        if role == "tool":
            entry["tool_call_id"] = fields.get("tool_call_id")
        calls = fields.get("tool_calls") or []
        if role == "assistant" and calls:
            entry["tool_calls"] = [
                {
                    "id": call.get("id"),
                    "type": "function",
                    "function": {
                        "name": call.get("name"),
                        "arguments": json.dumps(call.get("args") or {}),
                    },
                }
                for call in calls
            ]
        chat.append(entry)
    return chat


def replaced(messages: list[Any], texts: Mapping[str, str]) -> list[Any]:
    """``messages`` with the content of each ``ToolMessage`` whose call id is in ``texts``."""
    out: list[Any] = []
    for message in messages:
        fields = _fields(message)
        cid = fields.get("tool_call_id")
        if fields.get("type") == "tool" and isinstance(cid, str) and cid in texts:
            if isinstance(message, BaseMessage):
                message = message.model_copy(update={"content": texts[cid]})
            else:
                message = {**message, "content": texts[cid]}
        out.append(message)
    return out


def replaced_inputs(messages: list[Any], inputs: Mapping[str, str]) -> list[Any]:
    """``messages`` with the ``args`` of each tool call whose id is in ``inputs`` replaced
    (``inputs``: call id -> the new arguments as a JSON object's text)."""
    out: list[Any] = []
    for message in messages:
        fields = _fields(message)
        calls = fields.get("tool_calls") or []
        if fields.get("type") == "ai" and any(c.get("id") in inputs for c in calls):
            new = [
                {**c, "args": json.loads(inputs[c["id"]])} if c.get("id") in inputs else c
                for c in calls
            ]
            if isinstance(message, BaseMessage):
                message = message.model_copy(update={"tool_calls": new})
            else:
                message = {**message, "tool_calls": new}
        out.append(message)
    return out
