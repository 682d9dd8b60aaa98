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
thread). ``filecache.prune.codecs.langchain_messages.to_chat`` converts messages (objects or
their ``model_dump()`` dicts) to OpenAI chat dicts; ``prune_history``
returns the list with only the pruned ``ToolMessage`` contents replaced (``model_copy``);
``prune_messages`` accepts LangChain lists the same way.

Invariant: a replaced ``ToolMessage`` keeps its ``tool_call_id``, ``name``, ``id`` and position;
every other message is the input's own object.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from filecache.extras import requires
from filecache.prune.codecs import langchain_messages

from .frameworks import CallIdParam, prune_with, tool_functions

with requires("langchain_core", "langchain-core"):
    from langchain_core.tools import InjectedToolCallId, StructuredTool

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.prune.pruning import PrunePolicy
    from filecache.session import Session

__all__ = ["file_tools", "prune_history"]


_CALL_ID = CallIdParam(
    "tool_call_id", Annotated[str, InjectedToolCallId], first=False, call_id=lambda cid: cid
)


def file_tools(target: Session | FileCache) -> list[StructuredTool]:
    """``read_file``, ``write_file``, ``edit_file`` as LangChain ``StructuredTool``s
    (``TOOL_SPECS``; a sync and an async implementation each)."""
    sync = tool_functions(target, call_id=_CALL_ID)
    coro = tool_functions(target, call_id=_CALL_ID, is_async=True)
    return [
        StructuredTool.from_function(
            func=fn,
            coroutine=afn,
            name=fn.__name__,
            description=(fn.__doc__ or "").split("\n\nArgs:")[0].strip(),
        )
        for fn, afn in zip(sync, coro, strict=True)
    ]


def prune_history(
    messages: list[Any], target: Session | FileCache, policy: PrunePolicy | None = None
) -> list[Any]:
    """``messages`` with the results a prune pass clears or degrades replaced.

    ``target``: the session whose tools answered, or the ``FileCache`` whose bound conversation
    did (``with cache.conversation(run_id):``)."""
    return prune_with(langchain_messages, messages, target, policy)
