"""Replay of recorded sessions: plain vs filecache on the same trace, and the CLI around it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from filecache.cli import main
from filecache.replay import (
    CACHE_READ,
    CACHE_WRITE,
    combine,
    format_table,
    prompt_cost,
    replay_session,
)

FIXTURE = Path(__file__).parent.parent / "fixtures" / "sessions" / "lm32b__pytest-dev__pytest-7571"
FILE_TOOLS = {"read_file", "write_file", "edit_file"}


def _call(n: int, name: str, **args: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def _result(n: int, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{n}", "content": text}


def _trace(tmp_path: Path, messages: list[dict[str, Any]], files: dict[str, str]) -> Path:
    session = tmp_path / "session"
    for rel, text in files.items():
        (session / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (session / "files" / rel).write_text(text, encoding="utf-8")
    session.mkdir(exist_ok=True)
    trace = {"format": "filecache-trace/1", "source": "test", "messages": messages}
    (session / "transcript.json").write_text(json.dumps(trace), encoding="utf-8")
    return session


def test_fixture_replay_saves_tokens_and_ends_identical() -> None:
    r = replay_session(FIXTURE)
    assert r.requests == 17
    assert r.prompt_tokens.filecache < r.prompt_tokens.plain
    assert r.billed.filecache < r.billed.plain
    assert r.file_tool_tokens.filecache < r.file_tool_tokens.plain
    assert r.peak_request.filecache <= r.peak_request.plain
    assert r.files_identical and r.mismatches == ()
    assert r.file_calls == {"read_file": 6, "write_file": 1, "edit_file": 4}
    assert r.reads["unchanged"] >= 4 and r.reads["error"] == 0
    assert sum(r.reads.values()) == 6


def test_runs_differ_only_in_file_tool_results() -> None:
    r = replay_session(FIXTURE)
    trace = json.loads((FIXTURE / "transcript.json").read_text(encoding="utf-8"))
    assert len(r.plain_messages) == len(r.filecache_messages) == len(trace["messages"])
    file_ids = {c.call_id for c in r.calls}
    for recorded, plain, fc in zip(
        trace["messages"], r.plain_messages, r.filecache_messages, strict=True
    ):
        if recorded.get("tool_call_id") in file_ids:
            assert {k: v for k, v in plain.items() if k != "content"} == {
                k: v for k, v in fc.items() if k != "content"
            }
        else:
            assert plain == fc == recorded
    # The baseline renders content the same way filecache does for a first read.
    first = next(c for c in r.calls if c.tool == "read_file")
    assert first.kind == "full"
    # Writes and edits confirm with the same text in both runs.
    for c in r.calls:
        if c.tool != "read_file":
            assert c.plain_tokens == c.filecache_tokens


def test_tool_errors_replay_as_error_text_in_both_runs(tmp_path: Path) -> None:
    session = _trace(
        tmp_path,
        [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "Fix it."},
            _call(1, "read_file", path="missing.py"),
            _result(1, "recorded: no such file"),
            _call(2, "edit_file", path="a.py", old_string="not there", new_string="x"),
            _result(2, "recorded: no match"),
            _call(3, "read_file", path="a.py", offset=99, limit=5),
            _result(3, "recorded: bad range"),
            _call(4, "bash", command="ls"),
            _result(4, "a.py\n"),
            _call(5, "read_file", path="a.py"),
            _result(5, "recorded content"),
            {"role": "assistant", "content": "Done."},
        ],
        {"a.py": "def f():\n    return 1\n"},
    )
    r = replay_session(session)
    errors = [c for c in r.calls if c.kind == "error"]
    assert [c.call_id for c in errors] == ["call_1", "call_2", "call_3"]
    assert "missing.py: no such file" in (errors[0].error or "")
    assert "a.py: old_string not found" in (errors[1].error or "")
    assert "a.py: offset 99 is past the end; the file has 2 lines" in (errors[2].error or "")
    by_id = {m.get("tool_call_id"): i for i, m in enumerate(r.plain_messages)}
    for c in errors:
        i = by_id[c.call_id]
        assert r.plain_messages[i]["content"] == r.filecache_messages[i]["content"] == c.error
    bash = by_id["call_4"]
    assert r.plain_messages[bash]["content"] == r.filecache_messages[bash]["content"] == "a.py\n"
    assert r.reads["error"] == 2 and r.reads["full"] == 1
    assert r.files_identical
    assert r.requests == 6


def test_replayed_edits_match_a_plain_application(tmp_path: Path) -> None:
    text = "".join(f"line {i} of a file that is long enough to matter\n" for i in range(1, 41))
    session = _trace(
        tmp_path,
        [
            {"role": "user", "content": "Edit it."},
            _call(1, "read_file", path="notes.txt"),
            _result(1, "recorded"),
            _call(2, "edit_file", path="notes.txt", old_string="line 7 ", new_string="LINE 7 "),
            _result(2, "recorded"),
            _call(3, "write_file", path="new/made.txt", content="hello\n"),
            _result(3, "recorded"),
            _call(4, "read_file", path="notes.txt", offset=5, limit=5),
            _result(4, "recorded"),
            _call(5, "read_file", path="new/made.txt"),
            _result(5, "recorded"),
            {"role": "assistant", "content": "Done."},
        ],
        {"notes.txt": text},
    )
    r = replay_session(session)
    assert r.files_identical
    # A FileRef is never larger than the content: the one-line file is sent again.
    assert [c.kind for c in r.calls] == ["full", "edited", "written", "unchanged", "full"]
    edit = r.plain_messages[4]["content"]
    assert edit == r.filecache_messages[4]["content"]
    assert "edited notes.txt: 40 lines" in edit and "1 replacement" in edit


def test_prompt_cost_bills_the_shared_prefix_as_cache_reads() -> None:
    requests = [
        [("sys", 100)],
        [("sys", 100), ("a", 10)],
        [("sys", 100), ("a2", 5), ("b", 20)],  # "a" rewritten: only "sys" is cached
    ]
    cost = prompt_cost(requests)
    assert cost.requests == 3
    assert cost.tokens == 100 + 110 + 125
    assert cost.peak == 125
    expected = 100 * CACHE_WRITE + (100 * CACHE_READ + 10 * CACHE_WRITE)
    expected += 100 * CACHE_READ + 25 * CACHE_WRITE
    assert cost.billed == pytest.approx(expected)
    assert prompt_cost([]).tokens == 0


def test_combine_and_table() -> None:
    r = replay_session(FIXTURE, tokenizer="estimate")
    assert r.tokenizer == "estimate"
    total = combine([r, r])
    assert total.requests == 2 * r.requests
    assert total.prompt_tokens.plain == 2 * r.prompt_tokens.plain
    assert total.peak_request == r.peak_request
    table = format_table([r], total)
    assert r.name in table and "**total**" in table
    assert len(table.splitlines()) == 4


def test_cli_json_schema() -> None:
    result = CliRunner().invoke(main, ["replay", str(FIXTURE), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"totals", "sessions"}
    [session] = data["sessions"]
    keys = {
        "name",
        "source",
        "tokenizer",
        "messages",
        "requests",
        "prompt_tokens",
        "file_tool_tokens",
        "peak_request",
        "billed",
        "reads",
        "file_calls",
        "files_identical",
        "mismatches",
    }
    assert set(data["totals"]) == keys
    assert set(session) == keys | {"calls"}
    for measure in ("prompt_tokens", "file_tool_tokens", "peak_request", "billed"):
        assert set(session[measure]) == {"plain", "filecache", "saved_pct"}
    assert session["prompt_tokens"]["saved_pct"] > 0
    assert session["name"] == FIXTURE.name and session["files_identical"] is True
    assert set(session["reads"]) >= {"full", "partial", "unchanged", "diff", "error"}
    assert {"call_id", "tool", "path", "kind", "plain_tokens", "filecache_tokens", "error"} == set(
        session["calls"][0]
    )


def test_cli_table_and_bad_trace(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["replay", str(FIXTURE), "--tokenizer", "cl100k"])
    assert result.exit_code == 0, result.output
    assert FIXTURE.name in result.stdout and "**total**" in result.stdout
    (tmp_path / "transcript.json").write_text('{"format": "other"}', encoding="utf-8")
    bad = runner.invoke(main, ["replay", str(tmp_path)])
    assert bad.exit_code == 2
    assert "expected 'filecache-trace/1'" in bad.stderr
