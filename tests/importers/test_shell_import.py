"""mini-swe-agent 2.x trajectories: fenced ``mswea_bash_command`` blocks and native tool calls.

The fixtures (``fixtures/imports/mini-swe-agent-2x``, written by
``fixtures/make_mini_swe_agent_2x.py`` from the 1.x fixture's steps with 2.x's own templates)
hold the same session in the three forms 2.x writes; each must import with its shell reads as
``bash`` calls that replay serves through the cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from filecache.importers import import_logs
from filecache.importers.mini_swe_agent import parse_mini_swe_agent
from filecache.replay.replay import replay_session

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"
FORMS = ["toolcall-json", "toolcall-tags", "textbased"]


def _log(form: str) -> Path:
    return FIXTURES / "mini-swe-agent-2x" / f"pydata__xarray-4629.{form}.traj.json.gz"


@pytest.mark.parametrize("form", FORMS)
def test_2x_trajectories_import_their_shell_reads(form: str) -> None:
    recorded = parse_mini_swe_agent(_log(form))
    assert set(recorded.calls) and len(recorded.calls) == 3  # 1.x's reads, found in 2.x too
    assert "(mini-swe-agent 2.4.6)" in recorded.source
    assert all(m["role"] in ("system", "user", "assistant", "tool") for m in recorded.messages)
    calls = [c for m in recorded.messages for c in m.get("tool_calls") or ()]
    assert {c["function"]["name"] for c in calls} == {"bash"}
    results = {m["tool_call_id"] for m in recorded.messages if m["role"] == "tool"}
    assert results == {c["id"] for c in calls}
    if form.startswith("toolcall"):
        assert all(c["id"].startswith("toolu_") for c in calls)  # the model's own ids
    else:
        assert not any("mswea_bash_command" in (m.get("content") or "") for m in recorded.messages)
    assert recorded.edits  # sed -i and heredocs, redone by replay


@pytest.mark.parametrize("form", FORMS)
def test_2x_replay_serves_the_reads_inside_the_harness_frame(tmp_path: Path, form: str) -> None:
    [result] = import_logs("mini-swe-agent", [_log(form)], tmp_path)
    assert result.file_calls == 3 and not result.unknown_calls
    replay = replay_session(result.directory)
    assert not replay.skipped and replay.files_identical
    assert replay.stale_views == 0 and replay.dangling_refs == 0
    served = [c for c in replay.calls if c.get("shell")]
    assert [c["kind"] for c in served] == ["partial", "partial", "unchanged"]
    assert replay.prompt_tokens.filecache < replay.prompt_tokens.recorded
    assert replay.prompt_tokens.plain == replay.prompt_tokens.recorded  # the shell's own output
    by_id = {m.get("tool_call_id"): m for m in replay.filecache_messages}
    ref = by_id[served[2]["call_id"]]["content"]
    if form == "toolcall-json":  # the FileRef travels as JSON, as the output would have
        assert json.loads(ref)["output"].startswith("[filecache] xarray/core/merge.py unchanged")
    else:
        assert ref.startswith("<returncode>0</returncode>\n<output>\n[filecache] xarray/core/")
