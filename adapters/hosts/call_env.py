"""What one hook call's process would have seen: its working folder and the variables read per call.

A hook runs as one process per call, so ``os.getcwd()`` and ``os.environ`` are that call's. The
resident hook server (``hook_server``) answers the calls of many projects in one process, so a
host module reads those through ``getcwd``/``getenv`` here: inside ``calling`` (the server, one
call per thread) they are the calling client's, outside it the process's own. Only the names in
``PER_CALL`` are per call; every other variable that changes an answer is part of the server's
identity (``hook_client.identity``), so it is the same in the server as in the client.

Owned state: one ``ContextVar``, set per thread by the server for the duration of one call.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["PER_CALL", "calling", "getcwd", "getenv"]

PER_CALL = ("CLAUDE_PROJECT_DIR", "CLAUDE_CODE_EXPERIMENTAL_CODE_MODE")
"""Variables a host sets per project or session (so per call of a per-user server), sent with
each call: the project folder, and whether Claude Code's Code Mode is on (``claude_code``)."""

_CALL: ContextVar[tuple[str, Mapping[str, str]] | None] = ContextVar("filecache_call", default=None)


@contextmanager
def calling(cwd: str, env: Mapping[str, str]) -> Iterator[None]:
    """Run the block as a call made from ``cwd`` (absolute) with ``env`` (``PER_CALL`` names)."""
    if not os.path.isabs(cwd):
        raise ValueError(f"a call's working folder must be absolute, not {cwd!r}")
    resolved = {k: os.path.join(cwd, v) if k == "CLAUDE_PROJECT_DIR" and v else v
                for k, v in env.items() if k in PER_CALL}  # fmt: skip
    token = _CALL.set((cwd, resolved))
    try:
        yield
    finally:
        _CALL.reset(token)


def getcwd() -> str:
    """The calling process's working folder."""
    call = _CALL.get()
    return os.getcwd() if call is None else call[0]


def getenv(name: str) -> str | None:
    """A ``PER_CALL`` variable as the calling process has it (None: unset)."""
    call = _CALL.get()
    return os.environ.get(name) if call is None else call[1].get(name)
