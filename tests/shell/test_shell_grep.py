"""``grep`` of one file, served as a read, prints what GNU grep prints (real subprocesses).

The forms the mini-swe-agent runs use (``grep -n PATTERN FILE``, ``grep PATTERN FILE``,
``nl -ba FILE | grep -A 20 'def f('``, ``cat FILE | grep -C 2 x``), options that change the
output (``-n``, ``-A``/``-B``/``-C`` and their ``--`` separators, ``-e``, ``-F``/``-E``), and
hostile ones that must go to the shell (special characters, ``-i``/``-v``/``-w``/``-o``/``-c``,
several files, globs, variables, redirections, a filter after grep).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filecache import FileCache
from filecache.core.text import split_lines
from filecache.shell.bash_reads import serve_bash
from filecache.shell.shell_parse import parse_shell_read, render_output, selection

SOURCE = (
    "".join(
        f"def f_{n}(x):\n    return helper(x, {n})  # CONVERT_TZ\n"
        if n % 5 == 0
        else f"x_{n} = {n}\n"
        for n in range(1, 60)
    )
    + "def get_%s_display(self):\n\tpass"
)  # a tab, a %, no final newline


def run(root: Path, command: str) -> str:
    out = subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, check=False)
    return out.stdout.decode("utf-8")


SERVED = [
    'grep -n "CONVERT_TZ" m.py',
    'grep "def f_1" m.py',
    "grep -n 'def f_' m.py",
    'grep -n -A 3 "def f_2" m.py',
    'grep -A2 -n "def f_" m.py',
    'grep -B 1 -n "return helper" m.py',
    'grep -C 2 "x_3" m.py',
    'grep -n -C 20 "get_%s_display" m.py',
    'grep -A 5 -C 1 "def f_5" m.py',  # -A wins over -C for the lines after
    "grep -nF 'helper(x,' m.py",
    "grep -F 'x, 1' m.py",
    "grep -E 'x_1-' m.py",
    "grep -e '-x' m.py",
    'grep -n -e "  return" m.py',
    'cat m.py | grep -A 20 "def f_50"',
    'nl -ba m.py | grep -A 20 "def f_1("',
    'nl -ba m.py | grep -C 20 "get_%s_display"',
    "cat -n m.py | grep -n '  1'",  # the number is part of the line grep sees
    "nl -ba m.py | grep 5",
    "sed -n '10,40p' m.py | grep -n 'def'",
    "head -n 30 m.py | grep -B 2 x_2",
    "grep -n nothing-matches m.py",
    # a context option of 0 still puts "--" between groups (GNU grep); served without it before
    'grep -n -A 0 "def f_1" m.py',
    "grep -C0 CONVERT_TZ m.py",
    "nl -ba m.py | grep -B 0 'def f_'",
]


@pytest.mark.parametrize("command", SERVED)
def test_grep_reads_render_as_gnu_grep_prints(tmp_path: Path, command: str) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    read = parse_shell_read(command)
    assert read is not None and read.grep is not None, command
    lines = split_lines(SOURCE)
    assert render_output(read, [lines]) == run(tmp_path, command)


@pytest.mark.parametrize(
    "command",
    [
        'grep "q.c\\*q.d" m.py',  # regular expression characters
        "grep 'a.b' m.py",
        "grep '^def' m.py",
        "grep -E 'x_1+' m.py",
        "grep -E 'a|b' m.py",
        "grep -i def m.py",
        "grep -v def m.py",
        "grep -w def m.py",
        "grep -o def m.py",
        "grep -c def m.py",
        "grep -l def m.py",
        "grep -rn def .",
        "grep -n def m.py other.py",  # several files: names before every line
        "grep -n def *.py",
        'grep "$PAT" m.py',
        "grep def m.py > out.txt",
        "grep def m.py | head -n 2",  # a filter after grep
        "grep -A x def m.py",
        "grep --after-context=2 def m.py",
        "grep def",  # stdin
        "grep -n def m.py && cat m.py",
        "grep '' m.py",
        "cat m.py other.py | grep def",
        "grep -e def -e x m.py",
        "grep -n -- def m.py",  # end of options: not taken
    ],
)
def test_greps_that_print_otherwise_go_to_the_shell(command: str) -> None:
    assert parse_shell_read(command) is None


def test_served_grep_equals_the_shell_and_stays_content_when_run_again(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    command = 'nl -ba m.py | grep -A 3 "def f_1"'
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        first = serve_bash(session, command, lambda c: run(tmp_path, c), call_id="g1")
        assert first == run(tmp_path, command)
        again = serve_bash(session, command, lambda c: run(tmp_path, c), call_id="g2")
        assert again == first  # which lines match is news each time: never a FileRef
        held = session.ledger().calls["g1"]
        assert held.path == "m.py"
        # an unserved grep runs in the shell
        assert serve_bash(session, "grep -c def m.py", lambda c: run(tmp_path, c)) == "12\n"


LINE = st.sampled_from(
    ["x", "", "def f(x):", "  return x  # def", "--", "1:def", "t\tdef", "cr def\r", "ü déf"]
)
GREP = st.sampled_from(
    ["grep def F", "grep -n def F", "grep -n -A 1 def F", "grep -B 2 def F", "grep -C 1 -n def F",
     "grep -nF 'f(x' F", "grep -n -e '--' F", "grep -e -- F", "cat F | grep -n def",
     "nl -ba F | grep -A 2 def", "cat -n F | grep -C 1 1", "tail -n 5 F | grep -B 1 -n x",
     "sed -n '2,9p' F | grep -A 1 def", "grep -n -A 0 def F", "cat F | grep -C0 x"]
)  # fmt: skip


@settings(
    max_examples=max(20, int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")) // 5),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(command=GREP, rows=st.lists(LINE, max_size=16), final=st.booleans())
def test_random_greps_render_as_the_shell_prints(tmp_path_factory, command, rows, final) -> None:
    root = tmp_path_factory.mktemp("g")
    text = "\n".join(rows) + ("\n" if rows and final else "")
    (root / "F").write_bytes(text.encode())
    read = parse_shell_read(command)
    assert read is not None and read.grep is not None, command
    lines = split_lines(text)
    assert render_output(read, [lines]) == run(root, command)
    picked = selection(read, [len(lines)], [lines])
    assert len(picked) == len(set(picked))  # each line printed once
