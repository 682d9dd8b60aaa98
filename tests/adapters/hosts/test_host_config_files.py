"""What every ``filecache install HOST`` does to the host's configuration files themselves:
a symlinked file (dotfiles kept by stow or chezmoi) is written through, the link kept."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from filecache.adapters.hosts import registry

from filecache.cli import main

MINE = {"permissions": {"allow": ["Bash(ls:*)"]}}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-hosts"))  # no claude: a note, not a failure
    return home


# host, the file install edits (under HOME), its content before, what parses it, and what
# uninstall leaves (an emptied "hooks" object or "plugin" list stays: it may be the user's)
LINKED = [
    ("claude-code", ".claude/settings.json", json.dumps(MINE), json.loads, {**MINE, "hooks": {}}),
    ("codex", ".codex/config.toml", 'model = "gpt-5.5"\n', tomllib.loads, {"model": "gpt-5.5"}),
    ("opencode", ".config/opencode/opencode.json", '{"model": "x/y"}', json.loads,
     {"model": "x/y", "plugin": []}),
]  # fmt: skip


@pytest.mark.parametrize(("host", "name", "before", "parse", "left"), LINKED)
def test_a_symlinked_config_is_written_through_and_stays_a_link(
    home: Path, tmp_path: Path, host: str, name: str, before: str, parse: object, left: object
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / Path(name).name
    target.write_text(before)
    target.chmod(0o640)
    link = home / name
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    project = tmp_path / "project"
    project.mkdir()
    module = registry.host_module(host)
    module.install(scope="user", uninstall=False, cwd=project)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() != before  # filecache's entries are in the link's target
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in dotfiles.iterdir()) == [target.name]  # no temp file left
    module.install(scope="user", uninstall=True, cwd=project)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert parse(target.read_text()) == left  # type: ignore[operator]


def test_a_link_to_a_link_is_followed_to_its_final_target(home: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    final = dotfiles / "settings.json"
    final.write_text(json.dumps(MINE))
    middle = dotfiles / "claude-settings.json"
    middle.symlink_to(final)
    link = home / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(middle)
    registry.host_module("claude-code").install(scope="user", uninstall=False, cwd=tmp_path)
    assert link.is_symlink() and middle.is_symlink()
    assert json.loads(final.read_text())["permissions"] == MINE["permissions"]
    assert "hooks" in json.loads(final.read_text())


@pytest.mark.parametrize("host", ["claude-code", "codex", "opencode"])
@pytest.mark.parametrize("flags", [["--project", "--user"], ["--user", "--project"]])
def test_scopes_are_exclusive(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, flags: list[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    done = CliRunner().invoke(main, ["install", host, *flags])
    assert done.exit_code == 2, done.output  # a usage error, whichever comes last
    assert "--project" in done.output and "--user" in done.output
    assert list(home.iterdir()) == [] and list(project.iterdir()) == []  # nothing written
