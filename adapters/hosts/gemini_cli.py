"""filecache inside Gemini CLI: its ``AfterTool`` hook hands each file tool call to filecache.

``filecache install gemini-cli`` writes the hooks into Gemini CLI's ``settings.json`` (the
user's ``~/.gemini/settings.json``, ``$GEMINI_CLI_HOME`` standing for the home folder, or with
``--project`` the project's ``.gemini/settings.json``, which Gemini CLI runs only in a trusted
folder). Gemini CLI runs the guarded hook command (``config_files.client_command``) with the
hook's JSON on stdin (docs/gemini-cli.md has what 0.61 sends and reads):

- ``AfterTool`` on ``read_file``: a re-read the model holds becomes a FileRef naming the id of
  the result that shows the lines (the id in the ``functionResponse`` Gemini CLI sends), a
  changed file a diff. The hook answers ``{"decision": "deny", "reason": TEXT}``: Gemini CLI
  then sends TEXT alone as the call's result (``{"error": TEXT}``); 0.61 reads no
  ``hookSpecificOutput.tool_output`` (the docs' other way to replace a result), nor anything
  else that replaces a result with text. Content stays Gemini CLI's own output.
- ``run_shell_command``: a read (``cat``, ``sed -n``, ``head``, ...) the model holds is answered
  the same way, when the command ran in the root, in the foreground, and exited 0 with no
  error; any other command re-hashes the view (the next read of a file it changed is a diff).
- ``write_file`` and ``replace``: adopted, so a read after the model's own edit is short.
- ``SessionStart``: ``clear`` forgets everything; ``startup``/``resume`` keep what the session
  file holds.
- Subagents: Gemini CLI runs a subagent's tool calls through the same hooks, with the main
  context's ``session_id`` and ``transcript_path`` and nothing that tells them apart, and the
  subagent holds none of the main context's results. So ``BeforeTool``/``AfterTool`` on
  ``invoke_agent`` count the subagents running (in the store, per session), and while one runs
  every call's own output stands (a call that may change files re-hashes the view); a new prompt
  (``BeforeAgent``) or session start resets the count.

Call ids. Gemini CLI does not tell a hook the id of the call it runs, and writes a call to its
session file only once the whole batch of calls completed. So each call is recorded under an
id of its own (``_PENDING`` and a random suffix) and resolved later to the model's id: the first
call of the session file with the same tool, the same arguments and the same text as the model
got (a hash of it is kept, per session, in the store). A short answer whose base is not resolved
(a call of the same batch) is not sent: Gemini CLI's output stands. A pending call whose batch
is recorded without it (cancelled, failed, its text changed on the way) is forgotten.

What the model holds is the session file (``gemini_transcript``): a call whose result is no
longer in the history, or no longer the text the model got (compressed, masked, truncated) backs
no FileRef. How to read a short answer travels with the first one of each context
(``render.host_instructions``), as for the other hosts.

The host's answer is the fallback: a failed call, a denied file, a binary, image or PDF, a file
outside the project, lines Gemini CLI shortened, a file with CRLF line ends (Gemini CLI shows LF),
anything filecache cannot serve exactly: nothing is printed. Any internal error is one line in
the hook log and nothing printed (``registry.run_hook``).
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from filecache.adapters.hosts.base import HostSession
    from filecache.adapters.hosts.config_files import Installed
    from filecache.adapters.hosts.gemini_transcript import GeminiTranscript

__all__ = ["DISPLAY_NAME", "HOST_NAME", "abandon", "install", "installed", "run_hook"]

HOST_NAME = "gemini-cli"
DISPLAY_NAME = "Gemini CLI"

_PENDING = "gemini-pending-"
_PENDING_ID = re.compile(re.escape(_PENDING) + r"[0-9a-f]{12}")
_CALLS = "gemini-calls"  # the store's key-value namespace: pending and resolved calls, per session
# Gemini CLI's read_file result for a range or a long file (packages/core tools/read-file.ts).
_TRUNCATED = re.compile(
    r"\nIMPORTANT: The file content has been truncated\.\n"
    r"Status: Showing lines (\d+)-(\d+) of (\d+) total lines\.\n"
    r"[^\n]*\n\n--- FILE CONTENT \(truncated\) ---\n"
)
_EDITS = frozenset({"write_file", "replace"})
# A foreground command's result that exited 0 with no error: its output and its process group,
# wrapped as untrusted text (packages/core tools/shell.ts, wrapUntrusted).
_SHELL_OUTPUT = re.compile(
    r"<untrusted_context>\nOutput: (.*)\nProcess Group PGID: \d+\n</untrusted_context>",
    re.DOTALL,
)
_SUBAGENT = "invoke_agent"  # the tool whose call runs a subagent (its calls fire our hooks too)
_RUNNING = "gemini-subagents"  # the store's namespace: subagents running, per session


def _note() -> str:
    from filecache.adapters.hosts.host_specs import spec

    told = spec(HOST_NAME).told
    return told() if told is not None else ""


NOTE = _note()
"""What the model is told once per context about short answers (``HostSpec.told``)."""


def install(*, scope: str | None, uninstall: bool, cwd: Path) -> str:
    """``filecache install gemini-cli`` (``gemini_settings.install``)."""
    from filecache.adapters.hosts.gemini_settings import install as install_hooks

    line: str = install_hooks(scope=scope, uninstall=uninstall, cwd=cwd)
    return line


def installed(cwd: Path) -> list[Installed]:
    """filecache's hooks for Gemini CLI at each scope (``gemini_settings.installed``)."""
    from filecache.adapters.hosts.gemini_settings import installed as found

    out: list[Installed] = found(cwd)
    return out


def run_hook(args: list[str], payload: bytes) -> bytes:
    """The answer to one hook call (the JSON Gemini CLI reads on stdout), or ``b""`` to leave
    Gemini CLI's own output. Raises only on internal errors, which the caller logs."""
    event = json.loads(payload)
    if not isinstance(event, dict):
        return b""
    out = answer(event)
    return b"" if out is None else json.dumps(out, ensure_ascii=False).encode("utf-8")


def abandon(args: list[str], payload: bytes) -> None:
    """The answer to this ``AfterTool`` never reached Gemini CLI (the client gave up or was
    killed). Its call id was made up inside the call (the hook input carries none), so the
    payload cannot name the facts that relied on it: the session's whole view is dropped, and
    the next reads send content (safe, and rare: a hook that outlived its client)."""
    event = json.loads(payload)
    if not isinstance(event, dict) or event.get("hook_event_name") != "AfterTool":
        return
    session_id, cwd = event.get("session_id"), event.get("cwd")
    if not isinstance(session_id, str) or not session_id or not isinstance(cwd, str):
        return
    from filecache.adapters.hosts.base import HostSession

    with HostSession.open(HOST_NAME, session_id, cwd) as host:
        host.reset()


def answer(event: dict[str, Any]) -> dict[str, Any] | None:
    """The hook's output object for one event (None: Gemini CLI's own output stands)."""
    name = event.get("hook_event_name")
    session_id, cwd = event.get("session_id"), event.get("cwd")
    if not isinstance(session_id, str) or not session_id or not isinstance(cwd, str):
        return None
    tool = event.get("tool_name")
    if name in ("BeforeTool", "AfterTool") and tool == _SUBAGENT:
        name = "SubagentStart" if name == "BeforeTool" else "SubagentEnd"
    elif name == "AfterTool" and tool not in ("read_file", "run_shell_command", *_EDITS):
        return None
    elif name not in ("AfterTool", "SessionStart", "BeforeAgent"):
        return None
    from filecache.adapters.hosts.base import HostSession
    from filecache.adapters.hosts.gemini_transcript import load

    with HostSession.open(HOST_NAME, session_id, cwd) as host:
        if name != "AfterTool":
            _subagents(host, {"SubagentStart": 1, "SubagentEnd": -1}.get(name))
        if name == "SessionStart" and event.get("source") == "clear":
            host.reset()
            return None
        if name not in ("AfterTool", "SessionStart"):
            return None
        calls = _Calls(host, load(_str(event.get("transcript_path"))))
        if name == "SessionStart":  # startup, resume: the session file says what is held
            return None
        tool_input = event.get("tool_input")
        response = event.get("tool_response")
        if not isinstance(tool_input, dict) or not isinstance(response, dict):
            return None
        call = _PENDING + secrets.token_hex(6)
        failed = response.get("error") is not None
        shown = response.get("llmContent")
        if _subagents(host, 0):
            # A subagent's call: Gemini CLI hands it over with the main context's session id
            # and session file, and the subagent holds none of the main context's results.
            # Its output stands; what it may have changed makes the next read a diff.
            host.changed(call)
            return None
        if tool == "read_file" and not failed and isinstance(shown, str):
            return calls.read(call, tool_input, shown)
        if tool == "run_shell_command" and not failed and isinstance(shown, str):
            return calls.shell(call, tool_input, shown)
        if tool in _EDITS and not failed:
            _edit(host, str(tool), tool_input, call)
        else:
            host.changed(call)
        if isinstance(shown, str) and call in host.session.held_call_ids():
            calls.add(call, str(tool), tool_input, shown)  # the model holds what it did
    return None


def _subagents(host: HostSession, change: int | None) -> int:
    """How many subagents of this context run now, after ``change`` (+1 one starts, -1 one
    ended, 0 only asking, None: none runs). A new prompt or a session start (``BeforeAgent``,
    ``SessionStart``) means none, whatever was missed (a cancelled subagent whose end never
    came keeps filecache out of the context until then: its output stands)."""
    store = host.cache.engine.store
    with host.session.lock:
        raw = store.cache_get(_RUNNING, host.session.id)
        now = int(raw) if raw and raw.isdigit() else 0
        if change != 0:
            now = 0 if change is None else max(0, now + change)
            store.cache_put(_RUNNING, host.session.id, str(now))
        return now


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _edit(host: HostSession, tool: str, tool_input: dict[str, Any], call: str) -> None:
    path = tool_input.get("file_path")
    if not isinstance(path, str):
        host.changed(call)
        return
    if tool == "write_file" and isinstance(tool_input.get("content"), str):
        host.wrote(path, call, tool_input["content"])
        return
    old, new = tool_input.get("old_string"), tool_input.get("new_string")
    if tool == "replace" and isinstance(old, str) and isinstance(new, str) and old:
        host.edited(path, call, [(old, new)], replace_all=bool(tool_input.get("allow_multiple")))
        return
    host.changed(call)


class _Calls:
    """This context's calls: pending ones (recorded under an id of ours) and the model's id
    each resolved to, kept in the store; synced with the session file on creation."""

    def __init__(self, host: HostSession, transcript: GeminiTranscript) -> None:
        self.host = host
        self.transcript = transcript
        self.state = self._load()
        self._resolve()
        self._forget_gone()

    # -- the table -------------------------------------------------------------------------

    def _load(self) -> dict[str, Any]:
        raw = self.host.cache.engine.store.cache_get(_CALLS, self.host.session.id)
        try:
            state = json.loads(raw) if raw else {}
        except ValueError:
            state = {}
        if not isinstance(state, dict):
            state = {}
        state.setdefault("pending", {})
        state.setdefault("resolved", {})
        return state

    def _save(self) -> None:
        self.host.cache.engine.store.cache_put(_CALLS, self.host.session.id, json.dumps(self.state))

    def add(self, call: str, tool: str, tool_input: dict[str, Any], text: str) -> None:
        """``call`` (ours) showed the model ``text``: resolve it once the session file has it."""
        from filecache.adapters.hosts.gemini_transcript import canonical_args

        with self.host.session.lock:
            self.state = self._load()
            self.state["pending"][call] = {
                "tool": tool, "args": canonical_args(tool_input), "text": _digest(text),
                "seen": len(self.transcript.calls),
            }  # fmt: skip
            self._save()

    def _resolve(self) -> None:
        pending: dict[str, Any] = self.state["pending"]
        resolved: dict[str, Any] = self.state["resolved"]
        if not pending:
            return
        taken = {entry[0] for entry in resolved.values()}
        changed = False
        for call, want in sorted(pending.items(), key=lambda item: item[1]["seen"]):
            for found in self.transcript.calls[want["seen"] :]:
                if found.id in taken or found.name != want["tool"] or found.args != want["args"]:
                    continue
                if _digest(found.text) == want["text"]:
                    resolved[call] = [found.id, want["text"]]
                    taken.add(found.id)
                    del pending[call]
                    changed = True
                    break
        if changed:
            with self.host.session.lock:
                self._save()

    def _held(self, call: str) -> bool:
        """Whether the model's history holds ``call``'s result as it was shown (resolved), or
        may still (pending, its batch not recorded yet)."""
        done = self.state["resolved"].get(call)
        if done is not None:
            return (
                self.transcript.held.get(done[0]) is not None
                and _digest(self.transcript.held[done[0]]) == done[1]
            )
        want = self.state["pending"].get(call)
        return want is not None and want["seen"] == len(self.transcript.calls)

    def _forget_gone(self) -> None:
        session = self.host.session
        with session.lock:
            gone = {call for call in session.held_call_ids() if not self._held(call)}
            if gone:
                session.forget(gone)
            if gone & (set(self.state["pending"]) | set(self.state["resolved"])):
                self.state = self._load()
                for call in gone:
                    self.state["pending"].pop(call, None)
                    self.state["resolved"].pop(call, None)
                self._save()

    # -- run_shell_command -------------------------------------------------------------------

    def shell(self, call: str, tool_input: dict[str, Any], shown: str) -> dict[str, Any] | None:
        """A shell read (``cat``, ``sed -n``, ``head``, ...) the model holds: a FileRef or a
        diff. Only a command that ran in the root, in the foreground, exited 0 with no error
        (``Output: TEXT`` and its process group line, nothing else) is served; anything else
        re-hashes the view."""
        host = self.host
        command = tool_input.get("command")
        match = _SHELL_OUTPUT.fullmatch(shown)
        plain = (
            isinstance(command, str)
            and match is not None
            and not tool_input.get("dir_path")
            and not tool_input.get("is_background")
        )
        if not plain or match is None or not isinstance(command, str):
            host.changed(call)
            self._add_if_held(call, "run_shell_command", tool_input, shown)
            return None
        output = match.group(1)
        # Gemini CLI shows the terminal's text: the newline that ends the output is gone.
        got = host.shell(command, call, output=output + "\n" if output else output)
        if got is None:
            self._add_if_held(call, "run_shell_command", tool_input, shown)
            return None
        text = self._named(got)
        if text is None:
            host.session.withdraw([call])  # stats: the host's own output, no saving
            return None
        text = self._with_note(call, text, shown)
        if text is None:
            return None
        self.add(call, "run_shell_command", tool_input, text)
        return {"decision": "deny", "reason": text}

    def _add_if_held(self, call: str, tool: str, tool_input: dict[str, Any], shown: str) -> None:
        if call in self.host.session.held_call_ids():
            self.add(call, tool, tool_input, shown)

    # -- read_file ---------------------------------------------------------------------------

    def read(self, call: str, tool_input: dict[str, Any], shown: str) -> dict[str, Any] | None:
        path = tool_input.get("file_path")
        if not isinstance(path, str) or not path:
            return None
        lines = _shown_lines(shown)
        if lines is None:
            return None
        start, last, total, content = lines
        host = self.host
        # Gemini CLI splits on newlines: a file that ends with one has one more (empty) line,
        # and a range that stops before the end is shown without the newline ending its last.
        whole = start == 1 and last >= total
        host_text = content if last >= total else content + "\n"
        got = host.read(
            path, call, start=None if whole else start, end=None if last >= total else last,
            host_text=host_text,
        )  # fmt: skip
        if got is None:
            return None
        if got.is_content:
            self.add(call, "read_file", tool_input, shown)
            return None
        text = self._named(got.text)
        if text is None:
            host.session.withdraw([call])  # stats: the host's own output, no saving
            return None
        text = self._with_note(call, text, shown)
        if text is None:
            return None
        self.add(call, "read_file", tool_input, text)
        return {"decision": "deny", "reason": text}

    def _named(self, text: str) -> str | None:
        """``text`` with every id of ours replaced by the model's id; None when one of them is
        not resolved (a call of the same batch: the model has no id for it yet)."""
        from filecache.core.render import for_host_tools

        resolved = self.state["resolved"]
        missing = [m for m in _PENDING_ID.findall(text) if m not in resolved]
        if missing:
            return None
        named = _PENDING_ID.sub(lambda m: str(resolved[m.group(0)][0]), text)
        return for_host_tools(named).rstrip("\n")

    def _with_note(self, call: str, short: str, own: str) -> str | None:
        """The short answer of ``call`` as the model gets it, or None to leave Gemini CLI's
        ``own`` output (``HostSession.short_or_own``, the policy of every host)."""
        text: str | None = self.host.short_or_own(call, short, own, NOTE, self._held)
        return text


def _shown_lines(shown: str) -> tuple[int, int, int, str] | None:
    """(first line, last line, Gemini CLI's line count, the lines' text) of a read_file
    result; None when it is not plain lines of a text file (shortened lines, binary, empty)."""
    match = _TRUNCATED.match(shown)
    if match is not None:
        start, last, total = (int(g) for g in match.groups())
        content = shown[match.end() :]
    else:
        if not shown or shown.startswith("Cannot display content"):
            return None
        content = shown
        start, last = 1, shown.count("\n") + 1
        total = last
    if "... [truncated]" in content or start < 1 or last < start:
        return None
    return start, last, total, content


def _digest(text: str) -> str:
    from filecache.core.hashing import version_of

    return version_of(text.encode("utf-8", "surrogatepass"))
