"""A model-API stand-in on 127.0.0.1 whose every answer a test chooses, for the gateway's tests.

``RawUpstream(reply)`` serves each request with ``reply(request) -> Reply`` and RECORDS what it
received (method, path with query, headers, the body's exact bytes), so a test checks what the
gateway forwarded, byte for byte. A ``Reply`` is a status, headers and a body, or ``chunks``:
bytes sent one by one with chunked transfer encoding, each after its ``gate`` (a
``threading.Event`` the test sets) when one is given, so a test can prove that the gateway
relays a chunk before the next exists. ``break_after``: after that many chunks the connection is
closed without the terminating chunk (an upstream that dies mid-answer).

State: the recorded requests, appended under a lock by the handler threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names; a repeated header's values joined by ", "
    body: bytes


@dataclass
class Reply:
    status: int = 200
    headers: Sequence[tuple[str, str]] = (("Content-Type", "application/json"),)
    body: bytes = b"{}"
    chunks: Sequence[bytes] | None = None
    gates: Sequence[threading.Event | None] = ()
    break_after: int | None = None
    sent: threading.Event = field(default_factory=threading.Event)  # set after the last write


class RawUpstream:
    def __init__(self, reply: Callable[[Seen], Reply] | None = None) -> None:
        self.reply = reply or (lambda seen: Reply())
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers: dict[str, str] = {}
                for name, value in self.headers.items():
                    key = name.lower()
                    headers[key] = f"{headers[key]}, {value}" if key in headers else value
                seen = Seen(self.command, self.path, headers, body)
                with upstream._lock:
                    upstream.seen.append(seen)
                self._send(upstream.reply(seen))

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any  # noqa: N815

            def _send(self, reply: Reply) -> None:
                self.send_response(reply.status)
                for name, value in reply.headers:
                    self.send_header(name, value)
                if reply.chunks is None:
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    reply.sent.set()
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for index, chunk in enumerate(reply.chunks):
                    gate = reply.gates[index] if index < len(reply.gates) else None
                    if gate is not None:
                        gate.wait(120)
                    if reply.break_after is not None and index >= reply.break_after:
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)
                        reply.sent.set()
                        return
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                reply.sent.set()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that went away mid-answer: what the failure tests make happen

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RawUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
