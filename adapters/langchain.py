"""LangChain: filecache's file tools, message conversion, and pruning a message list.

::

    from filecache.adapters.langchain import file_tools, prune_history

    tools = file_tools(cache)            # StructuredTools; call them with the model's ToolCall
    model = chat_model.bind_tools(tools)
    with cache.conversation(run_id):
        ...  # the loop: ai = model.invoke(messages); tool.invoke(call) -> ToolMessage
        messages = prune_history(messages, cache)  # before each model call

The tools take LangChain's injected tool call id (``InjectedToolCallId``: the id FileRefs
name; invoke a tool with the model's ``ToolCall`` so LangChain injects it) and have both a sync
and an async implementation (``invoke``/``ainvoke``; the async one runs filecache's work in a
thread). ``to_chat`` converts messages (objects or their ``model_dump()`` dicts) to OpenAI chat
dicts; ``prune_history`` returns the list with only the pruned ``ToolMessage`` contents
replaced (``model_copy``); ``prune_messages`` accepts LangChain lists the same way.

Invariant: a replaced ``ToolMessage`` keeps its ``tool_call_id``, ``name``, ``id`` and position;
every other message is the input's own object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from .frameworks import (
    EDIT_DOC,
    READ_DOC,
    WRITE_DOC,
    prune_chat,
    requires,
    resolve,
    run_file_tool,
)
from .frameworks import run_file_tool_async as _run

with requires("langchain_core", "langchain-core"):
    from langchain_core.messages import BaseMessage
    from langchain_core.tools import InjectedToolCallId, StructuredTool

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.prune.pruning import PrunePolicy
    from filecache.session import Session

__all__ = ["file_tools", "prune_history", "replaced", "to_chat"]

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def file_tools(target: Session | FileCache) -> list[StructuredTool]:
    """``read_file``, ``write_file``, ``edit_file`` as LangChain ``StructuredTool``s."""

    def read_file(
        path: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        offset: int | None = None,
        limit: int | None = None,
        mode: str = "auto",
        symbol: str | None = None,
        fresh: bool = False,
    ) -> str:
        args = {"path": path, "offset": offset, "limit": limit, "mode": mode, "symbol": symbol}
        return run_file_tool(target, "read_file", {**args, "fresh": fresh}, tool_call_id)

    async def aread_file(
        path: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        offset: int | None = None,
        limit: int | None = None,
        mode: str = "auto",
        symbol: str | None = None,
        fresh: bool = False,
    ) -> str:
        args = {"path": path, "offset": offset, "limit": limit, "mode": mode, "symbol": symbol}
        return await _run(target, "read_file", {**args, "fresh": fresh}, tool_call_id)

    def write_file(
        path: str, content: str, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> str:
        return run_file_tool(target, "write_file", {"path": path, "content": content}, tool_call_id)

    async def awrite_file(
        path: str, content: str, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> str:
        return await _run(target, "write_file", {"path": path, "content": content}, tool_call_id)

    def edit_file(
        path: str,
        old_string: str,
        new_string: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        replace_all: bool = False,
    ) -> str:
        args = {"path": path, "old_string": old_string, "new_string": new_string}
        return run_file_tool(
            target, "edit_file", {**args, "replace_all": replace_all}, tool_call_id
        )

    async def aedit_file(
        path: str,
        old_string: str,
        new_string: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        replace_all: bool = False,
    ) -> str:
        args = {"path": path, "old_string": old_string, "new_string": new_string}
        return await _run(target, "edit_file", {**args, "replace_all": replace_all}, tool_call_id)

    return [
        StructuredTool.from_function(
            func=sync, coroutine=coro, name=name, description=doc.split("\nArgs:")[0].strip()
        )
        for name, sync, coro, doc in (
            ("read_file", read_file, aread_file, READ_DOC),
            ("write_file", write_file, awrite_file, WRITE_DOC),
            ("edit_file", edit_file, aedit_file, EDIT_DOC),
        )
    ]


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


def prune_history(
    messages: list[Any], target: Session | FileCache, policy: PrunePolicy | None = None
) -> list[Any]:
    """``messages`` with the results a prune pass clears or degrades replaced.

    ``target``: the session whose tools answered, or the ``FileCache`` whose bound conversation
    did (``with cache.conversation(run_id):``)."""
    session = resolve(target, "prune_history")
    texts = prune_chat(to_chat(messages), session, policy)
    return replaced(messages, texts) if texts else messages
