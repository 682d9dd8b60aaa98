"""Shell reads answered from the cache are byte-identical to the shell (real subprocesses).

The commands are every distinct read the mini-swe-agent trajectories of the corpus ran
(``fixtures/shell/recorded_commands.json``), on files made to fit them, plus random commands
of the recognised forms on random files (empty lines, CRLF, tabs, no final newline, nl's
section delimiters).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filecache import FileCache
from filecache.core.text import split_lines
from filecache.shell.bash_reads import serve_bash
from filecache.shell.shell_parse import NotServable, parse_shell_read, render_output

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "shell"
RECORDED = json.loads((FIXTURES / "recorded_commands.json").read_text(encoding="utf-8"))


def shell(root: Path) -> Callable[[str], str]:
    def run(command: str) -> str:
        out = subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, check=False)
        return out.stdout.decode("utf-8")

    return run


def _text(lines: int, final_newline: bool) -> str:
    rows = [
        f"\tdef f_{n}(x):  # line {n}" if n % 7 else "" for n in range(1, lines + 1)
    ]  # tabs, empty lines
    text = "\n".join(rows)
    return text + "\n" if final_newline and rows else text


def _make_files(root: Path, command: str, short: bool) -> None:
    read = parse_shell_read(command)
    assert read is not None
    top = max([int(x) for x in re.findall(r"\d+", command)] + [12])
    for path in read.paths:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_text(top // 2 if short else top + 20, not short), encoding="utf-8")


@pytest.mark.parametrize("command", RECORDED["reads"])
@pytest.mark.parametrize("short", [False, True], ids=["long", "short-no-eol"])
def test_recorded_reads_first_answer_equals_the_shell(
    tmp_path: Path, command: str, short: bool
) -> None:
    _make_files(tmp_path, command, short)
    run = shell(tmp_path)
    expected = run(command)
    with FileCache(tmp_path, store=":memory:") as cache:
        assert serve_bash(cache.session(), command, run) == expected


UNTERMINATED = [
    "sed -n '1,3p;2,4p' F | head -n 4",  # found by the property below at 20,000 examples
    "sed -n '1,3p;2,4p' F",
    "sed -n '1,3p;2,4p' F | tail -n 2",
    "sed -n '3p;3p' F | head -n 1",
    "cat F | head -n 2",
    "cat F | head -n 3",
    "cat -n F | tail -n 1",
    "nl -ba F | sed -n '2,3p'",
]


@pytest.mark.parametrize("command", UNTERMINATED)
def test_a_last_line_without_newline_ends_the_output_as_the_shell_ends_it(
    tmp_path: Path, command: str
) -> None:
    """Only the output's last line can lack its newline: sed writes one before its next output
    line (a line printed twice is open only the second time), and head keeps it only when the
    open line is still the last one it passes."""
    (tmp_path / "F").write_bytes(b"x\nx\nx")
    read = parse_shell_read(command)
    assert read is not None, command
    assert render_output(read, [split_lines("x\nx\nx")]) == shell(tmp_path)(command)


@pytest.mark.parametrize("command", RECORDED["not_reads"])
def test_recorded_commands_that_are_not_plain_reads_go_to_the_shell(command: str) -> None:
    assert parse_shell_read(command) is None


@pytest.mark.parametrize(
    "command",
    ["cat F\r", "cat F\u00a0", "\u00a0cat F", "cat F\x0b", "cat F\x0c", "cat F\x1c",
     "cat F\u2028", "head -n 1 F\x85"],
)  # fmt: skip
def test_only_blanks_bash_splits_at_are_trimmed_from_a_command(
    tmp_path: Path, command: str
) -> None:
    """bash splits words at spaces, tabs and newlines only: ``cat F\\r`` (a command with a CRLF
    ending) or ``cat F`` and a no-break space names a file ``F`` and that character, which is
    not there, so bash prints nothing on stdout. ``parse_shell_read`` trimmed the command with
    ``str.strip`` (every Unicode space) and served F."""
    (tmp_path / "F").write_text("one\ntwo\n", encoding="utf-8")
    run = shell(tmp_path)
    read = parse_shell_read(command)
    assert read is None or read.paths != ("F",)  # bash's word, or the shell's to run
    with FileCache(tmp_path, store=":memory:") as cache:
        assert serve_bash(cache.session(), command, run) == run(command) == ""
    assert parse_shell_read(f" \t{command.strip()}\n") is not None  # bash's blanks: trimmed


@pytest.mark.parametrize(
    "command",
    ["head -n \u00b2 F", "head -\u00b2 F", "tail -n +\u00b2 F", "grep -A \u00b2 one F",
     "head -n \u0663 F", "sed -n '\u0663p' F", "sed -n '1,\u0663p' F", "grep -C \u0663 one F",
     "grep -B\u0663 one F", "head -n 18446744073709551616 F", "tail -n 18446744073709551616 F",
     "tail -n +18446744073709551616 F", "head -18446744073709551616 F"],
)  # fmt: skip
def test_counts_the_tools_refuse_go_to_the_shell(tmp_path: Path, command: str) -> None:
    """Only ASCII digits are numbers to head, tail, sed and grep, and head and tail refuse a
    count past 2**64 - 1. ``str.isdigit`` took a superscript two (``int`` then raised
    ValueError out of ``parse_shell_read``) and an Arabic-Indic three (served as 3)."""
    (tmp_path / "F").write_text("one\ntwo\nthree\nfour\n", encoding="utf-8")
    run = shell(tmp_path)
    assert parse_shell_read(command) is None
    with FileCache(tmp_path, store=":memory:") as cache:
        assert serve_bash(cache.session(), command, run) == run(command) == ""
    assert parse_shell_read("head -n 18446744073709551615 F") is not None  # the largest


LINE = st.sampled_from(["x", "", "  y z", "\\:", "\\:\\:", "t\tab", "cr\r", "ü é", "p;q"])
FIRST = st.sampled_from(
    ["cat F", "cat -n F", "nl -ba F", "cat F G", "cat -n F G", "head F", "tail F"]
    + [f"head -n {n} F" for n in (0, 1, 3, 20)]
    + [f"head -{n} F" for n in (2, 5)]
    + [f"tail -n {n} F" for n in (0, 1, 4, 20)]
    + [f"tail -n +{n} F" for n in (1, 3, 9)]
    + [f"sed -n '{s}' F" for s in ("3,7p", "5p", "$p", "4,$p", "2,+3p", "7,3p", "1,3p;2,4p")]
    + ["sed -n -e '1,2p' -e '5,6p' F", "sed -n -e '$p' -e '1p' F"]
)
FILTER = st.sampled_from(
    ["", " | sed -n '2,5p'", " | sed -n '3,$p'", " | head -n 4", " | tail -n 2",
     " | tail -n +2 | head -n 2", " | sed -n -e '2,3p' -e '1p'"]
)  # fmt: skip


@st.composite
def files(draw: st.DrawFn) -> str:
    lines = draw(st.lists(LINE, max_size=14))
    text = "\n".join(lines)
    return text + "\n" if lines and draw(st.booleans()) else text


@settings(
    # Every example runs real bash (dozens of processes): a fifth of the invariant's examples.
    max_examples=max(20, int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")) // 5),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=FIRST, pipe=FILTER, f=files(), g=files())
def test_random_reads_render_as_the_shell_prints(tmp_path_factory, first, pipe, f, g) -> None:
    root = tmp_path_factory.mktemp("r")
    (root / "F").write_bytes(f.encode())
    (root / "G").write_bytes(g.encode())
    command = first + ("" if " G" in first else pipe)
    read = parse_shell_read(command)
    assert read is not None, command
    lines = [split_lines(f), split_lines(g)][: len(read.paths)]
    try:
        mine = render_output(read, lines)
    except NotServable:
        return  # nl's delimiter lines, cat -n joining files: the shell answers these
    assert mine == shell(root)(command)
