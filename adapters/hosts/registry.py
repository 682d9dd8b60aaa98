"""Which hosts filecache installs into, and the one entry every hook command goes through.

Each host module (``claude_code``, ``codex``, ``opencode``) provides ``HOST_NAME``,
``DISPLAY_NAME``, ``install(*, scope, uninstall, cwd) -> str`` (the one line to print) and
``run_hook(args, payload) -> bytes`` (what to print on stdout; ``b""`` leaves the host's own
output) and ``abandon(args, payload)`` (the answer to that call never reached the host: nothing
may rely on it). ``run_hook`` and ``abandon`` here never raise: a hook must never break the
host's session, so any failure is one line in the hook log and an empty answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, cast

__all__ = ["HOSTS", "HostModule", "abandon", "host_module", "run_hook"]

HOSTS = ("claude-code", "codex", "opencode")


class HostModule(Protocol):
    HOST_NAME: str
    DISPLAY_NAME: str

    def install(self, *, scope: str | None, uninstall: bool, cwd: Path) -> str: ...

    def run_hook(self, args: list[str], payload: bytes) -> bytes: ...

    def abandon(self, args: list[str], payload: bytes) -> None: ...


def host_module(name: str) -> HostModule:
    """The module of host ``name`` (one of ``HOSTS``), imported on first use."""
    if name == "claude-code":
        from filecache.adapters.hosts import claude_code

        return cast(HostModule, claude_code)
    if name == "codex":
        from filecache.adapters.hosts import codex

        return cast(HostModule, codex)
    if name == "opencode":
        from filecache.adapters.hosts import opencode

        return cast(HostModule, opencode)
    raise ValueError(f"unknown host {name!r}; use one of {', '.join(HOSTS)}")


def run_hook(name: str, args: list[str], payload: bytes) -> bytes:
    """Run host ``name``'s hook on ``payload``; on any failure log one line, answer nothing."""
    try:
        return host_module(name).run_hook(args, payload)
    except Exception as exc:  # a hook never breaks the host's session
        from filecache.adapters.hosts.base import log_failure

        log_failure(name, f"{type(exc).__name__}: {exc}")
        return b""


def abandon(name: str, args: list[str], payload: bytes) -> None:
    """The answer ``run_hook`` gave to ``payload`` never reached host ``name`` (its client
    gave up, or was killed at the host's timeout): forget the call, so no later FileRef relies
    on text the model never got. Never raises (one log line)."""
    try:
        host_module(name).abandon(args, payload)
    except Exception as exc:
        from filecache.adapters.hosts.base import log_failure

        log_failure(name, f"abandon: {type(exc).__name__}: {exc}")
