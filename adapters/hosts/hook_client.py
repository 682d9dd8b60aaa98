"""The hook command's first module: a thin client of the resident hook server.

``python -I -m filecache.adapters.hosts HOST`` (the command ``filecache install`` writes) runs
``main`` here. It imports nothing but the interpreter's built-in parts (``_socket``, ``_sha256``;
``fcntl`` and ``select`` only to start a server), so a hook call costs one bare interpreter start
and a round trip on a Unix socket: filecache itself is loaded once, by the resident server
(``hook_server``), which runs the same ``registry.run_hook`` a process per call would.

The call (``call``):
1. The server's socket is ``<folder>/<identity>.sock``: ``identity`` hashes everything that
   changes an answer and is fixed per process (uid, the mount namespace and root folder it
   sees, interpreter, where this code is installed, umask, ``FILECACHE_*``, ``HOME``,
   ``XDG_*``, ``LANG``/``LC_*``, libpq's ``PG*``); the server checks the code it runs against
   the disk on every call, and that the peer sees the files it sees (``SO_PEERCRED``).
   ``socket_folder`` is
   ``$XDG_RUNTIME_DIR/filecache``, else ``$XDG_CACHE_HOME/filecache/run``, else (a path too long
   for ``AF_UNIX``) ``$TMPDIR/filecache-<uid>``; a folder that is not ours, or that others may
   enter, is refused.
2. No server listening: one is started, detached (double fork, a new session, stdio on
   ``/dev/null``), under a lock so that racing hooks start one; the starter waits until it
   listens (``START_TIMEOUT``).
3. The exchange: the request; the server answers ``R`` (ready) or ``F`` (run it yourself: the
   server is stale, busy or refuses this call); the client says ``G`` (go) only if it still
   waits, then reads ``A`` and the answer, and says ``K`` (taken). An answer without ``K`` (the
   client gave up or was killed) is abandoned by the server: nothing relies on it.

In-process fallback (today's path: ``registry.run_hook`` in this process): no usable folder, no
server within the bounds, ``F``, or a connection that ends before the answer (the server died
mid-call; a call it committed is then a retry with the same call id, which ``Session`` answers
exactly once). A server that said ``R`` and got ``G`` but does not answer within
``ANSWER_TIMEOUT`` is given up on with no answer (the host's own output stands, as when a hook
times out), never run a second time beside it. ``FILECACHE_HOOK_SERVER=0`` turns the server off.
A client installed in the user's site-packages (``pip install --user``, which ``-I`` leaves off
``sys.path``) adds that folder, for the server it starts and for an in-process call.
Nothing here raises into the host: the exit status is 0 and failures are one line in the hook
log.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from collections.abc import Mapping

    from filecache.adapters.hosts.host_specs import HostSpec

try:
    import _socket
except ImportError:  # pragma: no cover - every CPython on a POSIX system has it
    import socket as _socket  # type: ignore[no-redef]  # the same names, one module up

__all__ = [
    "ANSWER_TIMEOUT",
    "HOSTS",
    "MAGIC",
    "call",
    "identity",
    "in_process",
    "main",
    "ping",
    "server_sockets",
    "socket_folder",
    "stop_servers",
    "view",
]

MAGIC = b"FCH1"
MAX_FIELD = 64 << 20  # bytes of one request field (a larger payload runs in-process)
SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux (104 - 1 on the BSDs: checked too)
CONNECT_TIMEOUT = 1.0
READY_TIMEOUT = 3.0  # from the request to the server's "R"
START_TIMEOUT = 10.0  # a server importing filecache on a loaded machine


def _specs() -> tuple[HostSpec, ...]:
    """``host_specs.SPECS`` (the module imports nothing): from the package, or in a bare
    ``python -I -S .../hook_client.py`` start (no package on ``sys.path``) from this file's
    folder; ``()`` when it is not there (the client outlived its package: any host's call then
    finds no filecache, and says so in the log)."""
    if __package__:
        from filecache.adapters.hosts.host_specs import SPECS

        return SPECS
    else:  # pragma: no cover - the installed hook command's start
        sys.path.insert(0, _HERE)
        try:
            # The same file as a top-level module: mypy knows it only by its package's name.
            from host_specs import SPECS as bare  # type: ignore[import-not-found]
        except ImportError:
            return ()
        finally:
            del sys.path[0]
        specs: tuple[HostSpec, ...] = bare
        return specs


_HERE = os.path.dirname(os.path.abspath(__file__))
_SPECS = _specs()
HOSTS: tuple[str, ...] = tuple(s.name for s in _SPECS)
ANSWER_TIMEOUT: dict[str, float] = {s.name: s.answer_timeout for s in _SPECS}
"""Seconds after ``G`` before the client gives up; below each host's hook timeout as installed
(``host_specs.HostSpec.answer_timeout``)."""
_IDENTITY_PREFIXES = ("FILECACHE_", "XDG_", "LC_", "PG")  # PG*: libpq's, for a store URL
_IDENTITY_NAMES = ("HOME", "LANG")
# call_env.PER_CALL (not imported: it loads contextvars)
_PER_CALL = ("CLAUDE_PROJECT_DIR", "CLAUDE_CODE_EXPERIMENTAL_CODE_MODE")


class Refused(Exception):
    """The socket folder or socket is not safe to use (the message says why)."""


# -- identity and the socket ----------------------------------------------------------------------


def identity(env: Mapping[str, str] | None = None) -> str:
    """The digest of everything fixed per process that changes a hook's answer."""
    env = os.environ if env is None else env
    mask = os.umask(0o022)
    os.umask(mask)
    parts = [
        f"uid={os.getuid()}", f"python={sys.executable}", f"version={sys.version}",
        f"code={_HERE}", f"umask={mask:o}", f"isolated={sys.flags.isolated}",
        f"view={view()}",
        *sorted(f"{k}={v}" for k, v in env.items()
                if k.startswith(_IDENTITY_PREFIXES) or k in _IDENTITY_NAMES),
    ]  # fmt: skip
    return _sha256_hex("\0".join(parts).encode("utf-8", "surrogateescape"))[:24]


def view(pid: int | str = "self") -> str:
    """Which file system process ``pid`` sees: its mount namespace and its root folder (a
    container or sandbox sharing HOME and the venv path sees other files under the same
    paths). ``""`` where ``/proc`` does not say (not Linux: the same machine's one view)."""
    try:
        mnt = os.readlink(f"/proc/{pid}/ns/mnt")
        st = os.stat(f"/proc/{pid}/root")
    except OSError:
        return ""
    return f"{mnt}:{st.st_dev}:{st.st_ino}"


def _sha256_hex(data: bytes) -> str:
    try:  # the built-in sha256 of 3.11 (hashlib loads OpenSSL: a millisecond more per hook)
        from _sha256 import sha256  # type: ignore[import-not-found]  # CPython's, no stubs
    except ImportError:
        from hashlib import sha256
    return str(sha256(data).hexdigest())


def _candidates(env: Mapping[str, str]) -> list[str]:
    folders = []
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        folders.append(os.path.join(runtime, "filecache"))
    cache = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if os.path.isabs(cache):
        folders.append(os.path.join(cache, "filecache", "run"))
    folders.append(os.path.join(env.get("TMPDIR") or "/tmp", f"filecache-{os.getuid()}"))
    return folders


def socket_folder(env: Mapping[str, str] | None = None, ident: str | None = None) -> str:
    """The folder of this user's hook sockets: the first candidate whose socket path fits in
    ``AF_UNIX``, created 0700. Raises ``Refused`` when it is not a folder of ours that only we
    may enter (or no candidate fits)."""
    env = os.environ if env is None else env
    name = f"{ident or identity(env)}.sock"
    for folder in _candidates(env):
        if len(os.fsencode(os.path.join(folder, name))) <= SUN_PATH_MAX:
            _ensure_private(folder)
            return folder
    raise Refused("every socket folder's path is too long for a Unix socket")


def _ensure_private(folder: str) -> None:
    parent = os.path.dirname(folder)
    try:
        os.makedirs(parent, exist_ok=True)
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise Refused(f"{folder}: cannot create it ({exc.strerror})") from exc
    st = os.lstat(folder)
    if (st.st_mode & 0o170000) != 0o040000:
        raise Refused(f"{folder}: not a folder (a link or a file is refused)")
    if st.st_uid != os.getuid():
        raise Refused(f"{folder}: owned by uid {st.st_uid}, not by this user")
    if st.st_mode & 0o077:
        raise Refused(f"{folder}: mode {st.st_mode & 0o777:o}; only its owner may enter it (0700)")


def _check_socket(path: str) -> None:
    st = os.lstat(path)  # FileNotFoundError: no server
    if (st.st_mode & 0o170000) != 0o140000 or st.st_uid != os.getuid():
        raise Refused(f"{path}: not a socket of this user")


def _peer_uid_ok(sock: _socket.socket) -> bool:
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:  # not Linux: the 0700 folder is the check
        return True
    creds = sock.getsockopt(_socket.SOL_SOCKET, option, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(creds[4:8], sys.byteorder) == os.getuid()


def peer_pid(sock: _socket.socket) -> int | None:
    """The pid of the process at the other end (Linux), else None."""
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return None
    return int.from_bytes(sock.getsockopt(_socket.SOL_SOCKET, option, 12)[0:4], sys.byteorder)


def _connect(path: str) -> _socket.socket | None:
    """A connection to the server at ``path``, None when none listens there."""
    try:
        _check_socket(path)
    except FileNotFoundError:
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        sock.connect(path)
    except OSError:  # refused (a stale socket), timed out (a full backlog)
        sock.close()
        return None
    if not _peer_uid_ok(sock):
        sock.close()
        raise Refused(f"{path}: the process listening is not this user's")
    return sock


# -- the frames -----------------------------------------------------------------------------------


def encode_request(op: str, ident: str, host: str, cwd: str, env: Mapping[str, str],
                   args: list[str], payload: bytes) -> bytes:  # fmt: skip
    """``MAGIC``, a field count, then each field as a 4-byte length and its bytes."""
    fields = [
        op.encode(), ident.encode(), host.encode(), os.fsencode(cwd),
        b"\0".join(os.fsencode(f"{k}={v}") for k, v in env.items()),
        b"\0".join(os.fsencode(a) for a in args), payload,
    ]  # fmt: skip
    out = [MAGIC, len(fields).to_bytes(4, "big")]
    for field in fields:
        out += [len(field).to_bytes(4, "big"), field]
    return b"".join(out)


def recv_exact(sock: _socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes; raises ``EOFError`` when the peer closes first."""
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class _GaveUp(Exception):
    """The server took the call (``G``) but did not answer in time."""


def _exchange(sock: _socket.socket, request: bytes, answer_timeout: float) -> bytes | None:
    """The server's answer, or None when the call must run in this process."""
    try:
        sock.settimeout(READY_TIMEOUT)
        sock.sendall(request)
        if recv_exact(sock, 1) != b"R":
            return None  # "F": stale, busy or refused; anything else: not our server
        sock.sendall(b"G")
    except (OSError, EOFError):
        return None  # it never started the call
    try:
        sock.settimeout(answer_timeout)
        if recv_exact(sock, 1) != b"A":
            return None
        size = int.from_bytes(recv_exact(sock, 4), "big")
        answer = recv_exact(sock, size)
    except TimeoutError as exc:
        raise _GaveUp(
            f"the hook server took the call but gave no answer in {answer_timeout:g} s"
        ) from exc
    except (OSError, EOFError):
        return None  # it died mid-call: run it here (a committed call is a retry of its id)
    try:
        sock.sendall(b"K")  # taken: without it the server forgets the call (a late answer)
    except OSError:
        return b""  # the server cannot know we took it, so it forgets: stand aside
    return answer


# -- starting a server ----------------------------------------------------------------------------


def _start(folder: str, ident: str, path: str) -> _socket.socket | None:
    """Start the server of ``ident`` unless another hook did (under ``<ident>.lock``), and
    connect to it; None when it is not listening within ``START_TIMEOUT``."""
    import fcntl

    deadline = time.monotonic() + START_TIMEOUT
    lock = os.open(os.path.join(folder, f"{ident}.lock"),
                   os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)  # fmt: skip
    try:
        while True:  # bounded: a holder waits START_TIMEOUT at most, a dead one holds nothing
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.005)
        sock = _connect(path)  # the holder before us may have started it
        if sock is not None:
            return sock
        if not _spawn(path, ident, deadline):
            return None
        return _connect(path)
    finally:
        os.close(lock)  # releases the lock


def _spawn(path: str, ident: str, deadline: float) -> bool:
    """Start ``hook_server`` detached; True once it says it listens on ``path``."""
    import select

    read_end, write_end = os.pipe()
    user = _user_site()
    start = (
        ["-m", "filecache.adapters.hosts.hook_server"]
        if user is None
        else [
            "-c",
            f"import runpy, site; site.addsitedir({user!r}); "
            "runpy.run_module('filecache.adapters.hosts.hook_server', run_name='__main__')",
        ]
    )
    argv = [sys.executable, "-I", *start,
            "--socket", path, "--identity", ident, "--ready-fd", str(write_end)]  # fmt: skip
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            os.close(read_end)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, write_end)
            os.closerange(write_end + 1, 1 << 16)  # the host's pipes must not stay open
            os.set_inheritable(write_end, True)
            os.chdir("/")
            os.execv(sys.executable, argv)
        finally:
            os._exit(127)
    os.close(write_end)
    try:
        os.waitpid(child, 0)
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read_end], [], [], left)[0]:
            return False
        return os.read(read_end, 16).startswith(b"ready")  # b"": it exited first
    finally:
        os.close(read_end)


# -- the call -------------------------------------------------------------------------------------


def _user_site() -> str | None:
    """The user's site-packages when this client is installed there (``pip install --user``):
    ``-I`` leaves it off ``sys.path``, so the server and an in-process call add it (it is the
    user's own folder, where this very file is, not the project's)."""
    import site

    user = site.getusersitepackages()
    return user if _HERE.startswith(os.path.join(user, "")) else None


def in_process(host: str, args: list[str], payload: bytes) -> bytes:
    """The hook run in this process (``registry.run_hook``: never raises); ``b""`` and a line
    in the log when filecache cannot be imported."""
    import site  # under ``-S``: imported, not run (``_user_site`` may have imported it)

    if sys.flags.no_site:  # a ``-S`` start (one call per process): sys.path as site has it
        site.main()
    user = _user_site()
    if user is not None and user not in sys.path:
        site.addsitedir(user)
    try:
        from filecache.adapters.hosts.registry import run_hook
    except ImportError as exc:  # the hook outlived its package: the host's output stands
        log(host, f"cannot import filecache ({exc}); {sys.executable} -I does not have it")
        return b""
    out: bytes = run_hook(host, args, payload)
    return out


def call(host: str, args: list[str], payload: bytes) -> bytes:
    """The answer to one hook call: from the resident server, else in this process."""
    env = os.environ
    if env.get("FILECACHE_HOOK_SERVER") == "0" or not sys.flags.isolated:
        return in_process(host, args, payload)  # not isolated: sys.path is this process's own
    try:
        ident = identity(env)
        folder = socket_folder(env, ident)
        path = os.path.join(folder, f"{ident}.sock")
        sock = _connect(path) or _start(folder, ident, path)
        if sock is None:
            log(host, "the hook server did not start in time; answered in-process")
            return in_process(host, args, payload)
        per_call = {k: env[k] for k in _PER_CALL if k in env}
        request = encode_request("call", ident, host, os.getcwd(), per_call, args, payload)
        try:
            answer = _exchange(sock, request, ANSWER_TIMEOUT.get(host, 25.0))
        finally:
            sock.close()
    except _GaveUp as exc:
        log(host, str(exc))
        return b""
    except (Refused, OSError) as exc:
        log(host, f"hook server not used ({exc}); answered in-process")
        return in_process(host, args, payload)
    return in_process(host, args, payload) if answer is None else answer


def log(host: str, message: str) -> None:
    """One line in the hook log (``base.log_failure``'s file; never raises)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    try:
        os.makedirs(os.path.join(base, "filecache"), exist_ok=True)
        with open(os.path.join(base, "filecache", "hooks.log"), "a", encoding="utf-8") as out:
            out.write(f"{stamp} {host} pid={os.getpid()}: {' '.join(message.split())[:500]}\n")
    except OSError:
        pass


# -- the servers of this user ---------------------------------------------------------------------


def server_sockets(env: Mapping[str, str] | None = None) -> list[str]:
    """The sockets in this user's socket folders (any identity: old servers too)."""
    env = os.environ if env is None else env
    found = []
    for folder in dict.fromkeys(_candidates(env)):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".sock")]
    return found


def ping(path: str, op: str = "ping") -> tuple[int | None, bytes] | None:
    """Ask the server at ``path`` for its status (``op`` ``ping``) or to stop (``stop``):
    (its pid, its JSON answer), or None when no server of this user answers there."""
    try:
        sock = _connect(path)
    except Refused:
        return None
    if sock is None:
        return None
    try:
        sock.settimeout(READY_TIMEOUT)
        pid = peer_pid(sock)
        sock.sendall(encode_request(op, "", "", "/", {}, [], b""))
        if recv_exact(sock, 1) != b"P":
            return None
        return pid, recv_exact(sock, int.from_bytes(recv_exact(sock, 4), "big"))
    except (OSError, EOFError):
        return None
    finally:
        sock.close()


def stop_servers(env: Mapping[str, str] | None = None) -> list[int | None]:
    """Ask every server of this user (in this environment's socket folders) to stop; returns
    the pids of those that said they would."""
    stopped = []
    for path in server_sockets(env):
        answer = ping(path, "stop")
        if answer is not None:
            stopped.append(answer[0])
    return stopped


def main(argv: list[str]) -> int:
    """``python -m filecache.adapters.hosts HOST [ARG...]``: payload on stdin, answer on stdout."""
    if not argv or (HOSTS and argv[0] not in HOSTS):
        print(f"usage: python -m filecache.adapters.hosts {{{','.join(HOSTS)}}} [ARG...]",
              file=sys.stderr)  # fmt: skip
        return 2
    out = call(argv[0], argv[1:], sys.stdin.buffer.read())
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover - ``python -I -S hook_client.py HOST``
    sys.exit(main(sys.argv[1:]))
