"""filecache inside Kilo CLI (``@kilocode/cli``): ``filecache install kilo``, and the plugin's
Python side.

Kilo CLI is an opencode fork that kept opencode's V1 plugin API, its tool names (``read``,
``bash``, ``edit``, ``write``) and its ``read`` output byte for byte (checked against Kilo
7.7.7's binary: docs/kilo.md). So Kilo runs opencode's plugin (``opencode_plugin.js``) and the
same Python side (``opencode.Hook``) under its own name: the plugin entry carries ``{"host":
"kilo"}``, the plugin starts ``python -m filecache.adapters.hosts.kilo serve``, and Kilo's
sessions are stored as ``kilo:…`` (``stats`` shows them as Kilo CLI). What this module owns is
where Kilo keeps its configuration (read from the binary, and seen with strace):

- the user's: ``$XDG_CONFIG_HOME/kilo`` (``~/.config/kilo``) holds ``config.json``,
  ``kilo.json``, ``kilo.jsonc``, ``opencode.json`` and ``opencode.jsonc``, merged in that order,
  and a later file's ``"plugin"`` list *replaces* an earlier one's. On its first start, when none
  of them exists, Kilo writes ``kilo.jsonc`` (``{"$schema": …}``, plain JSON): the first of
  ``_KILO_OWN`` that exists is its user config file. ``USER_FILES``; ``config_path`` picks the
  file whose list Kilo uses.
- a project's: ``.kilo/`` and ``.kilocode/`` (``kilo.jsonc``, ``kilo.json``, ``opencode.jsonc``,
  ``opencode.json``); their ``"plugin"`` lists are *added* to the user's. Kilo reads neither
  ``~/.config/opencode`` nor ``.opencode/``: opencode's installation never reaches Kilo.

Install writes one entry, in one file per scope (entries of filecache's found in the scope's
other files are removed). A file with comments or trailing commas (JSONC) is never rewritten:
the error names the entry to add by hand. Invariants and owned state are opencode's
(``opencode`` module docstring).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

from filecache.adapters.hosts.config_files import Installed, load_json_object, write_atomically
from filecache.adapters.hosts.host_specs import spec
from filecache.adapters.hosts.opencode import PLUGIN, _ours
from filecache.adapters.hosts.opencode import abandon as opencode_abandon
from filecache.adapters.hosts.opencode import run_hook as opencode_hook
from filecache.adapters.hosts.opencode import serve as opencode_serve

from filecache.errors import ConfigError

__all__ = [
    "DISPLAY_NAME",
    "HOST_NAME",
    "PROJECT_FILES",
    "USER_FILES",
    "abandon",
    "config_files",
    "config_path",
    "install",
    "installed",
    "run_hook",
    "serve",
]

HOST_NAME = "kilo"
DISPLAY_NAME = spec(HOST_NAME).display
SCOPES = spec(HOST_NAME).scopes
SCHEMA = "https://app.kilo.ai/config.json"

USER_FILES = ("config.json", "kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc")
"""The user's config files, in the order Kilo merges them (a later "plugin" list wins)."""
_KILO_OWN = ("kilo.jsonc", "kilo.json", "opencode.jsonc", "opencode.json", "config.json")
# the file Kilo treats as the user's config (the first that exists; it creates kilo.jsonc)
PROJECT_FILES = tuple(
    f"{folder}/{name}"
    for folder in (".kilo", ".kilocode")
    for name in ("kilo.jsonc", "kilo.json", "opencode.jsonc", "opencode.json")
)
"""A project's config files (relative to it); Kilo adds their "plugin" lists to the user's."""
_SETS_PLUGIN = re.compile(r'"plugin"\s*:')


# -- the plugin's Python side: opencode's, named kilo ----------------------------------------


def run_hook(args: list[str], payload: bytes) -> bytes:
    """One request of the plugin (``filecache hook kilo``): ``opencode.run_hook`` as Kilo."""
    answer: bytes = opencode_hook(args, payload, HOST_NAME)
    return answer


def abandon(args: list[str], payload: bytes) -> None:
    """The answer to this request never reached the plugin: ``forget`` its call."""
    opencode_abandon(args, payload, HOST_NAME)


def serve(stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> int:
    """The resident process the plugin starts (``opencode.serve`` as Kilo)."""
    status: int = opencode_serve(stdin, stdout, HOST_NAME)
    return status


# -- where Kilo reads its configuration ------------------------------------------------------


def config_files(scope: str, cwd: Path) -> list[Path]:
    """Every file of ``scope`` whose "plugin" list Kilo loads."""
    if scope == "project":
        return [cwd / name for name in PROJECT_FILES]
    folder = _config_home() / "kilo"
    return [folder / name for name in USER_FILES]


def config_path(scope: str, cwd: Path) -> Path:
    """The file ``install`` writes at ``scope``.

    A project's: ``.kilo/kilo.json`` (Kilo adds every project file's list to the user's). The
    user's: the last file (in Kilo's merge order) that sets "plugin", since its list replaces
    the others'; else the file Kilo itself keeps (``kilo.jsonc`` once Kilo has started) when it
    is plain JSON; else ``kilo.json``, which no later file overrides then.
    """
    if scope == "project":
        return cwd / ".kilo" / "kilo.json"
    files = config_files("user", cwd)
    setting = [path for path in files if _sets_plugin(path)]
    if setting:
        return setting[-1]
    folder = files[0].parent
    own = next((folder / n for n in _KILO_OWN if (folder / n).exists()), None)
    if own is not None and _plain(own) is not None:
        return own
    return folder / "kilo.json"


def install(*, scope: str | None, uninstall: bool, cwd: Path) -> str:
    """Add (or remove) the plugin in Kilo's config: the user's (``$XDG_CONFIG_HOME/kilo``, the
    default) or the project's (``.kilo/kilo.json`` under ``cwd``). Idempotent; every other
    setting and plugin stays as it was, and uninstall never deletes a file. Returns the line to
    print."""
    if scope not in (None, *SCOPES):
        raise ConfigError(f"{DISPLAY_NAME} has no --{scope} install; use --user or --project")
    scope = scope or SCOPES[0]
    within = cwd if scope == "project" else None
    if uninstall:
        removed = [path for path in config_files(scope, cwd) if _remove_ours(path, within)]
        if not removed:
            return f"filecache is not installed for {DISPLAY_NAME} in {config_path(scope, cwd)}"
        where = ", ".join(str(p) for p in removed)
        return f"removed filecache's plugin for {DISPLAY_NAME} from {where}"
    target = config_path(scope, cwd)
    config = _plain(target) if target.exists() else {}
    if config is None:
        raise ConfigError(
            f"{target} holds the {DISPLAY_NAME} plugins and has comments or trailing commas; "
            f'filecache does not rewrite it: add this entry to its "plugin" list: '
            f"{json.dumps(_entry())}"
        )
    _check_plugins(target, config)
    for other in config_files(scope, cwd):
        if other != target:
            _remove_ours(other, within)  # one entry per scope, or Kilo would load it twice
    if not config:
        config["$schema"] = SCHEMA
    config["plugin"] = [p for p in config.get("plugin", []) if not _ours(p)]
    config["plugin"].append(_entry())
    write_atomically(target, json.dumps(config, indent=2) + "\n", within=within)
    where = f"{PLUGIN.name}, run by {sys.executable}"
    return f"installed filecache's plugin for {DISPLAY_NAME} in {target} ({where})"


def installed(cwd: Path) -> list[Installed]:
    """filecache's plugin entries at each scope that has any (user, the project of ``cwd``):
    one row per scope, naming the first file that holds one."""
    found = []
    for scope in SCOPES:
        ours = [
            (path, entry)
            for path in config_files(scope, cwd)
            for entry in _plugins(path)
            if _ours(entry)
        ]
        if ours:
            path, entry = ours[0]
            options = entry[1] if isinstance(entry, list) and len(entry) > 1 else {}
            python = options.get("python") if isinstance(options, dict) else None
            script = unquote(
                (entry[0] if isinstance(entry, list) else entry).removeprefix("file://")
            )
            found.append(Installed(HOST_NAME, scope, path, python if isinstance(python, str)
                                   else None, script, True, len(ours)))  # fmt: skip
    return found


def _entry() -> list[Any]:
    return [PLUGIN.as_uri(), {"python": sys.executable, "host": HOST_NAME}]


def _remove_ours(path: Path, within: Path | None) -> bool:
    """Remove filecache's entries from ``path``'s "plugin" list (a plain-JSON file); whether
    there were any. The file, its "$schema" and an empty list stay."""
    config = _plain(path)
    plugins = config.get("plugin") if config else None
    if config is None or not isinstance(plugins, list):
        return False
    kept = [p for p in plugins if not _ours(p)]
    if len(kept) == len(plugins):
        return False
    config["plugin"] = kept
    write_atomically(path, json.dumps(config, indent=2) + "\n", within=within)
    return True


def _plain(path: Path) -> dict[str, Any] | None:
    """``path``'s JSON object; ``{}`` for no file or an empty one; None when it is not plain
    JSON (comments, trailing commas) or cannot be read."""
    try:
        config: dict[str, Any] = load_json_object(path, missing={})
    except ConfigError:
        return None
    return config


def _plugins(path: Path) -> list[Any]:
    plugins = (_plain(path) or {}).get("plugin")
    return plugins if isinstance(plugins, list) else []


def _sets_plugin(path: Path) -> bool:
    config = _plain(path)
    if config is not None:
        return "plugin" in config
    try:  # JSONC: a "plugin" key anywhere (a comment naming one too: then install refuses)
        return bool(_SETS_PLUGIN.search(path.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return False


def _check_plugins(path: Path, config: dict[str, Any]) -> None:
    if not isinstance(config.get("plugin", []), list):
        raise ConfigError(f'{path}: expected an object with a "plugin" list; fix it first')


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def _main(argv: Iterable[str]) -> int:
    if list(argv) == ["serve"]:
        return serve()
    print("usage: python -m filecache.adapters.hosts.kilo serve", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
