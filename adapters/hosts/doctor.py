"""``filecache doctor``: what serves the hosts here, and what stopped it.

``diagnose`` gathers, without changing anything: filecache's hooks of every host at every scope
(``registry.installed``: the file, the interpreter and client script each names, whether both
are still there, whether the command is guarded), the store the hooks of this project use and
whether it can be written, this user's resident hook servers (``hook_client.ping``), the state of
the server behind each port Claude Code's http hooks call (``hook_http.status``: running, not
running, or the port held by another program), and the last line of the hook log.
``format_diagnosis`` renders it for a terminal; ``to_json`` as data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filecache.adapters.hosts.base import log_path
from filecache.adapters.hosts.config_files import Installed

__all__ = ["Diagnosis", "diagnose", "format_diagnosis"]


@dataclass(frozen=True)
class Diagnosis:
    """What ``diagnose`` found (see the module docstring)."""

    hooks: tuple[Installed, ...]
    store: str
    store_writable: bool | None  # None: not a file (a URL, ``:memory:``)
    servers: tuple[dict[str, Any], ...]
    log: Path
    last_error: str | None
    http: tuple[dict[str, Any], ...] = ()
    """One per port of the installed http hooks: ``port``, ``state`` (``running``,
    ``stopped``, ``taken``), when running the server's ``status``, and when taken the ``uid``
    of another user's program listening there (None: this user's, not filecache's)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "hooks": [
                {
                    "host": h.host,
                    "scope": h.scope,
                    "path": str(h.path),
                    "interpreter": h.interpreter,
                    "script": h.script,
                    "runs": h.runs,
                    "guarded": h.guarded,
                    "entries": h.count,
                    "http_ports": list(h.http_ports),
                }
                for h in self.hooks
            ],  # fmt: skip
            "store": self.store,
            "store_writable": self.store_writable,
            "servers": list(self.servers),
            "http_servers": list(self.http),
            "log": str(self.log),
            "last_error": self.last_error,
        }


def diagnose(cwd: Path) -> Diagnosis:
    """The state of filecache's host integration for the project at ``cwd``."""
    from filecache.adapters.hosts import hook_client, registry

    from filecache.store.store_url import is_store_url

    store = _store_of(cwd.resolve())
    writable = None if store == ":memory:" or is_store_url(store) else _writable(Path(store))
    servers = []
    for path in hook_client.server_sockets():
        answer = hook_client.ping(path)
        if answer is not None:
            import json

            servers.append(json.loads(answer[1]))
    log = log_path()
    hooks = tuple(registry.installed(cwd))
    ports = dict.fromkeys(port for h in hooks for port in h.http_ports)
    return Diagnosis(hooks, store, writable, tuple(servers), log, _last_line(log),
                     tuple(_http_state(port) for port in ports))  # fmt: skip


def _store_of(root: Path) -> str:
    """Where the hooks' store is or would be made, found without creating anything (a
    diagnosis writes nothing): the project's ``.filecache/cache.db``, or, when the project
    cannot hold it, the user cache's fallback that the hooks would use instead."""
    from filecache.fsio import STORE_DIR
    from filecache.store.opening import store_location
    from filecache.store.store import fallback_store_folder
    from filecache.store.store_url import is_store_url

    store = store_location(root, create=False)
    local = root / STORE_DIR / "cache.db"
    if store != str(local) or is_store_url(store) or local.exists() or _writable(local):
        return store
    fallback = fallback_store_folder(root) / "cache.db"
    return str(fallback) if _writable(fallback) else store


def _http_state(port: int) -> dict[str, Any]:
    from filecache.adapters.hosts.hook_http import listening, other_users_listener, status

    found = status(port)
    if found is not None:
        return {"port": port, "state": "running", "status": found}
    if not listening(port):
        return {"port": port, "state": "stopped"}
    return {"port": port, "state": "taken", "uid": other_users_listener(port)}


def _writable(path: Path) -> bool:
    """Whether the store file (or, before its first use, the folder it would be made in) can
    be written by this user."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return os.access(candidate, os.W_OK | (os.X_OK if candidate.is_dir() else 0))
    return False


def _last_line(log: Path) -> str | None:
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    return lines[-1] if lines else None


def format_diagnosis(found: Diagnosis) -> str:
    """The diagnosis as lines for a terminal; each problem says what to do."""
    out = []
    if not found.hooks:
        out.append("hooks: none installed (filecache install HOST)")
    for h in found.hooks:
        state = "ok" if h.runs else "INTERPRETER OR SCRIPT GONE (does nothing)"
        if not h.guarded:
            state += "; UNGUARDED (an earlier release's: run filecache install again)"
        http = "".join(f", http hooks to 127.0.0.1:{port}" for port in h.http_ports)
        out.append(
            f"hooks: {h.host} --{h.scope} in {h.path}: {h.count} entr"
            f"{'y' if h.count == 1 else 'ies'}{http}, python {h.interpreter or '?'}, "
            f"script {h.script or '(module)'}: {state}"
        )
    if len({h.host for h in found.hooks}) < len(found.hooks):
        out.append("hooks: a host is installed at two scopes: filecache install HOST again")
    store_state = {True: "writable", False: "NOT WRITABLE: savings are off",
                   None: "not a file"}[found.store_writable]  # fmt: skip
    out.append(f"store: {found.store} ({store_state})")
    if not found.servers:
        out.append("server: none running (the next hook call starts one)")
    for s in found.servers:
        out.append(f"server: pid {s.get('pid')}, filecache {s.get('version')}, "
                   f"{s.get('calls')} calls, {s.get('socket')}")  # fmt: skip
    for each in found.http:
        port = each["port"]
        if each["state"] == "running":
            st = each["status"]
            out.append(f"http server: 127.0.0.1:{port}, pid {st.get('pid')}, filecache "
                       f"{st.get('version')}, {st.get('calls')} calls")  # fmt: skip
        elif each["state"] == "stopped":
            out.append(
                f"http server: 127.0.0.1:{port} not running (the next Claude Code "
                "session or prompt starts it; its own results stand until then)"
            )
        elif each.get("uid") is not None:
            out.append(f"http server: 127.0.0.1:{port} HELD BY ANOTHER USER'S PROGRAM (uid "
                       f"{each['uid']}): Claude Code sends it every tool result; filecache "
                       "install claude-code --command")  # fmt: skip
        else:
            out.append(f"http server: 127.0.0.1:{port} HELD BY ANOTHER PROGRAM: the http hooks "
                       "are not served; filecache install claude-code --http-port N (a free "
                       "port)")  # fmt: skip
    out.append(f"last error: {found.last_error or 'none'} ({found.log})")
    return "\n".join(out)
