"""OpenAI Agents SDK: filecache's file tools and a ``call_model_input_filter`` that prunes.

::

    from filecache.adapters.openai_agents import file_tools, input_filter

    agent = Agent(name="coder", tools=file_tools(cache))
    config = RunConfig(call_model_input_filter=input_filter(cache))
    with cache.conversation(run_id):
        await Runner.run(agent, "...", run_config=config)

The tools take the SDK's ``ToolContext`` (its ``tool_call_id`` is the id FileRefs name) and run
filecache's work in a thread. The filter hands the model input (Responses items, which
``prune_messages`` reads as they are) to a prune pass with the session's ledger and returns it
with only the pruned ``function_call_output`` bodies replaced.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .frameworks import EDIT_DOC, READ_DOC, WRITE_DOC, requires, resolve
from .frameworks import run_file_tool_async as _run

with requires("agents", "openai-agents"):
    from agents import FunctionTool, function_tool
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.prune.pruning import PrunePolicy
    from filecache.session import Session

__all__ = ["file_tools", "input_filter", "prune_input"]


def file_tools(target: Session | FileCache) -> list[FunctionTool]:
    """``read_file``, ``write_file``, ``edit_file`` as Agents SDK function tools."""

    async def read_file(
        ctx: ToolContext[Any],
        path: str,
        offset: int | None = None,
        limit: int | None = None,
        mode: str = "auto",
        symbol: str | None = None,
        fresh: bool = False,
    ) -> str:
        args = {"path": path, "offset": offset, "limit": limit, "mode": mode, "symbol": symbol}
        return await _run(target, "read_file", {**args, "fresh": fresh}, ctx.tool_call_id)

    async def write_file(ctx: ToolContext[Any], path: str, content: str) -> str:
        args = {"path": path, "content": content}
        return await _run(target, "write_file", args, ctx.tool_call_id)

    async def edit_file(
        ctx: ToolContext[Any],
        path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> str:
        args = {"path": path, "old_string": old_string, "new_string": new_string}
        return await _run(
            target, "edit_file", {**args, "replace_all": replace_all}, ctx.tool_call_id
        )

    read_file.__doc__, write_file.__doc__, edit_file.__doc__ = READ_DOC, WRITE_DOC, EDIT_DOC
    return [function_tool(read_file), function_tool(write_file), function_tool(edit_file)]


def prune_input(items: list[Any], session: Session, policy: PrunePolicy | None = None) -> list[Any]:
    """Responses input items with the results a prune pass clears or degrades replaced."""
    from filecache.prune.pruner import prune_messages

    result = prune_messages(items, session=session, policy=policy, format="responses")
    return list(result.messages)


def input_filter(
    target: Session | FileCache, policy: PrunePolicy | None = None
) -> Callable[[CallModelData[Any]], Any]:
    """A ``RunConfig(call_model_input_filter=...)`` that prunes with the session's ledger."""

    async def prune(data: CallModelData[Any]) -> ModelInputData:
        session = resolve(target, "the filecache input filter")
        model_data = data.model_data
        items = await asyncio.to_thread(prune_input, list(model_data.input), session, policy)
        return ModelInputData(input=items, instructions=model_data.instructions)

    return prune
