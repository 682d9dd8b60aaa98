"""A loopback TCP proxy in front of a PostgreSQL server that can lose one reply.

``Proxy(url)`` listens on 127.0.0.1 and relays every connection to the server of ``url``;
``proxy.url`` is ``url`` pointed at the proxy. ``lose_reply_to(needle)`` arms it: the next
message from a client that contains ``needle`` (a statement's text, or a parameter such as a
call id: psycopg sends prepared statements by name, but their parameters always travel) is
forwarded, the server's whole reply to it is read up to its ``ReadyForQuery`` and thrown away, and
then both sides of that connection are closed. The server has done the work (a commit has
committed); the client only sees its connection die: a lost reply, as a proxy's idle timeout, a
NAT reset or a failover produces it.
"""

from __future__ import annotations

import socket
import threading

from psycopg.conninfo import conninfo_to_dict

from filecache.store.store import ClosesOnExit

__all__ = ["Proxy"]

_READY_FOR_QUERY = b"Z\x00\x00\x00\x05"  # 'Z', length 5, then the status byte


class Proxy(ClosesOnExit):
    """See the module docstring."""

    def __init__(self, url: str) -> None:
        parts = conninfo_to_dict(url)
        self._target = (str(parts.get("host") or "127.0.0.1"), int(parts.get("port") or 5432))
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        scheme, _, rest = url.partition("://")
        userinfo, _, location = rest.rpartition("@")
        path = location.partition("/")[2]
        self.url = f"{scheme}://{userinfo + '@' if userinfo else ''}127.0.0.1:{port}/{path}"
        self._lock = threading.Lock()
        self._needle: bytes | None = None
        self.lost = threading.Event()  # set once a reply was lost
        self._closed = False
        self._then_down = False
        self._down = False
        self._pairs: list[_Pair] = []
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="pg-proxy", daemon=True).start()

    def lose_reply_to(self, needle: bytes, *, then_down: bool = False) -> None:
        """Lose the reply to the next client message that contains ``needle``; ``then_down``:
        then cut every other connection too and refuse new ones until ``up()`` (the server
        is unreachable: nobody can tell whether the work was done)."""
        with self._lock:
            self._needle = needle
            self._then_down = then_down
            self.lost.clear()

    def up(self) -> None:
        """Accept connections again (after ``lose_reply_to(..., then_down=True)``)."""
        with self._lock:
            self._down = False

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                _close(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                down = self._down
            if down:
                _close(client)
                continue
            server = socket.create_connection(self._target)
            pair = _Pair(client, server)
            with self._lock:
                self._sockets += [client, server]
                self._pairs.append(pair)
            threading.Thread(target=self._upstream, args=(pair,), daemon=True).start()
            threading.Thread(target=self._downstream, args=(pair,), daemon=True).start()

    def _upstream(self, pair: _Pair) -> None:
        """Client → server; arms the pair when the needle passes."""
        while True:
            try:
                data = pair.client.recv(65536)
            except OSError:
                data = b""
            if not data:
                pair.close()
                return
            with self._lock:
                if self._needle is not None and self._needle in data:
                    self._needle = None
                    pair.swallow = True
            try:
                pair.server.sendall(data)
            except OSError:
                pair.close()
                return

    def _downstream(self, pair: _Pair) -> None:
        """Server → client, unless swallowing: then read to ReadyForQuery and cut both."""
        swallowed = b""
        while True:
            try:
                data = pair.server.recv(65536)
            except OSError:
                data = b""
            if not data:
                pair.close()
                return
            if pair.swallow:
                swallowed += data
                if _READY_FOR_QUERY in swallowed:
                    # lost is set before any connection closes: the client's error (which the
                    # closing causes) must never be seen before it (a race the tests lost under
                    # load: StoreError raised, lost not yet set)
                    self.lost.set()
                    with self._lock:
                        if self._then_down:
                            self._down = True
                            for other in self._pairs:
                                other.close()
                    pair.close()
                    return
                continue
            try:
                pair.client.sendall(data)
            except OSError:
                pair.close()
                return


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.swallow = False

    def close(self) -> None:
        _close(self.client)
        _close(self.server)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
