"""A scripted model server reached as ``https://api.anthropic.com``, on loopback only.

Some of Claude Code turns on only against the Anthropic API itself: Code Mode in ``claude -p``
(2.1.332) refuses a session whose ``ANTHROPIC_BASE_URL`` names any other host ("for now claude
-p and Agent SDK apps get it only on the Anthropic API"), so a test cannot point Claude Code at
``ScriptedModel.base_url``. Instead Claude Code keeps its default address and gets
``HTTPS_PROXY`` (``Tunnel``, on 127.0.0.1) and ``NODE_EXTRA_CA_CERTS`` (a throwaway CA that
``openssl`` makes for the one test): the proxy answers ``CONNECT api.anthropic.com:443`` by
ending TLS itself, with a certificate for that name signed by the CA, and relays the bytes to a
``LoopbackServer`` (the scripted model, which records every request). Every other host is
refused (403) and listed in ``refused``, so nothing leaves the machine.
"""

from __future__ import annotations

import select
import shutil
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loopback import LoopbackServer

HOST = "api.anthropic.com"


def openssl() -> str | None:
    """The ``openssl`` command the CA is made with (None: not installed)."""
    return shutil.which("openssl")


def make_ca(folder: Path) -> tuple[Path, Path, Path]:
    """A CA (``ca.pem``) and a certificate for ``HOST`` it signed, with its key: the paths
    ``(ca, certificate, key)``. Valid two days; made anew for each test."""
    tool = openssl()
    assert tool is not None, "openssl is not installed"
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, csr = folder / "server.pem", folder / "server.key", folder / "server.csr"
    ext = folder / "server.ext"
    ext.write_text(
        f"subjectAltName=DNS:{HOST}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )

    def run(*args: str | Path) -> None:
        subprocess.run([tool, *map(str, args)], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
        "-days", "2", "-subj", "/CN=filecache test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", f"/CN={HOST}")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", ext)  # fmt: skip
    return ca, cert, key


class Tunnel:
    """The HTTPS proxy; a context manager. ``env`` goes into the host's environment."""

    def __init__(self, upstream: LoopbackServer, folder: Path) -> None:
        self.ca, cert, key = make_ca(folder)
        self.refused: list[str] = []
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.set_alpn_protocols(["http/1.1"])
        host, port = upstream.address
        tunnel = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def refuse(self) -> None:
                tunnel.refused.append(self.path)
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.close_connection = True

            def do_CONNECT(self) -> None:  # noqa: N802
                if self.path != f"{HOST}:443":
                    self.refuse()
                    return
                self.send_response(200)
                self.end_headers()
                self.wfile.flush()
                self.close_connection = True
                self.connection.settimeout(60)
                try:
                    inner = context.wrap_socket(self.connection, server_side=True)
                except (OSError, ssl.SSLError):
                    return  # the host gave up on the handshake: its own error stands
                with inner, socket.create_connection((host, port), timeout=60) as back:
                    _relay(inner, back)

            do_GET = do_POST = do_PUT = do_DELETE = refuse  # noqa: N815 (plain HTTP: refused)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def env(self) -> dict[str, str]:
        host, port = self._server.server_address[:2]
        return {"HTTPS_PROXY": f"http://{host!s}:{port}", "NODE_EXTRA_CA_CERTS": str(self.ca)}

    def __enter__(self) -> Tunnel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _relay(inner: ssl.SSLSocket, back: socket.socket) -> None:
    """Bytes both ways until either side closes (or a minute passes in silence)."""
    while True:
        ready, _, _ = select.select([inner, back], [], [], 60)
        if not ready:
            return
        for sock in ready:
            try:
                data = sock.recv(65536)
                while sock is inner and inner.pending():  # TLS may hold decrypted bytes back
                    data += inner.recv(inner.pending())
            except (OSError, ssl.SSLError):
                return
            if not data:
                return
            (back if sock is inner else inner).sendall(data)
