"""Claude Code 2.1.x session files: the whole conversation, whatever sits on its chain.

Fixtures: ``fixtures/imports/claude-code/cc-2.1.*.jsonl``, written by ``make_cc21x.py`` in the
shapes Claude Code 2.1.12-2.1.42 writes (progress entries on the ``parentUuid`` chain, a
summary appended on the last entry's line, a last line cut short, Windows paths, a log that
continues another session).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from filecache.adapters.hosts.claude_replay import replay_claude_code

from filecache.importers import import_logs
from filecache.importers.claude_code import parse_claude_code
from filecache.importers.trace import write_trace
from filecache.replay.replay import replay_session

LOGS = Path(__file__).parents[2] / "fixtures" / "imports" / "claude-code"
PROGRESS = LOGS / "cc-2.1.19-progress.jsonl"
WINDOWS = LOGS / "cc-2.1.30-windows.jsonl"
CONTINUED = LOGS / "cc-2.1.19-continued.jsonl"
PROJECT = LOGS / "project-session.jsonl"


def _call_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [c["id"] for m in messages for c in m.get("tool_calls") or ()]


def _calls(messages: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        c["id"]: (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for m in messages
        for c in m.get("tool_calls") or ()
    }


def test_progress_entries_on_the_chain_keep_the_whole_conversation() -> None:
    """Hook, bash and agent progress entries sit between a call and its result: the walk back
    from the newest entry stopped at the first one (37% of the tool calls kept on 279 public
    logs). A summary appended on the last line and a last line cut short do not refuse it."""
    [recorded] = parse_claude_code(PROGRESS)
    assert _call_ids(recorded.messages) == [f"toolu_{n:02d}" for n in range(1, 12)]
    assert recorded.messages[0] == {
        "role": "user", "content": "Make greet() take a name; keep the task list current."
    }  # fmt: skip
    assert recorded.messages[-1]["content"] == "greet() now takes a name."
    ids = [m.get("tool_call_id") for m in recorded.messages if m["role"] == "tool"]
    assert ids == [f"toolu_{n:02d}" for n in range(1, 12)]  # every result once, in order
    assert any("line 35" in n and "cut short" in n for n in recorded.notes)


def test_read_only_calls_do_not_stop_the_rebuild(tmp_path: Path) -> None:
    """TaskCreate/TaskUpdate/TaskList/TaskGet, LSP, an Explore subagent and ``git checkout -b``
    change no file: the whole-file Read after them still rebuilds files/ (they made the later
    reads 'kept as recorded', 42% of reads on 342 public logs)."""
    [recorded] = parse_claude_code(PROGRESS)
    assert recorded.changes == {}
    result = write_trace(recorded, tmp_path)
    assert result.unknown_files == {} and result.unknown_calls == {}
    app = (result.directory / "files" / "src" / "app.py").read_text("utf-8")
    assert app == 'def greet():\n    return "hi"\n\n\ndef main():\n    print(greet())\n'
    replay = replay_session(result.directory)
    assert replay.skipped == {} and replay.files_identical
    assert (replay.stale_views, replay.dangling_refs) == (0, 0)
    hooked = replay_claude_code(result.directory)
    assert (hooked.stale_views, hooked.dangling_refs) == (0, 0)


def test_a_folder_with_a_live_sessions_log_imports_whole(tmp_path: Path) -> None:
    """A last line cut short (the log of a running session) is skipped with a note; it
    aborted the folder's import after writing part of it."""
    folder = tmp_path / "logs"
    folder.mkdir()
    for log in (PROGRESS, WINDOWS):
        shutil.copy(log, folder / log.name)
    results = import_logs("claude-code", [folder], tmp_path / "out")
    assert [r.name for r in results] == ["cc-2.1.19-progress", "cc-2.1.30-windows"]
    assert any("cut short" in n for n in results[0].notes)


def test_logs_with_the_same_file_name_get_distinct_traces(tmp_path: Path) -> None:
    """Two projects' logs named alike overwrote each other's trace in one import."""
    for project in ("-home-me-a", "-home-me-b"):
        (tmp_path / project).mkdir()
        shutil.copy(PROJECT, tmp_path / project / "session.jsonl")
    results = import_logs("claude-code", [tmp_path / "-home-me-a", tmp_path / "-home-me-b"],
                          tmp_path / "out")  # fmt: skip
    names = [r.name for r in results]
    assert names == ["session.1", "session.2", "session-2.1", "session-2.2"]
    assert all((tmp_path / "out" / n / "transcript.json").is_file() for n in names)
    assert any("another log of this import" in n for n in results[2].notes)


def test_windows_paths_are_made_relative(tmp_path: Path) -> None:
    """``D:\\work\\proj\\src\\app.py`` under the working folder ``D:\\work\\proj``."""
    [recorded] = parse_claude_code(WINDOWS)
    calls = _calls(recorded.messages)
    assert calls["toolu_01"] == ("read_file", {"path": "src/app.py"})
    assert calls["toolu_02"][0] == "edit_file" and calls["toolu_02"][1]["path"] == "src/app.py"
    result = write_trace(recorded, tmp_path)
    assert result.files == ("src/app.py",) and result.unknown_calls == {}
    replay = replay_session(result.directory)
    assert replay.skipped == {} and replay.files_identical and replay.stale_views == 0


def test_a_log_that_continues_another_session_imports_and_replays(tmp_path: Path) -> None:
    """It starts at a compaction whose logical parent is in the other log, and answers a call
    made there: that result was a tool message with no call, and replay refused the trace."""
    [recorded] = parse_claude_code(CONTINUED)
    assert recorded.messages[0]["content"].startswith("This session is being continued")
    assert recorded.messages[1] == {
        "role": "user",
        "content": "Switched to a new branch 'greet-name'",
    }
    assert any("continues another session" in n for n in recorded.notes)
    result = write_trace(recorded, tmp_path)
    for replay in (replay_session(result.directory), replay_claude_code(result.directory)):
        assert replay.skipped == {} and replay.stale_views == 0


def test_a_compaction_whose_logical_parent_is_missing_keeps_the_conversation_before_it(
    tmp_path: Path,
) -> None:
    """The compaction names an entry the log lacks (here: a progress entry dropped from it):
    the conversation before it is still the first trace, not lost."""
    entries = [json.loads(line) for line in PROJECT.read_text("utf-8").splitlines()]
    for entry in entries:
        if entry.get("subtype") == "compact_boundary":
            entry["logicalParentUuid"] = "ffffffff-ffff-4fff-8fff-ffffffffffff"
    log = tmp_path / "project-session.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    before, after = parse_claude_code(PROJECT)
    first, second = parse_claude_code(log)
    assert first.messages == before.messages and second.messages == after.messages
