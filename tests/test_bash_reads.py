"""The bash wrapper: read-like commands answered from the cache, byte-identical to the shell."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from filecache import FileCache
from filecache.bash_reads import BashRead, parse_read, serve_bash

TEXT = "".join(f"line {i}: some text long enough to be worth caching here\n" for i in range(1, 61))


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat a.py", BashRead("a.py")),
        ("nl -ba src/a.py", BashRead("src/a.py", numbered=True)),
        ("sed -n '10,20p' a.py", BashRead("a.py", 10, 20)),
        ("sed -n 5p a.py", BashRead("a.py", 5, 5)),
        ("head -n 15 a.py", BashRead("a.py", 1, 15)),
        ("head -15 a.py", BashRead("a.py", 1, 15)),
        ("tail -n 5 a.py", BashRead("a.py", tail=5)),
        ("nl -ba a.py | sed -n '10,20p'", BashRead("a.py", 10, 20, numbered=True)),
        ("cat a.py | sed -n '3,4p'", BashRead("a.py", 3, 4)),
        ("head -n 10 a.py | sed -n '5,20p'", BashRead("a.py", 5, 10)),
    ],
)
def test_recognised_reads(command: str, expected: BashRead) -> None:
    assert parse_read(command) == expected


@pytest.mark.parametrize(
    "command",
    [
        "cat a.py b.py",
        "cat *.py",
        "cat a.py > b.py",
        "cat -A a.py",
        "sed -i 's/a/b/' a.py",
        "sed -n '20,10p' a.py",
        "grep -n foo a.py",
        "cat a.py | grep x",
        "tail -f a.py",
        "cat $FILE",
        "cat a.py; rm a.py",
        "cat 'unterminated",
    ],
)
def test_everything_else_is_left_to_the_shell(command: str) -> None:
    assert parse_read(command) is None


def _shell(root: Path) -> Callable[[str], str]:
    def run(command: str) -> str:
        return subprocess.run(
            ["bash", "-c", command], cwd=root, capture_output=True, text=True, check=False
        ).stdout

    return run


@pytest.mark.parametrize(
    "command",
    [
        "cat a.txt",
        "nl -ba a.txt",
        "sed -n '10,20p' a.txt",
        "head -n 7 a.txt",
        "tail -n 4 a.txt",
        "nl -ba a.txt | sed -n '55,70p'",
        "cat b.txt",
        "nl -ba b.txt",
        "tail -n 2 b.txt",
    ],
)
def test_content_answers_equal_the_shell_output(tmp_path: Path, command: str) -> None:
    (tmp_path / "a.txt").write_text(TEXT)
    (tmp_path / "b.txt").write_text("no final newline\nlast line")
    run = _shell(tmp_path)
    with FileCache(tmp_path, store=":memory:") as cache:
        assert serve_bash(cache.session(), command, run) == run(command)


def test_rereads_are_filerefs_and_other_commands_rehash(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(TEXT)
    run = _shell(tmp_path)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        serve_bash(session, "cat a.txt", run, "c1")
        again = serve_bash(session, "sed -n '10,20p' a.txt", run, "c2")
        assert again.startswith("[filecache] a.txt unchanged since your result c1")
        serve_bash(session, "sed -i 's/line 15:/LINE 15:/' a.txt", run, "c3")
        assert [w.call_id for w in session.ledger().writes["a.txt"]] == ["c3"]
        changed = serve_bash(session, "cat a.txt", run, "c4")
        assert changed.startswith("[filecache] a.txt changed since your result c1")
        assert "+LINE 15:" in changed
        missing = serve_bash(session, "cat nope.txt", run, "c5")
        assert missing == ""  # the shell's answer (its error goes to stderr)
