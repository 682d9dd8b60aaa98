"""Hook settings in Claude Code's shape, which Gemini CLI shares: ``{"hooks": {EVENT:
[{"matcher": M, "hooks": [HOOK, ...]}, ...]}}``. filecache's hooks found, removed and written in
it, for any host whose settings have that shape (pure: dicts in, dicts out).

Ours are recognised by what the command runs (``config_files.hook_parts``: every form filecache
ever wrote, from any interpreter) for the given host, or, for an ``http`` hook, by its URL
(``hook_http.hook_port``: ``http://127.0.0.1:PORT/hook/HOST``, any port), and replaced as a
whole on every install, so installing twice is installing once. Everything else is kept; an
uninstall removes only ours, and an event whose groups were all ours. A ``"hooks"`` that is not
an object of lists is not touched: ``ConfigError`` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from filecache.adapters.hosts.config_files import Installed, hook_parts, load_json_object

from filecache.errors import ConfigError

__all__ = ["installed_at", "merged", "our_commands", "our_http_ports"]


def _ours(hook: Any, host: str) -> bool:
    from filecache.adapters.hosts.hook_http import hook_port

    if hook_port(hook, host) is not None:
        return True
    command = hook.get("command") if isinstance(hook, dict) else None
    if not isinstance(command, str):
        return False
    parts = hook_parts(command)
    return parts is not None and parts.host == host


def _hooks(settings: Any) -> list[Any]:
    """Every hook entry in ``settings``, in order."""
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    found = []
    for groups in hooks.values() if isinstance(hooks, dict) else []:
        for group in groups if isinstance(groups, list) else []:
            inner = group.get("hooks") if isinstance(group, dict) else None
            found.extend(inner if isinstance(inner, list) else [])
    return found


def our_commands(settings: Any, host: str) -> list[str]:
    """The commands of ``host``'s hooks that filecache wrote into ``settings``."""
    return [str(hook["command"]) for hook in _hooks(settings)
            if _ours(hook, host) and "command" in hook]  # fmt: skip


def our_http_ports(settings: Any, host: str) -> list[int]:
    """The port of each of ``host``'s http hooks that filecache wrote into ``settings``."""
    from filecache.adapters.hosts.hook_http import hook_port

    return [port for hook in _hooks(settings) if (port := hook_port(hook, host)) is not None]


def installed_at(
    host: str, scopes: Sequence[str], path_of: Callable[[str], Path]
) -> list[Installed]:
    """filecache's hooks for ``host`` at each of ``scopes`` that has any (``path_of(scope)``:
    its settings file; one that cannot be read or parsed counts as none)."""
    found = []
    for scope in scopes:
        path = path_of(scope)
        try:
            settings = load_json_object(path)
        except ConfigError:
            continue
        commands, ports = our_commands(settings, host), our_http_ports(settings, host)
        if commands or ports:
            parts = hook_parts(commands[0]) if commands else None
            found.append(Installed(
                host, scope, path, parts.interpreter if parts else None,
                parts.script if parts else None, parts.guarded if parts else True,
                len(commands) + len(ports), tuple(dict.fromkeys(ports)),
            ))  # fmt: skip
    return found


def _without_ours(hooks: dict[str, list[Any]], host: str) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        left = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                left.append(group)
                continue
            rest = [h for h in inner if not _ours(h, host)]
            if rest:
                left.append({**group, "hooks": rest})
            elif len(rest) == len(inner):  # an empty group that was never ours
                left.append(group)
        if left or not groups:  # an event goes only when ours were all it held
            kept[event] = left
    return kept


def merged(
    settings: dict[str, Any],
    *,
    host: str,
    uninstall: bool,
    events: Mapping[str, str | None],
    hook: Mapping[str, Any],
    instead: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """``settings`` with ``host``'s filecache hooks replaced by ``hook`` under each of
    ``events`` (event -> matcher, None: the event has no tool matcher), or removed.
    ``instead``: event -> the hook written for that event in place of ``hook``."""
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
    hooks = _without_ours(hooks, host)
    if not uninstall:
        for event, matcher in events.items():
            group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
            group["hooks"] = [dict((instead or {}).get(event, hook))]
            hooks[event] = [*hooks.get(event, []), group]
    out = dict(settings)  # "hooks" keeps its place; an empty one stays (it may be the user's)
    if hooks or "hooks" in settings:
        out["hooks"] = hooks
    return out
