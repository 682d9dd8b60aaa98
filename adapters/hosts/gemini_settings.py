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
    load_json_object,
    write_atomically,
)
from filecache.adapters.hosts.host_specs import spec
from filecache.adapters.hosts.matcher_groups import installed_at
from filecache.adapters.hosts.matcher_groups import merged as matcher_groups

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


def installed(cwd: Path) -> list[Installed]:
    """filecache's hooks for Gemini CLI at each scope that has any (a file that cannot be
    read or parsed counts as none)."""
    found: list[Installed] = installed_at(HOST, SCOPES, lambda scope: settings_path(scope, cwd))
    return found


def merged(settings: dict[str, Any], *, uninstall: bool, command: str) -> dict[str, Any]:
    """``settings`` with filecache's hooks replaced (or removed); pure."""
    hook = {"type": "command", "name": "filecache", "command": command, "timeout": TIMEOUT_MS}
    out: dict[str, Any] = matcher_groups(
        settings, host=HOST, uninstall=uninstall, events=HOOKS, hook=hook
    )
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
        write_atomically(path, _dumped(after), within=None if scope == "user" else cwd)
        return f"removed filecache hooks for Gemini CLI from {path}"
    after = _merged(path, current or {}, uninstall=False)
    if current is not None and after == current:
        return f"filecache hooks for Gemini CLI already in {path}"
    write_atomically(path, _dumped(after), within=None if scope == "user" else cwd)
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
