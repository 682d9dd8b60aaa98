"""A ``~/.claude/projects`` folder as public ones hold it: subagents' own logs, and files with no
message (titles only, a ``/agents`` run, an empty file) beside the sessions.

Fixture: ``fixtures/imports/claude-code-projects/``, written by its ``make_projects.py`` in the
shapes Claude Code 2.1.220 (a session handing work to a subagent, the subagent's own log under
``<session>/subagents/``) and 1.0 (a file of ``summary`` lines) write.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from filecache.adapters.hosts.claude_replay import replay_claude_code

from filecache.cli import main
from filecache.errors import RequestError
from filecache.importers import import_logs
from filecache.importers.claude_code import parse_claude_code
from filecache.importers.trace import write_trace
from filecache.replay.replay import replay_session

PROJECTS = Path(__file__).parents[2] / "fixtures" / "imports" / "claude-code-projects"
FOLDER = PROJECTS / "-home-me-proj"
SESSION = FOLDER / "5e0c2a91-7d3b-4f6e-9a1c-2b8e4d6f0a13.jsonl"
SUBAGENT = FOLDER / SESSION.stem / "subagents" / "agent-a3f9c1e27b4d05a6e.jsonl"
NO_MESSAGE = sorted(p for p in FOLDER.glob("*.jsonl") if p != SESSION)


def test_a_subagents_own_log_imports_its_conversation(tmp_path: Path) -> None:
    """Every entry of a subagent's log is a sidechain: the importer left them all out and
    refused the log ('no Claude Code user/assistant lines'; 6 of 6 such logs of a public
    repository, 137 of 165 files of another)."""
    [recorded] = parse_claude_code(SUBAGENT)
    roles = [m["role"] for m in recorded.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool",
                     "assistant"]  # fmt: skip
    assert recorded.messages[0]["content"].startswith("Review greet()")
    tools = [c.tool for c in recorded.calls.values()]
    assert tools == ["read_file", "edit_file", "read_file"]
    result = write_trace(recorded, tmp_path)
    assert result.unknown_calls == {}
    for replay in (replay_session(result.directory), replay_claude_code(result.directory)):
        assert replay.skipped == {} and replay.requests == 4
        assert (replay.stale_views, replay.dangling_refs) == (0, 0), replay.problems


def test_a_session_file_still_leaves_its_sidechains_out() -> None:
    """Only a log with no main-line entry is a subagent's: a session file's own conversation
    is unchanged (the subagent's answer is the Agent call's result)."""
    [recorded] = parse_claude_code(SESSION)
    assert [m["role"] for m in recorded.messages] == ["user", "assistant", "tool", "assistant",
                                                      "tool", "assistant"]  # fmt: skip
    assert recorded.messages[2]["content"] == "greet() takes a name."


@pytest.mark.parametrize("log", NO_MESSAGE, ids=lambda p: p.name[:8])
def test_a_file_with_no_message_gives_no_trace(log: Path) -> None:
    assert parse_claude_code(log) == []


def test_a_projects_folder_imports_around_files_with_no_message(
    tmp_path: Path, runner: CliRunner
) -> None:
    """A file of ``summary`` lines (or an empty one, or a ``/agents`` run) aborted the whole
    folder's import ('no Claude Code user/assistant lines; is this its log?'): 20 of 64 files of
    one public ``.claude`` backup."""
    empty: list[Path] = []
    results = import_logs("claude-code", [PROJECTS], tmp_path / "a", empty=empty.append)
    assert sorted(r.name for r in results) == [SESSION.stem, SUBAGENT.stem]
    assert sorted(empty) == NO_MESSAGE
    result = runner.invoke(
        main, ["import", "claude-code", str(PROJECTS), "-o", str(tmp_path / "b")]
    )
    assert result.exit_code == 0, result.output
    for log in NO_MESSAGE:
        assert f"{log}: no message in it, no trace" in result.stdout
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [SESSION.stem, SUBAGENT.stem]


def test_logs_with_no_message_at_all_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RequestError, match="no conversation"):
        import_logs("claude-code", NO_MESSAGE, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_log_of_other_json_lines_is_still_refused(tmp_path: Path) -> None:
    """Lines of another program are not 'no message': the log is not Claude Code's."""
    log = tmp_path / "other.jsonl"
    log.write_text(json.dumps({"type": "event", "name": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(Exception, match="no Claude Code user/assistant lines"):
        parse_claude_code(log)
    shutil.copy(SUBAGENT, tmp_path / SUBAGENT.name)
    with pytest.raises(Exception, match="no Claude Code user/assistant lines"):
        import_logs("claude-code", [tmp_path], tmp_path / "out")
