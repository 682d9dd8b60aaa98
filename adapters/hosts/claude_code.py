"""filecache inside Claude Code: its hooks hand each Read, Edit, Write and Bash call to filecache.

``filecache install claude-code`` writes the hooks into Claude Code's settings
(``claude_settings``); Claude Code then runs ``python -m filecache.adapters.hosts claude-code``
with the hook's JSON on stdin and reads the answer on stdout (``run_hook``):

- ``PostToolUse`` on ``Read``: filecache's answer for the lines Claude Code read (``startLine``
  and ``numLines`` of its result, i.e. ``offset``/``limit`` as it applied them). A re-read the
  model holds becomes a FileRef naming the real ``tool_use_id`` of the result that shows the
  lines, a changed file a diff, both as ``hookSpecificOutput.updatedToolOutput`` in the Read
  result's exact shape (``{"type": "text", "file": {...}}``; Claude Code numbers
  ``file.content`` itself and drops a mis-shaped answer silently). Content stays Claude Code's
  own output (nothing is printed).
- ``Edit``/``MultiEdit``/``Write``: adopted, so a read after the model's own edit is short;
  ``NotebookEdit`` and any other ``Bash`` command re-hash the view (the next read of a file they
  changed is a diff); a ``Bash`` read (``cat``, ``sed -n``, ``head``, ...) is answered like a
  Read, in the Bash result's shape (Claude Code's own fields kept, ``stdout`` replaced).
- How to read a short answer travels with the first one of each context: the FileRef or diff
  ends with one more line, ``render.host_instructions`` (after the answer's own lines, so a
  Read's numbering of them is unchanged), and the store remembers which call carried it
  (``HostSession.instructions_due``); once the transcript no longer holds that result, the
  next short answer carries it again. Nothing is added at ``SessionStart``: a session whose
  answers are all content pays nothing.
- What the model holds comes from the transcript (``claude_transcript``, ``claude_index``):
  before every call, the calls it names and no longer holds are forgotten (a parallel call it
  does not name yet is kept: Claude Code runs tools while the response still streams); at
  ``UserPromptSubmit`` and ``SessionStart`` (startup, resume) everything it does not hold is;
  ``PreCompact``/``PostCompact``/``SessionStart`` (compact, clear) forget everything.
- The host's answer is the fallback: a failed call, a denied file, a binary, image, PDF or
  notebook, a file outside the project, Claude Code's own "unchanged" stub, a result cut to a
  token cap: nothing is printed. Any internal error is one line in the hook log and nothing
  printed (``registry.run_hook``), so the session never breaks.
- A tool call made by a Code Mode script (its ``tool_use_id`` says so: ``SCRIPTED``) goes back
  to the script, not to the model: Claude Code's own output, nothing recorded, and the user is
  told once per session.

One filecache session per Claude Code context: the ``session_id`` of the hook (a subagent,
``agent_id``, is its own context with its own transcript), on the project root
(``CLAUDE_PROJECT_DIR``, else the hook's ``cwd``). Nothing is kept between hook processes but
the store.

``answer(event, site)`` is the whole per-event logic, callable without any process: the hook
command (``run_hook``) is it with the default ``HookSite`` and the answer serialized; the replay
of imported Claude Code logs (``claude_replay``) feeds it the recorded events with a
``HookSite`` naming the replay's root, store and index folder, so both run one implementation.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filecache.adapters.hosts.claude_index import read_held
from filecache.adapters.hosts.claude_transcript import Held, is_stub
from filecache.adapters.hosts.host_specs import spec

if TYPE_CHECKING:
    from filecache.adapters.hosts.base import HostSession
    from filecache.adapters.hosts.config_files import Installed

__all__ = [
    "DISPLAY_NAME",
    "HOST_NAME",
    "HookSite",
    "MIN_VERSION",
    "abandon",
    "answer",
    "install",
    "installed",
    "run_hook",
]

HOST_NAME = "claude-code"
DISPLAY_NAME = spec(HOST_NAME).display
MIN_VERSION = (2, 1, 121)  # PostToolUse hookSpecificOutput.updatedToolOutput


def install(*, scope: str | None, uninstall: bool, cwd: Path, http_port: int | None = None) -> str:
    """``filecache install claude-code`` (``claude_settings.install``; imported only here, so
    the hook does not load it)."""
    from filecache.adapters.hosts.claude_settings import install as install_hooks

    line: str = install_hooks(scope=scope, uninstall=uninstall, cwd=cwd, http_port=http_port)
    return line


@dataclass(frozen=True)
class HookSite:
    """Where one hook call's state lives (each None: the hook command's default).

    Attributes:
        root: the project root (default: ``CLAUDE_PROJECT_DIR``, else the event's ``cwd``).
        store: the store (default: the root's settings, ``FILECACHE_STORE``, then
            ``<root>/.filecache/cache.db``).
        index_dir: where transcript scans are kept (default: the hook cache folder).
        seal: the name the seal on filecache's own lines is keyed by (default: the root's
            path; a replay names its session, since its root is a new temporary folder each
            run, so that its answers and their token counts repeat).
    """

    root: str | None = None
    store: str | None = None
    index_dir: Path | None = None
    seal: str | None = None


_EDITS = frozenset({"Edit", "MultiEdit", "Write"})
_RESETS = frozenset({"PreCompact", "PostCompact"})
_RESET_SOURCES = frozenset({"compact", "clear"})
_TOOL_CALLS = frozenset({"PostToolUse", "PostToolUseFailure"})


def installed(cwd: Path) -> list[Installed]:
    """filecache's hooks for this host at each scope (``claude_settings.installed``)."""
    from filecache.adapters.hosts.claude_settings import installed as found

    out: list[Installed] = found(cwd)
    return out


def run_hook(args: list[str], payload: bytes) -> bytes:
    """The answer to one hook call (the JSON Claude Code reads on stdout), or ``b""`` to leave
    Claude Code's own output. Raises only on internal errors, which the caller logs."""
    event = json.loads(payload)
    if not isinstance(event, dict):
        return b""
    warning = _start_http_servers(event) if event.get("hook_event_name") in _STARTS_HTTP else None
    if event.get("hook_event_name") == "PostToolUse" and scripted(event):
        out = _standing_aside(event)
    else:
        out = answer(event)
    if warning is not None and out is None:  # SessionStart, UserPromptSubmit: no other output
        out = {"systemMessage": warning}
    return b"" if out is None else json.dumps(out, ensure_ascii=False).encode("utf-8")


_STARTS_HTTP = frozenset({"SessionStart", "UserPromptSubmit"})


def _start_http_servers(event: Mapping[str, Any]) -> str | None:
    """Start ``hook_http``'s server for each http hook installed for this project whose port
    nothing listens on (``install --http``); never raises (one log line). Returns the warning
    for the user when another user's program listens on such a port: Claude Code sends it
    every tool result, and nothing a hook does can stop that for this session."""
    from filecache.adapters.hosts import call_env
    from filecache.adapters.hosts.base import log_failure

    try:
        from filecache.adapters.hosts.claude_settings import http_ports
        from filecache.adapters.hosts.hook_http import ensure_running, other_users_listener

        cwd = event.get("cwd")
        root = call_env.getenv("CLAUDE_PROJECT_DIR") or (cwd if isinstance(cwd, str) else None)
        if not root or not os.path.isabs(root):
            return None
        ports = http_ports(Path(root))
        ensure_running(ports)
        for port in ports:
            uid = other_users_listener(port)
            if uid is not None:
                log_failure(HOST_NAME, f"127.0.0.1:{port} is held by uid {uid}'s program")
                return (
                    f"WARNING: filecache's http hooks send every tool result to 127.0.0.1:"
                    f"{port}, and another user's program (uid {uid}) listens there. Quit this "
                    "session and run `filecache install claude-code --command`."
                )
    except Exception as exc:
        log_failure(HOST_NAME, f"starting the http hook server: {type(exc).__name__}: {exc}")
    return None


SCRIPTED = ("repl_", "toolu_cc_")
"""How the ``tool_use_id`` of a tool call made by a Code Mode script begins. In Code Mode
(``CLAUDE_CODE_EXPERIMENTAL_CODE_MODE``, 2.1.323 and later) the model's one tool is ``REPL``:
it writes JavaScript whose ``Read(...)``, ``$`cat ...```, ``file(...).text()`` and ``edit(...)``
calls run Claude Code's tools, each with a ``PostToolUse`` hook like any other call, and the
result goes to the script, not to the model. Nothing else in the hook's input says so, but the
id does: Claude Code names such a call ``repl_<uuid>`` (2.1.323 and 2.1.328; 2.1.332 in the
terminal) or ``toolu_cc_<hex>`` (2.1.332 in ``claude -p``), and tells them from the model's own
calls by these two prefixes itself. An id from the model API (``toolu_01...``) never has them.
A FileRef or diff handed to a script that expects the file's text would break it silently, so
such a call gets Claude Code's own output and is not recorded: the model never held its
result."""


def scripted(event: Mapping[str, Any]) -> bool:
    """Whether the hook call is a tool call of a Code Mode script (``SCRIPTED``)."""
    call = event.get("tool_use_id")
    return isinstance(call, str) and call.startswith(SCRIPTED)


def _standing_aside(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """A script's tool call: Claude Code's own result stands; the user is told once per
    session."""
    from filecache.adapters.hosts.registry import notice_text

    session = event.get("session_id")
    reason = "Code Mode is on: a tool result goes to the model's script, not to the model"
    said = notice_text(HOST_NAME, session, reason) if isinstance(session, str) else None
    return None if said is None else {"systemMessage": said}


def abandon(args: list[str], payload: bytes) -> None:
    """The answer to this ``PostToolUse`` never reached Claude Code: nothing relies on it."""
    event = json.loads(payload)
    call = _call_id(event) if isinstance(event, dict) else ""
    if call and event.get("hook_event_name") == "PostToolUse":
        with _open(event, HookSite()) as host:
            host.abandon(call)


def answer(event: Mapping[str, Any], site: HookSite | None = None) -> dict[str, Any] | None:
    """The hook's output object for one event (None: Claude Code's own output stands)."""
    site = site or HookSite()
    name = event.get("hook_event_name")
    if name in _TOOL_CALLS and scripted(event):
        return None  # its result went to a Code Mode script: nothing the model holds
    if name == "PostToolUse":
        return _post_tool_use(event, site)
    if name == "PostToolUseFailure":
        if event.get("tool_name") == "Bash":  # a failed command may still have changed files
            with _open(event, site) as host:
                host.changed(_call_id(event))
        return None
    if name in _RESETS:
        with _open(event, site) as host:
            host.reset()
        return None
    if name == "SessionStart":
        with _open(event, site) as host:
            if event.get("source") in _RESET_SOURCES:
                host.reset()
            else:  # startup, resume: the transcript says what is held
                host.keep_only(_held(event, site, among=host.relied_on()).ids)
        return None
    if name == "UserPromptSubmit":  # a new turn: every earlier call is written by now
        with _open(event, site) as host:
            host.keep_only(_held(event, site, among=host.relied_on()).ids)
    return None


def _post_tool_use(event: Mapping[str, Any], site: HookSite) -> dict[str, Any] | None:
    tool = event.get("tool_name")
    tool_input = event.get("tool_input")
    response = event.get("tool_response")
    call = _call_id(event)
    if not isinstance(tool_input, dict) or not call:
        return None
    if tool == "Read":
        return _read(event, site, tool_input, response, call)
    if tool == "Bash":
        return _bash(event, site, tool_input, response, call)
    if tool in _EDITS:
        _edit(event, site, str(tool), tool_input, response, call)
    elif tool == "NotebookEdit":
        with _open(event, site) as host:
            host.changed(call)
    return None


def _read(
    event: Mapping[str, Any], site: HookSite, tool_input: dict[str, Any], response: Any, call: str
) -> dict[str, Any] | None:
    if not isinstance(response, dict) or response.get("type") != "text":
        return None  # image, PDF, notebook: Claude Code's own
    file = response.get("file")
    if not isinstance(file, dict):
        return None
    content, start, count, total = (
        file.get("content"), file.get("startLine"), file.get("numLines"), file.get("totalLines"),
    )  # fmt: skip
    if not isinstance(content, str) or not _ints(start, count, total):
        return None
    assert isinstance(start, int) and isinstance(count, int) and isinstance(total, int)
    if count < 1 or start < 1 or file.get("truncatedByTokenCap") or is_stub(content):
        return None  # a page the model knows is partial; Claude Code's own "unchanged" stub
    path = str(tool_input.get("file_path") or file.get("filePath") or "")
    # Claude Code splits on "\n": a file ending in a newline has one more (empty) line, and a
    # range that stops before the end is shown without the newline that ends its last line.
    last = start + count - 1
    whole = start == 1 and last >= total
    host_text = content if last >= total else content + "\n"
    opened = _open(event, site, current=call)
    with opened as host:
        answer = host.read(
            path, call, start=None if whole else start,
            end=None if last >= total else last, host_text=host_text, crlf_shown_as_lf=True,
        )  # fmt: skip
        if answer is None or answer.is_content:
            return None
        text = opened.with_note(call, _for_host(answer.text), content)
        if text is None:
            return None
    shaped = {
        "type": "text",
        "file": {
            "filePath": file.get("filePath") or answer.abs_path,
            "content": text,
            "numLines": text.count("\n") + 1,
            "startLine": start,
            "totalLines": total,
        },
    }
    return _replace(shaped)


def _bash(
    event: Mapping[str, Any], site: HookSite, tool_input: dict[str, Any], response: Any, call: str
) -> dict[str, Any] | None:
    command = tool_input.get("command")
    if not isinstance(command, str):
        return None
    plain = (
        isinstance(response, dict)
        and isinstance(response.get("stdout"), str)
        and not response.get("stderr")
        and not response.get("interrupted")
        and not response.get("isImage")
        and not response.get("backgroundTaskId")
        and not response.get("persistedOutputPath")
        and not tool_input.get("run_in_background")
    )
    opened = _open(event, site, current=call)
    with opened as host:
        if not plain or not isinstance(response, dict):
            host.changed(call)
            return None
        stdout = str(response["stdout"])
        # Claude Code strips the newline(s) that end a command's output.
        answer = host.shell(
            command, call, output=stdout + "\n" if stdout else stdout, cwd=opened.cwd
        )  # the shell's folder: Claude Code's Bash keeps the one a ``cd`` left it in
        if answer is None:
            return None
        text = opened.with_note(call, _for_host(answer), stdout)
        if text is None:
            return None
    return _replace({**response, "stdout": text})


def _edit(
    event: Mapping[str, Any],
    site: HookSite,
    tool: str,
    tool_input: dict[str, Any],
    response: Any,
    call: str,
) -> None:
    path = tool_input.get("file_path")
    if not isinstance(path, str):
        return
    with _open(event, site, current=call) as host:
        if isinstance(response, dict) and response.get("staged"):
            host.changed(call)  # held for review, not written
        elif tool == "Write" and isinstance(tool_input.get("content"), str):
            host.wrote(path, call, tool_input["content"])
        elif tool == "Edit":
            old, new = tool_input.get("old_string"), tool_input.get("new_string")
            if isinstance(old, str) and isinstance(new, str):
                host.edited(
                    path, call, [(old, new)], replace_all=bool(tool_input.get("replace_all"))
                )
            else:
                host.changed(call)
        else:
            edits = tool_input.get("edits")
            pairs = [
                (e.get("old_string"), e.get("new_string"), bool(e.get("replace_all")))
                for e in edits if isinstance(e, dict)
            ] if isinstance(edits, list) else []  # fmt: skip
            modes = {mode for _, _, mode in pairs}
            if (
                pairs
                and len(modes) == 1
                and all(isinstance(o, str) and isinstance(n, str) for o, n, _ in pairs)
            ):
                host.edited(path, call, [(str(o), str(n)) for o, n, _ in pairs],
                            replace_all=modes.pop())  # fmt: skip
            else:
                host.changed(call)  # mixed replace_all: the base adopts one mode per change


class _Opened:
    """A ``HostSession`` synced with the transcript, as a context manager."""

    def __init__(self, event: Mapping[str, Any], site: HookSite, current: str | None) -> None:
        from filecache.adapters.hosts.base import HostSession

        session_id = str(event.get("session_id") or "")
        if not session_id:
            raise ValueError("the hook payload has no session_id")
        agent = event.get("agent_id")
        context = f"{session_id}.agent-{agent}" if isinstance(agent, str) and agent else session_id
        from filecache.adapters.hosts import call_env  # the calling process's, in the server

        cwd = str(event.get("cwd") or call_env.getcwd())
        self.cwd = os.path.join(call_env.getcwd(), cwd)
        root = site.root or call_env.getenv("CLAUDE_PROJECT_DIR") or cwd
        self.host = HostSession.open(HOST_NAME, context, cwd, root=root, store=site.store)
        if site.seal is not None:
            try:
                self.host.cache.engine.secrets.seal_as(site.seal)
            except BaseException:
                self.host.close()
                raise
        self.event, self.site = event, site
        self.held: Held | None = None
        if current is not None:
            try:
                self.held = _held(event, site, current, among=self.host.relied_on())
                self._forget_lost(self.held)
            except BaseException:
                self.host.close()
                raise

    def with_note(self, call: str, short: str, own: str) -> str | None:
        """The short answer of ``call`` as the model sees it, or None for Claude Code's
        ``own`` output (``HostSession.short_or_own``, with the note of ``host_specs``: the
        answer's own lines keep their place, and a Read its numbering). A carrier of the
        note is held when the transcript holds it."""
        held = self.held

        def holds(carrier: str) -> bool:
            # Held by the transcript, or a parallel call of this turn it does not name yet.
            found = held
            if found is not None and not found.answers(carrier):
                found = _held(self.event, self.site, among=[carrier])
            if found is None or not found.complete:
                return False
            return carrier in found.ids or carrier not in found.known

        told = spec(HOST_NAME).told
        out: str | None = self.host.short_or_own(
            call, short, own, None if told is None else told(), holds
        )
        return out

    def _forget_lost(self, held: Held) -> None:
        """Forget the calls the transcript names and no longer holds. A call it does not name
        yet is a parallel call of this turn whose entry is still being written: kept (a new
        prompt or a session start, where every call is written, forgets it if it never came)."""
        session = self.host.session
        with session.lock:
            gone = (session.held_call_ids() & held.known) - held.ids
            if gone:
                session.forget(gone)

    def __enter__(self) -> HostSession:
        return self.host

    def __exit__(self, *exc: object) -> None:
        self.host.close()


def _open(event: Mapping[str, Any], site: HookSite, current: str | None = None) -> _Opened:
    return _Opened(event, site, current)


def _held(
    event: Mapping[str, Any],
    site: HookSite,
    current: str | None = None,
    *,
    among: Iterable[str] | None = None,
) -> Held:
    """What the hook's context holds by its transcript (indexed in the hook cache folder), for
    the ids of ``among`` (the session's: a call costs what it asks, not the session)."""
    from filecache.adapters.hosts.base import log_path

    cache = site.index_dir or log_path().parent / "claude-code-transcripts"
    agent = event.get("agent_id")
    sidechain = isinstance(agent, str) and bool(agent)
    return read_held(
        _transcript(event), current=current, cache_dir=cache, sidechain=sidechain, among=among
    )


def _transcript(event: Mapping[str, Any]) -> str | None:
    """The transcript of the hook's context: a subagent's is beside its parent's."""
    path = event.get("transcript_path")
    if not isinstance(path, str) or not path:
        return None
    agent = event.get("agent_id")
    if isinstance(agent, str) and agent:
        own = event.get("agent_transcript_path")
        if isinstance(own, str) and own:
            return own
        folder = Path(path).with_suffix("") / "subagents"  # <session>/subagents/[dir/]agent-ID
        name = f"agent-{agent}.jsonl"
        if (folder / name).exists():
            return str(folder / name)
        found = sorted(folder.glob(f"*/{name}")) if "/" not in agent else []
        return str(found[0]) if found else None  # not found: only the current call is held
    return path


def _call_id(event: Mapping[str, Any]) -> str:
    value = event.get("tool_use_id")
    return value if isinstance(value, str) else ""


def _ints(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)


def _for_host(text: str) -> str:
    """filecache's answer with the wording for a host whose tools have no ``fresh`` flag."""
    from filecache.core.render import for_host_tools

    return for_host_tools(text).rstrip("\n")


def _replace(output: dict[str, Any]) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": output}}
