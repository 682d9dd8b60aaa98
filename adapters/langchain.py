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
dicts (``filecache.prune.codecs.langchain_messages``, re-exported here); ``prune_history``
returns the list with only the pruned ``ToolMessage`` contents replaced (``model_copy``);
``prune_messages`` accepts LangChain lists the same way.

Invariant: a replaced ``ToolMessage`` keeps its ``tool_call_id``, ``name``, ``id`` and position;
every other message is the input's own object.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from filecache.prune.codecs.langchain_messages import replaced, to_chat

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
    from langchain_core.tools import InjectedToolCallId, StructuredTool

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.prune.pruning import PrunePolicy
    from filecache.session import Session

__all__ = ["file_tools", "prune_history", "replaced", "to_chat"]


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


def prune_history(
    messages: list[Any], target: Session | FileCache, policy: PrunePolicy | None = None
) -> list[Any]:
    """``messages`` with the results a prune pass clears or degrades replaced.

    ``target``: the session whose tools answered, or the ``FileCache`` whose bound conversation
    did (``with cache.conversation(run_id):``)."""
    session = resolve(target, "prune_history")
    texts = prune_chat(to_chat(messages), session, policy)
    return replaced(messages, texts) if texts else messages
