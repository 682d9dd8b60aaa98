"""mini-swe-agent: an Environment whose file reads are served through the cache.

::

    from minisweagent.environments.local import LocalEnvironment
    from filecache.adapters.mini_swe_agent import CachedEnvironment

    env = CachedEnvironment(LocalEnvironment(cwd=str(root)), cache)
    with cache.conversation(run_id):
        DefaultAgent(model, env, **config).run(task)

mini-swe-agent's model has only a shell. ``CachedEnvironment`` wraps any mini-swe-agent
environment (``execute(action, cwd="", *, timeout=None) -> dict``): a read-like command
(``cat F``, ``nl -ba F``, ``sed -n 'A,Bp' F``, ``head``/``tail``; exactly what
``filecache.shell.bash_reads.parse_read`` recognises) is answered by ``serve_bash`` — the command's
own output the first time, a FileRef or a diff after that — and every other command runs in the
wrapped environment, after which the files the model holds are re-hashed, so a ``sed -i`` or a
``git checkout`` counts as a change. In tool-call mode the action's ``tool_call_id`` is the id
FileRefs name. Everything else (``config``, ``get_template_vars``, ``serialize``) is the
wrapped environment's.

Invariant: reads are served only when the command runs in the cache's root (the directory the
paths are relative to); anywhere else every command simply runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filecache.shell.bash_reads import serve_bash

from .frameworks import resolve

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.session import Session

__all__ = ["CachedEnvironment"]


class CachedEnvironment:
    """A mini-swe-agent environment that serves file reads from a filecache session.

    Args:
        inner: the environment that runs commands (``LocalEnvironment``, ``DockerEnvironment``
            with the root mounted at the same path, ...).
        target: the ``Session``, or the ``FileCache`` whose bound conversation answers.
    """

    def __init__(self, inner: Any, target: Session | FileCache) -> None:
        self.inner = inner
        self.target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def execute(self, action: Any, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        """Run ``action`` (``{"command": ..., "tool_call_id"?: ...}``) or serve it as a read."""
        command = action.get("command", "") if isinstance(action, dict) else str(action)
        call_id = action.get("tool_call_id") if isinstance(action, dict) else None
        session = resolve(self.target, "CachedEnvironment")
        if not self._in_root(session, cwd):
            return dict(self.inner.execute(action, cwd, timeout=timeout))
        ran: dict[str, Any] = {}

        def run(_: str) -> str:
            ran.update(self.inner.execute(action, cwd, timeout=timeout))
            return str(ran.get("output", ""))

        output = serve_bash(session, command, run, call_id if isinstance(call_id, str) else None)
        if ran:
            return {**ran, "output": output}
        return {"output": output, "returncode": 0, "exception_info": ""}

    def _in_root(self, session: Session, cwd: str) -> bool:
        config = getattr(self.inner, "config", None)
        where = cwd or getattr(config, "cwd", "") or os.getcwd()
        try:
            return Path(where).resolve() == session.engine.root
        except OSError:
            return False
