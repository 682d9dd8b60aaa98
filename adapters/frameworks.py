"""What the framework adapters share: the session a call answers from, filecache's file tools
as plain Python functions, pruning a history given as OpenAI chat dicts, and guarded imports.

Each adapter (``pydantic_ai``, ``openai_agents``, ``langchain``, ``smolagents``,
``mini_swe_agent``) turns these into its framework's own tools and history hook; the tool
functions take the call id the framework gives them, so FileRefs name the framework's own
tool call ids.

Invariants:
- A call answers from the ``Session`` given, or from the conversation bound for the
  ``FileCache`` given (``filecache.conversations``); never from another conversation's.
- A tool call the model got wrong (a bad path, an edit that does not match, content carrying
  filecache's markers) returns the error's one-line text: the model can act on it, the agent
  loop goes on (``filecache.tools.run_tool``).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from filecache.conversations import current_session
from filecache.core.render import instructions, render_result_tag
from filecache.extras import EXTRA_HINT, requires
from filecache.tools import run_tool

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.prune.pruning import PrunePolicy
    from filecache.session import Session

__all__ = [
    "EXTRA_HINT",
    "READ_DOC",
    "requires",
    "prune_chat",
    "resolve",
    "run_file_tool",
    "run_file_tool_async",
]

_HEADER = re.compile(r"\[[^\n]*, xxh3 ([0-9a-f]{8})\]\n")  # a content answer's header

READ_DOC = f"""Read a text file of the project.

{instructions()}

Args:
    path: File path, relative to the project root.
    offset: First line to read (1-based); omit for the whole file.
    limit: Number of lines to read; omit to read to the end.
    mode: auto (default; an outline for a very large file), full (always content) or outline.
    symbol: Read one definition by name, e.g. Queue.pop, instead of a line range.
    fresh: Send the full content even if you already have it (use when the result a FileRef
        or diff names is no longer in your context).
"""

WRITE_DOC = """Write a whole text file (created if missing).

Args:
    path: File path, relative to the project root.
    content: The file's whole new content (never a filecache answer line).
"""

EDIT_DOC = """Replace exact text in a file.

Args:
    path: File path, relative to the project root.
    old_string: The exact text to replace (it must occur once, unless replace_all).
    new_string: The replacement text.
    replace_all: Replace every occurrence.
"""


def resolve(target: Session | FileCache, what: str = "this tool") -> Session:
    """The session to answer from: ``target`` itself, or the conversation bound for it."""
    from filecache.cache import FileCache
    from filecache.session import Session

    if isinstance(target, Session):
        return target
    if isinstance(target, FileCache):  # FileCache.session gives a Session (hosts.SessionHost)
        return cast("Session", current_session(target, what))
    raise TypeError(f"expected a filecache Session or FileCache, got {type(target).__name__}")


def run_file_tool(
    target: Session | FileCache, name: str, arguments: Mapping[str, Any], call_id: str | None
) -> str:
    """Run filecache's ``read_file``/``write_file``/``edit_file``; errors come back as text."""
    args = {k: v for k, v in arguments.items() if v is not None}
    tag_id = None
    if call_id is None and name == "read_file":  # the framework gives none: name it ourselves
        call_id = tag_id = "fc-" + os.urandom(5).hex()
    output = run_tool(resolve(target, name), name, args, call_id)
    if output.is_error:
        return f"Error: {output.text}"
    header = _HEADER.match(output.text)
    if tag_id is not None and header is not None:  # content: say which id a FileRef will name
        tag = render_result_tag(tag_id, str(args.get("path", "")), "xxh3:" + header.group(1))
        return tag + output.text
    return output.text


async def run_file_tool_async(
    target: Session | FileCache, name: str, arguments: Mapping[str, Any], call_id: str | None
) -> str:
    """``run_file_tool`` off the event loop (the session is resolved here, in the task)."""
    session = resolve(target, name)
    return await asyncio.to_thread(run_file_tool, session, name, arguments, call_id)


def prune_chat(
    chat: list[dict[str, Any]], session: Session, policy: PrunePolicy | None
) -> Mapping[str, str]:
    """Prune a history converted to OpenAI chat dicts: ``{call id: new result text}``."""
    from filecache.prune.pruner import prune_messages

    return prune_messages(chat, session=session, policy=policy, format="openai").plan.replacements
