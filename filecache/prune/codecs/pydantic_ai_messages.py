"""pydantic-ai ``ModelMessage`` lists ⇄ OpenAI chat dicts, for pruning a pydantic-ai history.

``to_chat`` converts the history to OpenAI chat dicts (tool results and calls keep their ids),
which ``openai_chat`` parses; ``replaced`` puts pruned result texts back: the list with only
the pruned ``ToolReturnPart`` contents replaced (every other part is the input's own object).

``replaced_inputs`` puts a superseded call's new arguments back (a ``ToolCallPart``'s ``args``,
a dict or a JSON string as it was).

Invariant: a replaced result keeps its ``tool_call_id``, ``tool_name`` and position; a subclass
of ``ToolReturnPart`` (tool search, capability loading: structured content pydantic-ai reads
back) is never rewritten.

Imports ``pydantic_ai`` (``filecache.prune.sdk_messages`` loads this module only when a list
holds pydantic-ai messages); pure otherwise.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from filecache.extras import requires

with requires("pydantic_ai", "pydantic-ai-slim", "pruning pydantic-ai messages"):
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

__all__ = ["replaced", "replaced_inputs", "to_chat"]


def to_chat(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """The history as OpenAI chat dicts (tool results and calls keep their ids)."""
    chat: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                {
                    "id": p.tool_call_id,
                    "type": "function",
                    "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
                }
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
            chat.append(entry)
            continue
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                chat.append({"role": "system", "content": part.content})
            elif isinstance(part, UserPromptPart):
                content = part.content if isinstance(part.content, str) else "[user content]"
                chat.append({"role": "user", "content": content})
            elif isinstance(part, ToolReturnPart):
                body = part.model_response_str()
                chat.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": body})
            elif isinstance(part, RetryPromptPart):
                if part.tool_name is None:
                    chat.append({"role": "user", "content": part.model_response()})
                else:
                    body = part.model_response()
                    chat.append(
                        {"role": "tool", "tool_call_id": part.tool_call_id, "content": body}
                    )
    return chat


def _replaced_part(part: ModelRequestPart, texts: Mapping[str, str]) -> ModelRequestPart:
    # Exactly ToolReturnPart: its subclasses carry structured content pydantic-ai reads back.
    if type(part) is ToolReturnPart and part.tool_call_id in texts:
        plain: ToolReturnPart[Any] = part
        return dataclasses.replace(plain, content=texts[part.tool_call_id])
    return part


def replaced(messages: list[ModelMessage], texts: Mapping[str, str]) -> list[ModelMessage]:
    """``messages`` with the ``ToolReturnPart`` content of each call id in ``texts`` replaced."""
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest) and any(
            type(p) is ToolReturnPart and p.tool_call_id in texts for p in message.parts
        ):
            parts = [_replaced_part(p, texts) for p in message.parts]
            message = dataclasses.replace(message, parts=parts)
        out.append(message)
    return out


def _replaced_call(part: Any, inputs: Mapping[str, str]) -> Any:
    if isinstance(part, ToolCallPart) and part.tool_call_id in inputs:
        text = inputs[part.tool_call_id]
        return dataclasses.replace(
            part, args=text if isinstance(part.args, str) else json.loads(text)
        )
    return part


def replaced_inputs(messages: list[ModelMessage], inputs: Mapping[str, str]) -> list[ModelMessage]:
    """``messages`` with the ``args`` of each ``ToolCallPart`` whose id is in ``inputs``
    replaced (``inputs``: call id -> the new arguments as a JSON object's text)."""
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse) and any(
            isinstance(p, ToolCallPart) and p.tool_call_id in inputs for p in message.parts
        ):
            message = dataclasses.replace(
                message, parts=[_replaced_call(p, inputs) for p in message.parts]
            )
        out.append(message)
    return out
