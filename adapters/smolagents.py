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

from .frameworks import EDIT_DOC, READ_DOC, WRITE_DOC, requires, run_file_tool

with requires("smolagents", "smolagents"):
    from smolagents import Tool, tool

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.session import Session

__all__ = ["file_tools"]


def file_tools(target: Session | FileCache) -> list[Tool]:
    """``read_file``, ``write_file``, ``edit_file`` as smolagents tools."""

    def read_file(
        path: str,
        offset: int | None = None,
        limit: int | None = None,
        mode: str = "auto",
        symbol: str | None = None,
        fresh: bool = False,
    ) -> str:
        args = {"path": path, "offset": offset, "limit": limit, "mode": mode, "symbol": symbol}
        return run_file_tool(target, "read_file", {**args, "fresh": fresh}, None)

    def write_file(path: str, content: str) -> str:
        return run_file_tool(target, "write_file", {"path": path, "content": content}, None)

    def edit_file(path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        args = {"path": path, "old_string": old_string, "new_string": new_string}
        return run_file_tool(target, "edit_file", {**args, "replace_all": replace_all}, None)

    read_file.__doc__, write_file.__doc__, edit_file.__doc__ = READ_DOC, WRITE_DOC, EDIT_DOC
    return [tool(read_file), tool(write_file), tool(edit_file)]
