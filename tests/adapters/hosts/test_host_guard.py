"""The hook command never blocks or corrupts its host (``config_files.GUARD``), and the hooks of
every host can be found and removed whoever installed them (``filecache uninstall``), one
installation per host (``registry.install``).

The guard is run as the hosts run it: the command string through a shell, the payload on stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from filecache.adapters.hosts import registry
from filecache.adapters.hosts.config_files import CLIENT, client_command, hook_parts

from filecache.cli import main

PAYLOAD = json.dumps({"hook_event_name": "PostToolUse", "pad": "x" * (1 << 20)}).encode()


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """``command`` as a host runs it; the whole payload is written (a guard that did not read
    it would break the host's pipe: ``BrokenPipeError`` here)."""
    with subprocess.Popen(
        command, shell=True, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as child:  # fmt: skip
        assert child.stdin is not None and child.stdout is not None and child.stderr is not None
        child.stdin.write(PAYLOAD)
        child.stdin.close()
        out, err = child.stdout.read(), child.stderr.read()
        return subprocess.CompletedProcess(command, child.wait(), out, err)


def fake_client(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "lib" / "filecache" / "adapters" / "hosts" / "hook_client.py"
    script.parent.mkdir(parents=True)
    script.write_text(body)
    return script


def guarded(python: str, script: Path, host: str = "claude-code") -> str:
    return client_command(host).replace(sys.executable, python).replace(str(CLIENT), str(script))


@pytest.mark.parametrize(
    ("case", "body"),
    [
        ("interpreter gone", None),
        ("script gone", None),
        ("import error", "import filecache_is_not_here\n"),
        ("crash after a partial answer",
         "import os, sys\nsys.stdin.buffer.read()\nsys.stdout.write('{\"hookSpecificOut')\n"
         "sys.stdout.flush()\nos.kill(os.getpid(), 9)\n"),
        ("exits 2 with a message", "import sys\nprint('blocked', file=sys.stderr)\nsys.exit(2)\n"),
        ("never reads its input", "import sys\nsys.exit(1)\n"),
    ],
)  # fmt: skip
def test_whatever_fails_the_hook_exits_0_with_no_output(
    tmp_path: Path, case: str, body: str | None
) -> None:
    script = fake_client(tmp_path, body or "print('{}')\n")
    python = sys.executable
    if case == "interpreter gone":
        python = str(tmp_path / "venv" / "bin" / "python")
    elif case == "script gone":
        script.unlink()
    done = run(guarded(python, script), tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_a_client_that_answers_is_passed_through_byte_for_byte(tmp_path: Path) -> None:
    answer = '{"reason": "a\\nb", "x": "é $HOME `id` \\\\"}'
    script = fake_client(
        tmp_path,
        "import sys\nassert sys.argv[1:] == ['codex'] and sys.flags.isolated\n"
        f"n = len(sys.stdin.buffer.read())\nsys.stdout.write({answer!r})\n",
    )
    done = run(guarded(sys.executable, script, "codex"), tmp_path)
    assert (done.returncode, done.stdout.decode(), done.stderr) == (0, answer, b"")


def test_the_real_client_answers_nothing_to_an_empty_event(tmp_path: Path) -> None:
    done = run(client_command("claude-code"), tmp_path)
    assert (done.returncode, done.stdout) == (0, b"")


# -- finding and removing the hooks of every host ---------------------------------------------


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    for name in ("XDG_CONFIG_HOME", "CODEX_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-hosts"))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return project


def test_uninstall_removes_every_hosts_hooks_from_a_gone_interpreter(
    user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = {"permissions": {"allow": ["Bash(ls)"]}}
    (user / ".claude").mkdir()
    (user / ".claude" / "settings.json").write_text(json.dumps(mine))
    gone = str(user.parent / "gone-venv" / "bin" / "python")
    with monkeypatch.context() as patch:
        patch.setattr(sys, "executable", gone)
        for host in registry.HOSTS:
            module = registry.host_module(host)
            for scope in ("user", "project"):
                module.install(scope=scope, uninstall=False, cwd=user)
    found = registry.installed(user)
    assert {(f.host, f.scope) for f in found} == {
        (h, s) for h in registry.HOSTS for s in ("user", "project")
    }
    assert all(f.interpreter == gone and f.guarded and not f.runs for f in found)
    done = CliRunner().invoke(main, ["uninstall"])
    assert done.exit_code == 0, done.output
    assert len(done.output.splitlines()) == 2 * len(registry.HOSTS) and "removed" in done.output
    assert registry.installed(user) == []
    settings = json.loads((user / ".claude" / "settings.json").read_text())
    assert settings == {**mine, "hooks": {}}
    again = CliRunner().invoke(main, ["uninstall"])
    assert again.output.startswith("no filecache hooks found for any host"), again.output


def test_install_replaces_the_hooks_at_the_other_scope(user: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(main, ["install", "codex", "--project"])
    assert first.exit_code == 0 and "removed" not in first.output, first.output
    second = runner.invoke(main, ["install", "codex", "--user"])
    assert second.exit_code == 0, second.output
    project_hooks = user / ".codex" / "hooks.json"
    assert f"removed filecache's hooks for Codex CLI at --project ({project_hooks})" in (
        second.output
    )
    assert "one installation per host" in second.output
    assert [(f.host, f.scope) for f in registry.installed(user)] == [("codex", "user")]
    third = runner.invoke(main, ["install", "claude-code", "--user"])
    fourth = runner.invoke(main, ["install", "claude-code", "--local"])
    assert "removed" not in third.output and "--user" in fourth.output, fourth.output
    assert [(f.host, f.scope) for f in registry.installed(user, ["claude-code"])] == [
        ("claude-code", "local")
    ]


def test_hook_parts_reads_every_form_filecache_wrote() -> None:
    assert hook_parts("prettier --write") is None
    assert hook_parts("/v/bin/python -I -m filecache.adapters.hosts codex") is not None
    parts = hook_parts(client_command("opencode"))
    assert parts is not None and parts.host == "opencode" and parts.runs


def test_doctor_lists_every_hosts_hooks_the_store_and_the_last_error(
    user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = str(user.parent / "gone" / "bin" / "python")
    with monkeypatch.context() as patch:
        patch.setattr(sys, "executable", gone)
        registry.host_module("claude-code").install(scope="local", uninstall=False, cwd=user)
    registry.install("codex", scope=None, cwd=user)
    from filecache.adapters.hosts.base import log_failure

    log_failure("codex", "StoreError: the store is read-only")
    done = CliRunner().invoke(main, ["doctor", "--json"])
    assert done.exit_code == 0, done.output
    found = json.loads(done.output)
    hooks = {(h["host"], h["scope"]): h for h in found["hooks"]}
    assert set(hooks) == {("claude-code", "local"), ("codex", "user")}
    assert hooks["claude-code", "local"]["interpreter"] == gone
    assert not hooks["claude-code", "local"]["runs"] and hooks["codex", "user"]["runs"]
    assert found["store"] == str(user / ".filecache" / "cache.db")
    assert found["store_writable"] is True
    assert found["last_error"].endswith(f"pid={os.getpid()}: StoreError: the store is read-only")
    shown = CliRunner().invoke(main, ["doctor"]).output
    assert "INTERPRETER OR SCRIPT GONE" in shown and "store: " in shown, shown
    user.chmod(0o500)  # the project is read-only: the hooks would use the user cache's store
    try:
        if not os.access(user, os.W_OK):  # not as root
            found = json.loads(CliRunner().invoke(main, ["doctor", "--json"]).output)
            assert found["store"].startswith(str(user.parent / "home" / ".cache" / "filecache"))
            assert found["store_writable"] is True
            (user.parent / "home" / ".cache" / "filecache").chmod(0o500)  # and the user cache
            try:
                assert "NOT WRITABLE" in CliRunner().invoke(main, ["doctor"]).output
            finally:
                (user.parent / "home" / ".cache" / "filecache").chmod(0o700)
    finally:
        user.chmod(0o700)


def test_doctor_creates_nothing(user: Path) -> None:
    """A diagnosis writes nothing: run in a folder filecache never served, it leaves no store
    folder there (nor in the user cache), and still says where the store would be."""
    done = CliRunner().invoke(main, ["doctor", "--json"])
    assert done.exit_code == 0, done.output
    found = json.loads(done.output)
    assert found["store"] == str(user / ".filecache" / "cache.db")
    assert found["store_writable"] is True
    assert sorted(user.iterdir()) == []
    assert not list((user.parent / "home").rglob("cache.db"))


def test_a_store_that_cannot_be_written_is_said_once_per_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("FILECACHE_STORE", str(tmp_path / "a-file" / "cache.db"))
    project = tmp_path / "project"
    project.mkdir()

    def prompt(session: str) -> bytes:
        event = {
            "hook_event_name": "UserPromptSubmit",
            "session_id": session,
            "cwd": str(project),
            "transcript_path": str(tmp_path / "t.jsonl"),
            "prompt": "x",
        }
        return registry.run_hook("claude-code", [], json.dumps(event).encode())  # fmt: skip

    first = json.loads(prompt("s1"))
    assert list(first) == ["systemMessage"], first  # shown to the user, not to the model
    assert "filecache serves nothing in this session (StoreError" in first["systemMessage"]
    assert "Claude Code's own results stand" in first["systemMessage"]
    assert prompt("s1") == b"" and prompt("s1") == b""  # once
    assert json.loads(prompt("s2"))["systemMessage"] == first["systemMessage"]  # per session
    codex = {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": str(project)}
    said = json.loads(registry.run_hook("codex", [], json.dumps(codex).encode()))
    assert "Codex CLI's own results stand" in said["systemMessage"]  # per host and session
    assert registry.run_hook("codex", [], json.dumps(codex).encode()) == b""
