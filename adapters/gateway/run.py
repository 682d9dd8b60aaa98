"""``filecache run HOST ARGS...``: the host, for this one process, through the user's gateway.

Order: find the host's binary; read where it would send its requests (``hosts.plan``); start or
reuse the user's gateway (``user_gateway.ensure_gateway``) and register a route to each original
upstream; exec the host with its arguments and the variables that point it at the routes.

It cannot brick the host: whatever fails before the exec (no usable runtime folder, the gateway
not starting, a host setup it does not understand) prints one line on stderr and execs the plain
host with the user's arguments and environment unchanged. Nothing persisted changes: the host's
own settings files are only read.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from filecache.adapters.gateway.hosts import HOSTS, plan

__all__ = ["HOSTS", "launch", "run_host"]


def launch(
    host: str,
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    window: int | None = None,
) -> tuple[list[str], dict[str, str], str]:
    """(the argument list after the binary, the environment, a note for stderr: "" when the
    host goes through the gateway) — everything ``run_host`` does but the exec."""
    plain = (list(args), dict(env))
    try:
        from filecache.adapters.gateway.user_gateway import ensure_gateway, register_route

        chosen = plan(host, args, env, cwd)
        if chosen.unsupported:
            return *plain, f"filecache: {host} runs without the gateway: {chosen.unsupported}"
        gateway = ensure_gateway(env, env.get("FILECACHE_GATEWAY_STORE") or None)
        urls = [register_route(gateway, up, window, os.getpid()) for up in chosen.upstreams]
        extra, variables = chosen.apply(urls)
    except Exception as exc:  # never brick the host: it runs as it would without filecache
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return *plain, f"filecache: the gateway is not available ({why}); running plain {host}"
    argv = _codex_order(list(args), extra) if chosen.after_args else [*extra, *args]
    return argv, {**env, **variables}, ""


def _codex_order(args: list[str], extra: list[str]) -> list[str]:
    """Codex's ``-c`` overrides go last (a later override wins over the user's own), before a
    ``--`` when there is one."""
    if "--" in args:
        cut = args.index("--")
        return [*args[:cut], *extra, *args[cut:]]
    return [*args, *extra]


def run_host(host: str, args: Sequence[str], window: int | None = None) -> NoReturn:
    """Exec ``host`` (see the module docstring); raises FileNotFoundError when the binary is
    not on PATH."""
    binary = shutil.which(host)
    if binary is None:
        raise FileNotFoundError(f"{host}: not found on PATH")
    argv, env, note = launch(host, args, dict(os.environ), Path.cwd(), window)
    if note:
        print(note, file=sys.stderr, flush=True)
    os.execve(binary, [binary, *argv], env)
