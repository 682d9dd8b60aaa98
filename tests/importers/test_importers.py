"""Importers: real logs (fixtures/imports) -> session traces, then replay of the result."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from filecache.cli import main
from filecache.importers import find_logs, import_logs
from filecache.importers.claude_code import parse_claude_code
from filecache.importers.logs import changed_paths, relative_path, trace_name
from filecache.importers.mini_swe_agent import parse_mini_swe_agent
from filecache.importers.swe_agent import parse_swe_agent
from filecache.importers.trace import write_trace
from filecache.replay.replay import replay_session
from filecache.replay.trace_format import PLACEHOLDER, edit_pairs, unknown_calls

FIXTURES = Path(__file__).parents[2] / "fixtures" / "imports"
BUNDLED = Path(__file__).parents[2] / "fixtures" / "sessions"  # the quick start's traces
SWE_SESSIONS = (
    "lm32b__astropy__astropy-13033",
    "lm32b__pytest-dev__pytest-7571",
    "sonnet4__sympy__sympy-13480",
)


def _provided(name: str) -> Path:
    """The provided trace of a SWE-agent log: one the quick start bundles is not kept twice."""
    bundled = BUNDLED / name
    return bundled if bundled.is_dir() else FIXTURES / "swe-agent" / "traces" / name


def _trace(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((directory / "transcript.json").read_text("utf-8"))
    return data


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _calls(messages: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        c["id"]: (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for m in messages
        for c in m.get("tool_calls") or ()
    }


# -- SWE-agent ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SWE_SESSIONS)
def test_swe_agent_import_equals_the_provided_trace(tmp_path: Path, name: str) -> None:
    reference = _provided(name)
    recorded = parse_swe_agent(FIXTURES / "swe-agent" / "raw" / f"{name}.traj.gz")
    result = write_trace(recorded, tmp_path, repo=reference / "files")
    assert result.directory == tmp_path / name
    assert not result.rebuilt and result.unknown_calls == {} and result.unknown_files == {}
    mine, theirs = _trace(result.directory), _trace(reference)
    assert mine["messages"] == theirs["messages"]
    assert mine["base_commit"] == theirs["base_commit"]
    assert "unknown" not in mine
    assert _tree(result.directory / "files") == _tree(reference / "files")


def test_swe_agent_import_replays_to_the_provided_traces_totals(tmp_path: Path) -> None:
    for name in SWE_SESSIONS:
        reference = _provided(name)
        recorded = parse_swe_agent(FIXTURES / "swe-agent" / "raw" / f"{name}.traj.gz")
        imported = write_trace(recorded, tmp_path, repo=reference / "files").directory
        ours, provided = replay_session(imported), replay_session(reference)
        assert ours.skipped == {} and ours.files_identical and ours.mismatches == ()
        # Everything but the source line (which names the log it came from) is equal.
        assert dataclasses.replace(ours, source="") == dataclasses.replace(provided, source="")
        assert ours.to_json(detail=False) | {"source": ""} == provided.to_json(detail=False) | {
            "source": ""
        }


def test_swe_agent_import_without_the_repository_rebuilds_from_the_views(tmp_path: Path) -> None:
    name = "lm32b__pytest-dev__pytest-7571"
    recorded = parse_swe_agent(FIXTURES / "swe-agent" / "raw" / f"{name}.traj.gz")
    result = write_trace(recorded, tmp_path)
    assert result.rebuilt and result.files == ("src/_pytest/logging.py",)
    rebuilt = (result.directory / "files" / "src/_pytest/logging.py").read_text("utf-8")
    original = (_provided(name) / "files/src/_pytest/logging.py").read_text()
    # Every line a view showed is the original's (tabs expanded, as SWE-agent shows them); the
    # rest are placeholders, listed as unknown.
    unknown = result.unknown_files["src/_pytest/logging.py"]
    for n, (mine, real) in enumerate(
        zip(rebuilt.splitlines(), original.splitlines(), strict=False), 1
    ):
        assert mine == PLACEHOLDER or mine == real.expandtabs(), n
        assert (mine == PLACEHOLDER) == any(a <= n <= b for a, b in unknown.unknown)
    replay = replay_session(result.directory)
    assert set(replay.skipped) == set(result.unknown_calls)
    assert replay.files_identical and replay.stale_views == 0


# -- mini-swe-agent -------------------------------------------------------------------------------


def test_mini_swe_agent_commands_stay_bash_and_reads_teach_the_rebuild() -> None:
    recorded = parse_mini_swe_agent(
        FIXTURES / "mini-swe-agent" / "pydata__xarray-4629.traj.json.gz"
    )
    calls = _calls(recorded.messages)
    assert {name for name, _ in calls.values()} == {"bash"}
    assert calls["call_4"][1] == {"command": "nl -ba xarray/core/merge.py | sed -n '490,520p'"}
    assert set(recorded.calls) == {"call_4", "call_7", "call_16"}
    assert recorded.extra["cwd"] == "/testbed"
    # sed -i '504s/.../.../' is an edit replay redoes: the rebuild follows its lines.
    [step] = recorded.edits["call_5"]
    assert step.op == "sed" and step.path == "xarray/core/merge.py"
    assert step.rewrites == frozenset({504}) and not step.needs_text
    assert recorded.edits["call_2"][0].op == "write"  # cat <<'EOF' > reproduce_issue.py
    assert "call_3" not in recorded.changes  # python reproduce_issue.py names no read file
    first = recorded.calls["call_4"].shown
    assert first is not None and min(first.lines) == 490 and max(first.lines) == 520
    # The reasoning stays, without the command block; the result is the user message verbatim.
    assistant = next(m for m in recorded.messages if m.get("tool_calls"))
    assert "```" not in (assistant["content"] or "")
    result = next(m for m in recorded.messages if m.get("tool_call_id") == "call_4")
    assert result["content"].startswith("<returncode>0</returncode>\n<output>\n   490\t")


@pytest.mark.parametrize(
    "name", ["pydata__xarray-4629", "django__django-14007", "django__django-16560"]
)
def test_mini_swe_agent_import_marks_what_the_log_does_not_show(tmp_path: Path, name: str) -> None:
    recorded = parse_mini_swe_agent(FIXTURES / "mini-swe-agent" / f"{name}.traj.json.gz")
    result = write_trace(recorded, tmp_path)
    trace = _trace(result.directory)
    assert result.rebuilt and result.unknown_files
    assert trace["unknown"]["files"] == {p: u.to_json() for p, u in result.unknown_files.items()}
    assert trace["unknown"].get("calls", {}) == dict(result.unknown_calls)
    kept = set(recorded.calls) - set(result.unknown_calls)
    assert kept, "some reads reproduce on the rebuilt files"
    replay = replay_session(result.directory)
    # Replay also keeps reads the importer could not place (a tail, a read of a new file).
    assert set(replay.skipped) >= set(result.unknown_calls)
    assert replay.files_identical and replay.stale_views == 0 and replay.dangling_refs == 0
    served = {c["call_id"] for c in replay.calls if c.get("shell")}
    assert served >= kept - set(replay.skipped) and not served & set(replay.skipped)
    by_id = {m.get("tool_call_id"): m for m in replay.plain_messages}
    recorded_by_id = {m.get("tool_call_id"): m for m in trace["messages"]}
    for cid in set(replay.skipped) | served:  # the plain run is the shell's: the recorded output
        assert by_id[cid]["content"] == recorded_by_id[cid]["content"]


def test_mini_swe_agent_reads_after_sed_i_are_rebuilt_and_served(tmp_path: Path) -> None:
    recorded = parse_mini_swe_agent(
        FIXTURES / "mini-swe-agent" / "pydata__xarray-4629.traj.json.gz"
    )
    result = write_trace(recorded, tmp_path)
    # Line 504 changed by sed -i before both later reads: replay redoes it, so they reproduce,
    # and the read after it teaches lines 521-530 of the file before the session.
    assert result.unknown_calls == {}
    merge = result.unknown_files["xarray/core/merge.py"]
    assert merge.lines == 530 and not merge.end_known and merge.unknown == ((1, 489),)
    replay = replay_session(result.directory)
    assert not replay.skipped and replay.stale_views == 0
    kinds = [c["kind"] for c in replay.calls if c.get("shell")]
    assert kinds == ["partial", "partial", "unchanged"]


# -- Claude Code ----------------------------------------------------------------------------------


def test_claude_code_stream_json_reads_writes_errors_and_parallel_calls(tmp_path: Path) -> None:
    [recorded] = parse_claude_code(
        FIXTURES / "claude-code" / "skillsbench-exoplanet-detection-period.jsonl"
    )
    calls = _calls(recorded.messages)
    reads = [(cid, args) for cid, (name, args) in calls.items() if name == "read_file"]
    assert [args for _, args in reads] == [
        {"path": "data/tess_lc.txt"},
        {"path": "data/tess_lc.txt", "limit": 50},
    ]
    assert calls["toolu_bdrk_01P6MQHzQxCqapqei77Y4DpV"][0] == "write_file"
    assert {name for name, _ in calls.values()} >= {"Bash", "TodoWrite"}
    too_large = recorded.calls[reads[0][0]]
    assert too_large.failed and too_large.shown is None
    shown = recorded.calls[reads[1][0]].shown
    assert shown is not None and sorted(shown.lines) == list(range(1, 51))
    assert shown.lines[1] == "# column1: time (mjd)"  # the N→ prefix and reminder are gone
    result = write_trace(recorded, tmp_path)
    # The file is 748.9 KB in the log: a whole read succeeds on the 50 known lines only.
    assert set(result.unknown_calls) == {reads[0][0]}
    assert result.unknown_files["data/tess_lc.txt"].describe() == (
        "50 of 50 lines known, length unknown"
    )
    # The last Bash call has no result: it stays a pending call.
    assert recorded.messages[-1]["role"] == "assistant"
    replay = replay_session(result.directory)
    assert replay.skipped == result.unknown_calls and replay.files_identical


def test_claude_code_parallel_results_answered_out_of_order(tmp_path: Path) -> None:
    [recorded] = parse_claude_code(FIXTURES / "claude-code" / "skillsbench-citation-check.jsonl")
    message = next(m for m in recorded.messages if len(m.get("tool_calls") or ()) == 5)
    asked = [c["id"] for c in message["tool_calls"]]
    start = recorded.messages.index(message) + 1
    answered = [m["tool_call_id"] for m in recorded.messages[start : start + 5]]
    assert sorted(answered) == sorted(asked) and answered != asked
    result = write_trace(recorded, tmp_path)
    assert result.files == ("test.bib",) and result.unknown_files == {}
    bib = (result.directory / "files" / "test.bib").read_text("utf-8")
    assert bib.count("\n") == 463 - 1 or bib.count("\n") == 463
    replay = replay_session(result.directory)
    assert replay.skipped == {} and replay.files_identical and replay.stale_views == 0


def test_claude_code_binary_reads_fail_in_both_runs(tmp_path: Path) -> None:
    [recorded] = parse_claude_code(
        FIXTURES / "claude-code" / "skillsbench-econ-detrending-correlation.jsonl"
    )
    failed = [c for c in recorded.calls.values() if c.failed]
    assert [c.path for c in failed] == ["ERP-2025-table10.xls", "ERP-2025-table12.xls", "CPI.xlsx"]
    result = write_trace(recorded, tmp_path)
    # answer.txt was written by a Python script the log does not replay: unknown.
    assert list(result.unknown_calls.values()) == [
        "fails on the rebuilt files: answer.txt: no such file; check the path (it may have been "
        "deleted)"
    ]
    replay = replay_session(result.directory)
    assert replay.reads["error"] == 3 and len(replay.skipped) == 1


def test_claude_code_project_session_file(tmp_path: Path) -> None:
    first, second = parse_claude_code(FIXTURES / "claude-code" / "project-session.jsonl")
    assert (first.name, second.name) == ("project-session.1", "project-session.2")
    roles = "".join(m["role"][0] for m in first.messages)
    assert roles == "uattatatatatat"  # the rewound answer and the sidechain are left out
    assert first.messages[1]["content"] == "I'll read the code first."
    assert [c["id"] for c in first.messages[1]["tool_calls"]] == ["toolu_01", "toolu_02"]
    assert [m.get("tool_call_id") for m in first.messages[2:4]] == ["toolu_02", "toolu_01"]
    calls = _calls(first.messages)
    assert calls["toolu_03"] == (
        "edit_file",
        {
            "path": "src/app.py",
            "old_string": 'def greet():\n    return "hi"',
            "new_string": 'def greet(name):\n    return f"hello {name}"',
        },
    )
    name, multi = calls["toolu_04"]
    assert name == "edit_file" and len(multi["edits"]) == 2
    assert calls["toolu_06"] == ("read_file", {"path": "src/app.py", "offset": 1, "limit": 3})
    assert calls["toolu_07"][0] == "Read"  # outside the working directory: opaque
    assert second.messages[0]["content"].startswith("This session is being continued")
    for recorded in (first, second):
        result = write_trace(recorded, tmp_path)
        assert result.unknown_calls == {} and result.unknown_files == {}
        replay = replay_session(result.directory)
        assert replay.skipped == {} and replay.files_identical and replay.stale_views == 0
    app = (tmp_path / "project-session.1" / "files" / "src" / "app.py").read_text("utf-8")
    assert app == 'def greet():\n    return "hi"\n\n\ndef main():\n    print(greet())\n'
    replay = replay_session(tmp_path / "project-session.2")
    assert replay.reads["unchanged"] == 1


def test_claude_code_log_with_a_raw_line_separator_in_a_string_is_one_entry_a_line(
    tmp_path: Path,
) -> None:
    """Claude Code writes its log with Node's JSON.stringify, which leaves U+2028, U+2029 and
    U+0085 raw inside strings: a file holding one is still one JSON line, and rebuilt as read
    (``str.splitlines`` cut the entry there: "not a JSON line")."""
    cwd, text = "/home/me/proj", "first\u2028second\x85third\u2029\n"
    read = {"type": "tool_use", "id": "t0", "name": "Read", "input": {"file_path": f"{cwd}/a.txt"}}
    shown = {"type": "tool_result", "tool_use_id": "t0", "content": f"     1→{text}"}
    file = {"filePath": f"{cwd}/a.txt", "content": text, "numLines": 1, "startLine": 1,
            "totalLines": 1}  # fmt: skip
    entries = [
        {"type": "user", "uuid": "u0", "parentUuid": None, "message": {"role": "user",
         "content": "look"}},
        {"type": "assistant", "uuid": "a0", "parentUuid": "u0", "message": {"role": "assistant",
         "id": "m0", "content": [read]}},
        {"type": "user", "uuid": "r0", "parentUuid": "a0", "message": {"role": "user",
         "content": [shown]}, "toolUseResult": {"type": "text", "file": file}},
    ]  # fmt: skip
    log = tmp_path / "session.jsonl"
    log.write_text(
        "".join(json.dumps({"cwd": cwd, "sessionId": "x", **e}, ensure_ascii=False) + "\n"
                for e in entries),
        encoding="utf-8",
    )  # fmt: skip
    assert "\u2028" in log.read_text("utf-8")  # raw, as Node writes it
    [recorded] = parse_claude_code(log)
    result = write_trace(recorded, tmp_path / "out")
    assert result.files == ("a.txt",)
    assert (result.directory / "files" / "a.txt").read_text("utf-8") == text


# -- shared pieces and the CLI ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("grep -n foo src/a.py", frozenset()),
        ("cat src/a.py | head -n 5", frozenset()),
        ("python reproduce.py", frozenset()),
        ("sed -i 's/a/b/' src/a.py", frozenset({"src/a.py"})),
        ("cat <<'EOF' > src/a.py\nx\nEOF", frozenset({"src/a.py"})),
        ("python - <<'EOF'\nopen('src/a.py', 'w')\nEOF", frozenset({"src/a.py"})),
        ("echo x >> a.py", frozenset({"src/a.py"})),
        ("pytest tests/test_a.py", frozenset()),
        ("git checkout -- .", None),
        ("git diff src/a.py", frozenset()),
        ("patch -p1 < fix.diff", None),
        ("git checkout -b fix-greet", frozenset()),  # a new branch here: no file changes
        ("git switch -c fix/greet && git status", frozenset()),
        ("git checkout -b fix origin/main", None),  # a start point: the files may change
    ],
)
def test_changed_paths(command: str, expected: frozenset[str] | None) -> None:
    assert changed_paths(command, ["src/a.py", "README.md"]) == expected


def test_log_helpers() -> None:
    assert relative_path("/testbed/src/a.py", "/testbed") == "src/a.py"
    assert relative_path("src/./a.py", "/testbed") == "src/a.py"
    assert relative_path("/tmp/x.py", "/testbed") is None
    assert relative_path("../x.py", "/testbed") is None
    assert relative_path("D:\\work\\proj\\src\\a.py", "D:\\work\\proj") == "src/a.py"
    assert relative_path("d:/Work/proj/src/a.py", "D:\\work\\proj") == "src/a.py"
    assert relative_path("src\\a.py", "D:\\work\\proj") == "src/a.py"
    assert relative_path("D:\\other\\a.py", "D:\\work\\proj") is None
    assert relative_path("C:\\a.py", "/testbed") is None
    assert trace_name(Path("x/django__django-1.traj.json.gz")) == "django__django-1"
    assert unknown_calls({"unknown": {"calls": ["a", "b"]}}) == {"a": "", "b": ""}
    assert unknown_calls({"unknown": {"calls": {"a": "why"}}}) == {"a": "why"}
    assert unknown_calls({}) == {}
    edits = {
        "edits": [
            {"old_string": "a", "new_string": "b"},
            {"old_string": "c", "new_string": "d", "replace_all": True},
        ]
    }
    assert edit_pairs(edits) == ([("a", "b"), ("c", "d")], True)


def test_write_trace_never_overwrites_a_directory_that_is_not_a_trace(tmp_path: Path) -> None:
    recorded = parse_mini_swe_agent(
        FIXTURES / "mini-swe-agent" / "pydata__xarray-4629.traj.json.gz"
    )
    (tmp_path / recorded.name).mkdir()
    (tmp_path / recorded.name / "precious.txt").write_text("keep me")
    with pytest.raises(Exception, match="is not a session trace"):
        write_trace(recorded, tmp_path)
    assert (tmp_path / recorded.name / "precious.txt").read_text() == "keep me"
    shutil.rmtree(tmp_path / recorded.name)
    first = write_trace(recorded, tmp_path)
    again = write_trace(recorded, tmp_path)  # a trace is replaced
    assert _tree(first.directory) == _tree(again.directory)


def test_find_logs_searches_directories(tmp_path: Path) -> None:
    found = find_logs("claude-code", [FIXTURES / "claude-code"])
    assert [p.name for p in found] == sorted(
        p.name for p in (FIXTURES / "claude-code").glob("*.jsonl")
    )
    results = import_logs("mini-swe-agent", [FIXTURES / "mini-swe-agent"], tmp_path)
    assert len(results) == 3


def test_cli_import_then_replay(tmp_path: Path, runner: CliRunner) -> None:
    out = tmp_path / "traces"
    result = runner.invoke(
        main,
        [
            "import",
            "claude-code",
            str(FIXTURES / "claude-code" / "project-session.jsonl"),
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"{out / 'project-session.1'}: 14 messages, 5 file tool calls" in result.stdout
    assert "files/ rebuilt from the log: 2 files" in result.stdout
    assert f"next: filecache replay {out}/*" in result.stdout
    result = runner.invoke(
        main,
        [
            "import",
            "mini-swe-agent",
            str(FIXTURES / "mini-swe-agent" / "pydata__xarray-4629.traj.json.gz"),
            "-o",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.stdout)
    assert record["files_from"] == "rebuilt from the log"
    assert record["unknown_calls"] == {}
    result = runner.invoke(main, ["replay", str(out / "pydata__xarray-4629")])
    assert result.exit_code == 0, result.output
    assert "kept as recorded" not in result.stderr
    bad = runner.invoke(
        main, ["import", "swe-agent", str(FIXTURES / "claude-code"), "-o", str(out)]
    )
    assert bad.exit_code == 2 and "no swe-agent logs found" in bad.stderr
