"""What ``recall`` counts in a replay: the lines of files the agent touches again that a request
as sent still lets the model rebuild, including where its own edits landed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from filecache.prune.pruning import PrunePolicy
from filecache.replay.replay import replay_session
from filecache.store.store import MemoryStore

SOURCE = "".join(f"value_{n} = {n}\n" for n in range(1, 61))


def trace(tmp_path: Path, messages: list[dict[str, Any]]) -> Path:
    session = tmp_path / "session"
    (session / "files").mkdir(parents=True)
    (session / "files" / "app.py").write_text(SOURCE, encoding="utf-8")
    body = {"format": "filecache-trace/1", "source": "test", "messages": messages}
    (session / "transcript.json").write_text(json.dumps(body), encoding="utf-8")
    return session


def turn(n: int, name: str, result: str, **args: Any) -> list[dict[str, Any]]:
    call = {"id": f"call_{n}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(args)}  # type: ignore[assignment]
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": result},
    ]


def edit_out_of_sight(tmp_path: Path) -> Path:
    """The agent reads lines 1-10, edits line 40 (found with grep: it never read it), runs
    tests, and reads app.py again. Only the edit's confirmation says where the edit landed."""
    noise = "".join(f"test_{n} PASSED\n" for n in range(300))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "fix it"},
        *turn(1, "bash", "40:value_40 = 40\n", command="grep -n value_40 ."),
        *turn(2, "read_file", "", path="app.py", offset=1, limit=10),
        *turn(3, "edit_file", "", path="app.py", old_string="value_40 = 40", new_string="v = 0"),
        *turn(4, "bash", noise, command="pytest -q"),
        *turn(5, "bash", noise, command="pytest -q"),
        *turn(6, "read_file", "", path="app.py", offset=1, limit=5),
    ]
    return trace(tmp_path, messages)


def small_window(**changes: Any) -> PrunePolicy:
    rules: dict[str, Any] = dict(
        context_window=2_000, prune_at=0.0, target=0.0, protect_recent=100, min_reclaim=0,
        small_result=10**6, cache_aware=False, keep_edited=True,
    )  # fmt: skip
    return PrunePolicy(**(rules | changes))


def test_a_cleared_edit_confirmation_costs_recall_though_no_read_of_the_file_was_pruned(
    tmp_path: Path,
) -> None:
    session = edit_out_of_sight(tmp_path)
    # the read stays (keep_edited) and only the edit's confirmation is cleared: without it the
    # model cannot place its edit on the lines it holds, so it holds no line of the new version
    store = MemoryStore()
    pruned = replay_session(session, policy=small_window(), store=store)
    # what was pruned: the confirmation (call_3) and test output, never the read (call_2)
    cleared = {cid for cid, (tier, _) in store.projections("session").items() if tier == "clear"}
    assert "call_3" in cleared and "call_2" not in cleared, cleared
    assert pruned.recall < 1.0
    assert (pruned.stale_views, pruned.dangling_refs) == (0, 0)
    # kept while app.py is in use, the confirmation places the edit: every line is still there
    store = MemoryStore()
    kept = replay_session(session, policy=small_window(in_use_turns=10), store=store)
    assert "call_3" not in store.projections("session")
    assert kept.recall == 1.0
    assert kept.prompt_tokens.filecache > pruned.prompt_tokens.filecache


def test_a_cleared_confirmation_of_an_edit_inside_held_lines_costs_no_recall(
    tmp_path: Path,
) -> None:
    # the model read the whole file: its edit's arguments place it without the confirmation,
    # so clearing the confirmation must not count as lost lines (recall is not just "was an
    # edit confirmation pruned")
    noise = "".join(f"test_{n} PASSED\n" for n in range(300))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "fix it"},
        *turn(2, "read_file", "", path="app.py"),
        *turn(3, "edit_file", "", path="app.py", old_string="value_40 = 40", new_string="v = 0"),
        *turn(4, "bash", noise, command="pytest -q"),
        *turn(5, "bash", noise, command="pytest -q"),
        *turn(6, "read_file", "", path="app.py", offset=1, limit=5),
    ]
    store = MemoryStore()
    pruned = replay_session(trace(tmp_path, messages), policy=small_window(context_window=3_000),
                            store=store)  # fmt: skip
    assert store.projections("session").get("call_3", ("",))[0] == "clear"
    assert pruned.recall == 1.0 and pruned.recall_pairs > 0
    assert (pruned.stale_views, pruned.dangling_refs) == (0, 0)
