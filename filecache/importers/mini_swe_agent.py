"""mini-swe-agent ``.traj.json`` files -> session traces.

mini-swe-agent has one tool, bash: each assistant message holds its reasoning and one fenced
``bash`` block, and the next user message holds ``<returncode>`` and ``<output>`` (long outputs
as ``<output_head>`` / ``<output_tail>``). The trace keeps the system and task messages; an
assistant message with exactly one block becomes the reasoning (the block taken out) plus one
tool call ``call_<n>``, and the next message its tool result, verbatim. Any other assistant
message (no block, or several: the agent's format errors) stays as it is, and so does the user
message after it.

A command that ``bash_reads.parse_read`` recognises as a read — ``cat F``, ``nl -ba F``,
``sed -n 'A,Bp' F``, ``nl -ba F | sed -n 'A,Bp'``, ``head -n N F`` — becomes ``read_file``
(``tail`` stays bash: its range depends on a length the log rarely shows). Everything else,
edits by ``sed -i``, heredocs and Python included, stays ``bash``. The log does not carry the
repository, so ``files/`` is rebuilt from what the reads show (``trace.py``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..bash_reads import BashRead, parse_read
from ..errors import TranscriptError
from .logs import changed_paths, content_text, load_json, relative_path, trace_name
from .trace import FileCall, Recorded, Shown, tool_call

__all__ = ["parse_mini_swe_agent"]

_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"^<returncode>(-?\d+)</returncode>")
_NUMBERED = re.compile(r"^ *(\d+)\t(.*)$")


def _between(text: str, tag: str) -> str | None:
    start, end = f"<{tag}>\n", f"</{tag}>"
    if start not in text or end not in text:
        return None
    body = text[text.index(start) + len(start) : text.rindex(end)]
    return body


def _raw_lines(body: str) -> list[str]:
    lines = body.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _shown(read: BashRead, output: str) -> Shown | None:
    """What a recognised read's output shows, or None when it shows nothing parsable."""
    body = _between(output, "output")
    head = tail = None
    if body is None:
        head, tail = _between(output, "output_head"), _between(output, "output_tail")
        if head is None:
            return None
    lines: dict[int, str] = {}
    want = None if read.end is None else read.end - read.start + 1
    if read.numbered:
        parts = [body] if body is not None else [head or "", tail or ""]
        for i, part in enumerate(parts):
            rows = part.split("\n")
            if body is None:  # a cut output: its cut rows are partial
                rows = rows[:-1] if i == 0 else rows[1:]
            for row in rows:
                m = _NUMBERED.match(row)
                if m:
                    lines[int(m.group(1))] = m.group(2)
        total = None
        if body is not None and (want is None or len(lines) < want):
            total = max(lines, default=read.start - 1)
        return Shown(lines, total)
    rows = _raw_lines(body) if body is not None else (head or "").split("\n")[:-1]
    for i, row in enumerate(rows):
        lines[read.start + i] = row
    total = None
    if body is not None and (want is None or len(rows) < want):
        total = read.start + len(rows) - 1
    return Shown(lines, total)


def _read_args(read: BashRead, path: str, command: str) -> dict[str, Any]:
    args: dict[str, Any] = {"path": path}
    if read.start != 1 or "sed" in command:
        args["offset"] = read.start
    if read.end is not None:
        args["limit"] = read.end - read.start + 1
    return args


def parse_mini_swe_agent(path: Path) -> Recorded:
    """Parse one ``.traj.json`` (plain or gzipped) into a ``Recorded`` session.

    Raises:
        TranscriptError: not a mini-swe-agent trajectory.
    """
    data = load_json(path)
    raw = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(raw, list) or not all(isinstance(m, dict) for m in raw):
        raise TranscriptError(f"{path}: not a mini-swe-agent trajectory (no 'messages' list)")
    info = data.get("info") or {}
    config = info.get("config") if isinstance(info, dict) else None
    env = config.get("environment") if isinstance(config, dict) else None
    cwd = str(env.get("cwd") or "/testbed") if isinstance(env, dict) else "/testbed"
    source = f"mini-swe-agent: {Path(path).name}"
    if isinstance(info, dict) and info.get("mini_version"):
        source += f" (mini-swe-agent {info['mini_version']})"
    recorded = Recorded(trace_name(path), source, [])
    messages = recorded.messages
    commands: dict[str, str] = {}
    n = 0
    i = 0
    while i < len(raw):
        message, text = raw[i], content_text(raw[i].get("content"))
        blocks = _BLOCK.findall(text) if message.get("role") == "assistant" else []
        if len(blocks) != 1:
            messages.append({"role": str(message.get("role", "user")), "content": text})
            i += 1
            continue
        n += 1
        cid = f"call_{n}"
        command = blocks[0].strip()
        reasoning = _BLOCK.sub("", text, count=1).strip()
        read = parse_read(command)
        rel = relative_path(read.path, cwd) if read is not None and read.tail is None else None
        result = content_text(raw[i + 1].get("content")) if i + 1 < len(raw) else None
        if read is not None and rel is not None:
            name, args = "read_file", _read_args(read, rel, command)
            if result is not None:
                code = _RETURNCODE.match(result)
                failed = code is None or code.group(1) != "0"
                shown = None if failed else _shown(read, result)
                recorded.calls[cid] = FileCall(cid, name, args, failed, shown)
        else:
            name, args = "bash", {"command": command}
            commands[cid] = command
        call = tool_call(cid, name, args)
        messages.append({"role": "assistant", "content": reasoning or None, "tool_calls": [call]})
        if result is not None:
            messages.append({"role": "tool", "tool_call_id": cid, "content": result})
        i += 2
    paths = {c.path for c in recorded.calls.values()}
    for cid, command in commands.items():
        changed = changed_paths(command, paths)
        if changed is None or changed:
            recorded.changes[cid] = changed
    if isinstance(info, dict) and info.get("exit_status"):
        recorded.notes.append(f"exit status: {info['exit_status']}")
    return recorded
