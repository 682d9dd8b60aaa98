"""``filecache install claude-code``: merging with the user's settings, idempotence, uninstall."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from filecache.adapters.hosts.claude_settings import MARKER, hook_command, install, merged
from filecache.adapters.hosts.config_files import CLIENT, HookParts, hook_parts
from hook_servers import private_runtime

from filecache.cli import main
from filecache.errors import ConfigError

THEIRS = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "env": {"FOO": "bar"},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "no-claude"))  # no claude: a note, not a failure
    return home


def settings(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def ours(data: dict[str, Any]) -> dict[str, list[str]]:
    return {
        event: [h["command"] for g in groups for h in g["hooks"] if MARKER in h["command"]]
        for event, groups in data.get("hooks", {}).items()
        if any(MARKER in h["command"] for g in groups for h in g["hooks"])
    }


def test_install_merges_with_existing_settings_and_is_idempotent(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    path = project / ".claude" / "settings.json"
    path.write_text(json.dumps(THEIRS))
    line = install(scope=None, uninstall=False, cwd=project)
    assert line.startswith(f"installed filecache hooks for Claude Code in {path}")
    assert "\n" not in line and "claude not found on PATH" in line
    data = settings(path)
    assert data["permissions"] == THEIRS["permissions"] and data["env"] == THEIRS["env"]
    assert data["hooks"]["Stop"] == THEIRS["hooks"]["Stop"]
    assert THEIRS["hooks"]["PostToolUse"][0] in data["hooks"]["PostToolUse"]
    events = {"PostToolUse", "PostToolUseFailure", "PreCompact", "PostCompact", "SessionStart",
              "UserPromptSubmit"}  # fmt: skip
    assert set(ours(data)) == events
    command = ours(data)["PostToolUse"][0]
    assert command == hook_command() and hook_parts(command) == HookParts(
        "claude-code", sys.executable, str(CLIENT), guarded=True
    )
    before = path.read_bytes()
    again = install(scope="project", uninstall=False, cwd=project)
    assert (
        again.startswith("filecache hooks for Claude Code already in")
        and path.read_bytes() == before
    )
    assert install(scope=None, uninstall=True, cwd=project).startswith("removed filecache hooks")
    assert settings(path) == THEIRS  # exactly what the user had
    assert "nothing changed" in install(scope=None, uninstall=True, cwd=project)


@pytest.mark.parametrize(
    "stale",
    [
        f"/old/venv/bin/python {MARKER}",
        "'/old venv/bin/python' -I -S '/old venv/lib/filecache/adapters/hosts/hook_client.py' "
        "claude-code",  # an earlier release's unguarded command
        "/old/venv/bin/python -I -m filecache.adapters.hosts claude-code",
        "/old/venv/bin/filecache hook claude-code",
    ],
)
def test_an_install_from_another_interpreter_replaces_ours(
    home: Path, tmp_path: Path, stale: str
) -> None:
    old = merged(THEIRS, uninstall=False, command=stale)
    assert stale in [h["command"] for g in old["hooks"]["PostToolUse"] for h in g["hooks"]]
    fresh = merged(old, uninstall=False, command=hook_command())
    commands = [c for cs in ours(fresh).values() for c in cs]
    assert commands and all(c == hook_command() for c in commands)
    assert merged(fresh, uninstall=True, command=hook_command()) == THEIRS
    assert merged(old, uninstall=True, command=hook_command()) == THEIRS


def test_user_scope_and_uninstall_of_a_file_we_created(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    line = install(scope="user", uninstall=False, cwd=project)
    path = home / ".claude" / "settings.json"
    assert str(path) in line and ours(settings(path))
    assert not (project / ".claude").exists()
    install(scope="user", uninstall=True, cwd=project)
    # never deleted: install cannot tell at uninstall whether it made the file or its "hooks"
    assert settings(path) == {"hooks": {}}


@pytest.mark.parametrize(
    "mine",
    [{}, {"hooks": {}, "env": {}}, {"hooks": {"Stop": []}}, {"env": {"A": "1"}, "hooks": {}}],
)
def test_uninstall_removes_only_what_install_added(
    home: Path, tmp_path: Path, mine: dict[str, Any]
) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(mine))
    before = path.read_bytes()
    assert "nothing changed" in install(scope=None, uninstall=True, cwd=tmp_path)
    assert path.read_bytes() == before  # nothing of ours: not even rewritten
    install(scope=None, uninstall=False, cwd=tmp_path)
    assert ours(settings(path))
    assert install(scope=None, uninstall=True, cwd=tmp_path).startswith("removed")
    assert path.exists()
    after = settings(path)
    # exactly the user's settings; a "hooks" object install added may stay, empty
    assert after == mine or after == {**mine, "hooks": {}}
    assert list(after)[: len(mine)] == list(mine)  # keys keep their order


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        '{"hooks": [1]}',
        # an event that is not a list of matcher groups: refused, never spread into one
        '{"hooks": {"PostToolUse": "oops"}}',
        '{"hooks": {"PostToolUse": {"a": 1}}}',
        '{"hooks": {"Stop": 3}}',
    ],
)
def test_settings_we_cannot_merge_are_left_untouched(home: Path, tmp_path: Path, text: str) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(text)
    for uninstall in (False, True):
        with pytest.raises(ConfigError, match="fix it by hand") as raised:
            install(scope=None, uninstall=uninstall, cwd=tmp_path)
        assert "\n" not in str(raised.value)
        assert path.read_text() == text


def write_claude(folder: Path, version: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "claude"
    exe.write_text(f"#!/bin/sh\necho '{version} (Claude Code)'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def test_the_installed_claude_version_is_checked(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_ = tmp_path / "bin"
    write_claude(bin_, "2.1.100")
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}/usr/bin:/bin")
    line = install(scope=None, uninstall=False, cwd=tmp_path)
    assert "WARNING: Claude Code 2.1.100 is older than 2.1.121" in line
    write_claude(bin_, "2.1.328")
    line = install(scope=None, uninstall=False, cwd=tmp_path)
    assert line.endswith("(Claude Code 2.1.328)") and "WARNING" not in line


def test_the_cli_command(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    done = runner.invoke(main, ["install", "claude-code", "--command"])
    assert done.exit_code == 0 and done.output.count("\n") == 1, done.output
    assert ours(settings(tmp_path / ".claude" / "settings.json"))
    (tmp_path / ".claude" / "settings.json").write_text("{oops")
    failed = runner.invoke(main, ["install", "claude-code", "--uninstall"])
    assert failed.exit_code == ConfigError.exit_code and "fix it by hand" in failed.output


def test_a_project_cannot_shadow_the_hook(tmp_path: Path) -> None:
    """The hook runs in the project's folder: a filecache/ package there must not run."""
    import subprocess

    (tmp_path / "filecache").mkdir()
    (tmp_path / "filecache" / "__init__.py").write_text(
        "open('SHADOWED', 'w').write('ran')\n", encoding="utf-8"
    )
    env = dict(os.environ)
    with private_runtime(env):  # the hook's resident server: stopped when the test ends
        done = subprocess.run(
            hook_command(), shell=True, cwd=tmp_path, input=b"{}", capture_output=True, env=env
        )
    assert done.returncode == 0 and done.stdout == b""
    assert not (tmp_path / "SHADOWED").exists()


GIT = shutil.which("git")


def git(cwd: Path, *args: str) -> None:
    import subprocess

    assert GIT is not None
    subprocess.run([GIT, *args], cwd=cwd, check=True, capture_output=True)


def test_local_scope_writes_this_developers_project_settings(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--local: .claude/settings.local.json, the project's settings of this developer only
    (the hook command holds this machine's interpreter path)."""
    project = tmp_path / "project"
    project.mkdir()
    if GIT is not None:  # git runs, and says this is no work tree (the fixture's PATH has none)
        monkeypatch.setenv("PATH", os.path.dirname(GIT))
        monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    shared = project / ".claude" / "settings.json"
    local = project / ".claude" / "settings.local.json"
    line = install(scope="local", uninstall=False, cwd=project)
    assert line.startswith(f"installed filecache hooks for Claude Code in {local}")
    assert "git does not ignore" not in line  # not a git work tree: nothing to say
    assert ours(settings(local))["PostToolUse"] == [hook_command()]
    assert not shared.exists() and not (home / ".claude").exists()
    assert install(scope="local", uninstall=False, cwd=project).startswith(
        "filecache hooks for Claude Code already in"
    )
    install(scope="local", uninstall=True, cwd=project)
    assert not ours(settings(local))


def test_local_scope_says_when_git_would_commit_the_file(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if GIT is None:
        pytest.skip("git is not installed")
    monkeypatch.setenv("PATH", os.path.dirname(GIT))  # install runs git from PATH
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))  # no global ignore file
    git(tmp_path, "init", "-q")
    line = install(scope="local", uninstall=False, cwd=tmp_path)
    assert "git does not ignore .claude/settings.local.json" in line, line
    (tmp_path / ".gitignore").write_text(".claude/settings.local.json\n")
    assert "git does not ignore" not in install(scope="local", uninstall=False, cwd=tmp_path)
    (tmp_path / ".gitignore").unlink()
    project = install(scope="project", uninstall=False, cwd=tmp_path)  # a file to commit
    assert project.startswith("installed") and "git does not ignore" not in project


def test_the_cli_local_flag(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    done = runner.invoke(main, ["install", "claude-code", "--local"])
    assert done.exit_code == 0, done.output
    assert ours(settings(tmp_path / ".claude" / "settings.local.json"))
    assert not (tmp_path / ".claude" / "settings.json").exists()
    for flags in (["--local", "--project"], ["--user", "--local"], ["--local", "--user"]):
        failed = runner.invoke(main, ["install", "claude-code", "--uninstall", *flags])
        assert failed.exit_code == 2 and "exclude each other" in failed.output, failed.output
    assert ours(settings(tmp_path / ".claude" / "settings.local.json"))  # not uninstalled


@pytest.mark.parametrize("host", ["codex", "opencode"])
def test_local_is_claude_codes_only(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    failed = CliRunner().invoke(main, ["install", host, "--local"])
    assert failed.exit_code == 2 and "--project" in failed.output, failed.output
    assert list(home.iterdir()) == [] and list(tmp_path.iterdir()) == [home]


def test_hook_help_names_the_command_install_writes() -> None:
    shown = " ".join(CliRunner().invoke(main, ["hook", "--help"]).output.split())
    written = hook_command().replace(sys.executable, "PYTHON").replace("claude-code", "HOST")
    assert written.endswith(" PYTHON " + str(CLIENT) + " HOST") and '"$1" -I -S "$2"' in written
    assert "PYTHON -I -S .../hosts/hook_client.py HOST" in shown, shown
    assert "-m filecache.adapters.hosts" not in shown
