"""``filecache read`` without click (``filecache.cli_read.fast_read``): every command line it
answers gets click's output, message and exit code; every other goes to click."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from filecache.cli_read import fast_read
from filecache.core.planner import MODES
from filecache.tools import READ_FILE

CLICK = "import sys; from filecache.cli import main; main(prog_name='filecache')"
FAST = "import sys; from filecache.entry import main; main()"
ANSWERED = [
    ["read", "a.py"],
    ["read", "a.py"],  # a FileRef
    ["read", "a.py", "--offset", "2", "--limit", "3"],
    ["read", "--limit=2", "a.py"],
    ["read", "--fresh", "a.py"],
    ["read", "a.py", "--raw"],
    ["read", "a.py", "--json", "--call-id", "c1", "--fresh"],
    ["read", "missing.py"],
    ["read", "a.py", "--offset=99"],
    ["read", "a.py", "--mode", "outline"],
    ["read", "a.py", "--symbol", "f"],
    ["read", "a.py", "--symbol", "f", "--offset", "2"],
    ["read", "a.py", "--session", "other"],
    ["read", "a.py", "--root", "sub"],
    ["read", "b.txt", "--root=sub", "--store", ":memory:"],
    ["read", "../a.py"],
]
LEFT_TO_CLICK = [
    ["read"],
    ["read", "a.py", "-h"],
    ["read", "a.py", "--help"],
    ["read", "a.py", "b.py"],
    ["read", "a.py", "--mode", "bogus"],
    ["read", "a.py", "--offset", "x"],
    ["read", "a.py", "--offset"],
    ["read", "a.py", "--root", "nowhere"],
    ["read", "a.py", "--root", "a.py"],
    ["read", "a.py", "--offset", "1", "--offset", "2"],
    ["read", "a.py", "--json=1"],
    ["read", "a.py", "--unknown"],
    ["read", "--", "a.py"],
    ["read", "-"],
    ["outline", "a.py"],
]


def _tree(root: Path) -> Path:
    root.mkdir()
    (root / "a.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(9)))
    (root / "a.py").write_text("def f(x):\n    return x\n" + (root / "a.py").read_text())
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("one\ntwo\nthree\n")
    return root


def _run(code: str, args: list[str], cwd: Path) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FILECACHE_")}
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.argv[1:] = {args!r}; {code.split('; ', 1)[1]}"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    def same(text: str) -> str:  # what differs between the two copies: ids made, the root
        return re.sub(r"\bfc-[0-9a-f]+", "fc-ID", text).replace(str(cwd), "ROOT")

    return proc.returncode, same(proc.stdout), same(proc.stderr)


def test_every_line_it_answers_prints_what_click_prints(tmp_path: Path) -> None:
    """The same command lines, in order, on two copies of one tree: one through the entry
    point (without click), one through click; outputs, messages and exit codes are equal."""
    fast, slow = _tree(tmp_path / "fast"), _tree(tmp_path / "slow")
    for args in ANSWERED:
        assert _run(FAST, args, fast) == _run(CLICK, args, slow), args
    first = _run(FAST, ["read", "a.py", "--session", "third"], fast)
    assert first[0] == 0 and first[1].startswith("[a.py: 20 lines")
    again = _run(FAST, ["read", "a.py", "--session", "third"], fast)
    assert again[0] == 0 and "a.py unchanged since your result fc-ID" in again[1]


@pytest.mark.parametrize("args", LEFT_TO_CLICK, ids=" ".join)
def test_other_lines_go_to_click(args: list[str], tmp_path: Path) -> None:
    _tree(tmp_path / "t")
    os.chdir(tmp_path / "t")
    assert fast_read(args) is None


def test_the_fast_read_imports_no_click(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    code = (
        "import os, sys; sys.argv = ['filecache', 'read', 'a.py']\n"
        "def end(code, _exit=os._exit):\n"
        "    print(sorted(m for m in sys.modules if m.split('.')[0] == 'click'), file=sys.stderr)\n"
        "    sys.stderr.flush()\n"
        "    _exit(code)\n"
        "os._exit = end  # the entry ends a read with os._exit: look before it does\n"
        "from filecache.entry import main\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert proc.stderr.strip() == "[]" and proc.stdout.startswith("[a.py: 20 lines")


def test_the_modes_it_accepts_are_the_tool_tables() -> None:
    assert tuple(READ_FILE.param("mode").enum or ()) == MODES
