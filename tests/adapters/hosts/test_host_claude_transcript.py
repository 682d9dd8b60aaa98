"""What a Claude Code context holds, read from a real transcript (fixtures/hosts/claude-code).

``session.jsonl`` was captured from Claude Code 2.1.328 (``make_fixtures.py`` there): reads,
two parallel reads (their results written out of order), an edit, a write, Bash reads, a failed
read and a failed command, then ``/compact``, then one read after it. Each test changes the
transcript the way Claude Code would (a cleared result, a rewind, a microcompaction...) and
checks that nothing the model lost counts as held.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts.claude_index import read_held
from filecache.adapters.hosts.claude_transcript import CLEARED, STUB_PREFIXES, held_calls

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "hosts" / "claude-code"
BEFORE = {"toolu_a1", "toolu_a2", "toolu_p1", "toolu_p2", "toolu_e1", "toolu_a3", "toolu_w1"}
BEFORE |= {"toolu_b1", "toolu_p3"}


def entries() -> list[dict[str, Any]]:
    lines = (FIXTURES / "session.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def before_compact() -> list[dict[str, Any]]:
    all_ = entries()
    cut = next(i for i, e in enumerate(all_) if e.get("subtype") == "compact_boundary")
    return all_[:cut]


def held(items: list[dict[str, Any]]) -> frozenset[str]:
    return held_calls(json.dumps(e) for e in items).ids


def index_of(items: list[dict[str, Any]], call: str, kind: str) -> int:
    for i, entry in enumerate(items):
        content = (entry.get("message") or {}).get("content")
        if isinstance(content, list) and any(
            b.get("type") == kind and call in (b.get("id"), b.get("tool_use_id")) for b in content
        ):
            return i
    raise AssertionError(f"{kind} {call} not in the transcript")


def test_the_calls_whose_results_reached_the_model_are_held() -> None:
    assert held(before_compact()) == BEFORE  # toolu_f1 (a failed read), toolu_f2 (exit 1): not


def test_after_compact_only_the_calls_since_are_held() -> None:
    assert held(entries()) == {"toolu_a4"}
    assert read_held(FIXTURES / "session.jsonl").ids == {"toolu_a4"}


@pytest.mark.parametrize("first", ["toolu_p1", "toolu_p2"])
def test_parallel_results_written_in_either_order_are_both_held(first: str) -> None:
    items = before_compact()
    # Claude Code writes parallel results as they finish: the next message hangs under the
    # result written last, so the other call's tool_use entry is off the walked chain and must
    # be found as a sibling (same response id). Both orders occur in real runs.
    at = sorted(index_of(items, c, "tool_result") for c in ("toolu_p1", "toolu_p2"))
    if index_of(items, first, "tool_result") != at[0]:
        items[at[0]], items[at[1]] = items[at[1]], items[at[0]]
        later = items[at[1] + 1 :]
        next_message = next(e for e in later if e.get("uuid"))
        next_message["parentUuid"] = items[at[1]]["uuid"]
    assert index_of(items, first, "tool_result") == at[0]
    assert {"toolu_p1", "toolu_p2"} <= held(items[: at[1] + 1])
    assert held(items) == BEFORE


def test_calls_of_the_turn_in_progress_are_pending_and_held() -> None:
    items = before_compact()
    cut = items[: index_of(items, "toolu_p2", "tool_use") + 1]  # both uses, no result yet
    state = held_calls(json.dumps(e) for e in cut)
    assert state.pending == {"toolu_p1", "toolu_p2"} and state.pending <= state.ids


def test_a_use_without_result_before_the_last_prompt_is_not_pending() -> None:
    items = before_compact()
    cut = items[: index_of(items, "toolu_p2", "tool_use") + 1]
    prompt = next(e for e in items if e.get("type") == "user")
    cut.append({**prompt, "uuid": "prompt-2", "parentUuid": cut[-1]["uuid"]})
    assert not {"toolu_p1", "toolu_p2"} & held(cut)


@pytest.mark.parametrize(
    "content", [CLEARED, "<persisted-output>\nOutput too large", STUB_PREFIXES[0] + " x"]
)
def test_a_result_claude_code_replaced_is_not_held(content: str) -> None:
    items = before_compact()
    at = index_of(items, "toolu_a1", "tool_result")
    for block in items[at]["message"]["content"]:
        if block.get("type") == "tool_result":
            block["content"] = content
    assert "toolu_a1" not in held(items) and "toolu_a2" in held(items)


def test_a_microcompacted_result_is_not_held() -> None:
    items = before_compact()
    items.append({
        "type": "system", "subtype": "microcompact_boundary", "uuid": "mc-1",
        "parentUuid": next(e["uuid"] for e in reversed(items) if e.get("uuid")),
        "microcompactMetadata": {"trigger": "auto", "compactedToolIds": ["toolu_a1", "toolu_p2"]},
    })  # fmt: skip
    assert held(items) == BEFORE - {"toolu_a1", "toolu_p2"}


def test_a_rewound_branch_is_not_held() -> None:
    items = before_compact()
    # /rewind to just after the edit: a new prompt hangs under the edit's result.
    edit = items[index_of(items, "toolu_e1", "tool_result")]
    prompt = next(e for e in items if e.get("type") == "user")
    items.append({**prompt, "uuid": "rewound-prompt", "parentUuid": edit["uuid"]})
    assert held(items) == {"toolu_a1", "toolu_a2", "toolu_p1", "toolu_p2", "toolu_e1"}


def test_a_rewind_to_the_start_holds_nothing() -> None:
    items = before_compact()
    prompt = next(e for e in items if e.get("type") == "user")
    items.append({**prompt, "uuid": "fresh-start", "parentUuid": None})
    assert held(items) == frozenset()


def test_api_side_clearing_of_tool_results_holds_only_the_turn_in_progress() -> None:
    items = before_compact()
    request = next(e for e in items if e.get("type") == "api-request")
    edits = [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens"}}]
    clearing = {**request, "params": {**request["params"], "context_management": {"edits": edits}}}
    assert held([*items, clearing]) == frozenset()


def test_broken_lines_and_a_missing_transcript_hold_nothing_but_the_current_call(
    tmp_path: Path,
) -> None:
    lines = (FIXTURES / "session.jsonl").read_text().splitlines()
    cut = [*lines[:40], lines[40][:25], "[1, 2]", "", "{not json"]
    assert held_calls(cut).ids <= BEFORE  # a line being written is skipped, not fatal
    assert read_held(tmp_path / "gone.jsonl", current="toolu_x").ids == {"toolu_x"}
    assert not read_held(None).complete


def test_the_index_reads_only_what_was_appended_and_agrees_with_a_full_parse(
    tmp_path: Path,
) -> None:
    lines = (FIXTURES / "session.jsonl").read_text().splitlines(keepends=True)
    transcript, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    with transcript.open("w") as out:
        for n, line in enumerate(lines):
            out.write(line[:-10] if n == len(lines) - 1 else line)  # the last one half-written
            out.flush()
            if n % 7 == 0 or n == len(lines) - 1:
                expected = held_calls(lines[: n + (0 if n == len(lines) - 1 else 1)])
                assert read_held(transcript, cache_dir=cache) == expected
        out.write(lines[-1][-10:])
    assert read_held(transcript, cache_dir=cache).ids == {"toolu_a4"}
    assert [p.suffix for p in cache.iterdir()] == [".sqlite"]


def test_a_rewritten_transcript_or_a_broken_index_means_a_full_parse(tmp_path: Path) -> None:
    lines = (FIXTURES / "session.jsonl").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"compact_boundary"' in line)
    transcript, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    transcript.write_text("".join(lines))
    assert read_held(transcript, cache_dir=cache).ids == {"toolu_a4"}
    replaced = tmp_path / "other.jsonl"  # same path, other content, as long or longer
    replaced.write_text("".join(lines[:cut]) + "\n" * (len("".join(lines[cut:])) + 10))
    os.replace(replaced, transcript)
    assert read_held(transcript, cache_dir=cache).ids == BEFORE
    with transcript.open("r+") as out:  # rewritten in place: same inode, other bytes
        out.write(" " * 40)
    assert read_held(transcript, cache_dir=cache) == held_calls(transcript.read_text().splitlines())
    for index in cache.iterdir():
        index.write_text('{"version": 3, "offset": 5, "state": [')
    assert (
        read_held(transcript, cache_dir=cache).ids
        == held_calls(transcript.read_text().splitlines()).ids
    )


def test_sidechain_entries_belong_to_the_subagent_transcript_only() -> None:
    items = [{**e, "isSidechain": True} if "uuid" in e else e for e in before_compact()]
    lines = [json.dumps(e) for e in items]
    assert held_calls(lines).ids == frozenset()  # in a main transcript: another context's
    assert held_calls(lines, sidechain=True).ids == BEFORE  # a subagent's own transcript


def with_progress(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript as Claude Code 2.1.12-2.1.42 writes it: a hook ``progress`` entry between
    every message and its parent (the message's ``parentUuid`` names the progress entry)."""
    out: list[dict[str, Any]] = []
    for n, entry in enumerate(items):
        parent = entry.get("parentUuid")
        if entry.get("type") in ("user", "assistant") and isinstance(parent, str):
            hook = {"type": "progress", "uuid": f"progress-{n}", "parentUuid": parent,
                    "isSidechain": entry.get("isSidechain", False),
                    "data": {"type": "hook_progress", "hookEvent": "PostToolUse"}}  # fmt: skip
            out.append(hook)
            entry = {**entry, "parentUuid": hook["uuid"]}
        out.append(entry)
    return out


def test_progress_entries_on_the_chain_do_not_cut_it(tmp_path: Path) -> None:
    """The walk back from the newest entry stopped at the first progress entry: every result
    before it counted as not held (content again, never a FileRef to it)."""
    items = with_progress(before_compact())
    assert sum(e["type"] == "progress" for e in items) > 10
    assert held(items) == BEFORE
    log = tmp_path / "session.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in items[:20]))
    first = read_held(log).ids  # the index keeps the bridges between hooks
    with log.open("a") as fh:
        fh.write("".join(json.dumps(e) + "\n" for e in items[20:]))
    assert read_held(log).ids == BEFORE and first <= BEFORE
