"""``filecache replay`` on traces it cannot replay as they are: a clear error naming what is
wrong (the trace's path, the message's index), never a replay that looks like a success."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from filecache.cli import main
from filecache.errors import TranscriptError

REPO = Path(__file__).resolve().parents[2]
PYTEST_TRACE = REPO / "fixtures" / "sessions" / "lm32b__pytest-dev__pytest-7571"
IMPORTS = REPO / "fixtures" / "imports"


def replay(*args: str | Path) -> Any:
    return CliRunner().invoke(main, ["replay", *(str(a) for a in args), "--json"])


def test_a_trace_without_files_is_refused_naming_the_folder(tmp_path: Path) -> None:
    trace = tmp_path / "nofiles"
    trace.mkdir()
    shutil.copy(PYTEST_TRACE / "transcript.json", trace)
    result = replay(trace)
    assert result.exit_code == TranscriptError.exit_code, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert f"{trace}: no files/ folder" in result.stderr


def test_a_trace_with_an_empty_files_folder_replays(tmp_path: Path) -> None:
    trace = tmp_path / "fresh"
    (trace / "files").mkdir(parents=True)
    call = {
        "id": "w1",
        "type": "function",
        "function": {
            "name": "write_file",
            "arguments": json.dumps({"path": "new.py", "content": "x = 1\n"}),
        },
    }
    messages = [
        {"role": "user", "content": "create new.py"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "w1", "content": "Wrote new.py"},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip
    doc = {"format": "filecache-trace/1", "source": "test", "messages": messages}
    (trace / "transcript.json").write_text(json.dumps(doc), encoding="utf-8")
    result = replay(trace)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sessions"][0]["name"] == "fresh"


@pytest.mark.parametrize(
    ("fmt", "source"),
    [
        ("claude-code", IMPORTS / "claude-code" / "project-session.jsonl"),
        ("swe-agent", IMPORTS / "swe-agent" / "raw"),
        ("mini-swe-agent", IMPORTS / "mini-swe-agent" / "django__django-14007.traj.json.gz"),
    ],
)
def test_every_importer_writes_files_so_its_traces_replay(
    tmp_path: Path, fmt: str, source: Path
) -> None:
    out = tmp_path / "traces"
    imported = CliRunner().invoke(main, ["import", fmt, str(source), "-o", str(out), "--json"])
    assert imported.exit_code == 0, imported.output
    traces = [Path(r["directory"]) for r in json.loads(imported.stdout)]
    assert traces and all((t / "files").is_dir() for t in traces)
    result = replay(*traces)
    assert result.exit_code == 0, result.output


def _call(cid: str) -> dict[str, Any]:
    function = {"name": "read_file", "arguments": json.dumps({"path": "a.py"})}
    return {"id": cid, "type": "function", "function": function}


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([{"role": "assistant", "content": None, "tool_calls": "oops"}],
         "message 0: tool_calls must be a list, got str"),
        ([{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": ["oops"]}],
         "message 1: tool call 0 must be an object, got str"),
        ([{"role": "assistant", "content": None, "tool_calls": [{"function": {}}]}],
         "message 0: tool call 0: id must be a non-empty string, got null"),
        ([{"role": "user", "content": 5}],
         "message 0: content must be a string or a list of blocks, got int"),
        ([{"content": "hi"}], "message 0: role must be one of"),
        ([{"role": "robot", "content": "hi"}], "message 0: role must be one of"),
        ([{"role": "user", "content": "go"}, {"role": "tool", "content": "x"}],
         "message 1: tool_call_id must be a non-empty string, got null"),
        ([{"role": "tool", "tool_call_id": "c9", "content": "x"}],
         "message 0: tool result for c9, but no earlier assistant message calls it"),
        ([{"role": "assistant", "content": None, "tool_calls": [_call("c1"), _call("c1")]}],
         "message 0: tool call id c1 used twice"),
    ],
)  # fmt: skip
def test_a_malformed_message_is_refused_naming_its_index(
    tmp_path: Path, messages: list[Any], needle: str
) -> None:
    trace = tmp_path / "bad"
    (trace / "files").mkdir(parents=True)
    (trace / "files" / "a.py").write_text("x = 1\n", encoding="utf-8")
    doc = {"format": "filecache-trace/1", "messages": messages}
    (trace / "transcript.json").write_text(json.dumps(doc), encoding="utf-8")
    for extra in ((), ("--window", "32000"), ("--policy", "none")):
        result = replay(trace, *extra)
        assert result.exception is None or isinstance(result.exception, SystemExit), extra
        assert result.exit_code == TranscriptError.exit_code, (extra, result.output)
        assert result.stderr.count("\n") == 1, (extra, result.stderr)
        assert f"{trace / 'transcript.json'}: {needle}" in result.stderr, (extra, result.stderr)
