"""A real LiteLLM proxy for the tests: ``litellm --config`` in front of a scripted upstream on
127.0.0.1, with filecache's callback configured as a team would (docs/litellm.md).

``LiteLLMProxy`` starts ``litellm`` (the [litellm] extra's command, beside this interpreter) in
a session of its own, waits until every worker has started, and stops the whole group. The
proxy reaches nothing but the upstream: ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps its cost map
offline. Without the proxy installed the tests skip; under ``CI`` they fail.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType

import pytest

LITELLM = Path(sys.executable).parent / "litellm"
CALLBACK = "filecache.adapters.litellm_gateway.proxy_handler"
MASTER_KEY = "sk-litellm-master-5f3a9c1e7d2b"  # the key clients send to the proxy
UPSTREAM_KEY = "sk-ant-upstream-9d1b8a4f6e0c"  # the key the proxy sends upstream
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def need_proxy() -> None:
    """Skip (fail under CI) unless the LiteLLM proxy can run here."""
    try:
        import fastapi  # noqa: F401  # the proxy's server: [litellm]'s litellm[proxy]
        import litellm  # noqa: F401
    except ImportError as exc:
        message = f"the LiteLLM proxy is not installed ({exc}); pip install -e '.[litellm]'"
        if os.environ.get("CI"):
            pytest.fail(f"under CI the LiteLLM proxy must be installed: {message}", pytrace=False)
        pytest.skip(message, allow_module_level=True)
    if not LITELLM.exists():
        pytest.fail(f"{LITELLM} is missing although litellm imports", pytrace=False)


def config_text(upstream: str, callbacks: str = CALLBACK) -> str:
    """A proxy config: every model name to the scripted Anthropic upstream, the callback on."""
    return f"""\
model_list:
  - model_name: "*"
    litellm_params:
      model: "anthropic/*"
      api_base: {upstream}
      api_key: {UPSTREAM_KEY}
litellm_settings:
  callbacks: {callbacks}
general_settings:
  master_key: {MASTER_KEY}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LiteLLMProxy:
    """``litellm --config CONFIG`` on 127.0.0.1 with ``workers`` gunicorn workers; a context
    manager. ``env``: added to the proxy's environment (``FILECACHE_GATEWAY_STORE``, ...)."""

    def __init__(self, folder: Path, config: str, env: dict[str, str], workers: int = 2) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.config = folder / "config.yaml"
        self.config.write_text(config, encoding="utf-8")
        self.log = folder / "proxy.log"
        self.port = free_port()
        self.workers = workers
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(folder),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            **OFFLINE,
            **env,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiteLLMProxy:
        args = [str(LITELLM), "--config", str(self.config), "--host", "127.0.0.1"]
        args += ["--port", str(self.port), "--num_workers", str(self.workers), "--run_gunicorn"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                args, cwd=self.folder, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _wait_ready(self) -> None:
        """Until each worker has started and the proxy answers its liveness probe: a bounded
        count of attempts (a busy machine only makes it slower, never wrong)."""
        assert self.proc is not None
        for _attempt in range(3000):  # 100 ms apart: minutes on any machine
            assert self.proc.poll() is None, self.log.read_text(errors="replace")
            started = self.log.read_text(errors="replace").count("Application startup complete")
            if started >= self.workers and self._live():
                return
            time.sleep(0.1)
        raise AssertionError(f"the proxy never started:\n{self.log.read_text(errors='replace')}")

    def _live(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/health/liveliness", timeout=5) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def text(self) -> str:
        """The proxy's output so far (its log and the callback's warnings)."""
        return self.log.read_text(errors="replace")
