"""``filecache sessions list|show|delete|gc``: a thin CLI over the store."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from filecache import FileCache
from filecache.cli import main
from filecache.store.sqlite_store import SqliteStore

SUBCOMMANDS = ("list", "show", "delete", "gc")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with two sessions over one root: ``new`` (used now), ``old`` (60 days ago)."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("".join(f"line {i} of the notes\n" for i in range(60)))
    path = tmp_path / "cache.db"
    with FileCache(root, store=path) as cache:
        for sid in ("new", "old"):
            s = cache.session(sid)
            s.read("a.txt", call_id=f"{sid}-1")
            s.read("a.txt", call_id=f"{sid}-2")
        (root / "a.txt").write_text("only the old session saw this\n")
        cache.session("old").read("a.txt", call_id="old-3")
    with SqliteStore(path) as opened:
        opened.touch_session("old", time.time() - 60 * 86400)
    return path


def sessions(store: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["sessions", *args, "--store", str(store)])


def test_list(store: Path, tmp_path: Path) -> None:
    text = sessions(store, "list")
    assert text.exit_code == 0, text.output
    assert text.stdout.index("| new") < text.stdout.index("| old")  # most recent first
    rows = json.loads(sessions(store, "list", "--json").stdout)["sessions"]
    assert [r["session_id"] for r in rows] == ["new", "old"]
    assert set(rows[0]) == {
        "session_id", "host", "created", "last_used", "events", "tokens", "tokens_full", "saved",
        "saved_pct", "pruned", "reclaimed",
    }  # fmt: skip
    assert rows[0]["events"] == 2 and rows[0]["saved"] > 0 and rows[0]["pruned"] == 0
    with SqliteStore(tmp_path / "empty.db"):
        pass
    empty = sessions(tmp_path / "empty.db", "list")
    assert empty.exit_code == 0 and "no sessions" in empty.stdout


def test_show(store: Path) -> None:
    shown = sessions(store, "show", "old")
    assert shown.exit_code == 0, shown.output
    assert "old-3" in shown.stdout and "unchanged" in shown.stdout
    data = json.loads(sessions(store, "show", "old", "--json").stdout)
    assert data["sessions"][0]["session_id"] == "old" and data["overall"]["sessions"] == 1
    assert [e["call_id"] for e in data["events"]] == ["old-1", "old-2", "old-3"]
    assert data["events"][1]["kind"] == "unchanged"
    missing = sessions(store, "show", "nope")
    assert missing.exit_code == 2 and "no session 'nope'" in missing.stderr


def test_delete(store: Path) -> None:
    deleted = sessions(store, "delete", "new", "--json")
    assert deleted.exit_code == 0 and json.loads(deleted.stdout) == {"deleted": "new"}
    rows = json.loads(sessions(store, "list", "--json").stdout)["sessions"]
    assert [r["session_id"] for r in rows] == ["old"]
    again = sessions(store, "delete", "new")
    assert again.exit_code == 2 and "no session 'new'" in again.stderr


def test_gc_applies_retention_and_drops_unreferenced_blobs(store: Path, tmp_path: Path) -> None:
    with SqliteStore(store) as opened:
        opened.put_blob("xxh3:" + "0" * 32, b"no event refers to this")
        blobs_before = opened._conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]
    kept = sessions(store, "gc", "--json", "--older-than", "90")
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.stdout) == {
        "retention_days": 90.0, "sessions_deleted": 0, "blobs_deleted": 1,
    }  # fmt: skip
    # the default retention (30 days) comes from the settings of --root
    result = sessions(store, "gc", "--json", "--root", str(tmp_path))
    data = json.loads(result.stdout)
    assert data["retention_days"] == 30.0 and data["sessions_deleted"] == 1
    assert data["blobs_deleted"] >= 1  # the version only the old session saw
    with SqliteStore(store) as opened:
        assert [s.session_id for s in opened.sessions()] == ["new"]
        blobs_after = opened._conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]
    assert blobs_after == blobs_before - 1 - data["blobs_deleted"]
    (tmp_path / "pyproject.toml").write_text("[tool.filecache]\nretention_days = 0.5\n")
    text = sessions(store, "gc", "--root", str(tmp_path))
    assert text.exit_code == 0 and "unused for 0.5 days" in text.stdout


def test_errors_and_help(tmp_path: Path) -> None:
    missing = sessions(tmp_path / "none.db", "list")
    assert missing.exit_code == 2 and "no store at" in missing.stderr
    runner = CliRunner()
    for flag in ("-h", "--help"):
        group = runner.invoke(main, ["sessions", flag])
        assert group.exit_code == 0
        for name in SUBCOMMANDS:
            assert name in group.stdout
            helped = runner.invoke(main, ["sessions", name, flag])
            assert (
                helped.exit_code == 0 and "--json" in helped.stdout and "--store" in helped.stdout
            )
    assert runner.invoke(main, ["sessions", "show"]).exit_code == 2  # ID is required
    assert runner.invoke(main, ["sessions", "nope"]).exit_code == 2
