"""smolagents: filecache's file tools for ``CodeAgent`` and ``ToolCallingAgent``.

::

    from filecache.adapters.smolagents import file_tools

    agent = CodeAgent(tools=file_tools(cache), model=model)
    with cache.conversation(run_id):
        agent.run("...")

smolagents does not hand a tool its call id (a ``CodeAgent``'s calls are Python calls inside
the model's code), so each content answer starts with one tag line naming the id filecache
gave it (``[filecache] result fc-…``), and a later FileRef names that id. A ``CodeAgent``'s
code can pass a FileRef string on to ``write_file``/``edit_file``: filecache refuses content
carrying its own markers, and the tool answers with the error's text, which tells the model to
read the file with ``fresh=True``. Decorated tools of the agent's own (``@cache.write_tool``
under smolagents' ``@tool``) raise ``MarkerError`` instead, which smolagents reports to the
model as the step's error.

Invariant: the tools answer from the conversation bound where they run (smolagents copies the
context into its tool threads), never from another conversation's session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from filecache.extras import requires

from .frameworks import tool_functions

with requires("smolagents", "smolagents"):
    from smolagents import Tool, tool

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.session import Session

__all__ = ["file_tools"]


def file_tools(target: Session | FileCache) -> list[Tool]:
    """``read_file``, ``write_file``, ``edit_file`` as smolagents tools (``TOOL_SPECS``)."""
    return [tool(fn) for fn in tool_functions(target)]
