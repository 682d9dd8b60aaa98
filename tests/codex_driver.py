"""The real Codex CLI, headless, in a throwaway HOME and project, against ``responses_server``.

``codex_binary()`` finds the pinned binary (``FILECACHE_TEST_CODEX``, set by ``.ci/run``'s
``install_codex``); without it the test module is skipped, and under CI (``CI`` set) it fails:
CI installs the binary, so a skip there would hide a test that never ran.

``CodexWorld`` is one user: ``home`` (``HOME``, ``CODEX_HOME=home/.codex``,
``XDG_CACHE_HOME=home/.cache``, where hook failures are logged) and ``project`` (the folder
Codex runs in). ``exec`` runs ``codex exec`` with a scripted provider on the server's port, the
workspace-write sandbox and no approvals, and returns what Codex printed; what the model saw
is in ``server.requests``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from filecache.adapters.hosts.hook_client import stop_servers
from hook_servers import servers
from responses_server import ScriptedResponses

CODEX_VERSION = "0.171.0"
MODEL = "gpt-5.5"  # a name with bundled metadata: without it Codex drops the apply_patch tool


def codex_binary() -> str:
    """The pinned ``codex`` binary, or skip (fail under CI)."""
    path = os.environ.get("FILECACHE_TEST_CODEX", "")
    if path and os.access(path, os.X_OK):
        return path
    message = (
        f"the Codex CLI binary is not installed (FILECACHE_TEST_CODEX={path!r}); install it: "
        f"npm install --prefix ~/.cache/filecache-ci/npm-codex-{CODEX_VERSION} "
        f"@openai/codex@{CODEX_VERSION}, or run bash .ci/run"
    )
    if os.environ.get("CI"):
        pytest.fail(f"under CI the Codex CLI must be installed: {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)


@dataclass(frozen=True)
class CodexRun:
    returncode: int
    stdout: str
    stderr: str


class CodexWorld:
    def __init__(self, base: Path, binary: str) -> None:
        self.binary = binary
        self.home = base / "home"
        self.project = base / "project"
        self.codex_home = self.home / ".codex"
        self.codex_home.mkdir(parents=True)
        self.project.mkdir()
        # The hooks' resident server: its socket folder (short: AF_UNIX), stopped by ``close``.
        self.runtime = Path(tempfile.mkdtemp(prefix="fc-run-", dir="/tmp"))

    def close(self) -> None:
        """Stop the resident hook servers this user's hooks started."""
        stop_servers(self.env)
        shutil.rmtree(self.runtime, ignore_errors=True)

    def servers(self) -> list[dict[str, object]]:
        return servers(self.env)

    @property
    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "SCRIPTED_API_KEY": "not-a-real-key",
            "LANG": "C.UTF-8",
            "XDG_RUNTIME_DIR": str(self.runtime),
        }

    @property
    def hook_log(self) -> Path:
        return self.home / ".cache" / "filecache" / "hooks.log"

    @property
    def store(self) -> Path:
        return self.project / ".filecache" / "cache.db"

    def filecache(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The ``filecache`` CLI as this user (``python -m filecache``), from the project."""
        return subprocess.run(
            [sys.executable, "-m", "filecache", *args],
            cwd=self.project, env=self.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def exec(
        self,
        server: ScriptedResponses,
        prompt: str = "go",
        *extra: str,
        resume: str | None = None,
    ) -> CodexRun:
        provider = (
            f'model_providers.scripted={{name="scripted", base_url="{server.url}", '
            f'wire_api="responses", env_key="SCRIPTED_API_KEY"}}'
        )
        head = [self.binary, "exec"]
        if resume is not None:
            head += ["resume", resume]
        command = [
            *head, "--skip-git-repo-check", "-m", MODEL,
            "-c", "model_provider=scripted", "-c", provider, "-c", 'approval_policy="never"',
            "-c", 'sandbox_mode="workspace-write"', *extra, "--json", prompt,
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=self.project, env=self.env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=300,
        )  # fmt: skip
        return CodexRun(done.returncode, done.stdout, done.stderr)
