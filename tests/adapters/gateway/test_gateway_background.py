"""The user's background gateway (``filecache gateway --background/--status/--stop``, what
``filecache run`` starts): reused while alive and ours, private files, a health check that a
foreign listener cannot pass, idle exit, and ``filecache run`` with a stand-in host binary that
shows what it was started with (the host's own settings untouched; the plain host when the
gateway cannot start).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from gateway_run import user_env
from raw_upstream import RawUpstream

pytest.importorskip("aiohttp", reason="the gateway extra: pip install -e '.[gateway]'")

FAKE_HOST = """#!{python}
import json, os, sys
print(json.dumps({{"argv": sys.argv[1:], "env": {{k: v for k, v in os.environ.items()
      if k in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENCODE_CONFIG_CONTENT")}},
      "pid": os.getpid()}}))
"""


def _fc(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "filecache", *args], env=env, cwd=cwd, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip


def _gone(pid: int) -> bool:
    for _attempt in range(2400):  # 50 ms apart: a hang guard, not a timing
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_started_once_reused_listed_and_stopped(tmp_path: Path) -> None:
    with user_env(tmp_path) as env:
        first = _fc(env, "gateway", "--background", "--json")
        assert first.returncode == 0, first.stderr
        started = json.loads(first.stdout)
        again = json.loads(_fc(env, "gateway", "--background", "--json").stdout)
        assert again == started  # reused
        folder = Path(env["XDG_RUNTIME_DIR"]) / "filecache"
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        files = list(folder.glob("gateway-*"))
        assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
        (listed,) = json.loads(_fc(env, "gateway", "--status", "--json").stdout)
        assert listed["pid"] == started["pid"] and listed["url"] == started["url"]
        # Without the secret the health answer says nothing of the process, and stop is refused.
        with urllib.request.urlopen(started["url"] + "/_filecache/health", timeout=30) as got:
            assert json.loads(got.read()) == {"service": "filecache-gateway"}
        request = urllib.request.Request(started["url"] + "/_filecache/stop", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 403
        refused.value.close()
        stopped = json.loads(_fc(env, "gateway", "--stop", "--json").stdout)
        assert stopped == {"stopped": [started["pid"]]}
        assert _gone(started["pid"])
        assert _fc(env, "gateway", "--status").stdout.strip() == "no background gateway is running"


def test_a_foreign_listener_on_the_recorded_port_is_not_reused(tmp_path: Path) -> None:
    with user_env(tmp_path) as env, RawUpstream() as foreign:
        first = json.loads(_fc(env, "gateway", "--background", "--json").stdout)
        _fc(env, "gateway", "--stop")
        assert _gone(first["pid"])
        (state,) = (Path(env["XDG_RUNTIME_DIR"]) / "filecache").glob("gateway-????????????.json")
        recorded = json.loads(state.read_text())
        recorded |= {"url": foreign.url, "port": int(foreign.url.rsplit(":", 1)[1])}
        state.write_text(json.dumps(recorded))  # another program listens where ours did
        second = json.loads(_fc(env, "gateway", "--background", "--json").stdout)
        assert second["url"] != foreign.url and second["pid"] != first["pid"]


def test_idle_exit_when_no_client_lives(tmp_path: Path) -> None:
    with user_env(tmp_path) as env:
        env["FILECACHE_GATEWAY_IDLE"] = "1"
        started = json.loads(_fc(env, "gateway", "--background", "--json").stdout)
        assert _gone(started["pid"])


def _fake_host(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    host = folder / name
    host.write_text(FAKE_HOST.format(python=sys.executable))
    host.chmod(0o755)
    return folder


def test_run_points_only_this_process_at_the_gateway(tmp_path: Path) -> None:
    with user_env(tmp_path) as env:
        env["PATH"] = f"{_fake_host(tmp_path, 'claude')}{os.pathsep}{env['PATH']}"
        env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9/original"
        done = _fc(env, "run", "--window", "64000", "claude", "-p", "hi", "--x", cwd=tmp_path)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        shown = json.loads(done.stdout)
        assert shown["argv"] == ["-p", "hi", "--x"]
        url = shown["env"]["ANTHROPIC_BASE_URL"]
        (gateway,) = json.loads(_fc(env, "gateway", "--status", "--json").stdout)
        assert url.startswith(gateway["url"] + "/r/")
        routes_file = next((Path(env["XDG_RUNTIME_DIR"]) / "filecache").glob("*.routes.json"))
        routes = json.loads(routes_file.read_text())
        (route,) = routes["routes"].values()
        assert route == {"upstream": "http://127.0.0.1:9/original", "window": 64000}
        assert [shown["pid"]] == [pid for pid, _started in routes["clients"]]  # exec: same pid
        assert not (Path(env["HOME"]) / ".claude").exists()  # nothing of the host's written


def test_run_execs_the_plain_host_when_the_gateway_cannot_start(tmp_path: Path) -> None:
    with user_env(tmp_path) as env:
        env["PATH"] = f"{_fake_host(tmp_path, 'codex')}{os.pathsep}{env['PATH']}"
        folder = Path(env["XDG_RUNTIME_DIR"]) / "filecache"
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)  # others may enter it: refused
        done = _fc(env, "run", "codex", "exec", "go", cwd=tmp_path)
        assert done.returncode == 0
        assert json.loads(done.stdout) == {
            "argv": ["exec", "go"], "env": {}, "pid": json.loads(done.stdout)["pid"]
        }  # fmt: skip
        (line,) = done.stderr.splitlines()
        assert (
            line.startswith("filecache: the gateway is not available (") and "plain codex" in line
        )


def test_run_names_a_missing_host(tmp_path: Path) -> None:
    with user_env(tmp_path) as env:
        env["PATH"] = str(tmp_path / "empty")
        done = _fc(env, "run", "opencode", "run", "x", cwd=tmp_path)
        assert done.returncode != 0 and "opencode: not found on PATH" in done.stderr


def test_run_from_inside_a_host_behind_the_gateway_is_no_loop(tmp_path: Path) -> None:
    with user_env(tmp_path) as env:
        env["PATH"] = f"{_fake_host(tmp_path, 'claude')}{os.pathsep}{env['PATH']}"
        env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9/original"
        outer = json.loads(_fc(env, "run", "claude", cwd=tmp_path).stdout)["env"]
        env["ANTHROPIC_BASE_URL"] = outer["ANTHROPIC_BASE_URL"]  # a shell the host started
        inner = json.loads(_fc(env, "run", "claude", cwd=tmp_path).stdout)["env"]
        assert inner == outer  # the same route: to the original upstream, not to itself
