"""``filecache install claude-code``: filecache's hooks in Claude Code's ``settings.json``.

Where: the project's ``.claude/settings.json`` (the default), with ``--local`` the project's
``.claude/settings.local.json`` (Claude Code's settings of this developer for the project, not
for git: install says when git does not ignore it), or with ``--user``
``~/.claude/settings.json`` (every project of this user). The hook command holds this machine's
interpreter path, so the project file serves a team only where every teammate's path is the
same; otherwise each developer installs with ``--local``.

What: one command hook per event filecache needs (``HOOKS``), running the thin hook client,
``<this interpreter> -I -S <.../hosts/hook_client.py> claude-code`` inside a ``/bin/sh`` guard
that exits 0 with no output whatever fails, the package or the interpreter gone included
(``config_files.client_command``), by absolute paths, so the hook works whatever ``PATH`` Claude
Code runs with. Ours are recognised by what the command runs (``config_files.hook_parts``: also
the unguarded, ``-m filecache.adapters.hosts`` and ``filecache hook`` forms of earlier releases,
from any interpreter) and replaced as a whole on every install, so installing twice is
installing once, an install after moving the virtualenv points at the new interpreter, and an
install rewrites an earlier release's unguarded hooks. Everything else in the file (other
hooks, permissions, env, the user's formatting of other keys aside) is kept; ``--uninstall``
removes only ours, and an event whose groups were all ours. It never deletes the file, nor the
``"hooks"`` object (install cannot tell afterwards whether it made them): a file install
created is left as ``{"hooks": {}}``.

With ``--http`` (``http_port``; ``registry.install`` chooses it by default where
``hook_form.choose`` says so), the per-call events (``HTTP_EVENTS``: ``PostToolUse`` and
``PostToolUseFailure``) get an ``http`` hook to ``hook_http``'s server on 127.0.0.1:PORT in place
of the command hook (never beside it: both would answer). The other events keep the command
hook: ``SessionStart`` because Claude Code 2.1.332 runs no http hook there ("HTTP hooks are not
supported for SessionStart"); ``UserPromptSubmit``, ``PreCompact`` and ``PostCompact`` because
they say what the model no longer holds, which must not be lost when the server is down (a
command hook runs in-process then), and they are rare (a prompt, a compaction), so their cost
does not matter. ``SessionStart`` and ``UserPromptSubmit`` also start the http server when
nothing listens on its port (``http_ports``, ``hook_http.ensure_running``).

The settings are written atomically (a temporary file beside it, then a rename), so Claude Code
never reads half a file. A file that is not a JSON object, or whose ``"hooks"`` is not an object
of lists (``{EVENT: [GROUP...]}``), is not touched: the error says so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from filecache.adapters.hosts.config_files import (
    Installed,
    client_command,
    load_json_object,
    write_atomically,
)
from filecache.adapters.hosts.host_specs import spec
from filecache.adapters.hosts.matcher_groups import installed_at
from filecache.adapters.hosts.matcher_groups import merged as matcher_groups

from filecache.errors import ConfigError

__all__ = [
    "HOOKS",
    "HTTP_EVENTS",
    "MARKER",
    "SCOPES",
    "claude_version",
    "hook_command",
    "http_ports",
    "install",
    "installed",
    "settings_path",
]

MARKER = "hook_client.py claude-code"
_SPEC = spec("claude-code")
HOOKS = _SPEC.events
"""event -> matcher (None: the event has no tool matcher): ``host_specs``."""
TIMEOUT_SECONDS = _SPEC.hook_timeout
HTTP_EVENTS = ("PostToolUse", "PostToolUseFailure")
"""The events ``--http`` serves by an http hook (see the module docstring)."""
MIN_VERSION = (2, 1, 121)


SCOPES = _SPEC.scopes
LOCAL_NAME = "settings.local.json"


def settings_path(scope: str, cwd: Path) -> Path:
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    return cwd / ".claude" / (LOCAL_NAME if scope == "local" else "settings.json")


def hook_command() -> str:
    command: str = client_command("claude-code")
    return command


def installed(cwd: Path) -> list[Installed]:
    """filecache's hooks for Claude Code at each scope (``SCOPES``) that has any: the user's
    and the project's of ``cwd``. A file that cannot be read or parsed counts as none."""
    found: list[Installed] = installed_at(
        "claude-code", SCOPES, lambda scope: settings_path(scope, cwd)
    )
    return found


def http_ports(root: Path) -> list[int]:
    """The ports of filecache's http hooks for Claude Code in the settings that apply to the
    project at ``root`` (the user's, the project's, the local ones; unreadable ones skipped)."""
    from filecache.adapters.hosts.matcher_groups import our_http_ports

    ports: list[int] = []
    for scope in SCOPES:
        try:
            ports += our_http_ports(load_json_object(settings_path(scope, root)), "claude-code")
        except ConfigError:
            continue
    return list(dict.fromkeys(ports))


def merged(
    settings: dict[str, Any], *, uninstall: bool, command: str, http_port: int | None = None
) -> dict[str, Any]:
    """``settings`` with filecache's hooks replaced (or removed); pure. ``http_port``: the
    ``HTTP_EVENTS`` get an http hook to that port instead of the command."""
    hook = {"type": "command", "command": command, "timeout": TIMEOUT_SECONDS}
    instead = {}
    if http_port is not None:
        from filecache.adapters.hosts.hook_http import http_hook

        instead = {event: http_hook(http_port, timeout=TIMEOUT_SECONDS or 30)
                   for event in HTTP_EVENTS}  # fmt: skip
    out: dict[str, Any] = matcher_groups(
        settings, host="claude-code", uninstall=uninstall, events=HOOKS, hook=hook,
        instead=instead,
    )  # fmt: skip
    return out


def _merged(
    path: Path, settings: dict[str, Any], *, uninstall: bool, http_port: int | None = None
) -> dict[str, Any]:
    try:
        return merged(settings, uninstall=uninstall, command=hook_command(), http_port=http_port)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _dumped(settings: dict[str, Any]) -> str:
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"


def claude_version(executable: str | None = None) -> tuple[int, ...] | None:
    """The version of the ``claude`` on ``PATH`` (or ``executable``), None when unknown."""
    exe = executable or shutil.which("claude")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=15, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in match.groups()) if match else None


def _version_note() -> str:
    version = claude_version()
    need = ".".join(map(str, MIN_VERSION))
    if version is None:
        return f" (claude not found on PATH: output replacement needs Claude Code {need}+)"
    shown = ".".join(map(str, version))
    if version < MIN_VERSION:
        return (
            f"; WARNING: Claude Code {shown} is older than {need} and cannot replace tool "
            "output: upgrade it (npm install -g @anthropic-ai/claude-code)"
        )
    return f" (Claude Code {shown})"


def install(*, scope: str | None, uninstall: bool, cwd: Path, http_port: int | None = None) -> str:
    """Install (or remove) filecache's hooks; returns the one line to print. ``http_port``:
    http hooks for ``HTTP_EVENTS`` (``--http``)."""
    scope = scope or "project"
    if http_port is not None and not 0 < http_port < 65536:
        raise ConfigError(f"--http-port {http_port}: not a TCP port (1 to 65535)")
    if scope not in SCOPES:
        raise ConfigError(f"unknown scope {scope!r}; use --project, --local or --user")
    path = settings_path(scope, cwd)
    current = load_json_object(path)
    if uninstall:
        if current is None:
            return f"no filecache hooks for Claude Code in {path} (no such file)"
        after = _merged(path, current, uninstall=True)
        if after == current:
            return f"no filecache hooks for Claude Code in {path}; nothing changed"
        write_atomically(path, _dumped(after), within=None if scope == "user" else cwd)
        return f"removed filecache hooks for Claude Code from {path}"
    after = _merged(path, current or {}, uninstall=False, http_port=http_port)
    again = current is not None and after == current
    if not again:
        write_atomically(path, _dumped(after), within=None if scope == "user" else cwd)
    verb = "filecache hooks for Claude Code already in" if again else "installed filecache hooks"
    where = f"{verb} {path}" if again else f"{verb} for Claude Code in {path}"
    http = "" if http_port is None else (
        f"; {' and '.join(HTTP_EVENTS)} by http hooks to 127.0.0.1:{http_port} (the server "
        "starts with the next session or prompt; until it listens, Claude Code's own results "
        "stand)"
    )  # fmt: skip
    return where + http + _version_note() + (_git_note(path) if scope == "local" else "")


def _git_note(path: Path) -> str:
    """A warning when git would offer the per-developer settings for a commit: Claude Code
    asks git to ignore the file when Claude Code creates it, not when filecache does."""
    relative = f"{path.parent.name}/{path.name}"
    try:
        done = subprocess.run(
            ["git", "check-ignore", "-q", relative],
            cwd=path.parent.parent, capture_output=True, timeout=15, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    if done.returncode != 1:  # 0: ignored; 128: not a git work tree (or no git)
        return ""
    return f"; git does not ignore {relative} here: add it to .gitignore (it is yours only)"
