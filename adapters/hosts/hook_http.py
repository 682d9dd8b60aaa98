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
readable by others). Owned state: none across requests but the store; one thread per request.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["ENV_HEADER", "HEADER", "HookHTTPServer", "http_hook", "peer_uid", "serve"]

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


class _Handler(BaseHTTPRequestHandler):
    server: HookHTTPServer
    protocol_version = "HTTP/1.1"

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

    def _refuse(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:  # noqa: N802
        from filecache.adapters.hosts.host_specs import HOST_NAMES

        host = self.path.strip("/").removeprefix("hook/")
        port = self.server.server_address[1]
        allowed = (
            host in HOST_NAMES
            and self.headers.get(HEADER) == host
            and self.headers.get("Origin") is None
            and self.headers.get("Host") == f"127.0.0.1:{port}"
            and self._peer_is_this_user(port)
        )
        length = int(self.headers.get("Content-Length") or 0)
        if not allowed or not 0 < length <= MAX_BODY:
            self._refuse(403 if not allowed else 413)
            return
        payload = self.rfile.read(length)
        per_call = {name: value for name in _per_call_names()
                    if (value := self.headers.get(ENV_HEADER + name))}  # fmt: skip
        answer = _answer(host, payload, per_call)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


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


def http_hook(port: int, host: str = "claude-code", timeout: int = 30) -> dict[str, object]:
    """The hook entry for Claude Code's settings that calls this server on ``port``."""
    from filecache.adapters.hosts.call_env import PER_CALL

    headers = {HEADER: host, **{ENV_HEADER + name: f"${name}" for name in PER_CALL}}
    return {"type": "http", "url": f"http://127.0.0.1:{port}/hook/{host}", "headers": headers,
            "allowedEnvVars": list(PER_CALL), "timeout": timeout}  # fmt: skip


class HookHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(port: int) -> int:
    """Answer hook requests on 127.0.0.1:``port`` until killed."""
    if not Path("/proc/net/tcp").exists():
        print("hook_http: needs Linux's /proc/net/tcp to check who calls", file=sys.stderr)
        return 2
    import filecache.adapters.hosts.claude_code  # noqa: F401  (warm before the first call)
    from filecache.adapters.hosts.base import pool

    pool()  # each root's store stays open between calls

    with HookHTTPServer(("127.0.0.1", port), _Handler) as server:
        server.serve_forever()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) != 2 or args[0] != "--port" or not args[1].isdigit():
        print("usage: python -m filecache.adapters.hosts.hook_http --port N", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(int(args[1])))
