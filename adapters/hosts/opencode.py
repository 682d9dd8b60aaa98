"""filecache inside opencode: its plugin's Python side, and ``filecache install opencode``.

The plugin (``opencode_plugin.js`` beside this module, shipped in the wheel) hands over each
finished ``read``, ``bash``, ``edit`` and ``write`` call and, before each model request, the
call ids whose results the request carries. It starts one resident process per opencode process
(``python -m filecache.adapters.hosts.opencode serve``: JSON lines on stdin/stdout, ``serve``)
so a read costs a round trip, not a Python start; ``run_hook`` answers the same requests one at a
time (``filecache hook opencode`` with a request on stdin). Requests (``op``):

- ``read`` {path, offset, limit, output}: opencode's ``read`` result is
  ``<path>P</path>\\n<type>file</type>\\n<content>\\n1: …\\n\\n(FOOTER)\\n</content>`` (and
  possibly a ``<system-reminder>`` after it). When filecache's answer is a FileRef or a diff,
  only the numbered lines are replaced by it (the footer and anything after stay); content
  stands as opencode printed it, and backs nothing unless it is exactly what filecache read.
- ``bash`` {command, workdir, exit, output}: a read-like command gets its FileRef/diff (exit 0,
  run in the root); anything else re-hashes the files in the view.
- ``edit`` {path, old, new, all} / ``write`` {path, content}: the model knows what it wrote.
- ``keep`` {present}: the results the next request carries (the plugin drops opencode's
  compaction of any result a FileRef in it names); every other fact is forgotten.
- ``forget`` {call}: the plugin gave up waiting; nothing may rely on that call. ``changed``:
  a tool changed files (``apply_patch``): re-hash.
- ``expand`` {call, tool, output}: a FileRef or diff that the request carries names a result
  the request lacks (opencode summarised it away and kept the answer: a compaction's kept
  tail, in this process or one before it): the text to send instead, the lines the answer
  stood for in read's shape (a placeholder saying how to get them back when they cannot be
  rebuilt, or for a bash answer); the call then backs nothing and carries no instructions.

Every answer is ``{"id", "output"}``; ``output`` null leaves opencode's result alone. A store
that cannot be used or a bad setting adds ``notice``, once per opencode session: the line the
plugin shows the user (on stderr, and as a toast in the TUI). Invariants:
opencode's output is the fallback for anything not served exactly (a denied file is never read
through filecache, so nothing of it is stored); an internal error is one line in the hook log
and a null answer. Owned state: the open ``HostSession`` per (opencode session, root), in the
one thread of the serving process; the store is the truth across processes.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

from filecache.adapters.hosts.base import HostSession, log_failure
from filecache.adapters.hosts.config_files import Installed, load_json_object, write_atomically
from filecache.adapters.hosts.host_specs import spec

from filecache.errors import ConfigError

__all__ = [
    "DISPLAY_NAME",
    "HOST_NAME",
    "PLUGIN",
    "OpencodeRead",
    "Hook",
    "abandon",
    "install",
    "installed",
    "parse_read",
    "run_hook",
    "serve",
]

HOST_NAME = "opencode"
DISPLAY_NAME = spec(HOST_NAME).display
PLUGIN = Path(__file__).resolve().with_name("opencode_plugin.js")
"""The plugin file opencode loads (package data of ``filecache.adapters.hosts``)."""

_TRUNCATED = "... (line truncated to 2000 chars)"  # opencode's read cuts longer lines so
_HEAD = re.compile(r"<path>([^\n]*)</path>\n<type>file</type>\n<content>\n")
_FOOTER = re.compile(
    r"\n\n\((?:End of file - total \d+ lines"
    r"|Showing lines \d+-\d+ of \d+\. Use offset=\d+ to continue\."
    r"|Output capped at [^\n]*?\. Showing lines \d+-\d+\. Use offset=\d+ to continue\.)\)"
    r"\n</content>"
)
_NUMBERED = re.compile(r"(\d+): ")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # how opencode's read splits lines


# -- opencode's read result ---------------------------------------------------------------------


@dataclass(frozen=True)
class OpencodeRead:
    """A parsed ``read`` result: the lines shown (``start``..``end``, without their numbers),
    whether they run to the end of the file, and where they sit in ``text``."""

    text: str
    path: str
    start: int
    lines: tuple[str, ...]
    to_end: bool
    body: tuple[int, int]  # text[body[0]:body[1]] is the numbered lines

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1

    def with_body(self, answer: str) -> str:
        """The same result with filecache's answer in place of the numbered lines."""
        a, b = self.body
        return self.text[:a] + answer.rstrip("\n") + self.text[b:]


def parse_read(text: str) -> OpencodeRead | None:
    """``text`` as opencode's ``read`` prints a file's lines, or None for anything else (a
    directory, an image, an error) or lines opencode cut (longer than 2000 characters)."""
    head = _HEAD.match(text)
    if head is None:
        return None
    footer = _FOOTER.search(text, head.end())
    if footer is None or text.find("\n\n(", head.end()) != footer.start():
        return None  # no numbered line can start with "(": the first one is the footer
    rest = text[footer.end() :]
    if rest and not rest.startswith("\n\n<system-reminder>"):
        return None
    body = text[head.end() : footer.start()]
    lines: list[str] = []
    start = 0
    for number, line in enumerate(body.split("\n") if body else []):
        found = _NUMBERED.match(line)
        if found is None:
            return None
        if number == 0:
            start = int(found[1])
        elif int(found[1]) != start + number:
            return None
        shown = line[found.end() :]
        if shown.endswith(_TRUNCATED):
            return None  # the model saw a cut line: it does not hold that line
        lines.append(shown)
    if not lines:
        return None  # an empty file: nothing to save
    to_end = footer[0].startswith("\n\n(End of file")
    return OpencodeRead(text, head[1], start, tuple(lines), to_end, (head.end(), footer.start()))


def opencode_lines(raw: str) -> list[str]:
    """``raw`` split into lines as opencode's read splits them (``\\r\\n``, ``\\r``, ``\\n``)."""
    parts = _LINE_BREAK.split(raw)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


# -- the requests ---------------------------------------------------------------------------------


class Hook:
    """Answers the plugin's requests; one ``HostSession`` per (opencode session, root).
    ``host``: the host whose plugin this is (``kilo`` runs the same plugin)."""

    def __init__(self, host: str = HOST_NAME) -> None:
        self.host = host
        self._sessions: dict[tuple[str, str], HostSession] = {}

    def close(self) -> None:
        for host in self._sessions.values():
            host.close()
        self._sessions.clear()

    def answer(self, request: dict[str, Any]) -> str | None:
        """The text the model should see instead of opencode's (None: opencode's stands).
        Raises on a malformed request or a filecache failure (the caller logs it)."""
        op = request["op"]
        host = self._session(str(request["session"]), str(request["root"]))
        if op == "keep":
            host.keep_only(str(c) for c in request["present"])
            return None
        call = str(request["call"])
        if op == "read":
            return self._read(host, call, request)
        if op == "bash":
            return self._bash(host, call, request)
        if op == "edit":
            path, old, new = str(request["path"]), str(request["old"]), str(request["new"])
            if old == "":  # opencode's edit with an empty oldString writes newString whole
                host.wrote(path, call, new)
            else:
                host.edited(path, call, [(old, new)], replace_all=bool(request.get("all")))
            return None
        if op == "write":
            host.wrote(str(request["path"]), call, str(request["content"]))
            return None
        if op == "forget":
            host.abandon(call)
            return None
        if op == "changed":
            host.changed(call)
            return None
        if op == "expand":
            return _expand(host, call, str(request.get("tool")), str(request["output"]))
        raise ValueError(f"unknown request {op!r}")

    def _session(self, session_id: str, root: str) -> HostSession:
        key = (session_id, root)
        host = self._sessions.get(key)
        if host is None:
            host = HostSession.open(self.host, session_id, root)
            self._sessions[key] = host
        return host

    def _read(self, host: HostSession, call: str, request: dict[str, Any]) -> str | None:
        shown = parse_read(str(request["output"]))
        if shown is None:
            return None
        whole = shown.start == 1 and shown.to_end
        # opencode showed other text (the file changed in between, a BOM, odd line breaks):
        # the model holds what opencode showed, so nothing relies on this call (``read``
        # forgets it), and no FileRef or diff stands for lines it did not show.
        answer = host.read(
            shown.path, call, start=None if whole else shown.start,
            end=None if whole else shown.end,
            matches=lambda lines: opencode_lines(lines) == list(shown.lines),
        )  # fmt: skip
        if answer is None or answer.is_content:
            return None
        own = shown.text[shown.body[0] : shown.body[1]]
        short = host.short_or_own(call, _for_host(answer.text), own, _told(self.host))
        return None if short is None else shown.with_body(short)

    def _bash(self, host: HostSession, call: str, request: dict[str, Any]) -> str | None:
        workdir = request.get("workdir")
        in_root = workdir is None or _same_dir(str(workdir), host.cache.engine.root)
        if request.get("exit") != 0 or not in_root:
            host.changed(call)  # a failed command may still have changed files
            return None
        output = str(request["output"])
        answer = host.shell(
            str(request["command"]), call, output=output,
            cwd=None if workdir is None else str(workdir),
        )  # fmt: skip
        if answer is None:
            return None
        short: str | None = host.short_or_own(call, _for_host(answer), output, _told(self.host))
        return short


def _for_host(text: str) -> str:
    """filecache's answer in the words of opencode's tools (its read has no ``fresh``)."""
    from filecache.core.render import for_host_tools

    return for_host_tools(text).rstrip("\n")


def _expand(host: HostSession, call: str, tool: str, output: str) -> str:
    """What the model gets instead of ``output``, the short answer to ``call`` whose base is
    gone from the request (``expand``): the same bytes on every request while the version's
    lines are kept (opencode rebuilds each request from its own record)."""
    from filecache.core.render import render_cleared_ref

    host.expired(call)
    head = _HEAD.match(output) if tool == "read" else None
    footer = _FOOTER.search(output, head.end()) if head is not None else None
    answered = host.lines_answered(call) if footer is not None else None
    if head is not None and footer is not None and answered is not None:
        _, start, raw = answered
        numbered = "\n".join(f"{start + i}: {line}" for i, line in enumerate(opencode_lines(raw)))
        if numbered:
            return output[: head.end()] + numbered + output[footer.start() :]
    path = head[1] if head is not None else "the file"
    return render_cleared_ref(
        f"this answer relied on an earlier result that is no longer in your context; read "
        f"{path} again for its text"
    )


def _told(host: str) -> str | None:
    told = spec(host).told
    return None if told is None else told()


def _same_dir(path: str, root: Path) -> bool:
    try:
        return Path(path).resolve() == root.resolve()
    except OSError:
        return False


def _respond(hook: Hook, line: bytes) -> bytes:
    """One request line → one answer line (never raises)."""
    ident: Any = None
    session: Any = None
    try:
        request = json.loads(line)
        ident, session = request.get("id"), request.get("session")
        output = hook.answer(request)
        return json.dumps({"id": ident, "output": output}).encode() + b"\n"
    except Exception as exc:  # the plugin then keeps opencode's output
        from filecache.adapters.hosts.registry import notice_text

        from filecache.errors import ConfigError, StoreError

        reason = f"{type(exc).__name__}: {exc}"
        log_failure(hook.host, reason)
        answer = {"id": ident, "output": None, "error": True}
        if isinstance(exc, StoreError | ConfigError) and isinstance(session, str):
            said = notice_text(hook.host, session, reason)  # every call of it fails alike
            if said is not None:
                answer["notice"] = said  # the plugin shows it to the user, once
        return json.dumps(answer).encode() + b"\n"


def run_hook(args: list[str], payload: bytes, host: str = HOST_NAME) -> bytes:
    """One request (the JSON the plugin sends) → its answer line; ``b""`` for no request."""
    if not payload.strip():
        return b""
    hook = Hook(host)
    try:
        return _respond(hook, payload)
    finally:
        hook.close()


def abandon(args: list[str], payload: bytes, host: str = HOST_NAME) -> None:
    """The answer to this request never reached the plugin: ``forget`` its call."""
    request = json.loads(payload)
    if isinstance(request, dict) and request.get("op") in ("read", "bash"):
        hook = Hook(host)
        try:
            hook.answer({**request, "op": "forget"})
        finally:
            hook.close()


def serve(
    stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None, host: str = HOST_NAME
) -> int:
    """The resident process: answer request lines until stdin closes (opencode exited)."""
    import filecache.shell.bash_reads  # noqa: F401  (imported now, not on the first read)

    source = stdin if stdin is not None else sys.stdin.buffer
    sink = stdout if stdout is not None else sys.stdout.buffer
    hook = Hook(host)
    try:
        for line in source:
            if line.strip():
                sink.write(_respond(hook, line))
                sink.flush()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        hook.close()
    return 0


# -- install --------------------------------------------------------------------------------------


def install(*, scope: str | None, uninstall: bool, cwd: Path) -> str:
    """Add (or remove) the plugin in opencode.json: the user's (``$XDG_CONFIG_HOME/opencode``,
    the default) or the project's (``.opencode/`` under ``cwd``). Idempotent; every other
    setting and plugin stays as it was, and uninstall never deletes the file. Returns the line
    to print."""
    if scope not in (None, *SCOPES):
        raise ConfigError(f"opencode has no --{scope} install; use --user or --project")
    path = config_path(scope or "user", cwd)
    folder = path.parent
    if not path.exists() and (folder / "opencode.jsonc").exists():
        raise ConfigError(
            f"{folder / 'opencode.jsonc'} holds this opencode configuration and filecache does "
            f'not rewrite files with comments; add this entry to its "plugin" list: '
            f"{json.dumps(_entry())}"
        )
    config = _load(path)
    plugins = [p for p in config.get("plugin", []) if not _ours(p)]
    if uninstall:
        if len(plugins) == len(config.get("plugin", [])):
            return f"filecache is not installed for {DISPLAY_NAME} in {path}"
        # The file, its "$schema" and an empty "plugin" list stay: install cannot tell
        # afterwards whether it made them or the user did.
        config["plugin"] = plugins
        _save(path, config, cwd if scope == "project" else None)
        return f"removed filecache's plugin for {DISPLAY_NAME} from {path}"
    if not config:
        config["$schema"] = "https://opencode.ai/config.json"
    config["plugin"] = [*plugins, _entry()]
    _save(path, config, cwd if scope == "project" else None)
    where = f"{PLUGIN.name}, run by {sys.executable}"
    return f"installed filecache's plugin for {DISPLAY_NAME} in {path} ({where})"


SCOPES = spec(HOST_NAME).scopes


def config_path(scope: str, cwd: Path) -> Path:
    """The ``opencode.json`` of ``scope``: the user's or the project's (``.opencode/``)."""
    folder = cwd / ".opencode" if scope == "project" else _config_home() / "opencode"
    return folder / "opencode.json"


def installed(cwd: Path) -> list[Installed]:
    """filecache's plugin entries at each scope that has any (user, the project of ``cwd``)."""
    found = []
    for scope in SCOPES:
        path = config_path(scope, cwd)
        try:
            plugins = _load(path).get("plugin", [])
        except ConfigError:
            continue
        ours = [p for p in plugins if _ours(p)]
        if ours:
            entry = ours[0]
            spec = entry[0] if isinstance(entry, list) else entry
            options = entry[1] if isinstance(entry, list) and len(entry) > 1 else {}
            python = options.get("python") if isinstance(options, dict) else None
            script = unquote(spec.removeprefix("file://"))
            found.append(Installed(HOST_NAME, scope, path, python if isinstance(python, str)
                                   else None, script, True, len(ours)))  # fmt: skip
    return found


def _entry() -> list[Any]:
    return [PLUGIN.as_uri(), {"python": sys.executable}]


def _ours(entry: Any) -> bool:
    """A plugin entry filecache wrote (from this or any other installation of it)."""
    spec = entry[0] if isinstance(entry, list) and entry else entry
    # installed: .../filecache/adapters/hosts/; an editable install: <clone>/adapters/hosts/
    return (
        isinstance(spec, str)
        and spec.startswith("file://")
        and spec.endswith("/adapters/hosts/" + PLUGIN.name)
    )


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def _load(path: Path) -> dict[str, Any]:
    config: dict[str, Any] = load_json_object(path, missing={})
    if not isinstance(config.get("plugin", []), list):
        raise ConfigError(f'{path}: expected an object with a "plugin" list; fix it first')
    return config


def _save(path: Path, config: dict[str, Any], project: Path | None) -> None:
    write_atomically(path, json.dumps(config, indent=2) + "\n", within=project)


def _main(argv: Iterable[str]) -> int:
    args = list(argv)
    if args == ["serve"]:
        return serve()
    print("usage: python -m filecache.adapters.hosts.opencode serve", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
