"""``filecache install codex``: filecache's hooks in Codex's ``hooks.json``, and their trust.

Codex CLI (0.169) reads command hooks from ``hooks.json`` in each config folder it loads: the
user's ``$CODEX_HOME`` (default ``~/.codex``) and, once the user trusts a project, that
project's ``.codex/``. It runs a hook only if the user's ``config.toml`` records its trust::

    [hooks.state."<hooks.json path>:<event>:<group index>:<handler index>"]
    enabled = true
    trusted_hash = "sha256:<hex>"

where the hash is ``sha256`` of the handler's canonical identity (``trust_hash``; codex-rs
``hooks/src/engine/discovery.rs`` ``command_hook_hash`` and ``config/src/fingerprint.rs``).
Without that entry Codex skips the hook silently. Trust lives only in the user's
``config.toml``, also for a project's hooks.

What install writes, and nothing more: one matcher group per event filecache uses (appended
after the user's own groups, so their keys do not move), and one trust entry per handler of
ours. It never trusts a project folder (that would trust everything in it); ``--project``
says when Codex will not load the project's hooks until the user trusts the project.
Uninstall removes exactly those groups and entries; the trust entries of the user's groups
that followed ours move with their groups' new indices (the hash does not depend on them).

Edits are checked before anything is written: the new ``config.toml`` must parse to the old one
plus (minus) our entries, else install refuses and says what to add by hand. Files are
replaced atomically (a temp file, then ``os.replace``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
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

__all__ = [
    "EVENTS",
    "codex_home",
    "hook_command",
    "hook_key",
    "install",
    "installed",
    "is_ours",
    "trust_hash",
]

_SPEC = spec("codex")
EVENTS = _SPEC.events
"""The events filecache handles, with the matcher of each (None: an event without one)."""
_LABELS = {
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
}
TIMEOUT_SECONDS = _SPEC.hook_timeout  # Codex waits this long at most (a stuck store must not
# hold up a session)


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    """Codex's config folder as Codex names it: ``$CODEX_HOME`` resolved (Codex canonicalizes
    it), else ``$HOME/.codex`` as is."""
    env = os.environ if env is None else env
    if env.get("CODEX_HOME"):
        return Path(os.path.realpath(env["CODEX_HOME"]))
    return Path(env.get("HOME") or Path.home()) / ".codex"


def hook_command() -> str:
    """The command Codex runs: this interpreter on the thin hook client
    (``config_files.client_command``: ``-I -S .../hosts/hook_client.py codex``)."""
    command: str = client_command("codex")
    return command


def is_ours(handler: Any) -> bool:
    """A handler filecache installed (any release, any interpreter path:
    ``config_files.hook_parts``)."""
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return False
    command = handler.get("command")
    parts = hook_parts(command) if isinstance(command, str) else None
    return parts is not None and parts.host == "codex"


SCOPES = _SPEC.scopes


def hooks_path(scope: str, cwd: Path) -> Path:
    """The ``hooks.json`` of ``scope``: the user's (``codex_home()``) or the project's."""
    if scope == "user":
        return codex_home() / "hooks.json"
    return Path(os.path.realpath(cwd)) / ".codex" / "hooks.json"


def installed(cwd: Path) -> list[Installed]:
    """filecache's hooks for Codex at each scope that has any (user, the project of ``cwd``)."""
    found = []
    for scope in SCOPES:
        path = hooks_path(scope, cwd)
        try:
            data = _load_json(path)
        except ConfigError:
            continue
        hooks = data.get("hooks", {})
        commands = [
            str(h["command"])
            for groups in hooks.values() if isinstance(groups, list)
            for g in groups if _our_group(g)
            for h in g["hooks"]
        ]  # fmt: skip
        if commands:
            parts = hook_parts(commands[0])
            assert parts is not None
            found.append(Installed("codex", scope, path, parts.interpreter, parts.script,
                                   parts.guarded, len(commands)))  # fmt: skip
    return found


def _handler() -> dict[str, Any]:
    return {"type": "command", "command": hook_command(), "timeout": TIMEOUT_SECONDS}


def trust_hash(event: str, matcher: str | None, handler: Mapping[str, Any]) -> str:
    """The ``trusted_hash`` Codex computes for ``handler`` in a group of ``event``.

    The identity is ``{"event_name": LABEL, "matcher"?: M, "hooks": [NORMALIZED]}`` where the
    handler is normalized to ``type``, ``command``, ``timeout`` (default 600, at least 1),
    ``async`` and ``statusMessage`` when set; serialized through TOML (absent values vanish),
    keys sorted, compact JSON, UTF-8, sha256.
    """
    normalized: dict[str, Any] = {
        "type": "command",
        "command": handler["command"],
        "timeout": max(1, 600 if handler.get("timeout") is None else int(handler["timeout"])),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": _LABELS[event], "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def hook_key(hooks_file: Path, event: str, group: int, handler: int) -> str:
    """The ``[hooks.state]`` key of one handler (codex-rs ``hooks::hook_key``)."""
    return f"{hooks_file}:{_LABELS[event]}:{group}:{handler}"


# -- hooks.json ---------------------------------------------------------------------------


def _load_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = load_json_object(path, missing={})
    if not isinstance(data.get("hooks", {}), dict):
        raise ConfigError(f'{path}: expected {{"hooks": {{EVENT: [GROUP...]}}}}; fix it')
    return data


def _groups(data: dict[str, Any], event: str) -> list[Any]:
    groups = data.get("hooks", {}).get(event, [])
    if not isinstance(groups, list):
        raise ConfigError(f"hooks.{event} is not a list of matcher groups; fix it, then run again")
    return groups


def _our_group(group: Any) -> bool:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(hooks, list) and bool(hooks) and all(is_ours(h) for h in hooks)


Moves = dict[str, str]  # state key of a user's handler -> its key after our groups left


def _edit_hooks(data: dict[str, Any], hooks_file: Path, uninstall: bool) -> tuple[
    dict[str, Any], dict[str, str], set[str], Moves
]:  # fmt: skip
    """The new hooks.json, our trust entries (key -> hash), every key of ours before, and the
    user's keys that move."""
    new = json.loads(json.dumps(data))
    hooks = new.setdefault("hooks", {})
    trusted: dict[str, str] = {}
    old_keys: set[str] = set()
    moves: Moves = {}
    for event in list(hooks) if uninstall else sorted(set(hooks) | set(EVENTS)):
        if event not in _LABELS:
            continue
        groups = _groups(new, event)
        kept: list[Any] = []
        for index, group in enumerate(groups):
            if _our_group(group):
                old_keys.update(
                    hook_key(hooks_file, event, index, h) for h in range(len(group["hooks"]))
                )
                continue
            if len(kept) != index and isinstance(group, dict):
                for h in range(len(group.get("hooks") or [])):
                    moves[hook_key(hooks_file, event, index, h)] = hook_key(
                        hooks_file, event, len(kept), h
                    )
            kept.append(group)
        if not uninstall and event in EVENTS:
            ours: dict[str, Any] = {"hooks": [_handler()]}
            if EVENTS[event] is not None:
                ours = {"matcher": EVENTS[event], **ours}
            trusted[hook_key(hooks_file, event, len(kept), 0)] = trust_hash(
                event, EVENTS[event], ours["hooks"][0]
            )
            kept.append(ours)
        if kept:
            hooks[event] = kept
        else:
            hooks.pop(event, None)
    return new, trusted, old_keys, moves


# -- config.toml --------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[")


def _toml_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out) + '"'


def _state_key(header: str) -> str | None:
    """The key of a ``[hooks.state."KEY"]`` header line, else None."""
    try:
        parsed = tomllib.loads(header.strip())
    except tomllib.TOMLDecodeError:
        return None
    state = parsed.get("hooks", {}).get("state") if list(parsed) == ["hooks"] else None
    if isinstance(state, dict) and len(state) == 1 and len(parsed["hooks"]) == 1:
        key = next(iter(state))
        return key if state[key] == {} else None
    return None


def _block(key: str, trusted: str) -> str:
    header = f"[hooks.state.{_toml_string(key)}]"
    return f"{header}\nenabled = true\ntrusted_hash = {_toml_string(trusted)}\n"


def _edit_config(text: str, drop: set[str], add: dict[str, str], moves: Moves) -> str:
    """``text`` without the ``[hooks.state."K"]`` tables of ``drop``, with tables of ``moves``
    renamed, and with ``add``'s tables (``enabled = true`` + ``trusted_hash``) rewritten where
    they are, or appended."""
    out: list[str] = []
    pending = dict(add)
    mode = "keep"  # or "drop" (a table of ours that goes), "replaced" (rewritten above)
    for line in text.splitlines(keepends=True):
        if _HEADER.match(line):
            key = _state_key(line)
            mode = "keep"
            if key is not None and key in moves:  # a user's handler, at its new index
                line = f"[hooks.state.{_toml_string(moves[key])}]\n"
            elif key is not None and key in pending:
                out.append(_block(key, pending.pop(key)))
                mode = "replaced"
                continue
            elif key is not None and (key in drop or key in add):
                mode = "drop"
                continue
        if mode == "keep" or (mode == "replaced" and not line.strip()):
            out.append(line)
    body = "".join(out)
    if body.strip() and (not body.endswith("\n") or mode == "drop"):
        body = body.rstrip("\n") + "\n"  # no blank line left where our last table was
    if not pending:
        return body
    blocks = "\n".join(_block(key, h) for key, h in pending.items())
    return body.rstrip("\n") + "\n\n" + blocks if body.strip() else blocks


def _expected(old: dict[str, Any], drop: set[str], add: dict[str, str], moves: Moves) -> Any:
    """What ``_edit_config``'s text must parse to (compared after ``_without_empty``)."""
    new = json.loads(json.dumps(old))
    state = new.setdefault("hooks", {}).setdefault("state", {})
    moved = {moves[k]: state[k] for k in moves if k in state}
    for key in drop | set(add) | set(moves):
        state.pop(key, None)
    state.update(moved)
    for key, h in add.items():
        state[key] = {"enabled": True, "trusted_hash": h}
    return _without_empty(new)


def _without_empty(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without an empty ``hooks.state`` / ``hooks`` table (removing our last
    entry may leave one, or none, depending on how the file spelled it)."""
    hooks = config.get("hooks")
    if isinstance(hooks, dict):
        if hooks.get("state") == {}:
            hooks = {k: v for k, v in hooks.items() if k != "state"}
        config = {k: v for k, v in config.items() if k != "hooks"}
        if hooks:
            config["hooks"] = hooks
    return config


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix it, then run again") from exc


def _trusted_project(config: dict[str, Any], project: Path) -> bool:
    projects = config.get("projects")
    if not isinstance(projects, dict):
        return False
    for folder in [project, *project.parents]:
        entry = projects.get(str(folder))
        if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True
    return False


def install(*, scope: str | None, uninstall: bool, cwd: Path) -> str:
    """Install (or remove) filecache's Codex hooks; returns the one line to print."""
    home = codex_home()
    if scope not in (None, *SCOPES):
        raise ConfigError(f"Codex CLI has no --{scope} install: use --user or --project")
    hooks_file = hooks_path(scope or "user", cwd)
    config_file = home / "config.toml"
    data = _load_json(hooks_file)
    try:
        config_text = config_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        config_text = ""
    config = _parse_toml(config_file, config_text)
    new_hooks, add, old_keys, moves = _edit_hooks(data, hooks_file, uninstall)
    drop = old_keys - set(add)
    new_text = _edit_config(config_text, drop, add, moves)
    if _without_empty(_parse_toml(config_file, new_text)) != _expected(config, drop, add, moves):
        entries = "".join(_block(k, h) for k, h in add.items())
        raise ConfigError(
            f"{config_file}: cannot merge filecache's hook trust into it safely (its hooks.state "
            f"is written in a form this installer does not edit); add by hand: {entries}"
        )
    unchanged = new_hooks == data and new_text == config_text
    if not unchanged:
        if new_hooks.get("hooks") or hooks_file.exists():
            project = None if scope in (None, "user") else cwd
            write_atomically(hooks_file, json.dumps(new_hooks, indent=2) + "\n", within=project)
        if new_text != config_text:
            write_atomically(config_file, new_text)
    if uninstall:
        did = "removed" if old_keys else "found no"
        return f"{did} filecache hooks for Codex CLI in {hooks_file} (trust in {config_file})"
    line = f"installed filecache hooks for Codex CLI in {hooks_file}, trusted in {config_file}"
    if unchanged:
        line = f"filecache hooks for Codex CLI already installed in {hooks_file}"
    if scope == "project" and not _trusted_project(config, hooks_file.parent.parent):
        line += "; Codex loads them once you trust this project"
    return line
