"""A new user's first commands: a FileRef on the second read, nothing made by a command that only
reads, one exit code per cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from filecache.cli import CLI_SESSION, main


def test_cli_calls_without_a_session_share_one_per_root(
    runner: CliRunner, root: Path, store_path: Path
) -> None:
    """Each call without ``--session`` started a new session: a second read never showed a
    FileRef, and ``stats`` filled with one-read sessions."""
    base = ["notes.txt", "--root", str(root), "--store", str(store_path), "--json"]
    first = json.loads(runner.invoke(main, ["read", *base]).stdout)
    again = json.loads(runner.invoke(main, ["read", *base]).stdout)
    assert (first["kind"], again["kind"]) == ("full", "unchanged")
    assert first["session"] == again["session"] == CLI_SESSION
    other = json.loads(runner.invoke(main, ["read", *base, "--session", "mine"]).stdout)
    assert other["kind"] == "full"
    assert f"Default: {CLI_SESSION!r}" in " ".join(
        runner.invoke(main, ["read", "-h"]).stdout.split()
    )


@pytest.mark.parametrize(
    "args",
    [["stats"], ["stats", "--json"], ["sessions", "list"], ["sessions", "show", "x"],
     ["archive", "show", "call_1"], ["outline", "src/app.py"]],
)  # fmt: skip
def test_read_only_commands_make_nothing(
    runner: CliRunner, root: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """They left an empty ``.filecache/``; ``archive show`` made a whole store."""
    monkeypatch.chdir(root)
    monkeypatch.delenv("FILECACHE_STORE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(root.parent / "cache"))  # no gateway store either
    before = sorted(p.name for p in root.iterdir())
    result = runner.invoke(main, args)
    assert sorted(p.name for p in root.iterdir()) == before, result.output
    if args[0] != "outline":
        assert result.exit_code == 2 and "no store at" in result.stderr


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\x7fELF\x02\x01\x01" + bytes(64), "filecache serves text files only"),
        ("caf\u00e9\n".encode("latin-1"), "not valid UTF-8"),
    ],
)
def test_read_and_edit_exit_alike_for_one_cause(
    runner: CliRunner, root: Path, store_path: Path, data: bytes, words: str
) -> None:
    """A binary file: read exited 3 and edit 2 (with another message)."""
    (root / "f.dat").write_bytes(data)
    base = ["--root", str(root), "--store", str(store_path)]
    read = runner.invoke(main, ["read", "f.dat", *base])
    edit = runner.invoke(main, ["edit", "f.dat", "--old", "caf", "--new", "x", *base])
    assert read.exit_code == edit.exit_code == 3
    assert words in read.stderr and words in edit.stderr
    assert (root / "f.dat").read_bytes() == data
