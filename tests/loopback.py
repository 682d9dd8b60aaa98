"""What every scripted model API of the tests shares: an HTTP server on 127.0.0.1 (port 0: the OS
picks) in a daemon thread, used as a context manager, that records each JSON request body it
accepts, so a test asserts what the host sent, never filecache's own records.

A server subclasses ``LoopbackServer`` and answers in ``post(reply, path, raw, body)``: ``path``
without its query, ``raw`` the body's bytes, ``body`` their JSON (a body that is not JSON gets
``bad_json`` and never reaches ``post``); a ``GET`` goes to ``get(reply, path)``
(``not_found`` unless a server answers it). ``reply`` sends a JSON answer (``reply.json``) or opens
a server-sent-event stream (``reply.stream``) that ends with the connection. Nothing here
touches the network beyond the loopback socket it binds.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar


class Reply:
    """The answer to one request (one handler's socket)."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self._handler = handler

    @property
    def path(self) -> str:
        """The request's path, its query included."""
        return self._handler.path

    def json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        handler = self._handler
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def stream(self, chunks: Iterable[str], *, no_cache: bool = False) -> None:
        """A ``text/event-stream`` of ``chunks`` (each a whole event, its blank line included);
        the connection closes after it."""
        handler = self._handler
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        if no_cache:
            handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        for chunk in chunks:
            handler.wfile.write(chunk.encode())
        handler.wfile.flush()
        handler.close_connection = True


class LoopbackServer:
    """The server; a context manager. ``requests``: the bodies ``post`` recorded (``record``)."""

    not_found: ClassVar[Any] = {"error": "not found"}
    bad_json: ClassVar[Any] = {"error": "bad json"}

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_HEAD(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                server.get(Reply(self), self.path.split("?", 1)[0])

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    Reply(self).json(400, server.bad_json)
                    return
                server.post(Reply(self), self.path.split("?", 1)[0], raw, body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def post(self, reply: Reply, path: str, raw: bytes, body: dict[str, Any]) -> None:
        raise NotImplementedError

    def get(self, reply: Reply, path: str) -> None:
        """A ``GET``: ``not_found`` unless a server answers it."""
        reply.json(404, self.not_found)

    def record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def base_url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
