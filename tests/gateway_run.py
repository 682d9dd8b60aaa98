"""The gateway as its users start it, for the tests: ``filecache gateway`` in a subprocess.

``foreground(tmp, *args)`` runs ``python -m filecache gateway --port 0 ...`` (its store and log
under ``tmp``), waits for the URL it prints and stops it at the end. ``user_env(tmp)`` is a
user's environment for the background gateway (``filecache run``): its own HOME, cache and
runtime folder (short: the hook socket folder's rules apply), stopped and removed at the end by
``stop_user_gateways`` (``stop_and_wait``: until they have exited). ``log_and_store_bytes`` is
everything a gateway wrote (log, store) for the grep tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


def base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }


@contextmanager
def foreground(tmp: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Running]:
    log = tmp / "gateway.err"
    command = [sys.executable, "-m", "filecache", "gateway", "--port", "0"]
    if "--store" not in args:
        command += ["--store", str(tmp / "gateway.db")]
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [*command, *args], stdout=subprocess.PIPE, stderr=err,
            env=env or base_env(tmp / "home"), cwd=tmp,
        )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("http://"), log.read_text()
        yield Running(proc, url, log)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(60)
        if proc.stdout is not None:
            proc.stdout.close()


@contextmanager
def user_env(tmp: Path) -> Iterator[dict[str, str]]:
    """A user's environment with a runtime folder of its own; its gateways stopped at the end."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="fc-gw-", dir="/tmp"))
    env = base_env(home) | {"XDG_RUNTIME_DIR": str(run)}
    try:
        yield env
    finally:
        stop_user_gateways(env)
        shutil.rmtree(run, ignore_errors=True)


def stop_user_gateways(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "filecache", "gateway", "--stop"], env=env,
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip


def stop_and_wait(env: dict[str, str]) -> None:
    """Stop this user's background gateways and wait until each has exited (they write the
    counts still queued before they do); bounded polling, the gateway is not our child."""
    import threading

    from filecache.adapters.gateway.user_gateway import stop_gateways

    for pid in stop_gateways(env):
        for _ in range(1200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            threading.Event().wait(0.05)
        else:
            raise AssertionError(f"the gateway {pid} did not exit")


def log_and_store_bytes(*paths: Path) -> bytes:
    """The bytes of every file at or under ``paths`` (a log, a store and its WAL, a folder)."""
    out = []
    for path in paths:
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        out += [p.read_bytes() for p in files if not p.is_socket()]
    return b"".join(out)
