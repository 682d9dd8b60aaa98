"""Waiting for a server a test started to listen, without reading the clock."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def wait_until_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Wait until the server ``proc`` accepts connections on ``port``; fail with its ``log``
    if it exits first, or after a bounded number of attempts (a count, not a clock: a busy
    machine only makes it slower, never wrong)."""
    for _attempt in range(4000):  # 50 ms apart: minutes on any machine
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.05)
    raise AssertionError(f"the server never listened on port {port}:\n{log.read_text()}")
