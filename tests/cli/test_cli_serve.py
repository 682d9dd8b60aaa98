"""``filecache serve`` with a store it cannot open: the same one-line error and exit code as
``read`` and ``stats`` give, before the server starts (never an MCP task group's traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from filecache.errors import StoreError

pytest.importorskip("mcp", reason="the [mcp] extra is not installed")


def filecache(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m filecache ARGS`` with stdin closed (a stdio server ends at once)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FILECACHE_")}
    return subprocess.run(
        [sys.executable, "-m", "filecache", *(str(a) for a in args)],
        capture_output=True, text=True, timeout=120, cwd=cwd, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def corrupt_root(tmp_path: Path) -> Path:
    """A root whose default store (``.filecache/cache.db``) is not a database."""
    root = tmp_path / "root"
    (root / ".filecache").mkdir(parents=True)
    (root / ".filecache" / "cache.db").write_bytes(b"garbage, not SQLite\n" * 64)
    (root / "a.txt").write_text("a\n", encoding="utf-8")
    return root


def test_serve_on_a_corrupt_store_prints_the_store_error_in_one_line(tmp_path: Path) -> None:
    root = corrupt_root(tmp_path)
    read = filecache("read", "a.txt", "--root", root, cwd=tmp_path)
    served = filecache("serve", "--root", root, cwd=tmp_path)
    assert read.returncode == StoreError.exit_code and "not a filecache store" in read.stderr
    assert "Traceback" not in served.stderr, served.stderr[-2000:]
    assert served.returncode == StoreError.exit_code
    assert served.stderr.count("\n") == 1 and served.stderr.startswith("filecache: ")
    assert "not a filecache store or is corrupt" in served.stderr


def test_serve_on_a_store_path_it_cannot_create_prints_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("a regular file, not a folder\n", encoding="utf-8")
    root = tmp_path / "root"
    root.mkdir()
    store = tmp_path / "afile" / "x.db"
    served = filecache("serve", "--root", root, "--store", store, cwd=tmp_path)
    assert "Traceback" not in served.stderr, served.stderr[-2000:]
    assert served.returncode == StoreError.exit_code
    assert served.stderr.count("\n") == 1 and f"cannot open the store at {store}" in served.stderr
