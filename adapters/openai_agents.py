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

from filecache.extras import requires

from .frameworks import CallIdParam, resolve, tool_functions

with requires("agents", "openai-agents"):
    from agents import FunctionTool, function_tool
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.prune.pruning import PrunePolicy
    from filecache.session import Session

__all__ = ["file_tools", "input_filter", "prune_input"]


_CONTEXT = CallIdParam("ctx", ToolContext[Any], first=True, call_id=lambda ctx: ctx.tool_call_id)


def file_tools(target: Session | FileCache) -> list[FunctionTool]:
    """``read_file``, ``write_file``, ``edit_file`` as Agents SDK tools (``TOOL_SPECS``)."""
    return [function_tool(fn) for fn in tool_functions(target, call_id=_CONTEXT, is_async=True)]


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
