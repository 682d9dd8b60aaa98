"""The bash wrapper: read-like commands answered from the cache, byte-identical to the shell."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from filecache import FileCache
from filecache.shell.bash_reads import serve_bash
from filecache.shell.shell_parse import parse_shell_read

TEXT = "".join(f"line {i}: some text long enough to be worth caching here\n" for i in range(1, 61))


@pytest.mark.parametrize(
    ("command", "path", "numbering"),
    [
        ("cat a.py", "a.py", ""),
        ("cat -n a.py", "a.py", "cat"),
        ("nl -ba src/a.py", "src/a.py", "nl"),
        ("sed -n '10,20p' a.py", "a.py", ""),
        ("sed -n 5p a.py", "a.py", ""),
        ("sed -n -e '1,2p' -e '5,+3p' a.py", "a.py", ""),
        ("head -n 15 a.py", "a.py", ""),
        ("head -15 a.py", "a.py", ""),
        ("tail -n 5 a.py", "a.py", ""),
        ("tail -n +5 a.py", "a.py", ""),
        ("nl -ba a.py | sed -n '10,20p'", "a.py", "nl"),
        ("cat -n a.py | sed -n '3,4p'", "a.py", "cat"),
        ("head -n 10 a.py | sed -n '5,20p'", "a.py", ""),
        ("nl -ba 'my file.py' | head -n 3", "my file.py", "nl"),
        ("grep -n foo a.py", "a.py", ""),
        ("cat a.py | grep x", "a.py", ""),
    ],
)
def test_recognised_reads(command: str, path: str, numbering: str) -> None:
    read = parse_shell_read(command)
    assert read is not None and read.path == path and read.numbering == numbering


@pytest.mark.parametrize(
    "command",
    [
        "cat *.py",
        "cat a.py > b.py",
        "cat -A a.py",
        "cat a.py | head -n 2 b.py",
        "nl a.py",
        "sed -n '/def/,/return/p' a.py",
        "sed -n '1,5p' a.py b.py",
        "head -c 10 a.py",
        "tail -n -3 a.py",
        "cat a.py || true",
        "cd src && cat a.py",
        "cat ~/a.py",
        'cat "$HOME/a.py"',
        "sed -i 's/a/b/' a.py",
        "grep -i foo a.py",  # grep of one file with a literal pattern is a read; these are not
        "grep foo a.py b.py",
        'grep -n "fo.*o" a.py',
        "tail -f a.py",
        "cat $FILE",
        "cat a.py; rm a.py",
        "cat 'unterminated",
    ],
)
def test_everything_else_is_left_to_the_shell(command: str) -> None:
    assert parse_shell_read(command) is None


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
        "cat -n b.txt",
        "cat a.txt b.txt",
        "sed -n -e '1,3p' -e '50,+2p' a.txt",
        "sed -n '58,$p;1p' a.txt",
        "cat -n b.txt | sed -n '2p'",
        "nl -ba a.txt | head -n 12",
        "tail -n +57 a.txt",
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
