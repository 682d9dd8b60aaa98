"""The small vocabularies filecache compares by: enums whose members equal their strings.

- ``Kind``: the kind of an answer and of a ledger row (``full``, ``unchanged``, ``written``, ...;
  defined in ``filecache.core.results``, re-exported here).
- ``Tool``: what a ledger row, or a file tool call in a transcript, did (``read``, ``write``,
  ``edit``, ``change``, ...). Not the tool *names* of ``filecache.tools`` (``read_file``).
- ``Tier``: how far a prune pass has degraded a tool result (``keep`` < ``outline`` /
  ``truncate`` < ``clear``).
- ``Format``: a message list's format (``openai`` chat completions, OpenAI ``responses`` input
  items, ``anthropic`` Messages): the built-in codecs of ``filecache.prune.codecs``.

Each is a ``StrEnum``: a member is a ``str`` equal to its value, so what is stored, printed and
dumped to JSON stays the plain string, and rows read back from a store (plain strings) compare
equal to the members.
"""

from __future__ import annotations

from enum import StrEnum

from filecache.core.results import Kind

__all__ = ["CHANGES", "FILE_ACCESSES", "Format", "Kind", "Tier", "Tool"]


class Tool(StrEnum):
    """What a call did to a file, as the ledger records it (an event's ``tool``)."""

    READ = "read"
    WRITE = "write"
    EDIT = "edit"
    CHANGE = "change"  # the file changed outside the agent (or a host's own tool changed it)
    FORGET = "forget"  # results the model no longer has (a prune pass)
    OTHER = "other"  # a transcript's call of a tool that is none of the file tools


CHANGES = (Tool.WRITE, Tool.EDIT, Tool.CHANGE)
"""The tools after which a file's content is new."""
FILE_ACCESSES = (Tool.READ, *CHANGES)
"""The tools of a file's history (what supersedes, and is superseded)."""


class Tier(StrEnum):
    """How far a prune pass has degraded a tool result."""

    KEEP = "keep"
    OUTLINE = "outline"
    TRUNCATE = "truncate"
    CLEAR = "clear"


class Format(StrEnum):
    """A message list's format."""

    OPENAI = "openai"
    RESPONSES = "responses"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"
