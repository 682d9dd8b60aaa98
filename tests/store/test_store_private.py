"""The store is private: a 0700 folder, 0600 files, an existing wider store tightened and said
once (issue 31, 4). Through the library and the CLI, on real files."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from filecache import FileCache


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_new_store_is_0600_in_a_0700_folder(tmp_path: Path) -> None:
    os.umask(old := os.umask(0o022))
    (tmp_path / "a.txt").write_text("secret-ish text\n" * 20)
    with FileCache(tmp_path) as cache:
        cache.session("s").read("a.txt")
        folder = tmp_path / ".filecache"
        assert mode(folder) == 0o700
        for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
            if (folder / name).exists():
                assert mode(folder / name) == 0o600, name
    assert old == 0o022


def test_the_cli_makes_a_private_store(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("text\n" * 20)
    env = {**os.environ, "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "filecache", "read", "a.txt"]
    subprocess.run(command, cwd=tmp_path, check=True, capture_output=True, env=env)
    assert mode(tmp_path / ".filecache") == 0o700
    assert mode(tmp_path / ".filecache" / "cache.db") == 0o600


def test_an_existing_wider_store_is_tightened_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a.txt").write_text("text\n" * 20)
    with FileCache(tmp_path) as cache:
        cache.session("s").read("a.txt")
    folder = tmp_path / ".filecache"
    folder.chmod(0o755)
    for name in os.listdir(folder):
        if name.startswith("cache.db"):
            (folder / name).chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="filecache"):
        for _ in range(2):
            with FileCache(tmp_path) as cache:
                cache.session("s").read("a.txt")
    assert mode(folder) == 0o700 and mode(folder / "cache.db") == 0o600
    said = [r.getMessage() for r in caplog.records if "readable by others" in r.getMessage()]
    assert len(said) == len(set(said)) >= 2  # the folder and the database, each once
    assert any("cache.db was mode 644" in line for line in said)


def test_a_named_store_file_is_created_0600(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("text\n" * 20)
    store = tmp_path / "elsewhere" / "my.db"
    with FileCache(tmp_path, store=str(store)) as cache:
        cache.session("s").read("a.txt")
    assert mode(store) == 0o600 and mode(store.parent) == 0o700
