"""The end every importer shares: a recorded session -> a ``filecache-trace/1`` directory.

An importer parses a log into a ``Recorded``: the messages in the trace's OpenAI chat form, and
for every file tool call what the recorded run showed or did (``FileCall``). ``write_trace``:

1. builds ``files/``: copied from ``repo`` when one is given (a checkout as it was before the
   session; only the paths the calls name), else rebuilt from the log: the lines each read shows,
   up to the first thing that may change that file (the session's own write or edit, or an opaque
   call such as ``sed -i`` that names it); the file's text before a write or edit, where the log
   holds it (Claude Code's ``originalFile``), gives the whole file. Lines that no read shows
   become ``PLACEHOLDER`` and are listed in ``unknown.files``.
2. checks every file tool call against a plain run on ``files/`` (the ``Session`` calls of
   replay's baseline, in order): a read must show the recorded lines and no placeholder, and a
   call must fail exactly when it failed in the log. A call that does not reproduce is not run
   and goes into ``unknown.calls`` (``filecache.replay.trace_format``): replay keeps its recorded
   output.
3. writes ``transcript.json``.

A denied file (``settings.deny``: by name, and from ``repo`` also by identity, a hard link to
one; rebuilt, also a text holding a line of one the log shows) never goes into ``files/``: its
reads do not reproduce, so they go into ``unknown.calls`` and replay keeps their recorded
output (which the log itself holds).

Invariant: every read that replay runs (those not in ``unknown.calls``) shows, on the files
replay starts from, the lines the log shows for it, so replay measures what the agent saw.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filecache.cache import FileCache, ReadResult
from filecache.core.text import EOF_MARK, split_lines
from filecache.errors import FileCacheError, RequestError
from filecache.fsio import locate
from filecache.importers.line_map import LineMap
from filecache.importers.logs import content_text
from filecache.replay.replay import run_file_tool
from filecache.replay.replay_shell import prepare_shell_read
from filecache.replay.trace_format import PLACEHOLDER, TRACE_FORMAT
from filecache.secrecy import SecretIndex, secret_lines
from filecache.session import Session
from filecache.settings import DEFAULT_DENY, is_denied, load_settings
from filecache.shell.shell_edit import EditStep, apply_edit

__all__ = [
    "FileCall",
    "ImportResult",
    "Recorded",
    "Shown",
    "UnknownFile",
    "check_calls",
    "rebuild_files",
    "tool_call",
    "tool_order",
    "write_trace",
]

UNKNOWN_NOTE = (
    "files/ was rebuilt from what the log shows; placeholder lines are not in the log, and the "
    "calls listed here are kept as recorded by replay (their files are not known well enough)"
)


@dataclass(frozen=True)
class Shown:
    """What a recorded read result shows: line number -> the line's text (without its end).

    ``total`` is the file's line count when the output proves it (a whole file shown, or a
    range that stopped short of its end); None when it does not. ``text`` is the file's exact
    text when the log holds it whole (Claude Code's ``file.content`` of a whole-file read).
    """

    lines: Mapping[int, str]
    total: int | None = None
    text: str | None = None


@dataclass(frozen=True)
class FileCall:
    """A file tool call as recorded: arguments in the trace's form, and what came of it.

    Attributes:
        call_id: the tool call id in the trace.
        tool: ``read_file`` | ``write_file`` | ``edit_file``.
        args: its arguments (``path`` relative to ``files/``).
        failed: the recorded run answered an error.
        shown: for a read that succeeded, the lines its output shows (None: unparsable).
        before: the file's whole text just before a write or edit, where the log holds it.
        command: for a read done by a shell command (``cat``, ``sed -n``...), the command; the
            trace keeps it as a ``bash`` call, and the check asks whether replay can answer it.
    """

    call_id: str
    tool: str
    args: Mapping[str, Any]
    failed: bool = False
    shown: Shown | None = None
    before: str | None = None
    command: str | None = None

    @property
    def path(self) -> str:
        return str(self.args.get("path", ""))


@dataclass
class Recorded:
    """A session parsed from a log, ready for ``write_trace``.

    Attributes:
        name: the trace directory's name.
        source: the trace's ``source`` (what the log was).
        messages: OpenAI chat messages; file tool calls use the trace's tool names.
        calls: the file tool calls by id.
        changes: opaque calls (bash...) that may change files: id -> the paths they may change,
            or None for "any file" (``git checkout``, a glob...).
        edits: shell commands whose changes replay redoes (``shell_edit``): id -> the steps,
            paths relative to ``files/``; the check redoes them as replay will, and the rebuild
            follows the lines through them (unless the call is in ``changes`` too: it failed
            in the log, so what it did is not known).
        extra: other top-level keys for ``transcript.json`` (``base_commit``, ``repo``).
        normalize: how a recorded line and a file line are made comparable (SWE-agent's viewer
            expands tabs); a trailing ``\\r`` is always ignored.
        notes: what the importer left out or could not map, for the user.
    """

    name: str
    source: str
    messages: list[dict[str, Any]]
    calls: dict[str, FileCall] = field(default_factory=dict)
    changes: dict[str, frozenset[str] | None] = field(default_factory=dict)
    edits: dict[str, tuple[EditStep, ...]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    normalize: Callable[[str], str] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class UnknownFile:
    """A rebuilt file that the log shows only in part."""

    lines: int
    unknown: tuple[tuple[int, int], ...]
    end_known: bool

    def to_json(self) -> dict[str, Any]:
        unknown = [list(r) for r in self.unknown]
        return {"lines": self.lines, "unknown": unknown, "end_known": self.end_known}

    def describe(self) -> str:
        known = self.lines - sum(b - a + 1 for a, b in self.unknown)
        end = "" if self.end_known else ", length unknown"
        return f"{known} of {self.lines} lines known{end}"


@dataclass(frozen=True)
class ImportResult:
    """One trace written by ``write_trace``."""

    name: str
    directory: Path
    source: str
    messages: int
    file_calls: int
    rebuilt: bool
    files: tuple[str, ...]
    unknown_files: Mapping[str, UnknownFile]
    unknown_calls: Mapping[str, str]
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "directory": str(self.directory),
            "source": self.source,
            "messages": self.messages,
            "file_calls": self.file_calls,
            "files_from": "rebuilt from the log" if self.rebuilt else "repo",
            "files": list(self.files),
            "unknown_files": {p: u.to_json() for p, u in self.unknown_files.items()},
            "unknown_calls": dict(self.unknown_calls),
            "notes": list(self.notes),
        }


def _bare_lines(text: str) -> list[str]:
    """The lines of ``text`` without their ends (a missing final newline is not told apart)."""
    return [line.removesuffix(EOF_MARK) for line in split_lines(text)]


def tool_call(call_id: str, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """One entry of an assistant message's ``tool_calls`` (arguments as compact-ish JSON)."""
    arguments = json.dumps(args, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_order(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Call ids in the order their results appear (the order replay runs the calls)."""
    return [
        str(m["tool_call_id"])
        for m in messages
        if m.get("role") == "tool" and m.get("tool_call_id")
    ]


# -- rebuilding files/ from the log -------------------------------------------------------------


@dataclass
class _Partial:
    """What the log shows of one file before anything changed it."""

    lines: dict[int, str] = field(default_factory=dict)
    total: int | None = None
    text: str | None = None  # the exact whole text, when the log has it

    def learn(self, shown: Shown) -> bool:
        """Merge a read's lines; False (and nothing merged) when they contradict what is known."""
        if self.text is not None:
            known = dict(enumerate(_bare_lines(self.text), 1))
            return all(known.get(n, "\0") == t.rstrip("\r") for n, t in shown.lines.items())
        if shown.total is not None and self.total is not None and shown.total != self.total:
            return False
        clash = any(self.lines.get(n, t) != t for n, t in shown.lines.items())
        if clash or (self.total is not None and any(n > self.total for n in shown.lines)):
            return False
        self.lines.update(shown.lines)
        if shown.total is not None:
            self.total = shown.total
        return True

    def learn_text(self, text: str) -> bool:
        """The whole text before the session's first change of the file."""
        if self.text is not None:
            return self.text == text
        if self.lines or self.total is not None:
            lines = [x.rstrip("\r") for x in _bare_lines(text)]
            if self.total is not None and self.total != len(lines):
                return False
            if any(n > len(lines) or lines[n - 1] != t.rstrip("\r") for n, t in self.lines.items()):
                return False
        self.text = text
        return True

    def render(self) -> tuple[str, UnknownFile | None]:
        if self.text is not None:
            return self.text, None
        count = max([self.total or 0, *self.lines])
        body = [self.lines.get(n, PLACEHOLDER) for n in range(1, count + 1)]
        gaps = tuple(_runs(n for n in range(1, count + 1) if n not in self.lines))
        end_known = self.total is not None
        text = "\n".join(body) + ("\n" if body else "")
        return text, (UnknownFile(count, gaps, end_known) if gaps or not end_known else None)


def _runs(numbers: Iterator[int] | Sequence[int]) -> Iterator[tuple[int, int]]:
    start = prev = None
    for n in numbers:
        if prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None and prev is not None:
            yield start, prev
        start = prev = n
    if start is not None and prev is not None:
        yield start, prev


def rebuild_files(recorded: Recorded) -> dict[str, tuple[str, UnknownFile | None]]:
    """Path -> (text for ``files/``, what of it is unknown), from what the log shows."""
    partial: dict[str, _Partial] = {}
    frozen: set[str] = set()
    everything = False
    maps: dict[str, LineMap] = {}
    written: dict[str, str] = {}  # whole texts the session wrote (heredocs), for ``r FILE``
    for cid in tool_order(recorded.messages):
        if cid in recorded.changes:  # an edit that failed in the log is one too: not followed
            paths = recorded.changes[cid]
            if paths is None:
                everything = True
            else:
                frozen |= paths
            continue
        if cid in recorded.edits:
            for step in recorded.edits[cid]:
                _follow(step, partial, maps, written, frozen, everything)
            continue
        call = recorded.calls.get(cid)
        if call is None or everything or call.path in frozen:
            continue
        if call.tool == "read_file":
            line_map = maps.get(call.path)
            shown = call.shown
            if shown is not None and line_map is not None and line_map.changed():
                shown = _before_edits(shown, line_map)
            if not call.failed and shown is not None:
                known = partial.setdefault(call.path, _Partial())
                exact = shown.text
                if not (known.learn_text(exact) if exact is not None else known.learn(shown)):
                    frozen.add(call.path)  # the file changed in a way the log does not say
            continue
        if call.before is not None:
            partial.setdefault(call.path, _Partial()).learn_text(call.before)
        frozen.add(call.path)
    out: dict[str, tuple[str, UnknownFile | None]] = {}
    for path, known in partial.items():
        if known.text is None and not known.lines and known.total is None:
            continue
        out[path] = known.render()
    return out


def _follow(
    step: EditStep,
    partial: dict[str, _Partial],
    maps: dict[str, LineMap],
    written: dict[str, str],
    frozen: set[str],
    everything: bool,
) -> None:
    """One shell edit step (``shell_edit``) in the rebuild: follow its lines, or stop learning
    the file when the edit cannot be followed."""
    if step.path not in frozen and not everything:
        known = partial.get(step.path)
        line_map = maps.setdefault(step.path, LineMap())
        if not line_map.through(step, written, known.total if known else None):
            frozen.add(step.path)
    if step.op == "write":
        written[step.path] = step.text
    elif step.op == "append" and step.path in written:
        written[step.path] += step.text
    else:
        written.pop(step.path, None)


def _before_edits(shown: Shown, line_map: LineMap) -> Shown:
    """A read after edits, as lines of the file before the session (lines it wrote dropped)."""
    lines = {}
    for n, text in shown.lines.items():
        k = line_map.original(n)
        if k is not None:
            lines[k] = text
    total = None
    if shown.total is not None and shown.total > len(line_map.prefix) and not line_map.whole_new:
        total = shown.total + line_map.offset
    return Shown(lines, total)


# -- checking every call against a plain run ----------------------------------------------------


def _run(session: Session, call: FileCall) -> tuple[int, int] | None:
    """Run one call as replay's baseline does; a read's answered range."""
    result = run_file_tool(session, call.tool, call.args, call.call_id, mode=None)
    return (result.start, result.end) if isinstance(result, ReadResult) else None


def _disk(root: Path, path: str) -> bytes | None:
    try:
        real = locate(root, path).real
        return real.read_bytes() if real.is_file() else None
    except (FileCacheError, OSError):
        return None


def _restore(root: Path, path: str, data: bytes | None) -> None:
    try:
        real = locate(root, path).real
    except FileCacheError:
        return
    if data is None:
        real.unlink(missing_ok=True)
    else:
        real.write_bytes(data)


def _compare_read(
    root: Path, call: FileCall, span: tuple[int, int], norm: Callable[[str], str]
) -> str | None:
    data = _disk(root, call.path) or b""
    lines = _bare_lines(data.decode("utf-8", "replace"))
    start, end = span
    missing = [n for n in range(start, end + 1) if lines[n - 1] == PLACEHOLDER]
    if missing:
        where = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in _runs(missing))
        return f"lines {where} of {call.path} are not in the log"
    shown = call.shown
    if shown is None:
        return f"the log's output of this read of {call.path} could not be parsed"
    for n, text in sorted(shown.lines.items()):
        if not start <= n <= end:
            return f"the log shows line {n} of {call.path}, outside the lines {start}-{end} read"
        if norm(lines[n - 1].rstrip("\r")) != norm(text.rstrip("\r")):
            return f"line {n} of {call.path} differs from the log (changed by a command?)"
    whole = call.args.get("offset") is None and call.args.get("limit") is None
    if whole and shown.total is not None and shown.total != len(lines):
        return f"the log shows {shown.total} lines of {call.path}, not {len(lines)}"
    return None


def check_calls(recorded: Recorded, files: Path) -> dict[str, str]:
    """Run the file tool calls on a copy of ``files`` in order; the ones that do not reproduce.

    Returns call id -> why. Those calls are not run (so the copy stays what replay will have).
    """
    norm = recorded.normalize or (lambda s: s)
    unknown: dict[str, str] = {}
    outputs = {
        str(m.get("tool_call_id")): content_text(m.get("content"))
        for m in recorded.messages
        if m.get("role") == "tool"
    }
    cwd = recorded.extra.get("cwd") if isinstance(recorded.extra.get("cwd"), str) else None
    with tempfile.TemporaryDirectory(prefix="filecache-import-") as tmp:
        root = Path(tmp, "files").resolve()
        shutil.copytree(files, root, symlinks=True)
        with FileCache(root, store=":memory:", tokenizer="estimate") as cache:
            session = cache.session("import-check")
            for cid in tool_order(recorded.messages):
                if cid in recorded.edits:
                    apply_edit(recorded.edits[cid], root, originals=files)
                    continue
                call = recorded.calls.get(cid)
                if call is None:
                    continue
                if call.command is not None:
                    found = prepare_shell_read(
                        call.command,
                        outputs.get(cid, ""),
                        root,
                        cwd if isinstance(cwd, str) else None,
                    )
                    if isinstance(found, str) and not call.failed:
                        unknown[cid] = found
                    continue
                before = None if call.tool == "read_file" else _disk(root, call.path)
                try:
                    span = _run(session, call)
                except FileCacheError as exc:
                    if not call.failed:
                        unknown[cid] = f"fails on the rebuilt files: {exc}"
                    continue
                if call.failed:
                    if call.tool != "read_file":
                        _restore(root, call.path, before)
                    unknown[cid] = f"failed in the log but not on the rebuilt files ({call.path})"
                elif span is not None:
                    why = _compare_read(root, call, span, norm)
                    if why is not None:
                        unknown[cid] = why
    return unknown


# -- writing the trace ---------------------------------------------------------------------------


def _prepare(directory: Path) -> None:
    if directory.exists():
        if not (directory / "transcript.json").is_file() and any(directory.iterdir()):
            raise RequestError(
                f"{directory} exists and is not a session trace; choose another output directory"
            )
        shutil.rmtree(directory)
    (directory / "files").mkdir(parents=True)


def _copy_from_repo(recorded: Recorded, repo: Path, files: Path) -> list[str]:
    copied: list[str] = []
    deny = load_settings(repo).deny
    index = SecretIndex(repo, deny)
    for path in sorted({c.path for c in recorded.calls.values()}):
        try:
            loc = locate(repo, path)
            src = loc.real
            dst = locate(files, path).real
        except FileCacheError:
            continue
        if any(is_denied(name, deny) for name in (loc.rel, *loc.aliases)):
            continue
        with contextlib.suppress(OSError):
            if index.denied_identity(os.stat(src)):
                continue  # a hard link to a denied file
        if src.is_file() and index.reveals(src.read_text("utf-8", "replace")) is None:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            copied.append(path)
    return copied


def write_trace(recorded: Recorded, out_dir: Path, *, repo: Path | None = None) -> ImportResult:
    """Write ``out_dir/<recorded.name>/`` (files/ and transcript.json); see the module docstring.

    Raises:
        RequestError: the target exists and is not a trace (it is never overwritten then).
    """
    directory = Path(out_dir) / recorded.name
    _prepare(directory)
    files = (directory / "files").resolve()
    unknown_files: dict[str, UnknownFile] = {}
    if repo is not None:
        written = _copy_from_repo(recorded, Path(repo).resolve(), files)
    else:
        written = []
        rebuilt = rebuild_files(recorded)
        secret = [text for path, (text, _) in rebuilt.items() if is_denied(path, DEFAULT_DENY)]
        lines = {line for text in secret for line in secret_lines(text) if PLACEHOLDER not in line}
        for path, (text, unknown) in sorted(rebuilt.items()):
            if is_denied(path, DEFAULT_DENY) or any(line in text for line in lines):
                continue  # never copied out of the log into files/
            try:
                target = locate(files, path).real
            except FileCacheError:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
            written.append(path)
            if unknown is not None:
                unknown_files[path] = unknown
    unknown_calls = check_calls(recorded, files)
    trace: dict[str, Any] = {"format": TRACE_FORMAT, "source": recorded.source, **recorded.extra}
    if unknown_files or unknown_calls:
        trace["unknown"] = {
            "note": UNKNOWN_NOTE,
            "files": {p: u.to_json() for p, u in unknown_files.items()},
            "calls": unknown_calls,
        }
    trace["messages"] = recorded.messages
    text = json.dumps(trace, ensure_ascii=False, indent=1)
    (directory / "transcript.json").write_text(text + "\n", encoding="utf-8")
    return ImportResult(
        name=recorded.name,
        directory=directory,
        source=recorded.source,
        messages=len(recorded.messages),
        file_calls=len(recorded.calls),
        rebuilt=repo is None,
        files=tuple(written),
        unknown_files=unknown_files,
        unknown_calls=unknown_calls,
        notes=tuple(recorded.notes),
    )
