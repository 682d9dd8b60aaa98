"""What a host's own tool result shows of a file: path, first line, the lines' text (pure).

``shown_by(call, text, cwd)`` reads one tool call and its result text:

- Claude Code's ``Read`` (``     N→text`` or ``N<TAB>text`` lines, maybe under a header line and
  followed by a ``<system-reminder>`` block), filecache's own content answers and SWE-agent's
  ``cat -n`` views (the trace format's ``read_file``, the text editor's ``view``): numbered
  lines, one consecutive run;
- opencode's ``read`` (``<path>P</path>`` ``<type>file</type>`` ``<content>`` ``N: text``
  lines and a footer);
- shell reads through a host's shell tool (Claude Code's ``Bash``, Codex's ``exec_command`` /
  ``shell`` with its ``Output:`` frame, a trace's ``bash``): ``cat``, ``cat -n``, ``nl -ba``,
  ``sed -n``, ``head``, ``tail -n +N`` of one file, parsed by ``shell.shell_parse``, after any
  ``cd DIR &&`` prefixes (tracked, so a relative path resolves). An output the host cut
  (Claude Code's ``... [N lines truncated] ...``, Codex's omission markers) shows no lines.
  Claude Code's Bash drops the output's leading and trailing blank lines: its rows are counted
  from the line the command starts at, as a reader of the output can only count them (a
  reference is decided on the rows' text, so it stands for exactly the rows shown).

``changed_path(call, cwd)`` names the file a write or edit (Claude Code's ``Write``/``Edit``/
``MultiEdit``, opencode's ``write``/``edit``, the trace format's tools) changes; ``apply_patch``
and shell commands that are no read change files the transform cannot name (``UNKNOWN``).

Invariants: a ``Shown`` holds only lines the text shows whole and in order (the lines' own text,
without their number prefix or end of line); anything it cannot place exactly is None, never a
guess. Paths are normalised (``posixpath.normpath``, joined to ``cwd`` when relative and a cwd is
known) so two results of one file compare; a wrong path can never make a reference false, since
references are decided on the lines' text alone (``delta``).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from filecache.core.render import MARKER
from filecache.prune.codecs.base import ToolCall
from filecache.prune.file_tools import file_access
from filecache.shell.shell_parse import NotServable, ShellRead, parse_shell_read, selection

__all__ = ["UNKNOWN", "Shown", "changed_path", "shell_command", "shown_by", "split_body"]

UNKNOWN = "\0unknown"
"""``changed_path`` of a call that may change files it does not name (``apply_patch``)."""

_NUMBERED = re.compile(r"^ *(\d+)(?:→|\t)(.*)$")
_BARE_NUMBER = re.compile(r"^ *\d+$")
_REMINDER = "<system-reminder>"
_CUT = "... (line truncated to 2000 chars)"
_OC_HEAD = re.compile(r"<path>([^\n]*)</path>\n<type>file</type>\n<content>\n")
_OC_LINE = re.compile(r"(\d+): ")
_OC_FOOTER = "\n\n("
_CD = re.compile(r"^\s*cd\s+([^\s;&|]+)\s*&&\s*")
_CODEX_FRAME = "Process exited with code 0\n"
_CODEX_OUTPUT = "\nOutput:\n"
_TRUNCATED = re.compile(
    r"^\.\.\. \[\d+ lines truncated\] \.\.\.$"  # Claude Code's Bash
    r"|\[\.\.\. omitted \d+ of \d+ lines \.\.\.\]"  # Codex
    r"|\u2026\d+ (?:tokens|chars) truncated\u2026",  # Codex
    re.MULTILINE,
)
_SHELL_TOOLS = frozenset(
    {"Bash", "bash", "shell", "exec_command", "local_shell", "run_shell", "run_shell_command"}
)
_PATCH_TOOLS = frozenset({"apply_patch", "patch"})
_READ_TOOLS = frozenset({"Read", "read_file", "read", "view", "str_replace_editor"})
_GEMINI_PATHS = ("file_path", "absolute_path")  # Gemini CLI's read_file (numbers no lines)
_GEMINI_RANGE = re.compile(
    r"\nIMPORTANT: The file content has been truncated\.\n"
    r"Status: Showing lines (\d+)-(\d+) of \d+ total lines\.\n.*?\n"
    r"--- FILE CONTENT \(truncated\) ---\n",
    re.DOTALL,
)
_GEMINI_NOT_CONTENT = (
    "Cannot display content of", "Could not read file", "File size exceeds", "Error reading file",
    "Unhandled file type", "[filecache]",
)  # fmt: skip
_GEMINI_CUT = "... [truncated]"
_GEMINI_SHELL = re.compile(
    r"<untrusted_context>\nOutput: (.*)(\nProcess Group PGID: \d+\n</untrusted_context>)",
    re.DOTALL,
)
_GEMINI_SECTION = re.compile(r"^(?:Error|Exit Code|Signal|Background PIDs|Process Group PGID): ",
                             re.MULTILINE)  # fmt: skip


@dataclass(frozen=True)
class Shown:
    """Lines ``start..start+len(lines)-1`` of ``path`` as a result shows them.

    ``window``: what the call asked for (its range arguments or its command's selection), so
    two results of the same request shape can be diffed line for line. ``prefix``/``suffix``:
    the result's text before and after the lines (a header, a footer, a reminder), kept around a
    reference. ``exact``: the lines are the file's own text (never cut or re-wrapped)."""

    path: str
    start: int
    lines: tuple[str, ...]
    window: str
    prefix: str = ""
    suffix: str = ""

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1

    def line(self, n: int) -> str | None:
        k = n - self.start
        return self.lines[k] if 0 <= k < len(self.lines) else None


def _norm(path: str, cwd: str | None) -> str:
    if cwd and not path.startswith("/"):
        path = posixpath.join(cwd, path)
    return posixpath.normpath(path) if path else path


def split_body(text: str) -> tuple[str, str]:
    """(the body, the trailing ``<system-reminder>`` block with what precedes it on its line)."""
    at = text.find(_REMINDER)
    if at < 0:
        return text, ""
    cut = text.rfind("\n", 0, at)
    cut = cut if cut >= 0 else at
    while cut > 0 and text[cut - 1] == "\n":
        cut -= 1
    return text[:cut], text[cut:]


def numbered_lines(text: str) -> tuple[int, tuple[str, ...], str, str] | None:
    """``(first line, lines, prefix, suffix)`` of one run of consecutively numbered lines (a
    header line may come first, a reminder after); None if the text is not that."""
    body, suffix = split_body(text)
    rows = body.split("\n")
    head = ""
    if rows and not _NUMBERED.match(rows[0]):
        head = rows[0] + "\n"
        rows = rows[1:]
    while rows and rows[-1] == "":
        rows.pop()  # the final newline (and blank lines after the last numbered one)
        suffix = "\n" + suffix
    if rows and _BARE_NUMBER.match(rows[-1]):
        rows.pop()  # a last line whose blank text a harness stripped: not placed
        while rows and rows[-1] == "":
            rows.pop()
    if not rows:
        return None
    start = -1
    lines: list[str] = []
    for k, row in enumerate(rows):
        found = _NUMBERED.match(row)
        if found is None:
            return None
        number = int(found[1])
        if k == 0:
            start = number
        elif number != start + k:
            return None
        if found[2].endswith(_CUT):
            return None
        lines.append(found[2])
    if head.startswith(MARKER + " "):
        return None  # a FileRef's or diff's head line, not a content header
    return start, tuple(lines), head, suffix


def _opencode(text: str) -> tuple[str, int, tuple[str, ...], str, str] | None:
    head = _OC_HEAD.match(text)
    if head is None:
        return None
    end = text.find(_OC_FOOTER, head.end())
    if end < 0:
        return None
    rows = text[head.end() : end].split("\n")
    start = -1
    lines: list[str] = []
    for k, row in enumerate(rows):
        found = _OC_LINE.match(row)
        if found is None:
            return None
        if k == 0:
            start = int(found[1])
        elif int(found[1]) != start + k:
            return None
        shown = row[found.end() :]
        if shown.endswith(_CUT):
            return None
        lines.append(shown)
    return head[1], start, tuple(lines), text[: head.end()], text[end:]


def shell_command(call: ToolCall) -> tuple[str, str | None] | None:
    """(the command line, the call's own working folder) of a shell tool call, or None."""
    if call.name not in _SHELL_TOOLS:
        return None
    args = call.arguments
    given: Any = args.get("command", args.get("cmd"))
    given_folder = args.get("workdir", args.get("dir_path"))  # Codex, Gemini CLI
    folder = given_folder if isinstance(given_folder, str) else None
    if isinstance(given, list) and all(isinstance(w, str) for w in given):
        if len(given) == 3 and given[0] in ("bash", "sh", "zsh") and given[1] in ("-lc", "-c"):
            return given[2], folder
        return shlex.join(given), folder
    if isinstance(given, str):
        return given, folder
    return None


def _shell_output(call: ToolCall, text: str) -> str | None:
    """The command's stdout as the host shows it (None: it failed, or the frame is unknown)."""
    if call.name == "exec_command" or text.startswith(("Chunk ID:", "Wall time:", "Process ")):
        if _CODEX_FRAME not in text or _CODEX_OUTPUT not in text:
            return None
        return text.split(_CODEX_OUTPUT, 1)[1]
    if call.name == "shell" and text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        meta = data.get("metadata") if isinstance(data, dict) else None
        if not isinstance(meta, dict) or meta.get("exit_code") != 0:
            return None
        out = data.get("output")
        return out if isinstance(out, str) else None
    if call.name == "run_shell_command":  # Gemini CLI: the terminal drops the last newline
        found = _gemini_shell(text)
        if found is None:
            return None
        output = found[1]
        return output + "\n" if output and not output.endswith("\n") else output
    if call.name == "Bash":  # Claude Code strips the output's last newline
        return text + "\n" if text and not text.endswith("\n") else text
    return text


def _gemini_shell(text: str) -> tuple[str, str, str] | None:
    """(prefix, output, suffix) of a Gemini CLI shell result that exited 0 in the foreground
    and printed something (no ``Exit Code``, ``Error``, ``Signal`` or ``Background PIDs``
    section: any line of the output that looks like one is refused)."""
    found = _GEMINI_SHELL.fullmatch(text)
    if found is None or found[1] == "(empty)" or _GEMINI_SECTION.search(found[1]):
        return None
    return text[: found.start(1)], found[1], found[2]


def _order(read: ShellRead, rows: int) -> list[int] | None:
    """The line numbers a read prints for its first ``rows`` output lines, when they do not
    depend on the file's length (``tail -n N``, ``$p``) and run consecutively."""
    size = 2 + rows + sum(s.count + sum(abs(a) + abs(b) for a, b in s.ranges) for s in read.stages)
    try:
        lines = [n for _, n in selection(read, [size])]
        longer = [n for _, n in selection(read, [size + 1])]
    except NotServable:
        return None
    if longer[: len(lines)] != lines:
        return None
    lines = lines[:rows]
    if len(lines) < rows or any(b != a + 1 for a, b in zip(lines, lines[1:], strict=False)):
        return None
    return lines


def _shell_shown(call: ToolCall, text: str, cwd: str | None) -> Shown | None:
    found = shell_command(call)
    if found is None:
        return None
    command, folder = found
    where = _norm(folder, cwd) if folder else cwd
    while (cd := _CD.match(command)) is not None:
        where = _norm(cd[1], where)
        command = command[cd.end() :]
    read = parse_shell_read(command)
    if read is None or read.grep is not None or len(read.paths) != 1:
        return None
    output = _shell_output(call, text)
    if output is None or not output or _TRUNCATED.search(output) is not None:
        return None  # failed, empty, or cut by the host: its rows are not the file's lines
    frame = text[: len(text) - len(output)] if text.endswith(output) else ""
    suffix = ""
    gemini = _gemini_shell(text) if call.name == "run_shell_command" else None
    if gemini is not None:
        frame, _, suffix = gemini
    window = f"shell:{read.numbering}:{read.stages!r}"
    path = _norm(read.path, where)
    if read.numbering:
        parsed = numbered_lines(output)
        if parsed is None or parsed[2]:
            return None
        start, lines, _, _ = parsed
        return Shown(path, start, lines, window, frame, suffix)
    rows = output.split("\n")
    if rows[-1] != "":
        return None  # an unterminated last line: not told apart from a cut one
    rows.pop()
    order = _order(read, len(rows))
    if not rows or order is None:
        return None
    return Shown(path, order[0], tuple(rows), window, frame, suffix)


def _range_window(call: ToolCall) -> str:
    args = call.arguments
    keys = ("offset", "limit", "view_range", "start_line", "end_line")
    return "read:" + json.dumps([args.get(k) for k in keys])


def shown_by(call: ToolCall, text: str, cwd: str | None = None) -> Shown | None:
    """What ``text``, the result of ``call``, shows of a file (module docstring), or None."""
    if call.name in _SHELL_TOOLS:
        return _shell_shown(call, text, cwd)
    access = file_access(call)
    path = access.path if access is not None and access.kind == "read" else None
    if path is None and call.name not in _READ_TOOLS:
        return None
    if call.name == "read" and text.startswith("<path>"):
        found = _opencode(text)
        if found is None or path is None:
            return None
        _, start, lines, prefix, suffix = found
        return Shown(_norm(path, cwd), start, lines, _range_window(call), prefix, suffix)
    if path is None:
        return None
    if call.name == "read_file" and any(k in call.arguments for k in _GEMINI_PATHS):
        return _gemini_read(call, text, _norm(path, cwd))
    parsed = numbered_lines(text)
    if parsed is None:
        return None
    start, lines, prefix, suffix = parsed
    return Shown(_norm(path, cwd), start, lines, _range_window(call), prefix, suffix)


def _gemini_read(call: ToolCall, text: str, path: str) -> Shown | None:
    """Gemini CLI's ``read_file``: the file's lines as they are (split on ``\\r?\\n``, so a
    final newline shows as a last, empty line), after a header naming the range when the read
    was partial. A line cut to 2,000 characters, or a text that is a message, is no content."""
    if text.startswith(_GEMINI_NOT_CONTENT):
        return None
    start, skip = 1, 0
    head = _GEMINI_RANGE.match(text)
    if head is not None:  # a reference replaces the header too: it names the lines itself
        start, skip = int(head[1]), head.end()
    elif text.startswith("\nIMPORTANT:"):
        return None
    lines = tuple(text[skip:].split("\n"))
    if head is not None and int(head[2]) - start + 1 != len(lines):
        return None
    if any(line.endswith(_GEMINI_CUT) for line in lines):
        return None
    return Shown(path, start, lines, _range_window(call))


_CHANGE_TOOLS = ("write", "edit")


def changed_path(call: ToolCall, cwd: str | None = None) -> str | None:
    """The file ``call`` writes or edits (normalised), ``UNKNOWN`` for a patch or a shell
    command that may change files, None for a call that changes none it knows of."""
    if call.name in _PATCH_TOOLS:
        return UNKNOWN
    found = shell_command(call)
    if found is not None:
        command = found[0]
        while (cd := _CD.match(command)) is not None:
            command = command[cd.end() :]
        return None if parse_shell_read(command) is not None else UNKNOWN
    access = file_access(call)
    if access is None or access.kind not in _CHANGE_TOOLS:
        return None
    return _norm(access.path, cwd)


def working_folder(texts: Sequence[str]) -> str | None:
    """The session's working folder as a host states it in its system prompt or environment
    block (Claude Code, opencode: ``Working directory: /p``; Codex: ``<cwd>/p</cwd>``);
    memoised (every request of a conversation repeats these texts)."""
    key = tuple(texts)
    if key in _FOLDERS:
        return _FOLDERS[key]
    if len(_FOLDERS) >= 256:
        _FOLDERS.clear()
    found = _FOLDERS[key] = _working_folder(texts)
    return found


_FOLDERS: dict[tuple[str, ...], str | None] = {}


def _working_folder(texts: Sequence[str]) -> str | None:
    for text in texts:
        found = _CWD.search(text)
        if found is not None:
            return posixpath.normpath(found[1] or found[2] or found[3])
    return None


_CWD = re.compile(
    r"(?:[Ww]orking directory|cwd): *(/[^\s<>\"']*)|<cwd>(/[^<\n]*)</cwd>"
    r"|\*\*Workspace Directories:\*\*\n *- (/[^\n]*)"  # Gemini CLI's session context
)


def request_texts(payload: Mapping[str, Any], messages: Sequence[Any]) -> list[str]:
    """The texts a host states its working folder in: the system prompt, the instructions, the
    first user messages."""
    out: list[str] = []
    for key in ("system", "instructions", "systemInstruction"):
        value = payload.get(key)
        out.extend(_texts(value))
    for message in messages[:3]:
        if isinstance(message, dict):
            out.extend(_texts(message.get("content", message.get("parts"))))
    return out


def _texts(value: object) -> list[str]:
    if isinstance(value, dict):  # Gemini's systemInstruction
        value = value.get("parts")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [
            str(b.get("text"))
            for b in value
            if isinstance(b, dict) and isinstance(b.get("text"), str)
        ]
    return []
