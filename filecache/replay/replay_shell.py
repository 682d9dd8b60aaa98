"""Shell reads in a replayed trace: which ``bash`` calls replay can answer through the cache.

A trace keeps an agent's shell commands as they were (``bash {command}``, docs/design.md,
"Session trace format"). For a command that ``shell_parse`` recognises as a read of one file,
replay renders what the command prints on ``files/`` and looks for it in the recorded result:
the agent's harness wraps the output (mini-swe-agent's ``<returncode>``/``<output>``, or a JSON
object with the output as a JSON string), and what is around it is the ``ShellFrame``. Found:
the recorded result is the plain run's answer (it is the shell's), and the filecache run answers
the same frame around ``bash_reads.answer_shell_read``'s text. Not found (the log does not show
those bytes: a rebuilt file's placeholder lines, a file changed by a command replay did not run,
a cut output): the recorded result stands in both runs and the call is reported as kept.

Pure but for reading the trace's files.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filecache.core.text import decode_text, split_lines
from filecache.errors import FileCacheError
from filecache.fsio import locate
from filecache.replay.trace_format import PLACEHOLDER
from filecache.shell.bash_reads import ShellAnswer, answer_shell_read
from filecache.shell.shell_edit import EditStep, apply_edit, parse_shell_edit
from filecache.shell.shell_parse import (
    NotServable,
    ShellRead,
    parse_shell_read,
    render_output,
    selection,
    spans,
)

if TYPE_CHECKING:
    from filecache.session import Session

__all__ = [
    "ServedShellRead",
    "ShellFrame",
    "shell_edit_steps",
    "shell_read_paths",
    "find_frame",
    "prepare_shell_read",
    "redo_shell_edit",
    "serve_shell_step",
    "shell_commands",
    "trace_path",
]

FILE_TOOLS = ("read_file", "write_file", "edit_file")


def _json_inner(text: str, ascii: bool) -> str:
    return json.dumps(text, ensure_ascii=ascii)[1:-1]


def _html_safe(text: str) -> str:  # jinja2's ``tojson`` (mini-swe-agent 2.x tool results)
    inner = _json_inner(text, True)
    for ch, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        inner = inner.replace(ch, code)
    return inner


def _raw(text: str) -> str:
    return text


def _json(text: str) -> str:
    return _json_inner(text, False)


def _json_ascii(text: str) -> str:
    return _json_inner(text, True)


def _rstrip(text: str) -> str:  # harnesses that strip the output's final newlines
    return text.rstrip("\n")


_ENCODINGS: dict[str, Callable[[str], str]] = {
    "raw": _raw,
    "json": _json,
    "json-ascii": _json_ascii,
    "jinja-tojson": _html_safe,
    "rstrip": _rstrip,
}


@dataclass(frozen=True)
class ShellFrame:
    """What a harness put around a command's output in its recorded result."""

    prefix: str
    suffix: str
    encoding: str = "raw"

    def wrap(self, text: str) -> str:
        return self.prefix + _ENCODINGS[self.encoding](text) + self.suffix


def find_frame(recorded: str, output: str) -> ShellFrame | None:
    """The frame around ``output`` in ``recorded`` (the first encoding that finds it), or None."""
    if not output:
        return None
    for name, encode in _ENCODINGS.items():
        inner = encode(output)
        at = recorded.find(inner) if inner else -1
        if at >= 0:
            return ShellFrame(recorded[:at], recorded[at + len(inner) :], name)
    return None


def shell_commands(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Call id -> command, for every tool call that is not a file tool and has a string
    ``command`` argument (``bash``, ``shell``, ...)."""
    out: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            if fn.get("name") in FILE_TOOLS or not call.get("id"):
                continue
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (TypeError, json.JSONDecodeError):
                continue
            if isinstance(args, dict) and isinstance(args.get("command"), str):
                out[str(call["id"])] = args["command"]
    return out


def trace_path(path: str, root: Path, cwd: str | None) -> str | None:
    """A command's path as a path under ``files/`` (``root``), or None when it is not one.

    ``cwd`` is the directory the agent's shell ran in (the trace's ``cwd``); without it an
    absolute path maps to the shortest tail of it that names a file under ``root``.
    """
    if path.startswith("/"):
        base = (cwd or "").rstrip("/")
        if base and path.startswith(base + "/"):
            path = path[len(base) + 1 :]
        elif base:
            return None
        else:
            parts = [p for p in path.split("/") if p]
            tails = ("/".join(parts[k:]) for k in range(1, len(parts)))
            return next((t for t in tails if (root / t).is_file()), None)
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _lines(root: Path, rel: str) -> list[str] | None:
    try:
        real = locate(root, rel).real
        return split_lines(decode_text(real.read_bytes(), rel)) if real.is_file() else None
    except (FileCacheError, OSError):
        return None


def prepare_shell_read(
    command: str, recorded: str, root: Path, cwd: str | None
) -> tuple[ShellRead, ShellFrame] | str | None:
    """Whether replay can answer ``command`` (run on ``root``) through the cache.

    Returns the read (paths under ``root``) and its frame; a reason (str) when it is a read
    replay must keep as recorded; None when it is not a read at all.
    """
    read = parse_shell_read(command)
    if read is None:
        return None
    if len(read.paths) != 1:
        return "a read of several files: kept as recorded"
    rel = trace_path(read.path, root, cwd)
    lines = None if rel is None else _lines(root, rel)
    if rel is None or lines is None:
        return f"{read.path}: not among the trace's files"
    read = dataclasses.replace(read, paths=(rel,))
    try:
        output = render_output(read, [lines])
    except NotServable as exc:
        return f"{rel}: {exc}"
    if len(spans([n for _, n in selection(read, [len(lines)], [lines])])) != 1:
        return f"{rel}: several runs of lines: kept as recorded"
    if PLACEHOLDER in output:
        return f"{rel}: lines this read shows are not in the log"
    frame = find_frame(recorded, output)
    if frame is None:
        return f"{rel}: the recorded output is not this file's (changed by a command, or cut)"
    return read, frame


@dataclass(frozen=True)
class ServedShellRead:
    """A recorded bash read answered through the cache.

    Attributes:
        args: ``read_file``-style arguments of the lines answered (path, offset, limit).
        answer: filecache's answer (its text is the command's output, a FileRef or a diff).
        text: the answer inside the harness's frame (what the filecache run's model sees).
        output: the command's own output on the files (inside ``recorded``'s frame: what the
            plain run and every peer's run show).
        whole: whether the lines answered are the whole file.
    """

    args: dict[str, Any]
    answer: ShellAnswer
    text: str
    output: str
    whole: bool


def serve_shell_step(
    session: Session, command: str, recorded: str, root: Path, cwd: str | None, call_id: str
) -> ServedShellRead | str | None:
    """Answer a recorded bash call through ``session`` when it is a read replay can serve.

    Returns the served read; a reason (str) when it is a read kept as recorded; None when it
    is not a read.
    """
    found = prepare_shell_read(command, recorded, root, cwd)
    if found is None or isinstance(found, str):
        return found
    read, frame = found
    lines = _lines(root, read.path) or []
    output = render_output(read, [lines])  # prepare_shell_read rendered it: it renders
    try:
        answer = answer_shell_read(session, read, call_id)
    except (FileCacheError, NotServable) as exc:
        return f"{read.path}: {exc}"
    args = {"path": answer.path, "offset": answer.start, "limit": answer.end - answer.start + 1}
    whole = answer.start == 1 and answer.end == len(lines)
    return ServedShellRead(args, answer, frame.wrap(answer.text), output, whole)


def shell_read_paths(commands: Mapping[str, str], root: Path, cwd: str | None) -> dict[str, str]:
    """Call id -> the path under ``root`` of every command that reads one file."""
    out: dict[str, str] = {}
    for cid, command in commands.items():
        read = parse_shell_read(command)
        if read is not None and len(read.paths) == 1:
            rel = trace_path(read.path, root, cwd)
            if rel is not None:
                out[cid] = rel
    return out


def shell_edit_steps(command: str, root: Path, cwd: str | None) -> tuple[EditStep, ...] | None:
    """The edit steps of ``command`` with paths under ``root``, or None (opaque)."""
    steps = parse_shell_edit(command)
    if steps is None:
        return None
    out = []
    for step in steps:
        path = trace_path(step.path, root, cwd)
        source = trace_path(step.source, root, cwd) if step.source else ""
        if path is None or source is None:
            return None
        out.append(dataclasses.replace(step, path=path, source=source))
    return tuple(out)


def redo_shell_edit(
    command: str, roots: Sequence[Path], cwd: str | None, originals: Path | None = None
) -> bool:
    """Redo a recorded command's file changes on each of ``roots`` (``shell_edit``), when it
    is made only of changes replay can redo; whether it was. ``originals``: the trace's
    ``files/`` (what ``git checkout FILE`` restores)."""
    steps = shell_edit_steps(command, roots[0], cwd)
    if steps is None:
        return False
    for root in roots:
        apply_edit(steps, root, originals)
    return True
