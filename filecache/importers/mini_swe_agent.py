"""mini-swe-agent trajectories (``.traj.json``, 1.x and 2.x) -> session traces.

mini-swe-agent has one tool, bash. Three forms of a step occur:

- 1.x: an assistant message with its reasoning and one fenced ````` ```bash ````` block; the next
  user message holds ``<returncode>`` and ``<output>`` (long outputs as ``<output_head>`` /
  ``<output_tail>``).
- 2.x text-based (``mini_textbased.yaml``): the same with a ````` ```mswea_bash_command `````
  block (or ``<mswea_bash_command>`` tags); the user message after it carries
  ``extra.raw_output``, the command's exact output.
- 2.x tool calls (the default ``mini.yaml``): an assistant message with ``tool_calls`` (one or
  more ``bash {command}``), each answered by a ``tool`` message with its ``tool_call_id``,
  its content a JSON object (``returncode``, ``output``) and ``extra.raw_output``.

The trace keeps the system and task messages, every command as a ``bash`` tool call
(``call_<n>`` for a fenced block, the model's own id for a tool call) and its result verbatim;
any other message stays as it is (format errors included); a 2.x ``exit`` message (the
submission, which the model never saw) is left out. ``cwd`` (the agent's working directory)
goes into the trace, so replay can map the commands' paths to ``files/``.

Shell reads (``shell_parse``) stay shell commands: replay answers them through the cache
(``replay_shell``). The log does not carry the repository, so ``files/`` is rebuilt from what
those reads show (``trace.py``), and each read is checked against the rebuilt files.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from filecache.errors import TranscriptError
from filecache.importers.logs import (
    changed_paths,
    content_text,
    load_json,
    relative_path,
    trace_name,
)
from filecache.importers.trace import FileCall, Recorded, Shown, tool_call
from filecache.shell.shell_edit import EditStep, parse_shell_edit
from filecache.shell.shell_parse import ShellRead, parse_shell_read, selection

__all__ = ["parse_mini_swe_agent"]

_BLOCK = re.compile(
    r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```|<mswea_bash_command>(.*?)</mswea_bash_command>",
    re.DOTALL,
)
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_NUMBERED = re.compile(r"^ *(\d+)\t(.*)$")
_ROLES = ("system", "user", "assistant", "tool")


def _between(text: str, tag: str) -> str | None:
    start, end = f"<{tag}>\n", f"</{tag}>"
    if start not in text or end not in text:
        return None
    return text[text.index(start) + len(start) : text.rindex(end)]


def _blocks(text: str) -> list[str]:
    return [(a or b).strip() for a, b in _BLOCK.findall(text)]


def _result(message: dict[str, Any]) -> tuple[int | None, str | None, tuple[str, str] | None]:
    """(returncode, the whole output, or (head, tail) of a cut one) of an observation."""
    text = content_text(message.get("content"))
    extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
    code: int | None = None
    raw = extra.get("raw_output") if isinstance(extra, dict) else None
    if isinstance(extra, dict) and isinstance(extra.get("returncode"), int):
        code = extra["returncode"]
    found = _RETURNCODE.search(text)
    if code is None and found:
        code = int(found.group(1))
    if isinstance(raw, str):
        return code, raw, None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            rc = data.get("returncode")
            code = rc if isinstance(rc, int) else code
            if isinstance(data.get("output"), str):
                return code, data["output"], None
            head, tail = data.get("output_head"), data.get("output_tail")
            if isinstance(head, str) and isinstance(tail, str):
                return code, None, (head, tail)
    body = _between(text, "output")
    if body is not None:
        return code, body, None
    head, tail = _between(text, "output_head"), _between(text, "output_tail")
    if head is None or tail is None:
        return code, None, None
    # The template puts a newline after each part: the cut line before it is not a whole line.
    return code, None, (head.removesuffix("\n"), tail.removesuffix("\n"))


def _order(read: ShellRead, rows: int) -> tuple[list[int], bool] | None:
    """The line numbers a read prints for its first ``rows`` output lines, and whether they
    are one ascending run; None when they depend on the file's length (tail, ``$p``)."""
    stages = read.stages
    size = 2 + rows + sum(s.count + sum(abs(a) + abs(b) for a, b in s.ranges) for s in stages)
    lines = [n for _, n in selection(read, [size])]
    longer = [n for _, n in selection(read, [size + 1])]
    if longer[: len(lines)] != lines:
        return None  # the file's length decides which lines come first
    run = all(b == a + 1 for a, b in zip(lines, lines[1:], strict=False))
    return lines, run


def _shown(read: ShellRead, output: str | None, cut: tuple[str, str] | None) -> Shown | None:
    """What a recognised read's output shows, or None when it shows nothing it can place."""
    if output is None and cut is None:
        return None
    lines: dict[int, str] = {}
    if read.numbering:
        parts = [output] if output is not None else [cut[0], cut[1]] if cut else []
        for i, part in enumerate(parts):
            rows = part.split("\n")
            if output is None:  # a cut output: its cut rows are partial
                rows = rows[:-1] if i == 0 else rows[1:]
            for row in rows:
                m = _NUMBERED.match(row)
                if m:
                    lines[int(m.group(1))] = m.group(2)
        if read.stages and output is None:
            return Shown(lines)
        found = _order(read, len(lines)) if read.stages else ([], True)
        total = None
        if output is not None and found is not None and found[1]:
            want = len(found[0]) if read.stages else None
            if want is None or len(lines) < want:
                total = max(lines, default=0) or None
        return Shown(lines, total)
    text = output if output is not None else cut[0] if cut else ""
    rows = text.split("\n")
    rows = rows[:-1]  # the part after the last newline: "" or a cut/unterminated row
    if output is not None and output and not output.endswith("\n"):
        output = None  # an unterminated last line: the file's length is not told apart
    found = _order(read, len(rows))
    if found is None:
        return None
    order, run = found
    for k, row in enumerate(rows[: len(order)]):
        lines[order[k]] = row
    total = None
    if output is not None and run and len(rows) < len(order):
        total = order[0] + len(rows) - 1 if rows else None
    return Shown(lines, total)


def shell_shown(read: ShellRead, output: str) -> Shown | None:
    """What a recognised shell read's whole ``output`` shows (also for Claude Code's Bash)."""
    return _shown(read, output, None)


def shell_edit_steps(command: str, cwd: str) -> tuple[EditStep, ...] | None:
    """The edit steps of a command, paths relative to ``cwd``; None: opaque or outside it."""
    steps = parse_shell_edit(command)
    if steps is None:
        return None
    out = []
    for step in steps:
        path = relative_path(step.path, cwd)
        source = relative_path(step.source, cwd) if step.source else ""
        if path is None or source is None:
            return None
        out.append(dataclasses.replace(step, path=path, source=source))
    return tuple(out)


def _messages(data: Any, path: Path) -> list[dict[str, Any]]:
    raw = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(raw, list) or not all(isinstance(m, dict) for m in raw):
        raise TranscriptError(f"{path}: not a mini-swe-agent trajectory (no 'messages' list)")
    return raw


def _cwd(info: Any) -> str:
    config = info.get("config") if isinstance(info, dict) else None
    env = config.get("environment") if isinstance(config, dict) else None
    return str(env.get("cwd") or "/testbed") if isinstance(env, dict) else "/testbed"


class _Builder:
    def __init__(self, recorded: Recorded, cwd: str) -> None:
        self.recorded, self.cwd = recorded, cwd
        self.commands: dict[str, str] = {}
        self.n = 0

    def call(self, command: str, result: dict[str, Any] | None, cid: str | None = None) -> str:
        self.n += 1
        cid = cid or f"call_{self.n}"
        read = parse_shell_read(command)
        rel = relative_path(read.path, self.cwd) if read and len(read.paths) == 1 else None
        if read is not None and rel is not None:
            shown = None
            failed = result is None
            if result is not None:
                code, output, cut = _result(result)
                failed = code is not None and code != 0
                shown = None if failed else _shown(read, output, cut)
            if shown is not None or failed:
                self.recorded.calls[cid] = FileCall(
                    cid, "read_file", {"path": rel}, failed, shown, command=command
                )
        else:
            steps = shell_edit_steps(command, self.cwd)
            code = _result(result)[0] if result is not None else None
            if steps is not None:
                self.recorded.edits[cid] = steps  # replay redoes it, as the check does
            if steps is None or code != 0:
                self.commands[cid] = command
        return cid


def parse_mini_swe_agent(path: Path) -> Recorded:
    """Parse one ``.traj.json`` (plain or gzipped) into a ``Recorded`` session.

    Raises:
        TranscriptError: not a mini-swe-agent trajectory.
    """
    data = load_json(path)
    raw = _messages(data, path)
    info = data.get("info") or {}
    cwd = _cwd(info)
    source = f"mini-swe-agent: {Path(path).name}"
    if isinstance(info, dict) and info.get("mini_version"):
        source += f" (mini-swe-agent {info['mini_version']})"
    recorded = Recorded(trace_name(path), source, [], extra={"cwd": cwd})
    messages = recorded.messages
    build = _Builder(recorded, cwd)
    results = {
        str(m["tool_call_id"]): m for m in raw if m.get("role") == "tool" and m.get("tool_call_id")
    }
    i = 0
    while i < len(raw):
        message = raw[i]
        role, text = str(message.get("role", "user")), content_text(message.get("content"))
        i += 1
        if role == "exit":
            continue
        calls = message.get("tool_calls") if role == "assistant" else None
        if isinstance(calls, list) and calls:
            out: list[dict[str, Any]] = []
            for call in calls:
                fn = call.get("function") if isinstance(call, dict) else None
                args = fn.get("arguments") if isinstance(fn, dict) else None
                try:
                    command = json.loads(args).get("command") if isinstance(args, str) else None
                except (json.JSONDecodeError, AttributeError):
                    command = None
                cid = str(call.get("id") or "") if isinstance(call, dict) else ""
                if not isinstance(command, str) or not cid:
                    out = []
                    break
                build.call(command, results.get(cid), cid)
                out.append(tool_call(cid, "bash", {"command": command}))
            if out:
                messages.append({"role": "assistant", "content": text or None, "tool_calls": out})
                continue
        if role == "tool":
            cid = str(message.get("tool_call_id") or "")
            messages.append({"role": "tool", "tool_call_id": cid, "content": text})
            continue
        blocks = _blocks(text) if role == "assistant" else []
        if len(blocks) != 1:
            messages.append({"role": role if role in _ROLES else "user", "content": text})
            continue
        result = raw[i] if i < len(raw) and raw[i].get("role") == "user" else None
        cid = build.call(blocks[0], result)
        reasoning = _BLOCK.sub("", text, count=1).strip()
        call = tool_call(cid, "bash", {"command": blocks[0]})
        messages.append({"role": "assistant", "content": reasoning or None, "tool_calls": [call]})
        if result is not None:
            messages.append(
                {"role": "tool", "tool_call_id": cid, "content": content_text(result["content"])}
            )
            i += 1
    paths = {c.path for c in recorded.calls.values()}
    for cid, command in build.commands.items():
        changed = changed_paths(command, paths)
        if changed is None or changed:
            recorded.changes[cid] = changed
    if isinstance(info, dict) and info.get("exit_status"):
        recorded.notes.append(f"exit status: {info['exit_status']}")
    return recorded
