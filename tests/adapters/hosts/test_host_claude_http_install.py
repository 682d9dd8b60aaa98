"""``filecache install claude-code --http``: http hooks in place of the per-call command hooks,
their server started by the kept command hooks, and uninstall, doctor and the one-installation
rule seeing them (``claude_settings``, ``hook_http``, ``doctor``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from filecache.adapters.hosts import hook_http, registry
from filecache.adapters.hosts.claude_settings import (
    HOOKS,
    HTTP_EVENTS,
    MARKER,
    http_ports,
    install,
    installed,
)
from filecache.adapters.hosts.hook_client import socket_folder
from hook_servers import private_runtime

from filecache.cli import main
from filecache.errors import ConfigError

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="Linux only")

THEIRS_HTTP = {"type": "http", "url": "http://127.0.0.1:9/their-hook"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "no-claude"))  # no claude: a note, not a failure
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return home


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private hook socket folder in this process's environment; its servers stopped after."""
    env: dict[str, str] = {}
    with private_runtime(env) as folder:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
        yield folder


def hooks_of(path: Path) -> dict[str, list[dict[str, Any]]]:
    """event -> every hook entry under it."""
    data = json.loads(path.read_text())
    return {event: [h for g in groups for h in g["hooks"]]
            for event, groups in data["hooks"].items()}  # fmt: skip


def wait_for(port: int, up: bool = True) -> dict[str, object] | None:
    for _ in range(600):
        found = hook_http.status(port)
        if (found is not None) == up:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the server on {port} is {'not ' if up else ''}running after 30 s")


def test_http_replaces_the_per_call_command_hooks_and_keeps_the_others(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    path = project / ".claude" / "settings.json"
    theirs = {"hooks": {"PostToolUse": [{"matcher": "Read", "hooks": [THEIRS_HTTP]}]}}
    path.write_text(json.dumps(theirs))
    install(scope="project", uninstall=False, cwd=project, http_port=47001)
    found = hooks_of(path)
    assert set(found) == set(HOOKS)
    for event in HOOKS:
        mine = [h for h in found[event] if h != THEIRS_HTTP]
        assert len(mine) == 1, (event, mine)  # never a command hook beside the http one
        if event in HTTP_EVENTS:
            assert mine[0]["type"] == "http" and hook_http.hook_port(mine[0]) == 47001
        else:  # SessionStart: 2.1.332 runs no http hook there; the others stay in-process
            assert mine[0]["type"] == "command" and MARKER in mine[0]["command"]
    assert THEIRS_HTTP in found["PostToolUse"]
    before = path.read_text()
    again = install(scope="project", uninstall=False, cwd=project, http_port=47001)
    assert "already in" in again and path.read_text() == before
    install(scope="project", uninstall=False, cwd=project, http_port=47002)  # another port
    ports = [hook_http.hook_port(h) for h in hooks_of(path)["PostToolUse"]]
    assert ports == [None, 47002]  # theirs, then ours on the new port only
    (entry,) = installed(project)
    assert entry.http_ports == (47002,) and entry.count == len(HOOKS) and entry.runs
    install(scope="project", uninstall=False, cwd=project)  # without --http: commands again
    assert all(h["type"] == "command" for e in HOOKS for h in hooks_of(path)[e] if h != THEIRS_HTTP)
    assert installed(project)[0].http_ports == ()


def test_uninstall_removes_http_hooks_of_any_port_and_keeps_theirs(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    install(scope="project", uninstall=False, cwd=project, http_port=47001)
    path = project / ".claude" / "settings.json"
    data = json.loads(path.read_text())
    old = hook_http.http_hook(45999)  # as another install (or a hand-made one) wrote it
    data["hooks"]["Stop"] = [{"hooks": [old]}, {"hooks": [THEIRS_HTTP]}]
    path.write_text(json.dumps(data))
    assert installed(project)[0].http_ports == (47001, 45999)
    assert sorted(http_ports(project)) == [45999, 47001]
    install(scope="project", uninstall=True, cwd=project)
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [THEIRS_HTTP]}]}}
    assert installed(project) == [] and http_ports(project) == []


def test_a_url_that_only_looks_like_ours_is_not_ours() -> None:
    assert hook_http.hook_port(hook_http.http_hook(41000)) == 41000
    ours = "127.0.0.1:41000/hook/claude-code"
    for url in ("http://127.0.0.1:41000/hook/codex", "http://localhost:41000/hook/claude-code",
                f"http://{ours}/x", f"https://{ours}", "http://127.0.0.1:99999/hook/claude-code",
                "http://127.0.0.1:0/hook/claude-code"):  # fmt: skip
        assert hook_http.hook_port({"type": "http", "url": url}) is None, url
    assert hook_http.hook_port({"type": "command", "url": f"http://{ours}"}) is None


def test_one_installation_across_scopes_with_http(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    registry.install("claude-code", scope="project", cwd=project)
    line = registry.install("claude-code", scope="user", cwd=project, http_port=47003)
    assert "removed filecache's hooks for Claude Code at --project" in line
    (entry,) = installed(project)
    assert entry.scope == "user" and entry.http_ports == (47003,)
    line = registry.install("claude-code", scope="local", cwd=project)  # back to commands, local
    assert "--user" in line and [e.scope for e in installed(project)] == ["local"]
    with pytest.raises(ConfigError, match="Claude Code only"):
        registry.install("codex", scope="user", cwd=project, http_port=47003)
    with pytest.raises(ConfigError, match="not a TCP port"):
        install(scope="project", uninstall=False, cwd=project, http_port=70000)


def test_the_cli_flags(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    done = runner.invoke(main, ["install", "claude-code", "--http"])
    assert done.exit_code == 0 and "by http hooks to 127.0.0.1:" in done.output, done.output
    assert installed(tmp_path)[0].http_ports == (hook_http.default_port(),)
    done = runner.invoke(main, ["install", "claude-code", "--http-port", "47004"])
    assert done.exit_code == 0 and installed(tmp_path)[0].http_ports == (47004,)
    refused = runner.invoke(main, ["install", "claude-code", "--http", "--uninstall"])
    assert refused.exit_code == 2 and "exclude each other" in refused.output
    refused = runner.invoke(main, ["install", "codex", "--http"])
    assert refused.exit_code == ConfigError.exit_code and "Claude Code only" in refused.output


def test_session_start_starts_the_server_doctor_shows_it_uninstall_stops_it(
    home: Path, tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    port = free_port()
    monkeypatch.chdir(project)
    runner = CliRunner()
    assert runner.invoke(main, ["install", "claude-code", "--http-port", str(port)]).exit_code == 0
    doctor = runner.invoke(main, ["doctor"])
    assert f"http server: 127.0.0.1:{port} not running" in doctor.output, doctor.output
    event = {"hook_event_name": "SessionStart", "source": "startup", "session_id": "s1",
             "cwd": str(project), "transcript_path": str(tmp_path / "t.jsonl")}  # fmt: skip
    # The SessionStart command hook (in-process here) starts the server and does not wait.
    assert registry.run_hook("claude-code", [], json.dumps(event).encode()) == b""
    status = wait_for(port)
    assert status is not None and status["port"] == port
    pid = status["pid"]
    record = Path(socket_folder()) / f"http-{port}.pid"
    assert isinstance(pid, int) and record.read_text() == str(pid)
    # A second start (a prompt, another session) finds it listening and starts no other.
    assert hook_http.ensure_running([port]) == []
    report = json.loads(runner.invoke(main, ["doctor", "--json"]).output)
    (shown,) = report["http_servers"]
    assert shown["state"] == "running" and shown["status"]["pid"] == pid
    assert report["hooks"][0]["http_ports"] == [port]
    gone = runner.invoke(main, ["uninstall"])
    assert "stopped" in gone.output, gone.output
    wait_for(port, up=False)
    for _ in range(200):  # SIGTERM: serve returns, the process exits and init reaps it
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")
    assert not record.exists()


def test_no_server_is_started_with_the_servers_off_or_the_port_taken(
    home: Path, tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FILECACHE_HOOK_SERVER", "0")
    assert hook_http.ensure_running([free_port()]) == []
    monkeypatch.delenv("FILECACHE_HOOK_SERVER")
    with socket.socket() as other:  # another program holds the port
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        assert hook_http.ensure_running([port]) == []
        project = tmp_path / "project"
        install(scope="project", uninstall=False, cwd=project, http_port=port)
        monkeypatch.chdir(project)
        doctor = CliRunner().invoke(main, ["doctor"])
        assert f"127.0.0.1:{port} HELD BY ANOTHER PROGRAM" in doctor.output, doctor.output


def test_an_idle_server_exits_and_a_second_one_on_its_port_gives_way(runtime: Path) -> None:
    port = free_port()
    env = {**os.environ, "FILECACHE_HOOK_SERVER_IDLE": "1"}
    argv = [sys.executable, "-I", "-m", "filecache.adapters.hosts.hook_http", "--port", str(port)]
    first = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(port) is not None
        second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 1 and f"127.0.0.1:{port}" in second.stderr
        assert first.wait(timeout=120) == 0  # idle for a second: it ends by itself
    finally:
        first.kill()  # the process this test started (gone already when it passed)
        first.wait()
    assert not (Path(socket_folder()) / f"http-{port}.pid").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to listen as another user")
@pytest.mark.parametrize("address", ["127.0.0.1", "0.0.0.0", "::"])
def test_another_users_program_on_the_port_is_named_to_the_user(
    address: str, home: Path, tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While filecache's server is down, another user's program takes the port (on any
    address that takes connections to 127.0.0.1): the next prompt's hook warns the user, and
    doctor names it; nothing is started beside it."""
    python = shutil.which("python3", path="/usr/bin:/bin")  # the venv may be root's only
    if python is None:
        pytest.skip("no system python3 for the other user")
    port = free_port()
    family = "socket.AF_INET6" if ":" in address else "socket.AF_INET"
    squat = (f"import socket, sys\ns = socket.socket({family})\n"
             + ("s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\n" if ":" in address
                else "")
             + f"s.bind(({address!r}, {port}))\ns.listen()\nprint('up', flush=True)\n"
             "sys.stdin.read()\n")  # fmt: skip
    with subprocess.Popen([python, "-I", "-c", squat], user=65534, cwd="/", text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as other:  # fmt: skip
        try:
            assert other.stdout is not None and other.stdout.readline() == "up\n"
            assert hook_http.other_users_listener(port) == 65534
            project = tmp_path / "project"
            install(scope="project", uninstall=False, cwd=project, http_port=port)
            event = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": "x",
                     "cwd": str(project), "transcript_path": str(tmp_path / "t.jsonl")}  # fmt: skip
            said = json.loads(registry.run_hook("claude-code", [], json.dumps(event).encode()))
            assert (
                f"127.0.0.1:{port}" in said["systemMessage"]
                and "uid 65534" in said["systemMessage"]
            )
            assert "--command" in said["systemMessage"]
            monkeypatch.chdir(project)
            doctor = CliRunner().invoke(main, ["doctor"])
            assert f"127.0.0.1:{port} HELD BY ANOTHER USER'S PROGRAM (uid 65534)" in doctor.output
        finally:
            other.kill()  # the process this test started
    assert hook_http.other_users_listener(port) is None
    said_now = registry.run_hook("claude-code", [], json.dumps(event).encode())
    assert b"systemMessage" not in said_now  # the port is free: the hook started our server
    assert wait_for(port) is not None
