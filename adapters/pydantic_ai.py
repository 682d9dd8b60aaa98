"""pydantic-ai: filecache's file tools and a history processor.

::

    from filecache.adapters.pydantic_ai import file_tools, history_capability

    agent = Agent(model, tools=file_tools(cache), capabilities=[history_capability(cache)])
    with cache.conversation(run_id):
        agent.run_sync("...")

The tools take pydantic-ai's ``RunContext`` (its ``tool_call_id`` is the id FileRefs name) and
run filecache's work in a thread. The history processor (``history_processor``; pydantic-ai
2.x takes it as the ``ProcessHistory`` capability, ``history_capability``) converts the
``ModelMessage`` list to OpenAI chat dicts (``filecache.prune.codecs.pydantic_ai_messages``),
plans a prune with the session's ledger, and
returns the list with only the pruned ``ToolReturnPart`` contents replaced (every other part
is the input's own object).
``prune_history`` does the same for a list outside an agent run.

Invariant: a replaced result keeps its ``tool_call_id``, ``tool_name`` and position.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from filecache.extras import requires
from filecache.prune.codecs import pydantic_ai_messages

from .frameworks import CallIdParam, prune_with, resolve, tool_functions

with requires("pydantic_ai", "pydantic-ai-slim"):
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.messages import ModelMessage

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.prune.pruning import PrunePolicy
    from filecache.session import Session

__all__ = [
    "file_tools",
    "history_capability",
    "history_processor",
    "prune_history",
]


_CONTEXT = CallIdParam("ctx", RunContext[Any], first=True, call_id=lambda ctx: ctx.tool_call_id)


def file_tools(target: Session | FileCache) -> list[Tool[Any]]:
    """``read_file``, ``write_file``, ``edit_file`` as pydantic-ai tools (``TOOL_SPECS``)."""
    return [Tool(fn) for fn in tool_functions(target, call_id=_CONTEXT, is_async=True)]


def prune_history(
    messages: list[ModelMessage], target: Session | FileCache, policy: PrunePolicy | None = None
) -> list[ModelMessage]:
    """``messages`` with the results a prune pass clears or degrades replaced.

    ``target``: the session whose tools answered, or the ``FileCache`` whose bound conversation
    did (``with cache.conversation(run_id):``)."""
    return prune_with(pydantic_ai_messages, messages, target, policy)


def history_processor(
    target: Session | FileCache, policy: PrunePolicy | None = None
) -> Callable[[RunContext[Any], list[ModelMessage]], Any]:
    """A ``history_processors`` entry that prunes with the session's ledger."""

    async def prune(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        session = resolve(target, "the filecache history processor")
        return await asyncio.to_thread(prune_history, messages, session, policy)

    return prune


def history_capability(
    target: Session | FileCache, policy: PrunePolicy | None = None
) -> ProcessHistory[Any]:
    """``history_processor`` as the capability pydantic-ai 2.x agents take (``capabilities=``)."""
    return ProcessHistory(history_processor(target, policy))
