"""The resident hook server: filecache loaded once per user, answering the thin clients' calls.

``hook_client`` starts it (``python -I -m filecache.adapters.hosts.hook_server --socket PATH
--identity ID --ready-fd FD``), detached, when no server of its identity listens. Each call is
``registry.run_hook(host, args, payload)`` (it never raises) in a thread of its own, inside
``call_env.calling`` (the client's working folder and per-call variables), so parallel tool calls
of one assistant turn are answered at once; the store's locks and turns order them as they
order processes.

Invariants:
- It answers only what a process per call would: its identity is the clients' (``hook_client.
  identity``: uid, interpreter, install location, umask, the environment that changes answers),
  and before every call the code it runs (every file under filecache's package folders, the
  folders on ``sys.path``, the key file) is compared with what it loaded: a change, and it
  answers ``F`` (the client runs the call itself), stops taking calls and exits.
- A call it took (``G`` received) is answered or the process died: there is no third way out.
  A call it did not take left no trace. An answer the client did not take (no ``K`` after it:
  the client gave up at its timeout, or the host killed it) leaves no fact: the call is
  abandoned (``registry.abandon``), on every host.
- Only this user talks to it: the socket is 0600 in a 0700 folder, and a peer of another uid
  (``SO_PEERCRED``) is hung up on. Only a peer that sees the same files is answered: its mount
  namespace and root folder (``/proc/<pid>/ns/mnt``, ``/proc/<pid>/root``) are this server's
  (they are part of the identity too); any other is told ``F`` and answers in its own process.
- It ends on ``SIGTERM``/``SIGINT`` or a ``stop`` request (the calls in flight finish first),
  after ``FILECACHE_HOOK_SERVER_IDLE`` seconds without a call (default 600), and when its
  socket path no longer names its socket (deleted, replaced by another server).

A server whose call threads are all busy still reads a few connections more (``_control``)
and answers ``ping`` and ``stop`` there. A transcript or rollout that is not a regular file (a
FIFO, ``/dev/zero``) is refused at once (``regular_files``), so no call blocks on one.

Owned state: the listening socket, the stop flag, the live call threads and the count of
control threads (the main thread and ``_lock``); nothing of a call outlives it but what it
committed to the store.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import threading
import time
from typing import Any

from filecache.adapters.hosts import call_env
from filecache.adapters.hosts.registry import HOSTS, abandon, host_module, run_hook

__all__ = ["IDLE_SECONDS", "MAGIC", "MAX_FIELD", "Server", "code_fingerprint", "main", "recv_exact"]

MAGIC = b"FCH1"  # hook_client's (the client imports nothing of filecache; a test checks both)
MAX_FIELD = 64 << 20
IDLE_SECONDS = 600.0
MAX_CALLS = 32  # calls in flight; more are answered "F" (run in the client's own process)
MAX_CONTROLS = 4  # connections read beyond MAX_CALLS, for ping/stop only
_FIELDS = 7
_READ_TIMEOUT = 5.0  # a client that connects and says nothing does not hold a thread longer
_ACK_TIMEOUT = 10.0  # from the answer to the client's "K" (it sends it as soon as it has read)
_TICK = 1.0
_CODE_SUFFIXES = (".py", ".js", ".scm", ".typed", ".json")


def code_fingerprint() -> tuple[Any, ...]:
    """What the code this process runs is on disk: every file under filecache's package
    folders, the folders on ``sys.path`` (a package installed or upgraded beside it) and the
    key file(s). Cheap (stat calls); compared before every call."""
    import filecache.adapters

    import filecache
    from filecache.store.seal import key_path

    entries: list[tuple[Any, ...]] = []
    seen: set[str] = set()
    for root in [*filecache.__path__, *filecache.adapters.__path__]:
        _walk(os.path.realpath(root), entries, seen)
    for folder in sys.path:
        try:
            st = os.stat(folder or ".")
        except OSError:
            continue
        entries.append((folder, st.st_mtime_ns, st.st_ino))
    for key in (str(key_path()), os.environ.get("FILECACHE_KEY_FILE") or ""):
        try:
            st = os.stat(os.path.expanduser(key))
        except (OSError, ValueError):
            entries.append((key, None))
            continue
        entries.append((key, st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(entries)


def _walk(folder: str, into: list[tuple[Any, ...]], seen: set[str]) -> None:
    if folder in seen:
        return
    seen.add(folder)
    try:
        found = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in found:
        if entry.is_dir(follow_symlinks=False):
            if entry.name != "__pycache__":
                _walk(entry.path, into, seen)
        elif entry.name.endswith(_CODE_SUFFIXES):
            st = entry.stat(follow_symlinks=False)
            into.append((entry.path, st.st_mtime_ns, st.st_size, st.st_ino))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("filecache-agent")
    except PackageNotFoundError:
        return "unknown"


class Server:
    """One listening socket, its calls, and how it ends (see the module docstring)."""

    def __init__(self, path: str, ident: str, idle: float = IDLE_SECONDS) -> None:
        self.path = path
        self.ident = ident
        self.idle = idle
        self.fingerprint = code_fingerprint()
        self.version = _version()
        self.started = time.time()
        self.calls = 0
        self.last = time.monotonic()
        self.stopping = threading.Event()
        self.why = ""
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._controls = 0  # threads answering ping/stop while every call thread is busy
        self._wake_r, self._wake_w = os.pipe()
        self._inode: int | None = None
        self._listener: socket.socket | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def bind(self) -> bool:
        """Listen on the socket path; False when another live server already does."""
        if os.path.lexists(self.path):
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(self.path)
                return False  # a live server: ours is not needed
            except OSError:
                os.unlink(self.path)  # a stale socket of a dead server
            finally:
                probe.close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(self.path)  # 0600 from the start: no window where others may connect
        finally:
            os.umask(old)
        listener.listen(64)
        self._inode = os.lstat(self.path).st_ino
        self._listener = listener
        return True

    def stop(self, why: str) -> None:
        """Take no more calls; the main loop ends once the calls in flight are answered."""
        if not self.stopping.is_set():
            self.why = why
            self.stopping.set()
            os.write(self._wake_w, b"x")

    def serve(self) -> None:
        """Accept calls until stopped, idle, or the socket path is no longer ours."""
        listener = self._listener
        assert listener is not None
        try:
            while not self.stopping.is_set():
                ready = select.select([listener.fileno(), self._wake_r], [], [], _TICK)[0]
                if listener.fileno() in ready:
                    try:
                        conn, _ = listener.accept()
                    except OSError:
                        continue
                    self._dispatch(conn)
                self._check_idle()
        finally:
            listener.close()
            self._unlink()
            for thread in list(self._threads):
                thread.join(60.0)

    def _check_idle(self) -> None:
        try:
            if os.lstat(self.path).st_ino != self._inode:
                self.stop("its socket path names another socket")
                return
        except OSError:
            self.stop("its socket was removed")
            return
        with self._lock:
            idle = not self._threads and time.monotonic() - self.last > self.idle
        if idle:
            self.stop(f"idle for {self.idle:g} s")

    def _unlink(self) -> None:
        try:
            if os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except OSError:
            pass

    def _dispatch(self, conn: socket.socket) -> None:
        with self._lock:
            busy = len(self._threads) >= MAX_CALLS
            control = busy and self._controls < MAX_CONTROLS
            if not busy:
                thread = threading.Thread(target=self._connection, args=(conn,), daemon=True)
                self._threads.add(thread)
            elif control:
                self._controls += 1
                thread = threading.Thread(target=self._control, args=(conn,), daemon=True)
        if busy and not control:
            _send_quietly(conn, b"F")
            conn.close()
            return
        thread.start()

    def _control(self, conn: socket.socket) -> None:
        """A connection while every call thread is busy: ``ping`` and ``stop`` are answered
        (``hook --status`` and ``--stop`` see a busy server), a call is told ``F``."""
        try:
            conn.settimeout(_READ_TIMEOUT)
            if _peer_uid(conn) not in (None, os.getuid()):
                return
            fields = _read_request(conn)
            if fields is None:
                return
            if fields[0] in (b"ping", b"stop"):
                self._answer(conn, fields)
            else:
                conn.sendall(b"F")
        except (OSError, EOFError):
            pass
        finally:
            conn.close()
            with self._lock:
                self._controls -= 1

    # -- one connection ---------------------------------------------------------------------

    def _connection(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(_READ_TIMEOUT)
            if _peer_uid(conn) not in (None, os.getuid()):
                return  # another user's process: nothing is said to it
            fields = _read_request(conn)
            if fields is None:
                return
            self._answer(conn, fields)
        except (OSError, EOFError):
            pass  # the client went away: it answers the call itself if it never said "G"
        except Exception as exc:  # a bug here must not end the server
            from filecache.adapters.hosts.base import log_failure

            log_failure("hook-server", f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _answer(self, conn: socket.socket, fields: list[bytes]) -> None:
        op = fields[0]
        if op in (b"ping", b"stop"):
            if op == b"stop":
                self.stop("asked to stop")
            info = json.dumps(self.info()).encode()
            conn.sendall(b"P" + len(info).to_bytes(4, "big") + info)
            return
        host = fields[2].decode("utf-8", "replace")
        cwd = os.fsdecode(fields[3])
        if (
            op != b"call"
            or fields[1].decode("ascii", "replace") != self.ident
            or host not in HOSTS
            or not os.path.isabs(cwd)
            or not _runs_here(fields[6])
            or self.stopping.is_set()
            or not _same_view(conn)
        ):
            conn.sendall(b"F")
            return
        if code_fingerprint() != self.fingerprint:
            conn.sendall(b"F")
            self._unlink()  # the next client starts a server of the new code
            self.stop("its code or key changed on disk")
            return
        conn.sendall(b"R")
        if recv_exact(conn, 1) != b"G":
            return  # the client gave up before the call started: it runs it itself
        env = dict(_pairs(fields[4]))
        args = [os.fsdecode(a) for a in fields[5].split(b"\0")] if fields[5] else []
        with call_env.calling(cwd, env):
            out = run_hook(host, args, fields[6])
        with self._lock:
            self.calls += 1
            self.last = time.monotonic()
        # Only an answer the client took is a fact: it says "K" once it has the whole answer.
        # A client that gave up (its timeout) or was killed (the host's) never does, and then
        # nothing may rely on the call (its answer, a FileRef or diff, never reached the host).
        try:
            conn.settimeout(_ACK_TIMEOUT)
            conn.sendall(b"A" + len(out).to_bytes(4, "big") + out)
            taken = recv_exact(conn, 1) == b"K"
        except (OSError, EOFError):
            taken = False
        if not taken and out:
            abandon(host, args, fields[6])

    def info(self) -> dict[str, Any]:
        with self._lock:
            calls, idle = self.calls, time.monotonic() - self.last
        return {
            "pid": os.getpid(), "identity": self.ident, "socket": self.path,
            "version": self.version, "python": sys.executable, "started": self.started,
            "calls": calls, "idle_seconds": round(idle, 1), "idle_limit": self.idle,
            "stopping": self.stopping.is_set(),
        }  # fmt: skip


def _same_view(conn: socket.socket) -> bool:
    """Whether the peer sees the file system this server sees (its mount namespace and root,
    by ``SO_PEERCRED``'s pid): a peer in a container or sandbox that shares the socket folder
    is not answered here (``F``: it answers in its own process)."""
    mine = _view()
    if not mine:
        return True  # no /proc: one view per machine
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    pid = int.from_bytes(conn.getsockopt(socket.SOL_SOCKET, option, 12)[0:4], sys.byteorder)
    return bool(pid) and _view(pid) == mine  # pid 0: from another pid namespace


def _view(pid: int | str = "self") -> str:
    """``hook_client.view`` (the client imports nothing of filecache, so it cannot be shared
    without a cycle; a test checks both agree)."""
    try:
        mnt = os.readlink(f"/proc/{pid}/ns/mnt")
        st = os.stat(f"/proc/{pid}/root")
    except OSError:
        return ""
    return f"{mnt}:{st.st_dev}:{st.st_ino}"


def _runs_here(payload: bytes) -> bool:
    """False for a payload whose ``cwd`` is relative: only the client's own process resolves
    it as a process per call would."""
    if b'"cwd"' not in payload:
        return True
    try:
        data = json.loads(payload)
    except ValueError:
        return True  # run_hook says so, in the log, as it would in-process
    cwd = data.get("cwd") if isinstance(data, dict) else None
    return not isinstance(cwd, str) or not cwd or os.path.isabs(cwd)


def _pairs(blob: bytes) -> list[tuple[str, str]]:
    out = []
    for item in blob.split(b"\0") if blob else []:
        name, sep, value = os.fsdecode(item).partition("=")
        if sep and name in call_env.PER_CALL:
            out.append((name, value))
    return out


def _read_request(conn: socket.socket) -> list[bytes] | None:
    if recv_exact(conn, 4) != MAGIC:
        return None
    count = int.from_bytes(recv_exact(conn, 4), "big")
    if count != _FIELDS:
        return None
    fields = []
    for _ in range(count):
        size = int.from_bytes(recv_exact(conn, 4), "big")
        if size > MAX_FIELD:
            conn.sendall(b"F")
            return None
        fields.append(recv_exact(conn, size))
    return fields


def recv_exact(conn: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes; raises ``EOFError`` when the peer closes first."""
    chunks, got = [], 0
    while got < n:
        chunk = conn.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _peer_uid(conn: socket.socket) -> int | None:
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, option, 12)
    return int.from_bytes(creds[4:8], sys.byteorder)


def _send_quietly(conn: socket.socket, data: bytes) -> None:
    try:
        conn.sendall(data)
    except OSError:
        pass


def _warm() -> None:
    """Import now what every call needs, so the first call does not pay for it (and the code
    fingerprint is taken of what is loaded)."""
    import filecache.adapters.hosts.base  # noqa: F401
    import filecache.adapters.hosts.claude_index  # noqa: F401
    import filecache.adapters.hosts.codex_patch  # noqa: F401
    import filecache.adapters.hosts.codex_rollout  # noqa: F401

    import filecache.core.render  # noqa: F401
    import filecache.shell.bash_reads  # noqa: F401
    import filecache.shell.shell_parse  # noqa: F401
    from filecache.store.seal import default_seal

    for host in HOSTS:
        host_module(host)
    default_seal()  # loads (or makes) the key before its file is fingerprinted


def main(argv: list[str]) -> int:
    """Serve until stopped; ``--ready-fd`` gets ``ready`` once the socket listens."""
    opts = dict(zip(argv[0::2], argv[1::2], strict=False))
    path, ident = opts.get("--socket"), opts.get("--identity")
    if not path or not ident:
        print("usage: python -m filecache.adapters.hosts.hook_server --socket PATH "
              "--identity ID [--ready-fd FD]", file=sys.stderr)  # fmt: skip
        return 2
    ready = int(opts["--ready-fd"]) if "--ready-fd" in opts else None
    for name in call_env.PER_CALL:  # the starting client's: each call brings its own
        os.environ.pop(name, None)
    from filecache.adapters.hosts.base import pool

    pool()  # each root's store stays open between calls
    try:
        idle = float(os.environ.get("FILECACHE_HOOK_SERVER_IDLE") or IDLE_SECONDS)
        _warm()
        server = Server(path, ident, idle)
        if not server.bind():
            _ready(ready)  # another server listens there: the client uses it
            return 0
    except Exception as exc:
        from filecache.adapters.hosts.base import log_failure

        log_failure("hook-server", f"did not start: {type(exc).__name__}: {exc}")
        return 1
    signal.signal(signal.SIGTERM, lambda *_: server.stop("SIGTERM"))
    signal.signal(signal.SIGINT, lambda *_: server.stop("SIGINT"))
    _ready(ready)
    server.serve()
    return 0


def _ready(fd: int | None) -> None:
    if fd is not None:
        try:
            os.write(fd, b"ready\n")
            os.close(fd)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
