"""``filecache install gemini-cli``: filecache's hooks in Gemini CLI's ``settings.json``.

Where: with ``--user`` (the default) ``~/.gemini/settings.json`` (Gemini CLI reads
``$GEMINI_CLI_HOME/.gemini/`` instead when that is set), every project of this user; with
``--project`` the project's ``.gemini/settings.json``, which Gemini CLI runs only in a folder
the user trusts (and announces as new project hooks on first use).

What: one command hook per event filecache needs (``HOOKS``; Gemini CLI's ``matcher`` is a
regular expression over the tool name, and its ``timeout`` is in milliseconds), named
``filecache``, running the guarded thin hook client (``config_files.client_command``: a
``/bin/sh`` line that exits 0 with no output whatever fails, the package or the interpreter gone
included). Ours are recognised by what the command runs (``config_files.hook_parts``) and
replaced as a whole on every install, so installing twice is installing once. Everything else
in the file is kept; ``--uninstall`` removes only ours, and an event whose groups were all ours.
The file is written atomically; a file that is not a JSON object, or whose ``"hooks"`` is not
an object of lists, is not touched (the error says so).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from filecache.adapters.hosts.config_files import (
    Installed,
    client_command,
    hook_parts,
    load_json_object,
    write_atomically,
)
from filecache.adapters.hosts.host_specs import spec

from filecache.errors import ConfigError

__all__ = ["HOOKS", "SCOPES", "install", "installed", "merged", "settings_path"]

HOST = "gemini-cli"
_SPEC = spec(HOST)
HOOKS = _SPEC.events
"""event -> matcher (None: the event has no tool matcher): ``host_specs``."""
TIMEOUT_MS = (_SPEC.hook_timeout or 30) * 1000  # Gemini CLI's hook timeout is in milliseconds
SCOPES = _SPEC.scopes


def settings_path(scope: str, cwd: Path) -> Path:
    if scope == "user":
        home = os.environ.get("GEMINI_CLI_HOME") or str(Path.home())
        return Path(home) / ".gemini" / "settings.json"
    return cwd / ".gemini" / "settings.json"


def _ours(hook: Any) -> bool:
    command = hook.get("command") if isinstance(hook, dict) else None
    if not isinstance(command, str):
        return False
    parts = hook_parts(command)
    return parts is not None and parts.host == HOST


def _our_commands(settings: Any) -> list[str]:
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    found = []
    for groups in hooks.values() if isinstance(hooks, dict) else []:
        for group in groups if isinstance(groups, list) else []:
            inner = group.get("hooks") if isinstance(group, dict) else None
            for hook in inner if isinstance(inner, list) else []:
                if _ours(hook):
                    found.append(str(hook["command"]))
    return found


def installed(cwd: Path) -> list[Installed]:
    """filecache's hooks for Gemini CLI at each scope that has any (a file that cannot be
    read or parsed counts as none)."""
    found = []
    for scope in SCOPES:
        path = settings_path(scope, cwd)
        try:
            commands = _our_commands(load_json_object(path))
        except ConfigError:
            continue
        if commands:
            parts = hook_parts(commands[0])
            assert parts is not None
            found.append(Installed(HOST, scope, path, parts.interpreter, parts.script,
                                   parts.guarded, len(commands)))  # fmt: skip
    return found


def _without_ours(hooks: dict[str, list[Any]]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        left = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                left.append(group)
                continue
            rest = [h for h in inner if not _ours(h)]
            if rest:
                left.append({**group, "hooks": rest})
            elif len(rest) == len(inner):  # an empty group that was never ours
                left.append(group)
        if left or not groups:  # an event goes only when ours were all it held
            kept[event] = left
    return kept


def merged(settings: dict[str, Any], *, uninstall: bool, command: str) -> dict[str, Any]:
    """``settings`` with filecache's hooks replaced (or removed); pure."""
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(
            '"hooks" in the settings is not an object; fix it by hand, then install again'
        )
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise ConfigError(
                f'"hooks.{event}" in the settings is not a list of matcher groups; '
                "fix it by hand, then install again"
            )
    hooks = _without_ours(hooks)
    if not uninstall:
        for event, matcher in HOOKS.items():
            group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
            group["hooks"] = [
                {"type": "command", "name": "filecache", "command": command,
                 "timeout": TIMEOUT_MS}
            ]  # fmt: skip
            hooks[event] = [*hooks.get(event, []), group]
    out = dict(settings)
    if hooks or "hooks" in settings:
        out["hooks"] = hooks
    return out


def install(*, scope: str | None, uninstall: bool, cwd: Path) -> str:
    """Install (or remove) filecache's hooks; returns the one line to print."""
    scope = scope or SCOPES[0]
    if scope not in SCOPES:
        raise ConfigError(f"unknown scope {scope!r} for Gemini CLI; use --user or --project")
    path = settings_path(scope, cwd)
    current = load_json_object(path)
    if uninstall:
        if current is None:
            return f"no filecache hooks for Gemini CLI in {path} (no such file)"
        after = _merged(path, current, uninstall=True)
        if after == current:
            return f"no filecache hooks for Gemini CLI in {path}; nothing changed"
        write_atomically(path, _dumped(after))
        return f"removed filecache hooks for Gemini CLI from {path}"
    after = _merged(path, current or {}, uninstall=False)
    if current is not None and after == current:
        return f"filecache hooks for Gemini CLI already in {path}"
    write_atomically(path, _dumped(after))
    trust = (
        " (Gemini CLI runs project hooks only in a trusted folder)" if scope == "project" else ""
    )
    return f"installed filecache hooks for Gemini CLI in {path}{trust}"


def _merged(path: Path, settings: dict[str, Any], *, uninstall: bool) -> dict[str, Any]:
    try:
        return merged(settings, uninstall=uninstall, command=client_command(HOST))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _dumped(settings: dict[str, Any]) -> str:
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
