"""Which tool calls read, write or edit a file: a data table over the agents' tool schemas.

``FILE_TOOLS`` says, per tool name and path argument, what kind of file access a call is and
where its line range lives; ``file_access(call)`` applies it. This is how a planner without a
session derives the write→read map from a transcript alone.

Invariants: lines are 1-based and ranges inclusive whatever the tool's own convention
(``start_base``); a range argument that is missing, not an integer or out of range counts as
absent (the read is taken as reaching the end of the file). A misread kind errs towards a change
(an edit is never taken for a read), so a planner can only clear too much, never keep a stale
result for current. Paths are returned as the call gives them (absolute or relative), and
compared as such: ``same_path`` is the lenient identity a result's cut relies on (a later read of
``f.py`` may show ``sub/f.py``); ``same_written`` the strict one for clearing an input (the
harmful direction: two relative paths are one file only when equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from filecache.core.kinds import Tool

__all__ = [
    "FILE_TOOLS", "Call", "FileAccess", "FileTool", "file_access", "file_name", "same_path",
    "same_written", "tool_name",
]  # fmt: skip


class Call(Protocol):
    """What ``file_access`` reads of a tool call (``transcript.ToolCall`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> Mapping[str, Any]: ...
    @property
    def message_index(self) -> int: ...


@dataclass(frozen=True)
class FileTool:
    """How one agent's file tool names its path and line range.

    Attributes:
        name: the tool name, exactly as the agent calls it.
        kind: ``read`` | ``write`` | ``edit``; empty when ``command`` chooses it.
        paths: argument names that may hold the path; the row applies to a call that has one
            of them as a string (the first present wins).
        start: argument holding the first line, if any.
        start_base: the ``start`` value that means the first line (1, or 0 for 0-based tools).
        limit: argument holding a line count, if any.
        end: argument holding the last line (1-based, inclusive), if any.
        line_range: argument holding ``[first, last]`` (1-based; ``last`` -1 = to the end).
        command: argument whose value chooses the kind (the text editor tool's ``command``).
        commands: that value → kind; a value not listed means "not a file access".
    """

    name: str
    kind: str
    paths: tuple[str, ...]
    start: str | None = None
    start_base: int = 1
    limit: str | None = None
    end: str | None = None
    line_range: str | None = None
    command: str | None = None
    commands: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


_EDITOR_COMMANDS: Mapping[str, str] = MappingProxyType(
    {
        "view": Tool.READ,
        "create": Tool.WRITE,
        "str_replace": Tool.EDIT,
        "insert": Tool.EDIT,
        "undo_edit": Tool.EDIT,
    }
)


def _text_editor(name: str) -> FileTool:
    return FileTool(
        name, "", ("path",), line_range="view_range", command="command", commands=_EDITOR_COMMANDS
    )


FILE_TOOLS: tuple[FileTool, ...] = (
    # filecache's trace format (docs/design.md, "Session trace format"); also the MCP
    # filesystem server.
    FileTool("read_file", Tool.READ, ("path",), start="offset", limit="limit"),
    FileTool("write_file", Tool.WRITE, ("path",)),
    FileTool("edit_file", Tool.EDIT, ("path",)),
    # Gemini CLI: its path argument tells it from the row above. Before 0.2x read_file took
    # ``absolute_path`` and a 0-based ``offset`` with ``limit``; 0.61 takes ``file_path`` with
    # 1-based ``start_line`` and ``end_line`` (inclusive).
    FileTool(
        "read_file",
        Tool.READ,
        ("absolute_path",),
        start="offset",
        start_base=0,
        limit="limit",
    ),
    FileTool("read_file", Tool.READ, ("file_path",), start="start_line", end="end_line"),
    FileTool("write_file", Tool.WRITE, ("file_path",)),
    FileTool("replace", Tool.EDIT, ("file_path",)),
    # Claude Code.
    FileTool("Read", Tool.READ, ("file_path",), start="offset", limit="limit"),
    FileTool("Write", Tool.WRITE, ("file_path",)),
    FileTool("Edit", Tool.EDIT, ("file_path",)),
    FileTool("MultiEdit", Tool.EDIT, ("file_path",)),
    FileTool("NotebookEdit", Tool.EDIT, ("notebook_path",)),
    # Anthropic's text editor tool (SWE-agent and OpenHands use the same schema).
    _text_editor("str_replace_editor"),
    _text_editor("str_replace_based_edit_tool"),
    # opencode (0-based offset).
    FileTool("read", Tool.READ, ("filePath",), start="offset", start_base=0, limit="limit"),
    FileTool("write", Tool.WRITE, ("filePath",)),
    FileTool("edit", Tool.EDIT, ("filePath",)),
    # Cline.
    FileTool("write_to_file", Tool.WRITE, ("path",)),
    FileTool("replace_in_file", Tool.EDIT, ("path",)),
)
"""Known file tools. Add a row to teach the planner another agent's tools."""


@dataclass(frozen=True)
class FileAccess:
    """A file tool call: what it does to which path, and which lines a read asks for.

    ``start`` is the first line (1-based; 1 when the call names none), ``end`` the last line
    (inclusive) or ``None`` for "to the end of the file". Writes and edits cover the whole file.
    Whether the call succeeded is not known here (see the result's ``is_error`` or text).
    """

    call_id: str
    message_index: int
    tool: str
    kind: str
    path: str
    start: int = 1
    end: int | None = None


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def tool_name(name: str) -> str:
    """The file tool a call's name stands for: an MCP tool as a host names it
    (``mcp__SERVER__TOOL``: Claude Code, Codex; ``filecache_TOOL``: opencode) is its ``TOOL``."""
    if name.startswith("mcp__"):  # a server name may hold "__"; no file tool's name does
        server, sep, tool = name[5:].rpartition("__")
        if sep and server and tool:
            return tool
    if name.startswith("filecache_") and len(name) > 10:
        return name[10:]
    return name


def _row(call: Call) -> tuple[FileTool, str] | None:
    tool = tool_name(call.name)
    for row in FILE_TOOLS:
        if row.name != tool:
            continue
        for name in row.paths:
            path = call.arguments.get(name)
            if isinstance(path, str) and path:
                return row, path
    return None


def _range(row: FileTool, args: Mapping[str, Any]) -> tuple[int, int | None]:
    if row.line_range is not None:
        bounds = args.get(row.line_range)
        if isinstance(bounds, list) and len(bounds) == 2:
            first, last = _int(bounds[0]), _int(bounds[1])
            if first is not None and first >= 1:
                if last is not None and last >= first:
                    return first, last
                return first, None
        return 1, None
    start = 1
    if row.start is not None:
        given = _int(args.get(row.start))
        if given is not None and given >= row.start_base:
            start = given - row.start_base + 1
    limit = _int(args.get(row.limit)) if row.limit is not None else None
    if limit is not None and limit >= 1:
        return start, start + limit - 1
    last = _int(args.get(row.end)) if row.end is not None else None
    if last is not None and last >= start:
        return start, last
    return start, None


def file_access(call: Call) -> FileAccess | None:
    """What ``call`` does to a file per ``FILE_TOOLS`` (also under an MCP host's name for the
    tool, ``tool_name``), or ``None`` if it is no file access."""
    found = _row(call)
    if found is None:
        return None
    row, path = found
    kind = row.kind
    if row.command is not None:
        kind = row.commands.get(str(call.arguments.get(row.command)), "")
    if not kind:
        return None
    if kind != Tool.READ:
        return FileAccess(call.id, call.message_index, call.name, kind, path)
    start, end = _range(row, call.arguments)
    return FileAccess(call.id, call.message_index, call.name, kind, path, start, end)


def _norm(path: str) -> str:
    return path.removeprefix("./").lstrip("/")


def file_name(path: str) -> str:
    """The last component of ``path``: two paths that may be one file (``same_path``) have
    the same one. A backslash ends a component too: a Windows host's paths (``X:\\app\\a.py``)
    are named by their file name in later turns as anywhere else."""
    return _norm(path).rsplit("/", 1)[-1].rsplit("\\", 1)[-1]


def same_path(a: str, b: str) -> bool:
    """Whether two paths as the transcript gives them may name one file: equal, or one ends
    with the other (``sub/f.py`` and ``f.py``; an absolute path and a relative one)."""
    a, b = _norm(a), _norm(b)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def same_written(a: str, b: str) -> bool:
    """``same_path`` for what supersedes an input (clearing is the harmful direction): two
    relative paths are one file only when equal (``sub/f.py`` is not ``f.py``); an absolute
    path is the relative one it ends with (the root is not known here)."""
    x, y = a.removeprefix("./"), b.removeprefix("./")
    if x == y:
        return True
    if x.startswith("/") == y.startswith("/"):
        return False
    rel, full = (y, x) if x.startswith("/") else (x, y)
    return full.endswith("/" + rel)
