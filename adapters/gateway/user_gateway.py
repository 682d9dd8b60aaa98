"""The user's background gateway: started or reused by ``filecache run``, one per user and code.

Files, in the user's private runtime folder (``hook_client.socket_folder``: 0700, refused when
it is not this user's), named by ``identity`` (the interpreter, filecache's version and the
gateway store), each 0600:
- ``gateway-<id>.json``: the state the daemon writes once it listens (pid, port, url, the
  control secret, version). The secret proves on the health check that the process listening on
  that port is ours (a foreign one cannot know it); it also authorizes ``stop``.
- ``gateway-<id>.routes.json``: the routes ``run`` registered (id → original upstream and
  window) and the processes using them (pid and start time: a reused pid is not a client).
- ``gateway-<id>.lock``: held while a gateway is started (racing runs start one) and while the
  routes file is rewritten.

The daemon (``python -m filecache.adapters.gateway STATE``, detached by a double fork, its stdio
on /dev/null, its log the gateway log) exits after ``FILECACHE_GATEWAY_IDLE`` seconds (default
1800) without a request and with no live client. Nothing here touches a host's own settings.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filecache.adapters.gateway.proxy import CONTROL_HEADER, HEALTH_PATH, STOP_PATH
from filecache.adapters.gateway.routes import Route, check_upstream, route_id
from filecache.adapters.hosts.hook_client import Refused, socket_folder

__all__ = [
    "IDLE_SECONDS",
    "Refused",
    "UserGateway",
    "daemon_main",
    "ensure_gateway",
    "gateway_log",
    "identity",
    "register_route",
    "running_gateways",
    "stop_gateways",
]

IDLE_SECONDS = 1800.0
START_ATTEMPTS = 400  # 50 ms apart: 20 s for an interpreter to import aiohttp on a loaded machine
_CONTROL_ENV = "FILECACHE_GATEWAY_CONTROL"
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")  # kept out of the daemon's environment


@dataclass(frozen=True)
class UserGateway:
    """A running background gateway: ``url`` (``http://127.0.0.1:PORT``), ``state`` (its file)."""

    url: str
    port: int
    pid: int
    state: Path


def identity(store: str | None = None) -> str:
    """The digest naming this user's gateway for this interpreter, version and store."""
    import hashlib

    key = f"{sys.executable}\0{_version()}\0{store or ''}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("filecache-agent")
    except PackageNotFoundError:
        return "unknown"


def _folder(env: Mapping[str, str]) -> Path:
    return Path(socket_folder(env, "gateway"))


def gateway_log(env: Mapping[str, str]) -> Path:
    """The background gateways' log (counts only): ``$XDG_CACHE_HOME/filecache/gateway.log``."""
    cache = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or "~", ".cache")
    return Path(os.path.expanduser(cache)) / "filecache" / "gateway.log"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_private(path: Path, payload: dict[str, Any]) -> None:
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(payload, out)
    os.replace(temp, path)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _request(url: str, secret: str, method: str = "GET") -> dict[str, Any] | None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    request = urllib.request.Request(url, method=method, headers={CONTROL_HEADER: secret})
    try:
        with opener.open(request, timeout=5) as answer:
            data = json.loads(answer.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _healthy(state: dict[str, Any]) -> bool:
    """The process on the state's port is our gateway, alive (it knows the secret)."""
    if not state.get("url") or not state.get("control"):
        return False
    info = _request(state["url"] + HEALTH_PATH, state["control"])
    return info is not None and info.get("pid") == state.get("pid")


def _start_time(pid: int) -> str:
    """The process's start time (``/proc``), "" where unknown: a reused pid differs."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process now holds that pid
    return not started or _start_time(pid) == started


def ensure_gateway(env: Mapping[str, str], store: str | None = None) -> UserGateway:
    """The user's running gateway, started when none answers. Raises OSError or RuntimeError
    when it cannot be started (the caller runs the host without it)."""
    folder = _folder(env)
    ident = identity(store)
    state_path = folder / f"gateway-{ident}.json"
    with _locked(folder / f"gateway-{ident}.lock"):
        state = _read(state_path)
        if _healthy(state):
            return UserGateway(state["url"], state["port"], state["pid"], state_path)
        secret = secrets.token_hex(16)
        _spawn(state_path, secret, env, store, state.get("port"))
        for _attempt in range(START_ATTEMPTS):
            state = _read(state_path)
            if state.get("control") == secret and _healthy(state):
                return UserGateway(state["url"], state["port"], state["pid"], state_path)
            time.sleep(0.05)
    raise RuntimeError(f"the gateway did not start (see {gateway_log(env)})")


def _spawn(state: Path, secret: str, env: Mapping[str, str], store: str | None, port: Any) -> None:
    """Start the daemon detached (double fork: it is nobody's child once the host runs)."""
    child_env = {
        k: v for k, v in env.items() if not any(word in k.upper() for word in _SECRET_WORDS)
    }
    child_env[_CONTROL_ENV] = secret
    argv = [sys.executable, "-m", "filecache.adapters.gateway", str(state)]
    if store:
        argv += ["--store", store]
    if isinstance(port, int) and port > 0:
        argv += ["--port", str(port)]  # the port of the gateway before it, where it is free
    log = gateway_log(env)
    log.parent.mkdir(parents=True, exist_ok=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's path ends in exec or _exit
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(err, 2)
            os.chdir("/")
            os.execve(sys.executable, argv, child_env)
        finally:
            os._exit(127)
    os.waitpid(pid, 0)


def register_route(gateway: UserGateway, upstream: str, window: int | None, client_pid: int) -> str:
    """Register ``upstream`` (at ``window``) with ``gateway`` for the process ``client_pid``;
    the base URL the host is to use."""
    upstream = check_upstream(upstream)
    routes_path = gateway.state.with_suffix(".routes.json")
    with _locked(gateway.state.with_suffix(".lock")):
        data = _read(routes_path)
        found = data.get("routes")
        routes: dict[str, Any] = found if isinstance(found, dict) else {}
        own = f"{gateway.url}/r/"
        if upstream.startswith(own):  # started from a host already behind this gateway
            inner = routes.get(upstream[len(own) :].split("/", 1)[0])
            if not isinstance(inner, dict) or not isinstance(inner.get("upstream"), str):
                raise RuntimeError(f"{upstream} is a route this gateway no longer has")
            upstream = inner["upstream"]  # not a loop through itself
        ident = route_id(upstream, window)
        routes[ident] = {"upstream": upstream, "window": window}
        clients = [
            c
            for c in data.get("clients", [])
            if isinstance(c, list) and len(c) == 2 and _alive(int(c[0]), str(c[1]))
        ]
        entry = [client_pid, _start_time(client_pid)]
        if entry not in clients:
            clients.append(entry)
        _write_private(routes_path, {"routes": routes, "clients": clients})
    return f"{gateway.url}/r/{ident}"


def _registered(routes_path: Path) -> dict[str, Route]:
    found: dict[str, Route] = {}
    for ident, entry in (_read(routes_path).get("routes") or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("upstream"), str):
            window = entry.get("window")
            found[ident] = Route(
                f"/r/{ident}", entry["upstream"], window if isinstance(window, int) else None
            )
    return found


def _clients_alive(routes_path: Path) -> bool:
    clients = _read(routes_path).get("clients") or []
    return any(
        isinstance(c, list) and len(c) == 2 and _alive(int(c[0]), str(c[1])) for c in clients
    )


def running_gateways(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """What each of this user's background gateways says about itself (its health answer)."""
    found = []
    for path in sorted(_folder(env).glob("gateway-*.json")):
        if path.name.endswith(".routes.json"):
            continue
        state = _read(path)
        if state.get("url") and state.get("control"):
            info = _request(state["url"] + HEALTH_PATH, state["control"])
            if info is not None and info.get("pid") == state.get("pid"):
                found.append({"url": state["url"], **info})
    return found


def stop_gateways(env: Mapping[str, str]) -> list[int]:
    """Ask each of this user's background gateways to stop; their pids."""
    stopped = []
    for path in sorted(_folder(env).glob("gateway-*.json")):
        if path.name.endswith(".routes.json"):
            continue
        state = _read(path)
        if state.get("url") and state.get("control"):
            answer = _request(state["url"] + STOP_PATH, state["control"], "POST")
            if answer is not None and answer.get("stopping") == state.get("pid"):
                stopped.append(int(state["pid"]))
    return stopped


def daemon_main(argv: list[str]) -> int:
    """The background gateway (see the module docstring)."""
    import argparse

    from filecache.adapters.gateway.server import ServeOptions, serve

    parser = argparse.ArgumentParser(prog="python -m filecache.adapters.gateway")
    parser.add_argument("state")
    parser.add_argument("--store")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    state_path = Path(args.state)
    secret = os.environ.pop(_CONTROL_ENV, "") or secrets.token_hex(16)
    routes_path = state_path.with_suffix(".routes.json")
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s gateway %(message)s"
    )
    idle = float(os.environ.get("FILECACHE_GATEWAY_IDLE") or IDLE_SECONDS)

    def ready(url: str, port: int) -> None:
        payload = {"pid": os.getpid(), "port": port, "url": url, "control": secret}
        _write_private(state_path, payload | {"version": _version()})
        logging.getLogger("filecache.gateway").info("listening on %s", url)

    options = ServeOptions(port=args.port, store=args.store, control=secret, idle=idle)
    try:
        serve(
            options,
            ready,
            reload=lambda: _registered(routes_path),
            clients_alive=lambda: _clients_alive(routes_path),
        )
    except OSError as exc:
        if args.port == 0:
            raise
        logging.getLogger("filecache.gateway").info("port %d: %s; another port", args.port, exc)
        serve(
            ServeOptions(store=args.store, control=secret, idle=idle),
            ready,
            reload=lambda: _registered(routes_path),
            clients_alive=lambda: _clients_alive(routes_path),
        )
    return 0
