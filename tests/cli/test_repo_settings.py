"""A repository cannot move or create things outside itself (issue 31, 6): its
``[tool.filecache]`` may narrow, never send reads elsewhere or name a key file, and ``filecache
install`` never writes a project's settings through a link that leaves the project. Through
the CLI as a user runs it, in a throwaway HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(cwd: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
            "CODEX_HOME": str(home / ".codex"), **env}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "filecache", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "home").mkdir()
    (repo / "a.txt").write_text("text of a\n" * 20)
    return repo


def test_a_repository_store_outside_it_is_refused_and_said_once(repo: Path) -> None:
    home = repo.parent / "home"
    outside = repo.parent / "public" / "reads.db"
    (repo / "pyproject.toml").write_text(f'[tool.filecache]\nstore = "{outside}"\n')
    for _ in range(2):
        done = run(repo, home, "read", "a.txt")
        assert done.returncode == 0, done.stderr
        assert done.stderr.count("is ignored; a repository may not keep its store outside") == 1
    assert not outside.parent.exists()
    assert (repo / ".filecache" / "cache.db").exists()


@pytest.mark.parametrize("store", ["../up.db", "sub/../../up.db"])
def test_a_relative_store_that_climbs_out_is_refused(repo: Path, store: str) -> None:
    (repo / "pyproject.toml").write_text(f'[tool.filecache]\nstore = "{store}"\n')
    done = run(repo, repo.parent / "home", "read", "a.txt")
    assert done.returncode == 0 and "is ignored" in done.stderr
    assert not (repo.parent / "up.db").exists()


def test_a_store_that_leaves_through_a_link_is_refused(repo: Path) -> None:
    (repo.parent / "elsewhere").mkdir()
    (repo / "out").symlink_to(repo.parent / "elsewhere")
    (repo / "pyproject.toml").write_text('[tool.filecache]\nstore = "out/reads.db"\n')
    done = run(repo, repo.parent / "home", "read", "a.txt")
    assert done.returncode == 0 and "is ignored" in done.stderr
    assert os.listdir(repo.parent / "elsewhere") == []


def test_a_repository_store_url_is_refused(repo: Path) -> None:
    (repo / "pyproject.toml").write_text(
        '[tool.filecache]\nstore = "postgresql://127.0.0.1:1/reads"\n'
    )
    done = run(repo, repo.parent / "home", "read", "a.txt")
    assert done.returncode == 0, done.stderr
    assert "may not send its reads to a server" in done.stderr
    assert (repo / ".filecache" / "cache.db").exists()


def test_a_repository_key_file_is_refused(repo: Path) -> None:
    home = repo.parent / "home"
    target = home / ".gitconfig"
    (repo / "pyproject.toml").write_text(f'[tool.filecache]\nkey_file = "{target}"\n')
    (repo / ".env").write_text("TOKEN=abcdefghijklmnop\n")
    done = run(repo, home, "read", ".env")
    assert done.returncode == 0, done.stderr
    assert "key_file is ignored" in done.stderr
    assert not target.exists()


def test_a_store_inside_the_repository_is_the_roots_wherever_the_command_runs(
    repo: Path,
) -> None:
    (repo / "sub").mkdir()
    (repo / "pyproject.toml").write_text('[tool.filecache]\nstore = "state/reads.db"\n')
    done = run(repo / "sub", repo.parent / "home", "read", "a.txt", "--root", str(repo))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (repo / "state" / "reads.db").exists() and not (repo / "sub" / "state").exists()


def test_the_users_own_environment_may_name_any_store(repo: Path) -> None:
    outside = repo.parent / "mine" / "reads.db"
    done = run(repo, repo.parent / "home", "read", "a.txt", FILECACHE_STORE=str(outside))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert outside.exists()


@pytest.mark.parametrize(
    ("host", "scope", "name"),
    [("claude-code", "--project", ".claude/settings.json"),
     ("claude-code", "--local", ".claude/settings.local.json"),
     ("codex", "--project", ".codex/hooks.json"),
     ("opencode", "--project", ".opencode/opencode.json"),
     ("gemini-cli", "--project", ".gemini/settings.json"),
     ("kilo", "--project", ".kilo/kilo.json")],
)  # fmt: skip
def test_install_never_writes_through_a_link_out_of_the_project(
    repo: Path, host: str, scope: str, name: str
) -> None:
    home = repo.parent / "home"
    users = home / "users-own.json"
    users.write_text('{"theirs": true}\n')
    link = repo / name
    link.parent.mkdir(parents=True)
    link.symlink_to(users)
    done = run(repo, home, "install", host, scope)
    assert done.returncode != 0 and "leads out of the project" in done.stderr, done
    assert json.loads(users.read_text()) == {"theirs": True}
    folder_link = repo.parent / "repo2"
    folder_link.mkdir()
    (folder_link / name.split("/")[0]).symlink_to(home)  # the folder itself leads out
    done = run(folder_link, home, "install", host, scope)
    assert done.returncode != 0 and "leads out of the project" in done.stderr, done
    assert not (home / name.split("/")[1]).exists()
