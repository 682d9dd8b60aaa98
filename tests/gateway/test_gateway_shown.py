"""filecache.gateway.shown: what each host's own read result shows (real log excerpts in
fixtures/gateway/host_reads.json, and the formats the host adapters' tests pin)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from filecache.gateway.shown import UNKNOWN, changed_path, shown_by, working_folder
from filecache.prune.codecs.base import ToolCall

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "gateway" / "host_reads.json"
READS: dict[str, Any] = json.loads(HERE.read_text())


def call(name: str, args: dict[str, Any], cid: str = "c1") -> ToolCall:
    return ToolCall(cid, name, args, json.dumps(args), True, 0, 0)


def use(entry: dict[str, Any]) -> tuple[ToolCall, str]:
    block = entry["tool_use"]
    content = entry["tool_result"]["content"]
    text = content if isinstance(content, str) else "".join(b["text"] for b in content)
    return call(block["name"], block["input"], block["id"]), text


def test_claude_code_read_with_arrows_and_a_reminder() -> None:
    c, text = use(READS["claude_read_arrow_reminder"])
    shown = shown_by(c, text)
    assert shown is not None
    assert shown.path == "/root/data/tess_lc.txt"
    assert (shown.start, shown.end) == (1, 50)
    assert shown.lines[0] == "# column1: time (mjd)"
    assert shown.suffix.lstrip("\n").startswith("<system-reminder>")
    assert "<system-reminder>" not in "".join(shown.lines)


def test_claude_code_read_with_tabs_and_an_offset() -> None:
    c, text = use(READS["cc2328_toolu_m2"])
    shown = shown_by(c, text)
    assert shown is not None
    assert shown.start == 30 and shown.lines[0] == "class LineMap:"
    whole = shown_by(*use(READS["cc2328_toolu_m1"]))
    assert whole is not None and whole.start == 1
    assert whole.line(30) == shown.line(30)


def test_claude_code_bash_cat_relative_to_the_working_folder() -> None:
    c, text = use(READS["cc2328_toolu_c1"])
    assert shown_by(c, text) is not None
    shown = shown_by(c, text, "/home/user/proj")
    assert shown is not None and shown.path == "/home/user/proj/trace_format.py"
    assert shown.start == 1
    assert shown.lines[0].startswith('"""The parts of the session trace format')


def test_edits_and_shell_changes_name_their_file() -> None:
    c, _ = use(READS["cc2328_toolu_e1"])
    assert changed_path(c) == "/home/user/proj/metrics.py"
    s, _ = use(READS["cc2328_toolu_s1"])
    assert changed_path(s, "/home/user/proj") == UNKNOWN
    assert changed_path(call("apply_patch", {})) == UNKNOWN
    assert changed_path(call("Read", {"file_path": "/a"})) is None


def test_swe_agent_cat_n_view_under_its_header() -> None:
    entry = READS["swe_agent_read_file"]
    fn = entry["tool_call"]["function"]
    c = call(fn["name"], json.loads(fn["arguments"]))
    shown = shown_by(c, entry["tool"]["content"], "/testbed")
    assert shown is not None
    assert shown.path == "/testbed/astropy/timeseries/core.py"
    assert shown.prefix.startswith("Here's the result of running `cat -n`")
    assert shown.lines[0].startswith("# Licensed under a 3-clause BSD")


OPENCODE = (
    "<path>/p/a.txt</path>\n<type>file</type>\n<content>\n1: alpha\n2: beta\n3: gamma\n\n"
    "(End of file - total 3 lines)\n</content>"
)


def test_opencode_read_keeps_its_frame() -> None:
    shown = shown_by(call("read", {"filePath": "/p/a.txt"}), OPENCODE)
    assert shown is not None
    assert shown.lines == ("alpha", "beta", "gamma")
    assert shown.prefix.endswith("<content>\n")
    assert shown.suffix.startswith("\n\n(End of file")


@pytest.mark.parametrize(
    ("args", "output", "start", "lines"),
    [
        ({"cmd": "sed -n 2,3p a.txt", "workdir": "/p"}, "b\nc\n", 2, ("b", "c")),
        ({"cmd": "cat -n a.txt", "workdir": "/p"}, "     1\ta\n     2\tb\n", 1, ("a", "b")),
        ({"cmd": "cd sub && head -n 2 ../a.txt", "workdir": "/p"}, "a\nb\n", 1, ("a", "b")),
    ],
)
def test_codex_exec_command_reads(
    args: dict[str, Any], output: str, start: int, lines: tuple[str, ...]
) -> None:
    framed = (
        "Chunk ID: 1a2b\nWall time: 0.0012 seconds\nProcess exited with code 0\n"
        f"Original token count: 4\nOutput:\n{output}"
    )
    shown = shown_by(call("exec_command", args), framed)
    assert shown is not None
    assert shown.path == "/p/a.txt"
    assert (shown.start, shown.lines) == (start, lines)


def test_codex_shell_json_and_failures() -> None:
    ok = json.dumps({"output": "x\ny\n", "metadata": {"exit_code": 0}})
    shell = call("shell", {"command": ["bash", "-lc", "cat a.txt"], "workdir": "/p"})
    found = shown_by(shell, ok)
    assert found is not None and found.lines == ("x", "y")
    failed = json.dumps({"output": "cat: a.txt: No such file", "metadata": {"exit_code": 1}})
    assert shown_by(shell, failed) is None
    exited = "Process exited with code 1\nOutput:\nnope\n"
    assert shown_by(call("exec_command", {"cmd": "cat a.txt"}), exited) is None


@pytest.mark.parametrize(
    "command",
    ["tail -n 3 a.txt", "grep -n x a.txt", "cat a.txt b.txt", "cat a.txt | wc -l", "ls"],
)
def test_reads_whose_lines_cannot_be_placed_are_none(command: str) -> None:
    assert shown_by(call("Bash", {"command": command}), "a\nb\nc") is None


def test_a_filecache_reference_is_not_content() -> None:
    ref = "[filecache] a.py unchanged since your result c0 (lines 1-3 as shown there): use it.\n"
    assert shown_by(call("Read", {"file_path": "/p/a.py"}), ref) is None
    assert shown_by(call("Read", {"file_path": "/p/a.py"}), "     1→x\n     3→y") is None


def test_working_folder_from_the_hosts_prompts() -> None:
    assert working_folder(["x", "<env>\nWorking directory: /home/me/p\n</env>"]) == "/home/me/p"
    assert working_folder([" - Primary working directory: /w/q\n"]) == "/w/q"
    assert working_folder(["<environment_context><cwd>/c/d</cwd></environment_context>"]) == "/c/d"
    assert working_folder(["nothing"]) is None
