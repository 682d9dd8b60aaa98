"""Replay an imported Claude Code log through the hook's own logic (``claude_code.answer``).

``filecache import claude-code LOG -o DIR`` keeps, beside the trace's messages, every
``Read``/``Edit``/``MultiEdit``/``Write``/``NotebookEdit``/``Bash`` call as the hook would have
received it (``claude_code.calls``: tool name, input, Claude Code's payload). This module plays
the session again as Claude Code would have run it with the hook installed, on a copy of the
trace's ``files/``:

1. ``SessionStart`` (startup): any ``additionalContext`` of the hook's joins the model's
   context (it adds none: its instructions travel with the first short answer).
2. Each prompt: ``UserPromptSubmit``. Each assistant message: its ``tool_use`` entries are
   appended to a transcript written as Claude Code writes one (``uuid``/``parentUuid`` chain,
   one entry per block), the file the hook reads ``transcript_path`` from.
3. Each call: first what Claude Code's tool did to the files (an ``Edit``/``Write``/``MultiEdit``
   redone on the copy; a ``Bash`` command made only of edits replay can redo, redone), then
   ``PostToolUse`` (``PostToolUseFailure`` for a failed call) with the recorded input and
   payload, paths mapped onto the copy. The hook's ``updatedToolOutput`` becomes the result the
   model sees, rendered as Claude Code renders a Read result (its own line numbers, in the
   log's style, and the log's ``<system-reminder>`` tail kept) or a Bash result (``stdout``);
   no answer: the recorded result stands. The result entry is then appended to the transcript,
   so the next call's hook sees what this one showed.

Every decision is the hook's: this module only builds its events and renders its answers.
``replay_host.HostRun`` meters the two runs (recorded, through the hook) and checks the model's
view (0 stale, 0 dangling) from the messages as sent.

Not replayed: a compaction inside one trace (the importer splits a session file at each
compaction into traces ``<id>.1``, ``<id>.2``..., each replayed from an empty view, as the hook
resets at ``PreCompact``); results Claude Code cleared later (``microcompact_boundary``), which
the stream-json logs do not record; subagents inside a session file (the importer leaves
sidechains out; a subagent's own log, ``agent-<id>.jsonl``, imports as a trace of its own).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from filecache.adapters.hosts.base import host_session_id
from filecache.adapters.hosts.claude_code import DISPLAY_NAME, HOST_NAME, HookSite, answer

from filecache.cache import FileCache, Session
from filecache.core.kinds import Tool
from filecache.core.render import host_instructions
from filecache.core.tokens import TokenCounter
from filecache.errors import FileCacheError, TranscriptError
from filecache.fsio import locate
from filecache.replay.replay import run_file_tool
from filecache.replay.replay_check import AGENT_VIEW, FileCall, disk_lines, tag_of
from filecache.replay.replay_host import HostRun, load_trace
from filecache.replay.replay_metrics import SessionReplay
from filecache.replay.replay_shell import redo_shell_edit
from filecache.replay.trace_format import unknown_calls
from filecache.stats import read_baseline
from filecache.store.opening import open_store

__all__ = ["render_read", "replay_claude_code"]

_FILE_TOOLS = ("read_file", "write_file", "edit_file")
_REMINDER = "<system-reminder>"
_NUMBERED = re.compile(r"^ *\d+(?:\t|→)")


def replay_claude_code(
    trace_dir: Path, *, tokenizer: str = "o200k", store: str | None = None
) -> SessionReplay:
    """Replay one imported Claude Code trace through the hook (see the module docstring).

    Args:
        trace_dir: a trace ``filecache import claude-code`` wrote.
        tokenizer: how prompt tokens are counted (``o200k``, ``cl100k``, ``estimate``).
        store: where the hook's session is kept (default: a temporary store); the session is
            ``claude-code:<trace name>@<root>``, as ``filecache stats`` lists it.

    Raises:
        TranscriptError: not a trace, or one imported without the hook's calls.
    """
    trace_dir = Path(trace_dir)
    trace = load_trace(trace_dir)
    host = trace.get("claude_code")
    calls = host.get("calls") if isinstance(host, dict) else None
    if not isinstance(calls, dict):
        raise TranscriptError(
            f"{trace_dir}: the trace holds no Claude Code hook calls; import the log again "
            "(filecache import claude-code LOG -o DIR) or replay it with --host none"
        )
    counter = TokenCounter(tokenizer)
    with tempfile.TemporaryDirectory(prefix="filecache-ccreplay-") as tmp:
        root = Path(tmp, "project")
        root.mkdir()  # load_trace made sure the trace has files/
        shutil.copytree(trace_dir / "files", root, symlinks=True, dirs_exist_ok=True)
        root = root.resolve()
        location = store if store is not None else str(Path(tmp, "cache.db"))
        site = HookSite(
            root=str(root), store=location, index_dir=Path(tmp, "index"),
            seal=f"replay of {trace_dir.resolve().name}",
        )  # fmt: skip
        replayer = _Replayer(trace_dir, trace, calls, root, site, Path(tmp, "transcript.jsonl"))
        with FileCache(root, store=":memory:") as plain:
            replayer.run(HostRun(counter), plain.session("claude-code"))
        with open_store(root, location) as opened:
            sid = host_session_id(HOST_NAME, replayer.name, root)
            reads = [e for e in opened.events(sid) if e.tool == Tool.READ]
        ledger = (
            sum(e.tokens for e in reads),
            sum(read_baseline(e.kind, e.tokens, e.tokens_full) for e in reads),
        )
    return replayer.run_.result(
        replayer.name, str(trace.get("source", "")), counter.encoding,
        skipped=replayer.skipped, ledger_reads=ledger, mismatches=replayer.mismatches,
    )  # fmt: skip


def render_read(file: Mapping[str, Any], recorded: str) -> str:
    """A Read result as Claude Code shows the model ``file`` (``updatedToolOutput.file``):
    its lines numbered from ``startLine`` in the style of the ``recorded`` result (``   N→``
    before 2.1.x's tab style), and the recorded result's ``<system-reminder>`` tail kept."""
    content = str(file.get("content", ""))
    start = int(file.get("startLine") or 1)
    arrow = "→" in recorded.split("\n", 1)[0]
    rows = [
        f"{n:>6}→{line}" if arrow else f"{n}\t{line}"
        for n, line in enumerate(content.split("\n"), start)
    ]
    return "\n".join(rows) + _tail(recorded)


def _tail(recorded: str) -> str:
    at = recorded.find(_REMINDER)
    if at < 0:
        return ""
    while at > 0 and recorded[at - 1] == "\n":
        at -= 1
    return recorded[at:]


class _Replayer:
    """One trace's replay: its events, the copy of its files, its transcript."""

    def __init__(
        self,
        trace_dir: Path,
        trace: Mapping[str, Any],
        calls: Mapping[str, Any],
        root: Path,
        site: HookSite,
        transcript: Path,
    ) -> None:
        self.trace_dir = trace_dir
        self.name = trace_dir.resolve().name
        self.messages: list[dict[str, Any]] = trace["messages"]
        self.calls = {k: v for k, v in calls.items() if isinstance(v, dict)}
        self.cwd = str(trace.get("cwd") or "").rstrip("/")
        self.root = root
        self.site = site
        self.transcript = _Transcript(transcript, self.name, str(root))
        self.skipped = unknown_calls(trace)
        self.file_args = _file_args(self.messages)
        self.mismatches: list[str] = []
        self.run_: HostRun
        self.ledger_seen = 0

    def _event(self, name: str, **fields: Any) -> dict[str, Any]:
        return {
            "hook_event_name": name, "session_id": self.name, "cwd": str(self.root),
            "transcript_path": str(self.transcript.path), **fields,
        }  # fmt: skip

    def run(self, run: HostRun, plain: Session) -> None:
        self.run_, self.plain = run, plain
        start = answer(self._event("SessionStart", source="startup"), self.site)
        context = (start or {}).get("hookSpecificOutput", {}).get("additionalContext")
        if isinstance(context, str) and context:
            run.context(context)
        previous: str | None = None
        for message in self.messages:
            role = message.get("role")
            if role == "assistant":
                self.transcript.assistant(message, self.calls)
                run.message(message)
            elif role == "tool":
                self._tool(message)
            elif role == "user" and previous != "tool":  # a prompt (not text beside results)
                text = str(message.get("content") or "")
                answer(self._event("UserPromptSubmit", prompt=text), self.site)
                self.transcript.prompt(text)
                run.message(message)
            else:
                run.message(message)
            previous = str(role)

    def _tool(self, message: dict[str, Any]) -> None:
        cid = str(message.get("tool_call_id") or "")
        recorded = str(message.get("content") or "")
        hook = self.calls.get(cid)
        if hook is None:  # not a hooked tool (Grep, WebFetch...): Claude Code's own answer
            self.transcript.result(cid, recorded, None, failed=False)
            self.run_.message(message)
            return
        failed = bool(hook.get("failed"))
        trace_call = self.file_args.get(cid)
        rel = str(trace_call[1].get("path", "")) if trace_call else ""
        before = _snapshot(self.root, rel) if trace_call and trace_call[0] != "read_file" else None
        if not failed and cid not in self.skipped:
            self._redo(cid, hook, trace_call)
        out = answer(self._post(cid, hook, recorded, failed), self.site)
        specific = (out or {}).get("hookSpecificOutput", {})
        replaced = specific.get("updatedToolOutput") if isinstance(specific, dict) else None
        text = self._render(hook, replaced, recorded) if isinstance(replaced, dict) else None
        sent = recorded if text is None else text
        call = self._file_call(cid, hook, trace_call, replaced, before, sent, failed)
        self.transcript.result(cid, sent, replaced or hook.get("tool_response"), failed=failed)
        self.run_.message(message, text, call)

    def _redo(self, cid: str, hook: Mapping[str, Any], trace_call: Any) -> None:
        """What Claude Code's tool did to the files, done on the copy before its hook runs."""
        try:
            if trace_call is not None and trace_call[0] in ("write_file", "edit_file"):
                run_file_tool(self.plain, trace_call[0], trace_call[1], cid, mode=None)
            elif hook.get("tool_name") == "Bash":
                command = (hook.get("tool_input") or {}).get("command")
                if isinstance(command, str):
                    redo_shell_edit(
                        command, (self.root,), self.cwd or None, self.trace_dir / "files"
                    )
        except FileCacheError as exc:
            self.mismatches.append(f"{cid}: the recorded change could not be redone ({exc})")

    def _post(
        self, cid: str, hook: Mapping[str, Any], recorded: str, failed: bool
    ) -> dict[str, Any]:
        tool_input = _mapped(hook.get("tool_input"), self._path, self._command)
        fields = {"tool_name": hook.get("tool_name"), "tool_input": tool_input, "tool_use_id": cid}
        if failed:
            return self._event("PostToolUseFailure", error=recorded, **fields)
        response = _mapped(hook.get("tool_response"), self._path, None)
        return self._event("PostToolUse", tool_response=response, **fields)

    def _path(self, path: str) -> str:
        if self.cwd and (path == self.cwd or path.startswith(self.cwd + "/")):
            return str(self.root) + path[len(self.cwd) :]
        return path

    def _command(self, command: str) -> str:
        if not self.cwd:
            return command
        return re.sub(re.escape(self.cwd) + r"(?=/|\s|$|['\"])", str(self.root), command)

    def _render(self, hook: Mapping[str, Any], replaced: Mapping[str, Any], recorded: str) -> str:
        if hook.get("tool_name") == "Read":
            return render_read(replaced.get("file") or {}, recorded)
        stdout = str(replaced.get("stdout", ""))
        original = hook.get("tool_response")
        was = str(original.get("stdout", "")) if isinstance(original, Mapping) else ""
        return stdout + (recorded[len(was) :] if recorded.startswith(was) else "")

    def _file_call(
        self,
        cid: str,
        hook: Mapping[str, Any],
        trace_call: tuple[str, dict[str, Any]] | None,
        replaced: Any,
        before: tuple[str, tuple[str, ...]] | None,
        sent: str,
        failed: bool,
    ) -> FileCall | None:
        """The call as the checks see it (None: no file tool call, nothing to check)."""
        tool = hook.get("tool_name")
        if trace_call is not None and trace_call[0] in ("write_file", "edit_file"):
            name, args = trace_call
            rel = str(args.get("path", ""))
            kind = "error" if failed else ("written" if name == "write_file" else "edited")
            return FileCall(cid, name, rel, args, kind, sent, before, _snapshot(self.root, rel))
        if failed or tool not in ("Read", "Bash"):
            return None
        events = self._ledger(cid)
        if len(events) != 1 or events[0].path is None:
            return None  # not served (outside, denied, binary), or several files at once
        event = events[0]
        rel = str(event.path)
        after = _snapshot(self.root, rel)
        start = int(event.start or 1)
        args = {"path": rel, "offset": start, "limit": int(event.end or start) - start + 1}
        if isinstance(replaced, Mapping):
            inner = replaced.get("file", {}).get("content") if tool == "Read" else None
            inner = str(inner if inner is not None else replaced.get("stdout", ""))
            inner = inner.removesuffix("\n" + host_instructions(DISPLAY_NAME))  # not the answer's
            return FileCall(cid, "read_file", rel, args, str(event.kind), sent, None, after, inner)
        shown = _shown_rows(hook.get("tool_response"), tool, start)
        inner = _verified(shown, after[1] if after else ())
        return FileCall(cid, "read_file", rel, args, AGENT_VIEW, sent, None, after, inner)

    def _ledger(self, cid: str) -> list[Any]:
        sid = host_session_id(HOST_NAME, self.name, self.root)
        with open_store(self.root, str(self.site.store)) as opened:
            return [e for e in opened.events(sid) if e.call_id == cid and e.tool == Tool.READ]


def _file_args(messages: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            if fn.get("name") not in _FILE_TOOLS or not call.get("id"):
                continue
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (TypeError, ValueError):
                continue
            if isinstance(args, dict) and isinstance(args.get("path"), str):
                out[str(call["id"])] = (str(fn["name"]), args)
    return out


def _mapped(value: Any, path: Any, command: Any) -> Any:
    """``value`` with its file paths (and, given ``command``, its command) mapped to the copy."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in ("file_path", "filePath", "notebook_path") and isinstance(item, str):
                out[key] = path(item)
            elif key == "command" and command is not None and isinstance(item, str):
                out[key] = command(item)
            else:
                out[key] = _mapped(item, path, command)
        return out
    if isinstance(value, list):
        return [_mapped(item, path, command) for item in value]
    return value


def _snapshot(root: Path, rel: str) -> tuple[str, tuple[str, ...]] | None:
    if not rel:
        return None
    try:
        real = locate(root, rel).real
        data = real.read_bytes() if real.is_file() else None
    except (FileCacheError, OSError):
        return None
    return None if data is None else (tag_of(data), disk_lines(data))


def _shown_rows(response: Any, tool: Any, start: int) -> dict[int, str]:
    """Line number -> text of what Claude Code's own Read or Bash result showed."""
    if not isinstance(response, Mapping):
        return {}
    if tool == "Read":
        file = response.get("file")
        content = file.get("content") if isinstance(file, Mapping) else None
        first = file.get("startLine") if isinstance(file, Mapping) else None
        rows = str(content or "").split("\n")
        return dict(enumerate(rows, first if isinstance(first, int) else start))
    rows = str(response.get("stdout", "")).split("\n")
    numbered = bool(rows) and all(_NUMBERED.match(r) for r in rows if r)
    if numbered:  # cat -n, nl -ba: the numbers say which lines
        out: dict[int, str] = {}
        for row in rows:
            number, _, text = re.sub(r"→", "\t", row, count=1).lstrip(" ").partition("\t")
            if number.isdigit():
                out[int(number)] = text
        return out
    return dict(enumerate(rows, start))


def _verified(shown: Mapping[int, str], lines: tuple[str, ...]) -> str:
    """The shown lines equal to disk, as ``N<TAB>line`` rows (what the model holds for sure)."""
    rows = []
    for n in sorted(shown):
        if 1 <= n <= len(lines) and shown[n] == lines[n - 1].rstrip("\n").rstrip("\r"):
            rows.append(f"{n}\t{lines[n - 1]}")
    return "".join(rows)


class _Transcript:
    """The session's transcript as Claude Code writes it (what the hook reads as held)."""

    def __init__(self, path: Path, session_id: str, cwd: str) -> None:
        self.path = path
        self.session_id, self.cwd = session_id, cwd
        self.last: str | None = None
        self.uses: dict[str, str] = {}
        self.turns = 0
        path.write_text("", encoding="utf-8")

    def _append(self, entry: dict[str, Any], parent: str | None) -> str:
        uid = str(uuid.uuid4())
        entry |= {"uuid": uid, "parentUuid": parent, "isSidechain": False,
                  "sessionId": self.session_id, "cwd": self.cwd}  # fmt: skip
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry, ensure_ascii=False) + "\n")
        return uid

    def prompt(self, text: str) -> None:
        message = {"role": "user", "content": text}
        self.last = self._append({"type": "user", "message": message}, self.last)

    def assistant(self, message: Mapping[str, Any], calls: Mapping[str, Any]) -> None:
        self.turns += 1
        mid = f"msg_replay_{self.turns}"
        blocks: list[dict[str, Any]] = []
        if message.get("content"):
            blocks.append({"type": "text", "text": str(message["content"])})
        for call in message.get("tool_calls") or ():
            cid = str(call.get("id") or "")
            hook = calls.get(cid) or {}
            name = hook.get("tool_name") or (call.get("function") or {}).get("name")
            blocks.append({"type": "tool_use", "id": cid, "name": name, "input": {}})
        for block in blocks:
            entry = {"type": "assistant", "message": {"id": mid, "role": "assistant",
                                                      "content": [block]}}  # fmt: skip
            self.last = self._append(entry, self.last)
            if block["type"] == "tool_use":
                self.uses[block["id"]] = self.last

    def result(self, cid: str, text: str, payload: Any, *, failed: bool) -> None:
        block = {"type": "tool_result", "tool_use_id": cid, "content": text, "is_error": failed}
        entry = {"type": "user", "message": {"role": "user", "content": [block]},
                 "toolUseResult": payload}  # fmt: skip
        self.last = self._append(entry, self.uses.get(cid, self.last))
