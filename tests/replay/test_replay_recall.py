"""What ``recall`` counts in a replay: the lines of files the agent touches again that a request
as sent still lets the model rebuild, including where its own edits landed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from filecache.prune.pruning import PrunePolicy
from filecache.replay.replay import HEADER_SLACK, replay_session
from filecache.store.memory_store import MemoryStore

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


BIG = "".join(f"def function_{n}(argument):\n    return argument * {n} + {n}  # body\n\n"
              for n in range(1, 700))  # fmt: skip


def test_recall_over_every_line_counts_outlined_lines_as_hidden(tmp_path: Path) -> None:
    """The recording showed a large file whole (``cat -n``); filecache's auto mode answers the
    same read with an outline. Today's recall leaves the outlined lines out (nothing was shown,
    nothing lost: 100%); recall over every line the recording showed counts them as hidden."""
    lines = BIG.splitlines(keepends=True)
    shown = "".join(f"{n:6d}\t{t}" for n, t in enumerate(lines, 1))
    part = "".join(f"{n:6d}\t{t}" for n, t in enumerate(lines[9:20], 10))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "fix it"},
        *turn(
            1,
            "read_file",
            f"Here's the result of running `cat -n` on big.py:\n{shown}",
            path="big.py",
        ),  # fmt: skip
        *turn(2, "read_file", part, path="big.py", offset=10, limit=11),
        *turn(3, "read_file", part, path="big.py", offset=10, limit=11),
        {"role": "assistant", "content": "done"},
    ]
    session = tmp_path / "session"
    (session / "files").mkdir(parents=True)
    (session / "files" / "big.py").write_text(BIG, encoding="utf-8")
    body = {"format": "filecache-trace/1", "source": "test", "messages": messages}
    (session / "transcript.json").write_text(json.dumps(body), encoding="utf-8")
    auto = replay_session(session, read_mode="auto")
    assert auto.reads["outline"] == 1 and auto.recall == 1.0
    file, recorded, held = auto.lines_in_use
    assert recorded == file == 2 * len(lines) and auto.recall_all_pairs == 2
    # the request after the outline holds none of it; the next lines 10-20 only
    assert held == 11 and auto.recall_all == (0 + 11 / len(lines)) / 2
    full = replay_session(session, read_mode="full")
    assert full.reads["outline"] == 0 and full.recall_all == 1.0 == full.recall
    assert full.lines_in_use == (file, recorded, recorded)


def test_no_answer_is_larger_than_the_agents_own_view(tmp_path: Path) -> None:
    """The agent's tool clipped a large file to its first lines; filecache's outline of it is
    larger. Capped (the default), the agent's view is sent instead and the session forgets the
    outline: never worse than the recording; the next read of lines the agent's view showed
    is content (filecache never claims what it did not send), and nothing is stale. Uncapped,
    the session costs more than recorded, and the report names it."""
    from filecache.replay.replay_report import format_replay, worse_than_recorded

    lines = BIG.splitlines(keepends=True)
    clipped = "".join(f"{n:6d}\t{t}" for n, t in enumerate(lines[:6], 1)) + "<response clipped>"
    part = "".join(f"{n}\t{t}" for n, t in enumerate(lines[:5], 1))  # as filecache numbers
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "fix it"},
        *turn(1, "read_file", clipped, path="big.py"),
        *turn(2, "read_file", part, path="big.py", offset=1, limit=5),
        *turn(3, "read_file", part, path="big.py", offset=1, limit=5),
        {"role": "assistant", "content": "done"},
    ]
    session = tmp_path / "session"
    (session / "files").mkdir(parents=True)
    (session / "files" / "big.py").write_text(BIG, encoding="utf-8")
    body = {"format": "filecache-trace/1", "source": "test", "messages": messages}
    (session / "transcript.json").write_text(json.dumps(body), encoding="utf-8")
    capped = replay_session(session, read_mode="auto")
    kinds = {c["call_id"]: (c["kind"], c["capped"]) for c in capped.calls}
    assert kinds == {
        "call_1": ("outline", True), "call_2": ("partial", False),
        "call_3": ("unchanged", False),
    }  # fmt: skip
    sent = {m.get("tool_call_id"): m.get("content") for m in capped.filecache_messages}
    assert sent["call_1"] == clipped and capped.capped == 1
    assert (capped.stale_views, capped.dangling_refs) == (0, 0)
    # content answers may exceed the agent's view by their header (HEADER_SLACK), no more
    assert capped.prompt_tokens.filecache <= capped.prompt_tokens.recorded + HEADER_SLACK
    raw = replay_session(session, read_mode="auto", cap=False)
    assert raw.capped == 0 and raw.prompt_tokens.filecache > 5 * raw.prompt_tokens.recorded
    # every session that costs more than recorded is named, however little
    assert worse_than_recorded([capped]) == [capped] and worse_than_recorded([raw]) == [raw]
    assert "1 session cost more than recorded: session (prompt +" in format_replay([raw], raw)
    p, b = capped.prompt_tokens, capped.billed
    fine = dataclasses.replace(
        capped, prompt_tokens=dataclasses.replace(p, filecache=p.recorded),
        billed=dataclasses.replace(b, filecache=b.recorded),
    )  # fmt: skip
    assert worse_than_recorded([fine]) == []
    assert "no session costs more than recorded (1 answers" in format_replay([fine], fine)
