"""Claude Code's ``http`` hooks answered by a resident process on 127.0.0.1: no process per call.

Claude Code (2.1.x) has a hook type ``"http"``: it POSTs the hook's JSON input to a URL and
reads the answer from the response body, as it reads a command hook's stdout. A hook answered so
costs one loopback request instead of an interpreter start. This module is that server
(``serve``), run as ``python -I -m filecache.adapters.hosts.hook_http --port N``; each request
runs ``registry.run_hook`` in the warm process, as the unix-socket server (``hook_server``) does
for the command hook's thin client.

A port on 127.0.0.1 is open to every local user and to every web page the user's browser
shows, so a request is answered only when all of these hold (else 403, and nothing runs):

- the peer's socket belongs to this user: its uid in ``/proc/net/tcp`` (Linux; elsewhere the
  server refuses to start), so another local user cannot drive it;
- the ``Host`` header is ``127.0.0.1:PORT`` (a DNS-rebinding page sends its own name);
- no ``Origin`` header, and the header ``X-Filecache-Hook`` names the host: a browser sends
  neither a custom header nor a cross-origin POST without a CORS preflight, which this server
  never grants (it answers no ``OPTIONS``).

No secret is needed, so nothing secret is written into Claude Code's settings (which are often
readable by others). Owned state: none across requests but the store and the call count (under
a lock); one thread per request.

Each response goes out in one write on a socket with ``TCP_NODELAY``: Claude Code keeps its
connection open between calls, and a response written in two parts waited, under Nagle's
algorithm, for the client's delayed ACK of the first (40 ms or more per call).

Lifetime: nothing runs it as a service. ``filecache install claude-code --http`` (the default
where only this user can log in: ``hook_form``) keeps
``SessionStart`` and ``UserPromptSubmit`` command hooks, and they call ``ensure_running`` with
the ports of the http hooks installed for the project: a port where nothing listens gets a
server, started detached (a new session, stdio on ``/dev/null``) without waiting for it, so the
calls before it listens are simply not served (Claude Code's own result stands). The server
records itself in the hook socket folder (``http-PORT.pid``; ``stop_servers`` ends those of
this environment's folder), answers ``GET /status`` (its pid and call count, under the same
checks as a hook call), and exits after ``FILECACHE_HOOK_SERVER_IDLE`` seconds without a call
(600 by default, as the Unix-socket server does), so a changed filecache is loaded again by the
next prompt's hook. ``FILECACHE_HOOK_SERVER=0`` starts none.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from filecache.adapters.hosts.hook_form import default_port

__all__ = [
    "ENV_HEADER",
    "HEADER",
    "HookHTTPServer",
    "default_port",
    "ensure_running",
    "http_hook",
    "hook_port",
    "listener_uids",
    "listening",
    "other_users_listener",
    "peer_uid",
    "serve",
    "status",
    "stop_servers",
]

HEADER = "X-Filecache-Hook"
ENV_HEADER = "X-Filecache-Env-"
"""``ENV_HEADER + NAME``: a ``call_env.PER_CALL`` variable of the calling Claude Code, which an
http hook sends as a header (``"$NAME"``, with NAME in the hook's ``allowedEnvVars``)."""
MAX_BODY = 64 << 20


def _hex_address(host: str, port: int) -> str:
    """An IPv4 address and port as ``/proc/net/tcp`` writes them (little-endian hex)."""
    packed = socket.inet_aton(host)
    return f"{int.from_bytes(packed, 'little'):08X}:{port:04X}"


def peer_uid(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """The uid that owns the socket at ``peer`` connected to ``local`` (Linux's
    ``/proc/net/tcp``), or None when it is not found."""
    want_local, want_remote = _hex_address(*peer), _hex_address(*local)
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and fields[1] == want_local and fields[2] == want_remote:
            return int(fields[7])
    return None


_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column
_REACHES_LOOPBACK = ("0100007F", "00000000", "0" * 32, "0000000000000000FFFF00000100007F")
"""Local addresses of a listening socket that takes connections to 127.0.0.1 (the address
itself, every IPv4 address, every address of a dual-stack IPv6 socket, ``::ffff:127.0.0.1``)."""


def listener_uids(port: int) -> list[int]:
    """The uids owning a socket that listens for connections to 127.0.0.1:``port``
    (``/proc/net/tcp`` and ``tcp6``; empty where they cannot be read)."""
    wanted = {f"{address}:{port:04X}" for address in _REACHES_LOOPBACK}
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and fields[3] == _LISTEN and fields[1] in wanted:
                found.append(int(fields[7]))
    return found


def other_users_listener(port: int) -> int | None:
    """The uid of another user's program listening on 127.0.0.1:``port`` (where this
    user's http hooks send every tool result), else None."""
    return next((uid for uid in listener_uids(port) if uid != os.getuid()), None)


class _Handler(BaseHTTPRequestHandler):
    server: HookHTTPServer
    protocol_version = "HTTP/1.1"
    # Claude Code keeps the connection open between calls. With Nagle's algorithm on, a
    # response written in two parts (headers, then body) waits for the client's delayed ACK of
    # the first part: about 40 ms per call on Linux. So: TCP_NODELAY, and one write per response.
    disable_nagle_algorithm = True
    wbufsize = 1 << 16

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def _peer_is_this_user(self, port: int) -> bool:
        """Checked once per connection (this handler serves one connection; reading
        ``/proc/net/tcp`` costs milliseconds): a socket's owner does not change."""
        known: bool | None = getattr(self, "_peer_ok", None)
        if known is None:
            known = peer_uid(self.client_address[:2], ("127.0.0.1", port)) == os.getuid()
            self._peer_ok = known
        return known

    def _reply(self, status: int, body: bytes = b"", content_type: str | None = None) -> None:
        """The whole response in one write (``wbufsize``: ``end_headers`` only buffers the
        headers, ``flush`` sends them with the body)."""
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _refuse(self, status: int) -> None:
        self._reply(status)

    def _allowed(self, host: str) -> bool:
        from filecache.adapters.hosts.host_specs import HOST_NAMES

        port = self.server.server_address[1]
        return (
            host in HOST_NAMES
            and self.headers.get(HEADER) == host
            and self.headers.get("Origin") is None
            and self.headers.get("Host") == f"127.0.0.1:{port}"
            and self._peer_is_this_user(port)
        )

    def do_GET(self) -> None:  # noqa: N802
        """``GET /status`` (``HEADER: status``): this server's pid, port and call count."""
        if self.path != "/status" or not self._allowed_status():
            self._refuse(403)
            return
        self._reply(200, json.dumps(self.server.status()).encode(), "application/json")

    def _allowed_status(self) -> bool:
        port = self.server.server_address[1]
        return (
            self.headers.get(HEADER) == "status"
            and self.headers.get("Origin") is None
            and self.headers.get("Host") == f"127.0.0.1:{port}"
            and self._peer_is_this_user(port)
        )

    def do_POST(self) -> None:  # noqa: N802
        host = self.path.strip("/").removeprefix("hook/")
        allowed = self._allowed(host)
        length = int(self.headers.get("Content-Length") or 0)
        if not allowed or not 0 < length <= MAX_BODY:
            self._refuse(403 if not allowed else 413)
            return
        payload = self.rfile.read(length)
        self.server.began()
        try:
            self._answer_call(host, payload)
        finally:
            self.server.ended()

    def _answer_call(self, host: str, payload: bytes) -> None:
        per_call = {name: value for name in _per_call_names()
                    if (value := self.headers.get(ENV_HEADER + name))}  # fmt: skip
        answer = _answer(host, payload, per_call)
        try:
            self._reply(200, answer, "application/json")
        except OSError:  # Claude Code gave up (its timeout): nothing may rely on the answer
            _abandon(host, payload, per_call)
            raise


def _per_call_names() -> tuple[str, ...]:
    from filecache.adapters.hosts.call_env import PER_CALL

    names: tuple[str, ...] = PER_CALL
    return names


def _answer(host: str, payload: bytes, env: dict[str, str] | None = None) -> bytes:
    """``registry.run_hook`` as a call made from the event's ``cwd`` with ``env`` (the
    ``call_env.PER_CALL`` variables the hook's headers carry; never raises)."""
    from filecache.adapters.hosts import call_env
    from filecache.adapters.hosts.registry import run_hook

    try:
        event = json.loads(payload)
        cwd = event.get("cwd") if isinstance(event, dict) else None
    except ValueError:
        cwd = None
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        return b""
    with call_env.calling(cwd, env or {}):
        out: bytes = run_hook(host, [], payload)
    return out


def _abandon(host: str, payload: bytes, env: dict[str, str]) -> None:
    """``registry.abandon`` for an answer that could not be sent (best effort: a peer that
    closed without a reset is not seen; the unix-socket client's acknowledgement has no
    equivalent in HTTP)."""
    from filecache.adapters.hosts import call_env
    from filecache.adapters.hosts.registry import abandon

    try:
        event = json.loads(payload)
        cwd = event.get("cwd") if isinstance(event, dict) else None
    except ValueError:
        return
    if isinstance(cwd, str) and os.path.isabs(cwd):
        with call_env.calling(cwd, env):
            abandon(host, [], payload)


def http_hook(port: int, host: str = "claude-code", timeout: int = 30) -> dict[str, object]:
    """The hook entry for Claude Code's settings that calls this server on ``port``."""
    from filecache.adapters.hosts.call_env import PER_CALL

    headers = {HEADER: host, **{ENV_HEADER + name: f"${name}" for name in PER_CALL}}
    return {"type": "http", "url": f"http://127.0.0.1:{port}/hook/{host}", "headers": headers,
            "allowedEnvVars": list(PER_CALL), "timeout": timeout}  # fmt: skip


class HookHTTPServer(ThreadingHTTPServer):
    """The server; ``idle`` seconds without a call (and none running) end ``serve``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[_Handler],
                 idle: float | None = None) -> None:  # fmt: skip
        super().__init__(address, handler)
        self.idle = idle
        self.calls = 0
        self._running = 0
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def began(self) -> None:
        with self._lock:
            self.calls += 1
            self._running += 1

    def ended(self) -> None:
        with self._lock:
            self._running -= 1
            self._last = time.monotonic()

    def is_idle(self) -> bool:
        with self._lock:
            return (self.idle is not None and not self._running
                    and time.monotonic() - self._last > self.idle)  # fmt: skip

    def status(self) -> dict[str, object]:
        from filecache.adapters.hosts.hook_server import _version

        with self._lock:
            calls, idle = self.calls, time.monotonic() - self._last
        return {"pid": os.getpid(), "port": self.server_address[1], "calls": calls,
                "idle_seconds": round(idle, 1), "version": _version()}  # fmt: skip


IDLE_SECONDS = 600.0
_URL = re.compile(r"http://127\.0\.0\.1:(\d{1,5})/hook/([a-z-]+)")


def hook_port(hook: object, host: str = "claude-code") -> int | None:
    """The port of ``hook`` when it is an http hook filecache wrote for ``host`` (any port),
    else None."""
    if not isinstance(hook, dict) or hook.get("type") != "http":
        return None
    url = hook.get("url")
    match = _URL.fullmatch(url) if isinstance(url, str) else None
    if match is None or match.group(2) != host or not 0 < int(match.group(1)) < 65536:
        return None
    return int(match.group(1))


def listening(port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def status(port: int, timeout: float = 2.0) -> dict[str, object] | None:
    """The status of filecache's http server on ``port`` (None: nothing, or not ours)."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", "/status", headers={HEADER: "status"})
        response = connection.getresponse()
        body = response.read()
        found = json.loads(body) if response.status == 200 else None
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        connection.close()
    return found if isinstance(found, dict) else None


def _folder(env: Mapping[str, str] | None = None) -> str | None:
    from filecache.adapters.hosts.hook_client import Refused, socket_folder

    try:
        return socket_folder(env)
    except (Refused, OSError):
        return None


def ensure_running(ports: list[int]) -> list[int]:
    """Start a detached server on each of ``ports`` where nothing listens (none when
    ``FILECACHE_HOOK_SERVER=0``); returns the ports started, without waiting for them. Racing
    starts are harmless: the second cannot bind the port and exits."""
    if os.environ.get("FILECACHE_HOOK_SERVER") == "0" or not Path("/proc/net/tcp").exists():
        return []
    started = []
    for port in dict.fromkeys(ports):
        if listening(port, 0.2):
            continue
        # sh starts the server in the background and exits at once (waited for here), so the
        # server is init's child: a resident caller keeps no zombie when it exits.
        command = ["/bin/sh", "-c", '"$@" </dev/null >/dev/null 2>&1 &', "filecache-http",
                   sys.executable, "-I", "-m", "filecache.adapters.hosts.hook_http", "--port",
                   str(port)]  # fmt: skip
        subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                       cwd="/", timeout=10, check=False)  # fmt: skip
        started.append(port)
    return started


def _pid_file(folder: str, port: int) -> Path:
    return Path(folder) / f"http-{port}.pid"


def _is_server(pid: int, port: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"filecache.adapters.hosts.hook_http" in argv and str(port).encode() in argv


def stop_servers(env: Mapping[str, str] | None = None) -> list[int]:
    """End the http servers recorded in the hook socket folder of ``env`` (default: this
    process's; SIGTERM, each checked to be such a server by its command line); their pids."""
    folder = _folder(env)
    stopped: list[int] = []
    for path in Path(folder).glob("http-*.pid") if folder else []:
        port = path.stem.removeprefix("http-")
        try:
            pid = int(path.read_text())
        except (OSError, ValueError):
            continue
        if port.isdigit() and _is_server(pid, int(port)):
            try:
                os.kill(pid, signal.SIGTERM)
                stopped.append(pid)
            except OSError:
                pass
        path.unlink(missing_ok=True)
    return stopped


def serve(port: int, idle: float | None = None) -> int:
    """Answer hook requests on 127.0.0.1:``port`` until killed, or idle for ``idle`` seconds
    (default ``FILECACHE_HOOK_SERVER_IDLE``, else ``IDLE_SECONDS``)."""
    if not Path("/proc/net/tcp").exists():
        print("hook_http: needs Linux's /proc/net/tcp to check who calls", file=sys.stderr)
        return 2
    if idle is None:
        idle = float(os.environ.get("FILECACHE_HOOK_SERVER_IDLE") or IDLE_SECONDS)
    try:
        server = HookHTTPServer(("127.0.0.1", port), _Handler, idle)
    except OSError as exc:  # another server took the port first
        print(f"hook_http: 127.0.0.1:{port}: {exc.strerror}", file=sys.stderr)
        return 1
    from filecache.adapters.hosts.base import pool
    from filecache.adapters.hosts.registry import host_module

    host_module("claude-code")  # warm before the first call

    pool()  # each root's store stays open between calls
    folder = _folder()
    record = _pid_file(folder, port) if folder else None
    if record is not None:
        record.write_text(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    watcher = threading.Thread(target=_stop_when_idle, args=(server,), daemon=True)
    watcher.start()
    with server:
        server.serve_forever()
    if record is not None and record.exists() and record.read_text() == str(os.getpid()):
        record.unlink(missing_ok=True)
    return 0


def _stop_when_idle(server: HookHTTPServer) -> None:
    while not server.is_idle():
        time.sleep(min(5.0, server.idle or 5.0))
    server.shutdown()


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) != 2 or args[0] != "--port" or not args[1].isdigit():
        print("usage: python -m filecache.adapters.hosts.hook_http --port N", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(int(args[1])))
