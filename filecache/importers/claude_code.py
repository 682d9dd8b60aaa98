"""Claude Code logs -> session traces.

Two kinds of log, told apart by their lines:

- ``--output-format stream-json`` transcripts: a ``system``/``init`` event (with ``cwd``),
  ``assistant`` events (one content block each; blocks of one API message share its id), ``user``
  events with ``tool_result`` blocks and Claude Code's own ``tool_use_result`` payload, and a
  final ``result``. The user's first prompt is not in the stream.
- the session files Claude Code keeps per project (``~/.claude/projects/<project>/<id>.jsonl``):
  ``user``/``assistant`` entries linked by ``uuid``/``parentUuid`` (``toolUseResult`` for the
  payload), plus ``summary``, ``file-history-snapshot`` and other bookkeeping lines. The
  conversation is the chain from the last entry back; entries off it (rewound branches) and
  sidechains (subagents) are left out, unless the file is a subagent's own log (every entry a
  sidechain: ``agent-<id>.jsonl``, ``<session>/subagents/agent-<id>.jsonl``). A compaction
  starts a new chain (``parentUuid`` null, ``logicalParentUuid`` naming the old one): each
  chain becomes its own trace, ``<id>.1``, ``<id>.2``..., since the model's context restarted
  there. A file with no message (titles only, a ``/agents`` run, empty) gives no trace.

Messages: consecutive assistant blocks of one API message become one assistant message (text
joined; ``thinking`` left out), each ``tool_result`` a tool message in the order the results
came (parallel calls answered out of order stay so). ``Read``/``Write``/``Edit``/``MultiEdit`` on
paths under the working directory become ``read_file``/``write_file``/``edit_file`` (``MultiEdit``
with ``edits``); every other call keeps its name and input. What a ``Read`` showed comes from the
payload's ``file`` (exact text, ``startLine``, ``totalLines``) or else from the ``N→`` lines of
its result (the ``<system-reminder>`` tail cut off); ``Edit``/``Write`` payloads'
``originalFile`` gives a file's whole text before the session changed it.

For the replay through the hook (``filecache.adapters.hosts.claude_replay``), the trace also
keeps, under ``claude_code.calls``, each ``Read``/``Edit``/``MultiEdit``/``Write``/
``NotebookEdit``/``Bash`` call as Claude Code's hook would have received it: its tool name,
input and payload (``tool_use_result``; ``originalFile`` left out, the hook does not read it),
and whether it failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from filecache.errors import TranscriptError
from filecache.importers.logs import changed_paths, read_log, relative_path, trace_name
from filecache.importers.mini_swe_agent import shell_edit_steps, shell_shown
from filecache.importers.trace import FileCall, Recorded, Shown, tool_call
from filecache.shell.shell_parse import parse_shell_read

__all__ = ["HOOK_TOOLS", "parse_claude_code"]

_LINE = re.compile(r"^ *(\d+)(?:→|\t)(.*)$")
_REMINDER = "<system-reminder>"
_MAX_LINE = 2000  # Claude Code cuts longer lines in what Read shows
HOOK_TOOLS = frozenset({"Read", "Edit", "MultiEdit", "Write", "NotebookEdit", "Bash"})
_UNUSED_PAYLOAD = frozenset({"originalFile", "originalFileContents"})
_READ_ONLY_TOOLS = frozenset(
    "Read Glob Grep LS WebFetch WebSearch TodoWrite TodoRead Skill BashOutput KillShell "
    "ExitPlanMode EnterPlanMode AskUserQuestion ToolSearch TaskOutput TaskStop "
    "TaskCreate TaskUpdate TaskList TaskGet LSP".split()
)
_READ_ONLY_AGENTS = frozenset({"Explore"})  # subagents with no tool that changes a file
_AGENT_TOOLS = frozenset({"Task", "Agent"})
# lines of a session file that are no part of the conversation
_NO_MESSAGE = frozenset(
    "summary custom-title file-history-snapshot queue-operation last-prompt mode "
    "system attachment progress".split()
)


def _events(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The log's entries, and notes on what was skipped.

    A line may hold two entries (a ``summary`` appended without a line break): each is taken.
    A last line cut short (the log of a session still running) is skipped with a note; any
    other line that is not JSON is an error."""
    events: list[dict[str, Any]] = []
    notes: list[str] = []
    # JSON Lines end at "\n": Node's JSON.stringify leaves U+2028, U+2029 and U+0085 raw in
    # strings, and ``str.splitlines`` would cut an entry there
    lines = read_log(path).split("\n")
    last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entries = _entries(line)
        except json.JSONDecodeError as exc:
            if n == last:
                notes.append(
                    f"line {n} of {Path(path).name} is cut short (a session still being "
                    "written?): skipped"
                )
                continue
            raise TranscriptError(f"{path}:{n}: not a JSON line ({exc})") from exc
        events.extend(e for e in entries if isinstance(e, dict))
    return events, notes


_DECODER = json.JSONDecoder()


def _entries(line: str) -> list[Any]:
    """The JSON values on one line: one, or several written back to back."""
    out: list[Any] = []
    at, end = 0, len(line.rstrip())
    while True:
        while at < end and line[at].isspace():
            at += 1
        if at >= end:
            return out
        value, at = _DECODER.raw_decode(line, at)
        out.append(value)


def _chains(events: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The conversation of a project session file: its chains, oldest first.

    The chain from the newest message back (through ``attachment`` entries, which Claude Code
    2.1.x writes between messages, and through ``progress`` and other entries off the
    conversation: hook, bash and agent progress sit on the ``parentUuid`` chain in 2.1.12 to
    2.1.42). Parallel calls of one response are one assistant entry per ``tool_use``, chained,
    each result under its own ``tool_use`` entry, and the next message hangs under whichever
    result came last: the siblings of a response on the chain and the results under an entry on
    it join it (as ``claude_transcript`` reads a context). A compaction's ``logicalParentUuid``
    names the chain before it; when the log lacks that entry, the newest message before the
    compaction not yet taken ends the chain before it, so no part of the log is lost."""
    kinds = ("user", "assistant", "system", "attachment")
    # a subagent's own log (``agent-<id>.jsonl``, ``<session>/subagents/agent-<id>.jsonl``) is
    # all sidechain: there the sidechain is the conversation
    side = not any(e.get("type") in kinds and not e.get("isSidechain") for e in events)
    talk = [e for e in events if e.get("type") in kinds and bool(e.get("isSidechain")) == side]
    position = {id(e): n for n, e in enumerate(talk)}
    by_uuid = {str(e["uuid"]): e for e in talk if e.get("uuid")}
    # entries off the conversation (progress...) that sit on the chain: uuid -> their parent
    bridge = {
        str(e["uuid"]): e.get("parentUuid")
        for e in events
        if e.get("uuid") and str(e["uuid"]) not in by_uuid and bool(e.get("isSidechain")) == side
    }

    def parent(uid: Any) -> str | None:
        hops = 0
        while uid is not None and str(uid) not in by_uuid and str(uid) in bridge:
            uid, hops = bridge[str(uid)], hops + 1
            if hops > len(bridge):  # a loop: the log is damaged there
                return None
        return None if uid is None else str(uid)

    leaf = next((e for e in reversed(talk) if e.get("type") in ("user", "assistant")), None)
    chains: list[list[dict[str, Any]]] = []
    seen: set[str] = set()
    while leaf is not None:
        chain: list[dict[str, Any]] = []
        node: dict[str, Any] | None = leaf
        head = leaf
        while node is not None and str(node.get("uuid")) not in seen:
            seen.add(str(node.get("uuid")))
            chain.append(node)
            head = node
            node = by_uuid.get(parent(node.get("parentUuid")) or "")
        on = {str(e.get("uuid")) for e in chain}
        responses = {_message_id(e) for e in chain if e.get("type") == "assistant"} - {None}
        grown = True
        while grown:  # parallel calls: siblings of one response, and results under each
            grown = False
            for e in talk:
                uid = str(e.get("uuid"))
                if uid in seen or parent(e.get("parentUuid")) not in on:
                    continue
                sibling = e.get("type") == "assistant" and _message_id(e) in responses
                if sibling or _has_result(e):
                    seen.add(uid)
                    on.add(uid)
                    chain.append(e)
                    grown = True
        chains.append(sorted(chain, key=lambda e: position[id(e)]))
        leaf = None
        logical = head.get("logicalParentUuid")
        if logical:
            leaf = by_uuid.get(parent(logical) or "")
            if leaf is None or str(leaf.get("uuid")) in seen:
                leaf = next(
                    (
                        e
                        for e in reversed(talk[: position[id(head)]])
                        if e.get("type") in ("user", "assistant") and str(e.get("uuid")) not in seen
                    ),
                    None,
                )
    return list(reversed(chains))


def _message_id(entry: Mapping[str, Any]) -> str | None:
    message = entry.get("message")
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str) and value else None


def _has_result(entry: Mapping[str, Any]) -> bool:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return (
        entry.get("type") == "user"
        and isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return "" if content is None else str(content)


def _read_shown(text: str, payload: Any) -> tuple[Shown | None, int | None, int | None]:
    """(what a Read showed, its first line, its line count) from the payload or the text."""
    file = payload.get("file") if isinstance(payload, Mapping) else None
    if isinstance(file, Mapping) and isinstance(file.get("content"), str):
        content = str(file["content"])
        start = int(file.get("startLine") or 1)
        total = file.get("totalLines")
        rows = content.split("\n")
        count = int(file.get("numLines") or len(rows))
        to_end = isinstance(total, int) and start + count - 1 >= total
        if to_end and rows and rows[-1] == "":
            rows.pop()  # Claude Code counts the empty "line" after a final newline
        lines = {start + i: r for i, r in enumerate(rows) if len(r) < _MAX_LINE}
        whole = start == 1 and to_end and all(len(r) < _MAX_LINE for r in rows)
        file_total = start + len(rows) - 1 if to_end else None
        return Shown(lines, file_total, content if whole else None), start, count
    body = text.split(_REMINDER, 1)[0] if _REMINDER in text else text
    lines = {}
    for raw in body.rstrip("\n").split("\n"):
        m = _LINE.match(raw)
        if m and len(m.group(2)) < _MAX_LINE:
            lines[int(m.group(1))] = m.group(2)
    if not lines:
        empty = "contents are empty" in text
        return (Shown({}, 0), 1, 0) if empty else (None, None, None)
    start, last = min(lines), max(lines)
    return Shown(lines), start, last - start + 1


def _file_call(
    name: str, given: Mapping[str, Any], rel: str, cid: str, result: Mapping[str, Any]
) -> tuple[dict[str, Any], FileCall] | None:
    """The trace's arguments and the recorded call, or None when it is not a file tool call."""
    text, failed, payload = str(result["text"]), bool(result["failed"]), result["payload"]
    before = None
    if isinstance(payload, Mapping):
        original = payload.get("originalFile", payload.get("originalFileContents"))
        before = original if isinstance(original, str) else None
    if name == "Read":
        args: dict[str, Any] = {"path": rel}
        shown, start, count = (None, None, None) if failed else _read_shown(text, payload)
        total = shown.total if shown is not None else None
        if given.get("offset") is not None and start is not None:
            args["offset"] = start
        if isinstance(given.get("limit"), int):
            args["limit"] = given["limit"]
        elif count and total is None and shown is not None and shown.lines:
            args["limit"] = count  # Claude Code stopped before the end (its line cap)
        return args, FileCall(cid, "read_file", args, failed, shown)
    if name == "Write" and isinstance(given.get("content"), str):
        args = {"path": rel, "content": given["content"]}
        return args, FileCall(cid, "write_file", args, failed, before=before)
    if name == "Edit" and isinstance(given.get("old_string"), str):
        args = {"path": rel, "old_string": given["old_string"]}
        args["new_string"] = given.get("new_string") or ""
        if given.get("replace_all"):
            args["replace_all"] = True
        return args, FileCall(cid, "edit_file", args, failed, before=before)
    if name == "MultiEdit" and isinstance(given.get("edits"), list):
        args = {"path": rel, "edits": given["edits"]}
        return args, FileCall(cid, "edit_file", args, failed, before=before)
    return None


class _Builder:
    """Turns one chain of events into a ``Recorded``."""

    def __init__(self, recorded: Recorded, cwd: str) -> None:
        self.recorded = recorded
        self.cwd = cwd
        self.uses: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}
        self.last_id: str | None = None
        self.opaque: dict[str, tuple[str, Mapping[str, Any]]] = {}
        self.hook_calls: dict[str, dict[str, Any]] = {}
        self.orphans = 0  # results of calls the log does not hold (it continues another)

    def assistant(self, message: Mapping[str, Any]) -> None:
        msgs = self.recorded.messages
        mid = message.get("id")
        if not (msgs and msgs[-1]["role"] == "assistant" and mid and mid == self.last_id):
            msgs.append({"role": "assistant", "content": None})
        self.last_id = str(mid) if mid else None
        current = msgs[-1]
        for block in message.get("content") or ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and block.get("text"):
                current["content"] = "\n\n".join(filter(None, [current["content"], block["text"]]))
            elif block.get("type") == "tool_use" and block.get("id"):
                raw = block.get("input")
                given: dict[str, Any] = raw if isinstance(raw, dict) else {}
                call = tool_call(str(block["id"]), str(block.get("name", "")), given)
                current.setdefault("tool_calls", []).append(call)
                self.uses[str(block["id"])] = (str(block.get("name", "")), given, call)

    def user(self, content: Any, payload: Any) -> None:
        msgs = self.recorded.messages
        self.last_id = None
        if not isinstance(content, list):
            msgs.append({"role": "user", "content": _result_text(content)})
            return
        texts = [_result_text([b]) for b in content]
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            cid = str(block.get("tool_use_id", ""))
            text = _result_text(block.get("content"))
            if cid not in self.uses:  # a call made in the session this log continues
                msgs.append({"role": "user", "content": text})
                self.orphans += 1
                continue
            failed = bool(block.get("is_error")) or text.startswith("<tool_use_error>")
            msgs.append({"role": "tool", "tool_call_id": cid, "content": text})
            self._map(cid, {"text": text, "failed": failed, "payload": payload})
            self._hook_call(cid, failed, payload if len(results) == 1 else None)
        if any(texts):
            msgs.append({"role": "user", "content": "\n\n".join(t for t in texts if t)})

    def _hook_call(self, cid: str, failed: bool, payload: Any) -> None:
        """The call as Claude Code's hook receives it (``claude_code.calls`` of the trace)."""
        if cid not in self.uses or self.uses[cid][0] not in HOOK_TOOLS:
            return
        name, given, _ = self.uses[cid]
        response = (
            {k: v for k, v in payload.items() if k not in _UNUSED_PAYLOAD}
            if isinstance(payload, Mapping)
            else payload
        )
        self.hook_calls[cid] = {
            "tool_name": name, "tool_input": given, "tool_response": response, "failed": failed,
        }  # fmt: skip

    def _map(self, cid: str, result: Mapping[str, Any]) -> None:
        if cid not in self.uses:
            return
        name, given, call = self.uses[cid]
        raw = given.get("file_path")
        rel = relative_path(str(raw), self.cwd) if isinstance(raw, str) and raw else None
        mapped = _file_call(name, given, rel, cid, result) if rel is not None else None
        if mapped is None:
            self.opaque[cid] = (name, given)
            return
        args, file_call = mapped
        call["function"]["name"] = file_call.tool
        call["function"]["arguments"] = json.dumps(args, ensure_ascii=False)
        self.recorded.calls[cid] = file_call

    def _shell(self, cid: str, command: str) -> bool:
        """A Bash read (``cat``, ``sed -n``...) of one file under the working directory, or
        a command made only of edits replay can redo: recorded as such; False: neither."""
        hook = self.hook_calls.get(cid) or {}
        response = hook.get("tool_response")
        read = parse_shell_read(command)
        if read is not None and read.grep is not None:
            read = None  # a grep's output places lines by what matches: not rebuilt from here
        rel = relative_path(read.path, self.cwd) if read and len(read.paths) == 1 else None
        if read is not None and rel is not None:
            if (
                hook.get("failed")
                or not isinstance(response, Mapping)
                or not isinstance(response.get("stdout"), str)
                or response.get("stderr")
            ):
                return False
            stdout = str(response["stdout"])  # Claude Code strips the output's last newline
            shown = shell_shown(read, stdout + "\n" if stdout else stdout)
            if shown is None:
                return False
            self.recorded.calls[cid] = FileCall(
                cid, "read_file", {"path": rel}, False, shown, command=command
            )
            return True
        steps = shell_edit_steps(command, self.cwd)
        if steps is None or hook.get("failed"):
            return False
        self.recorded.edits[cid] = steps  # replay redoes it, as the import's check does
        return True

    def finish(self) -> Recorded:
        for cid, (name, given) in self.opaque.items():
            if name == "Bash" and isinstance(given.get("command"), str):
                if self._shell(cid, str(given["command"])):
                    self.opaque[cid] = ("", {})  # understood: neither opaque nor a change
        paths = {c.path for c in self.recorded.calls.values()}
        for cid, (name, given) in self.opaque.items():
            if name in _READ_ONLY_TOOLS or not name:
                continue
            if name in _AGENT_TOOLS and given.get("subagent_type") in _READ_ONLY_AGENTS:
                continue
            if name == "Bash" and isinstance(given.get("command"), str):
                changed = changed_paths(str(given["command"]), paths)
            else:  # an Edit outside the root, NotebookEdit, a subagent (Task), an MCP tool...
                changed = None
            if changed is None or changed:
                self.recorded.changes[cid] = changed
        return self.recorded


def parse_claude_code(path: Path) -> list[Recorded]:
    """Parse a stream-json transcript or a project session file (plain or gzipped).

    Returns one ``Recorded`` per conversation chain (one, unless the session was compacted);
    none for a session file with no message: empty, or bookkeeping lines only (Claude Code 1.0
    leaves files of ``summary`` lines in a project's folder, beside the sessions they title; a
    session that only ran ``/agents`` holds ``system`` lines).

    Raises:
        TranscriptError: not a Claude Code log.
    """
    events, skipped = _events(path)
    kinds = {e.get("type") for e in events}
    if not kinds & {"user", "assistant"}:
        if kinds <= _NO_MESSAGE:
            return []  # empty, titles, snapshots, a local command (/agents...): no conversation
        raise TranscriptError(f"{path}: no Claude Code user/assistant lines; is this its log?")
    name = trace_name(path)
    project = any("parentUuid" in e for e in events)
    chains = _chains(events) if project else [events]
    out: list[Recorded] = []
    for n, chain in enumerate(chains, 1):
        cwd = next((str(e["cwd"]) for e in chain if e.get("cwd")), "")
        cwd = cwd or next((str(e["cwd"]) for e in events if e.get("cwd")), "/")
        kind = "session file" if project else "stream-json"
        label = f"{name}.{n}" if len(chains) > 1 else name
        builder = _Builder(Recorded(label, f"claude-code {kind}: {Path(path).name}", []), cwd)
        for event in chain:
            message = event.get("message")
            if not isinstance(message, dict):
                continue
            if event.get("type") == "assistant":
                builder.assistant(message)
            elif event.get("type") == "user":
                payload = event.get("toolUseResult", event.get("tool_use_result"))
                builder.user(message.get("content"), payload)
        recorded = builder.finish()
        recorded.extra["cwd"] = cwd
        recorded.extra["claude_code"] = {"calls": builder.hook_calls}
        if project and len(chains) > 1:
            recorded.notes.append(f"conversation {n} of {len(chains)} (split at compactions)")
        if builder.orphans:
            recorded.notes.append(
                f"continues another session: {builder.orphans} result(s) of calls made there "
                "kept as user text"
            )
        if n == len(chains):
            recorded.notes.extend(skipped)  # the cut line is the newest
        out.append(recorded)
    return out
