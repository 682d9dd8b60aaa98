"""Tests for ``filecache.cli``: help everywhere, sessions across processes, JSON, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from filecache.cli import main

CONSOLE_SCRIPT = Path(sys.executable).with_name("filecache")


def run(runner: CliRunner, root: Path, store: Path, *args: str, **kwargs: object) -> Result:
    """Invoke ``filecache COMMAND ... --root ROOT --store STORE``."""
    command, *rest = args
    argv = [command, *rest, "--root", str(root), "--store", str(store)]
    return runner.invoke(main, argv, catch_exceptions=False, **kwargs)  # type: ignore[arg-type]


def commands() -> list[str]:
    return sorted(main.commands)


def test_there_are_commands() -> None:
    assert {"read", "write", "edit"} <= set(main.commands)


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_main_has_help(runner: CliRunner, flag: str) -> None:
    result = runner.invoke(main, [flag])
    assert result.exit_code == 0
    assert "Usage:" in result.stdout
    for name in commands():
        assert name in result.stdout


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("name", commands())
def test_every_command_has_help(runner: CliRunner, name: str, flag: str) -> None:
    result = runner.invoke(main, [name, flag])
    assert result.exit_code == 0, result.output
    assert f"Usage: main {name}" in result.stdout or f"{name} [OPTIONS]" in result.stdout
    command = main.commands[name]
    assert isinstance(command, click.Command)
    assert command.help and command.help.split("\n")[0].strip() in " ".join(result.stdout.split())


def test_console_script_runs(root: Path, store_path: Path) -> None:
    assert CONSOLE_SCRIPT.exists(), CONSOLE_SCRIPT
    base = ["--root", str(root), "--store", str(store_path), "--session", "proc"]
    help_proc = subprocess.run(
        [str(CONSOLE_SCRIPT), "--help"], capture_output=True, text=True, timeout=60
    )
    assert help_proc.returncode == 0 and "read" in help_proc.stdout
    first = subprocess.run(
        [str(CONSOLE_SCRIPT), "read", "notes.txt", *base], capture_output=True, timeout=60
    )
    assert first.returncode == 0, first.stderr
    assert b"]\n 1\tline 1: the quick" in first.stdout
    second = subprocess.run(
        [str(CONSOLE_SCRIPT), "read", "notes.txt", *base], capture_output=True, timeout=60
    )
    assert second.returncode == 0, second.stderr
    assert b"unchanged" in second.stdout


def test_read_twice_in_one_session_gives_content_then_fileref(
    runner: CliRunner, root: Path, store_path: Path
) -> None:
    first = run(runner, root, store_path, "read", "notes.txt", "--session", "s1")
    assert first.exit_code == 0, first.stderr
    assert "\n60\tline 60: the quick brown fox" in first.stdout
    second = run(runner, root, store_path, "read", "notes.txt", "--session", "s1")
    assert second.exit_code == 0, second.stderr
    assert "notes.txt unchanged" in second.stdout
    assert "line 60" not in second.stdout
    other = run(runner, root, store_path, "read", "notes.txt", "--session", "s2")
    assert "\n60\tline 60" in other.stdout


def test_default_store_lives_in_the_root_and_is_git_ignored(runner: CliRunner, root: Path) -> None:
    args = ["read", "notes.txt", "--root", str(root), "--session", "d"]
    env = {"FILECACHE_STORE": None}
    assert "\n60\tline 60" in runner.invoke(main, args, env=env).stdout
    assert "notes.txt unchanged" in runner.invoke(main, args, env=env).stdout
    assert (root / ".filecache" / ".gitignore").read_text(encoding="utf-8").strip() == "*"


def test_session_from_environment(runner: CliRunner, root: Path, store_path: Path) -> None:
    env = {"FILECACHE_SESSION": "from-env"}
    first = run(runner, root, store_path, "read", "notes.txt", "--json", env=env)
    assert json.loads(first.stdout)["session"] == "from-env"
    second = run(runner, root, store_path, "read", "notes.txt", "--json", env=env)
    payload = json.loads(second.stdout)
    assert payload["kind"] == "unchanged"
    assert payload["base_call_id"] == json.loads(first.stdout)["call_id"]


def test_read_json_fields(runner: CliRunner, root: Path, store_path: Path) -> None:
    result = run(
        runner, root, store_path, "read", "notes.txt", "--json", "--session", "j", "--call-id", "c1"
    )
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert {"kind", "path", "version", "tokens", "tokens_full", "call_id", "session"} <= set(
        payload
    )
    assert payload["kind"] == "full" and payload["path"] == "notes.txt"
    assert payload["call_id"] == "c1" and payload["session"] == "j"
    assert payload["version"].startswith("xxh3:")
    assert payload["tokens"] == payload["tokens_full"] > 0


def test_read_with_range_and_raw(runner: CliRunner, root: Path, store_path: Path) -> None:
    result = run(runner, root, store_path, "read", "notes.txt", "--offset", "2", "--limit", "2")
    assert "]\n2\tline 2:" in result.stdout and "\n4\t" not in result.stdout
    raw = run(runner, root, store_path, "read", "src/app.py", "--raw")
    assert raw.stdout == "def main():\n    return 1\n"


def test_read_raw_keeps_escape_sequences(runner: CliRunner, root: Path, store_path: Path) -> None:
    text = "plain \x1b[31mred\x1b[0m text\n"
    (root / "ansi.txt").write_text(text, encoding="utf-8")
    result = run(runner, root, store_path, "read", "ansi.txt", "--raw")
    assert result.stdout == text


def test_read_raw_prints_the_content_in_a_session_that_has_it(
    runner: CliRunner, root: Path, store_path: Path, notes: str
) -> None:
    """``read --raw F > copy`` copies F: never a FileRef or a diff, even in a session that has
    the file (FILECACHE_SESSION), unchanged or changed since."""
    env = {"FILECACHE_SESSION": "raw"}
    first = run(runner, root, store_path, "read", "notes.txt", "--raw", env=env)
    again = run(runner, root, store_path, "read", "notes.txt", "--raw", env=env)
    assert first.stdout == again.stdout == notes  # on 35ed230: "[filecache] notes.txt unchanged"
    changed = notes.replace("line 5:", "line five:")
    (root / "notes.txt").write_text(changed, encoding="utf-8")
    after = run(runner, root, store_path, "read", "notes.txt", "--raw", env=env)
    assert after.stdout == changed  # on 35ed230: a diff
    part = run(runner, root, store_path, "read", "notes.txt", "--raw", "--offset", "2",
               "--limit", "2", env=env)  # fmt: skip
    assert part.stdout == "".join(changed.splitlines(keepends=True)[1:3])


def test_write_from_stdin_and_content(runner: CliRunner, root: Path, store_path: Path) -> None:
    piped = run(runner, root, store_path, "write", "new/a.txt", input="from stdin\n")
    assert piped.exit_code == 0, piped.stderr
    assert (root / "new" / "a.txt").read_text(encoding="utf-8") == "from stdin\n"
    assert "a.txt" in piped.stdout
    given = run(runner, root, store_path, "write", "b.txt", "--content", "given\r\nCRLF")
    assert given.exit_code == 0, given.stderr
    assert (root / "b.txt").read_bytes() == b"given\r\nCRLF"
    as_json = run(runner, root, store_path, "write", "c.txt", "--content", "x\n", "--json")
    assert json.loads(as_json.stdout)["kind"] == "written"


def test_edit(runner: CliRunner, root: Path, store_path: Path) -> None:
    result = run(
        runner, root, store_path, "edit", "src/app.py", "--old", "return 1", "--new", "return 2"
    )
    assert result.exit_code == 0, result.stderr
    assert (root / "src" / "app.py").read_text(encoding="utf-8") == "def main():\n    return 2\n"
    (root / "dup.txt").write_text("x\nx\n", encoding="utf-8")
    ambiguous = run(runner, root, store_path, "edit", "dup.txt", "--old", "x", "--new", "y")
    assert ambiguous.exit_code == 2 and "2 times" in ambiguous.stderr
    every = run(
        runner, root, store_path, "edit", "dup.txt", "--old", "x", "--new", "y", "--replace-all"
    )
    assert every.exit_code == 0, every.stderr
    assert (root / "dup.txt").read_text(encoding="utf-8") == "y\ny\n"


def test_edit_in_session_makes_next_read_a_fileref(
    runner: CliRunner, root: Path, store_path: Path
) -> None:
    run(runner, root, store_path, "read", "notes.txt", "--session", "e")
    edited = run(
        runner,
        root,
        store_path,
        "edit",
        "notes.txt",
        "--old",
        "line 5:",
        "--new",
        "line five:",
        "--session",
        "e",
    )
    assert edited.exit_code == 0, edited.stderr
    again = run(runner, root, store_path, "read", "notes.txt", "--session", "e", "--json")
    assert json.loads(again.stdout)["kind"] == "unchanged"


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["read", "../outside/secret.txt"], 2, "outside the root"),
        (["read", "missing.txt"], 2, "no such file"),
        (["read", "logo.png"], 3, "PNG image"),
        (["read", "notes.txt", "--offset", "99"], 2, "60 lines"),
        (["write", "../outside/new.txt", "--content", "x"], 2, "outside the root"),
        (["edit", "notes.txt", "--old", "absent", "--new", "x"], 2, "not found"),
    ],
)
def test_errors_exit_with_class_code_on_stderr(
    runner: CliRunner,
    root: Path,
    outside: Path,
    store_path: Path,
    args: list[str],
    code: int,
    needle: str,
) -> None:
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    result = run(runner, root, store_path, *args)
    assert result.exit_code == code
    assert result.stdout == ""
    assert result.stderr.startswith("filecache: ")
    assert needle in result.stderr
    assert not (outside / "new.txt").exists()
