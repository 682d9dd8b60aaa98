"""Which hosts filecache installs into, and the one entry every hook command goes through.

The hosts are ``host_specs.SPECS``; each spec's module (``claude_code``, ``codex``,
``opencode``) provides ``HOST_NAME``, ``DISPLAY_NAME``, ``install(*, scope, uninstall, cwd)
-> str`` (the one line to print), ``run_hook(args, payload) -> bytes`` (what to print on
stdout; ``b""`` leaves the host's own output) and ``installed(cwd) -> list[Installed]``
(filecache's hooks at each scope), and ``abandon(args, payload)`` (the answer to that call
never reached the host: nothing may rely on it). ``run_hook`` and ``abandon`` here never raise:
a hook must never break the host's session, so any failure is one line in the hook log and an
empty answer.

One installation per host: ``install`` removes filecache's hooks of that host at every other
scope (Codex at the user's and a project's level would run both, and the model would get every
answer twice), and says so. ``uninstall`` removes filecache's hooks of every host at every scope,
whatever interpreter or release wrote them and whether or not it still exists.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from filecache.adapters.hosts.config_files import Installed
from filecache.adapters.hosts.host_specs import HOST_NAMES, spec

__all__ = [
    "HOSTS",
    "HostModule",
    "abandon",
    "host_module",
    "install",
    "installed",
    "notice",
    "notice_text",
    "run_hook",
    "uninstall",
]

HOSTS = HOST_NAMES


class HostModule(Protocol):
    HOST_NAME: str
    DISPLAY_NAME: str

    def install(self, *, scope: str | None, uninstall: bool, cwd: Path) -> str: ...

    def installed(self, cwd: Path) -> list[Installed]: ...

    def run_hook(self, args: list[str], payload: bytes) -> bytes: ...

    def abandon(self, args: list[str], payload: bytes) -> None: ...


def host_module(name: str) -> HostModule:
    """The module of host ``name`` (one of ``HOSTS``), imported on first use.

    Raises:
        ValueError: no such host.
    """
    from importlib import import_module

    module: HostModule = import_module(f"{__package__}.{spec(name).module}")
    return module


def run_hook(name: str, args: list[str], payload: bytes) -> bytes:
    """Run host ``name``'s hook on ``payload``; on any failure log one line and answer
    nothing, but for a store that cannot be used or a bad setting (every call of the session
    fails alike): a line that tells the user so, once per host session (``notice``)."""
    try:
        return host_module(name).run_hook(args, payload)
    except Exception as exc:  # a hook never breaks the host's session
        from filecache.adapters.hosts.base import log_failure

        from filecache.errors import ConfigError, StoreError

        reason = f"{type(exc).__name__}: {exc}"
        log_failure(name, reason)
        if isinstance(exc, StoreError | ConfigError):  # every call of the session fails so
            return notice(name, payload, reason)
        return b""


def notice(name: str, payload: bytes, reason: str) -> bytes:
    """The hook's answer that tells the user, the first time in a host session, that filecache
    serves nothing there and why (``HostSpec.notice``: Claude Code's ``systemMessage``, shown to
    the user, never to the model); ``b""`` after that, for a host without such a field, or when
    the session is unknown (``notice_text``)."""
    import json

    field = spec(name).notice
    try:
        event = json.loads(payload)
        session = event.get("session_id") if isinstance(event, dict) else None
    except ValueError:
        return b""
    if field is None or not isinstance(session, str):
        return b""
    text = notice_text(name, session, reason)
    return b"" if text is None else json.dumps({field: text}).encode("utf-8")


def notice_text(name: str, session: str, reason: str) -> str | None:
    """The line that tells the user that filecache serves nothing in host ``name``'s session
    ``session`` and why, the first time it is asked for that session; None after that (or
    for no session). Once per session: a marker file beside the hook log (the store may be
    what failed)."""
    import hashlib

    from filecache.adapters.hosts.base import log_path

    if not session:
        return None
    key = hashlib.sha256(f"{name}\0{session}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    folder = log_path().parent / "notices"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.close(os.open(folder / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:  # said already (or nowhere to remember it: say nothing rather than often)
        return None
    return (
        f"filecache serves nothing in this session ({' '.join(reason.split())[:300]}); "
        f"{spec(name).display}'s own results stand. `filecache doctor` says more."
    )


def install(
    name: str, *, scope: str | None, cwd: Path, http_port: int | None = None,
    http: bool | None = False,
) -> str:  # fmt: skip
    """Install host ``name``'s hooks at ``scope`` (None: the host's default) and remove its
    hooks at every other scope (one installation per host); the line to print.

    Args:
        http_port: Claude Code's per-call events by http hooks to this port
            (``claude_settings``); implies ``http``.
        http: http hooks (to ``hook_form.default_port`` when no ``http_port``); None: as
            ``hook_form.choose`` decides for this machine (Claude Code; the other hosts have
            command hooks only), and the line says which and why.

    Raises:
        ConfigError: ``http`` or ``http_port`` for a host other than Claude Code.
    """
    module = host_module(name)
    scope = scope or spec(name).scopes[0]
    why = ""
    if http is None and http_port is None and name == "claude-code":
        from filecache.adapters.hosts.hook_form import choose

        http, why = choose()
        why = f"; {why}"
    if http and http_port is None:
        from filecache.adapters.hosts.hook_form import default_port

        http_port = default_port()
    if http_port is None:
        line = module.install(scope=scope, uninstall=False, cwd=cwd)
    elif name == "claude-code":  # its install takes http_port too (the protocol's does not)
        install_claude: Callable[..., str] = module.install
        line = install_claude(scope=scope, uninstall=False, cwd=cwd, http_port=http_port)
    else:
        from filecache.errors import ConfigError

        raise ConfigError(f"--http is for Claude Code only, not {spec(name).display}")
    line += why
    found = module.installed(cwd)
    here = {os.path.realpath(f.path) for f in found if f.scope == scope}
    others = [f for f in found if f.scope != scope and os.path.realpath(f.path) not in here]
    for other in others:
        module.install(scope=other.scope, uninstall=True, cwd=cwd)
    if others:
        where = ", ".join(f"--{f.scope} ({f.path})" for f in others)
        line += (
            f"; removed filecache's hooks for {module.DISPLAY_NAME} at {where}: one installation "
            "per host, the new one replaces them"
        )
    return line


def installed(cwd: Path, names: Iterable[str] = HOSTS) -> list[Installed]:
    """filecache's hooks of hosts ``names`` at every scope (the user's, the project of
    ``cwd``), from any interpreter or release."""
    return [found for name in names for found in host_module(name).installed(cwd)]


def uninstall(cwd: Path, names: Iterable[str] = HOSTS, scope: str | None = None) -> list[str]:
    """Remove filecache's hooks of hosts ``names`` at ``scope`` (None: every scope); one line
    per file changed."""
    lines = []
    for found in installed(cwd, names):
        if scope is None or found.scope == scope:
            module = host_module(found.host)
            lines.append(module.install(scope=found.scope, uninstall=True, cwd=cwd))
    return lines


def abandon(name: str, args: list[str], payload: bytes) -> None:
    """The answer ``run_hook`` gave to ``payload`` never reached host ``name`` (its client
    gave up, or was killed at the host's timeout): forget the call, so no later FileRef relies
    on text the model never got. Never raises (one log line)."""
    try:
        host_module(name).abandon(args, payload)
    except Exception as exc:
        from filecache.adapters.hosts.base import log_failure

        log_failure(name, f"abandon: {type(exc).__name__}: {exc}")
