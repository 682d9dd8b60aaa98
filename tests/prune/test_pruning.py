"""The pruning planner, pass by pass, on small handcrafted OpenAI chat transcripts.

Sizes are words (``prune_chat.words``), so every number below can be checked by eye: a
``numbered(n)`` read is ``4 * n`` words, ``filler(n)`` is ``n``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prune_chat import Chat, bodies, filler, numbered, tier, words

from filecache import FileCache
from filecache.core.render import OUTLINE_TAG, TRUNCATION_MARKER, render_cleared
from filecache.ledger import Ledger
from filecache.prune.pruner import prune_messages
from filecache.prune.pruning import (
    PrunePlan,
    PrunePolicy,
    ResultInfo,
    _superseded,
    apply_plan,
    collect,
    plan_prune,
)
from filecache.prune.transcript import parse_transcript


def policy(**changes: Any) -> PrunePolicy:
    """A policy for word-sized transcripts: no minimum reclaim, no cost gate."""
    base: dict[str, Any] = dict(
        context_window=1_000, protect_recent=50, min_reclaim=0, small_result=100, cache_aware=False
    )
    return PrunePolicy(**(base | changes))


POLICY = policy()
SOURCE = "".join(f"value_{i} = compute({i})  # long enough for a FileRef\n" for i in range(40))


def plan(
    messages: list[Any], policy: PrunePolicy = POLICY, ledger: Ledger | None = None, **kw: Any
) -> tuple[PrunePlan, list[Any]]:
    transcript = parse_transcript(messages)
    result = plan_prune(transcript, ledger, policy, words, **kw)
    return result, apply_plan(transcript, result)


def reasons(result: PrunePlan) -> dict[str, str]:
    return {a.call_id: a.reason for a in result.actions}


def total(messages: list[Any]) -> int:
    return plan(messages, PrunePolicy(context_window=10**9))[0].prompt_tokens


def test_under_prune_at_nothing_changes() -> None:
    chat = Chat()
    chat.read("a.py", numbered(100))
    chat.edit("a.py")  # call_1 is superseded, but there is no pressure
    chat.bash("pytest -q", filler(200))
    result, out = plan(chat.messages)
    assert result.prompt_tokens < POLICY.prune_at * POLICY.context_window
    assert (result.triggered, result.actions, dict(result.replacements)) == (False, (), {})
    assert not result.changed and result.reclaimed == 0
    assert out == chat.messages and all(a is b for a, b in zip(out, chat.messages, strict=True))


@pytest.mark.parametrize(("budget", "kept"), [(0, 0), (99, 0), (100, 1), (250, 2), (300, 3)])
def test_the_newest_protect_recent_tokens_stay_verbatim(budget: int, kept: int) -> None:
    chat = Chat()
    ids = [chat.bash(f"step {i}", filler(100, f"out{i}")) for i in range(5)]
    result, out = plan(chat.messages, policy(context_window=500, protect_recent=budget))
    before, after = bodies(chat.messages), bodies(out)
    assert all(after[cid] == before[cid] for cid in ids[len(ids) - kept :])
    assert {a.call_id for a in result.actions}.isdisjoint(ids[len(ids) - kept :])
    assert tier(after[ids[0]]) == "clear"


def test_protected_results_stay_verbatim_even_when_superseded() -> None:
    chat = Chat()
    old = chat.bash("pytest -q", filler(400))
    read = chat.read("a.py", numbered(20))
    chat.edit("a.py")
    result, out = plan(chat.messages, policy(context_window=500, protect_recent=100))
    assert reasons(result).keys() == {old}
    assert bodies(out)[read] == numbered(20)


# -- supersession ---------------------------------------------------------------------------


def _read(path: str, offset: int | None = None, limit: int | None = None) -> Any:
    return lambda chat: chat.read(path, numbered(5), offset, limit)


SUPERSESSION = {
    "edit": ([_read("a.py"), lambda c: c.edit("a.py")], {"call_1": "superseded by edit call_2"}),
    "write": ([_read("a.py"), lambda c: c.write("a.py")], {"call_1": "superseded by write call_2"}),
    "covering read": (
        [_read("a.py", 10, 20), _read("a.py")],
        {"call_1": "superseded by a later read call_2 of these lines"},
    ),
    "wider range": (
        [_read("a.py", 10, 20), _read("a.py", 5, 30)],
        {"call_1": "superseded by a later read call_2 of these lines"},
    ),
    "later start": ([_read("a.py", 10, 20), _read("a.py", 15, 100)], {}),
    "earlier end": ([_read("a.py", 10, 20), _read("a.py", 1, 20)], {}),
    "whole file by a range": ([_read("a.py"), _read("a.py", 1, 1000)], {}),
    "another file": ([_read("a.py"), lambda c: c.edit("b.py")], {}),
    "same name elsewhere": ([_read("x/a.py"), lambda c: c.edit("y/a.py")], {}),
    "longer name": ([_read("a.py"), lambda c: c.edit("ba.py")], {}),
    "./ and absolute": (
        [_read("/repo/src/a.py"), lambda c: c.edit("./src/a.py")],
        {"call_1": "superseded by edit call_2"},
    ),
    "bash without a ledger": ([_read("a.py"), lambda c: c.bash("sed -i s/a/b/ a.py", "")], {}),
    "the first later change wins": (
        [_read("a.py"), lambda c: c.edit("a.py"), _read("a.py"), lambda c: c.write("a.py")],
        {"call_1": "superseded by edit call_2", "call_3": "superseded by write call_4"},
    ),
    "a FileRef is no covering read": (
        [
            _read("a.py"),
            lambda c: c.read("a.py", "[filecache] a.py unchanged since your result call_1 (x)."),
        ],
        {},
    ),
}


@pytest.mark.parametrize("case", SUPERSESSION, ids=list(SUPERSESSION))
def test_superseded_without_a_ledger(case: str) -> None:
    steps, expected = SUPERSESSION[case]
    chat = Chat()
    for step in steps:
        step(chat)
    found = _superseded(collect(parse_transcript(chat.messages), None, words), None)
    assert found == expected


def test_superseded_by_an_outside_change_seen_by_rehash(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SOURCE)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        chat = Chat()
        chat.read("a.py", session.read("a.py", call_id="r1").text, call_id="r1")
        (tmp_path / "a.py").write_text(SOURCE.replace("compute(3)", "compute(30)"))
        assert session.rehash("b1") == ["a.py"]
        chat.bash("sed -i s/3/30/ a.py", "", call_id="b1")
        chat.read("a.py", session.read("a.py", call_id="r2").text, call_id="r2")
        (tmp_path / "a.py").write_text(SOURCE)
        assert session.rehash() == ["a.py"]  # a generated call id: no result of its own
        ledger = session.ledger()
        (change,) = [w.call_id for w in ledger.writes["a.py"] if w.call_id != "b1"]
        found = _superseded(collect(parse_transcript(chat.messages), ledger, words), ledger)
        assert found == {
            "r1": "superseded by a change seen outside b1",
            "r2": f"superseded by a change seen outside ({change})",
        }


def test_an_outline_the_model_was_not_given_is_not_a_map_it_used(tmp_path: Path) -> None:
    """The ledger says outline, but the transcript holds the agent's own view in its place (a
    cap kept it): a later range read does not supersede that view as a used map would be."""
    (tmp_path / "a.py").write_text(SOURCE)
    with FileCache(tmp_path, store=":memory:", outline_threshold=0) as cache:
        session = cache.session()
        outline = session.read("a.py", call_id="r1")
        assert outline.kind == "outline"
        lines = session.read("a.py", offset=3, limit=2, call_id="r2").text
        for shown, expected in ((outline.text, {"r1"}), (numbered(40), set())):
            chat = Chat()
            chat.read("a.py", shown, call_id="r1")
            chat.read("a.py", lines, 3, 2, call_id="r2")
            ledger = session.ledger()
            found = _superseded(collect(parse_transcript(chat.messages), ledger, words), ledger)
            assert set(found) == expected


# -- keep-alive -----------------------------------------------------------------------------


def _session_plan(chat: Chat, ledger: Ledger, protect: int) -> tuple[PrunePlan, list[Any]]:
    rules = policy(context_window=total(chat.messages), protect_recent=protect)
    return plan(chat.messages, rules, ledger)


def test_a_live_diff_keeps_its_base_until_it_is_superseded_too(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SOURCE)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        chat = Chat()
        chat.read("a.py", session.read("a.py", call_id="r1").text, call_id="r1")
        (tmp_path / "a.py").write_text(SOURCE.replace("compute(3)", "compute(30)"))
        chat.bash("sed -i s/3/30/ a.py", "", call_id="b1")
        session.rehash("b1")
        diff = session.read("a.py", call_id="r2")
        assert (diff.kind, diff.base_call_id) == ("diff", "r1")
        chat.read("a.py", diff.text, call_id="r2")
        # r1 is superseded by the change, but the diff in the protected tail applies to it
        result, out = _session_plan(chat, session.ledger(), words(diff.text) + 5)
        assert "r1" not in reasons(result) and bodies(out)["r1"] == bodies(chat.messages)["r1"]
        # an edit supersedes both: nothing relies on r1 any more
        edit = session.edit("a.py", "compute(4)", "compute(40)", call_id="e1")
        chat.edit("a.py", edit.text, call_id="e1")
        result, _ = _session_plan(chat, session.ledger(), words(edit.text))
        assert reasons(result) == {
            "r1": "superseded by a change seen outside b1",
            "r2": "superseded by edit e1",
        }


def test_a_fileref_after_an_edit_keeps_the_read_it_relies_on(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(SOURCE)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        chat = Chat()
        chat.read("a.py", session.read("a.py", call_id="r1").text, call_id="r1")
        chat.edit(
            "a.py", session.edit("a.py", "compute(3)", "compute(33)", call_id="e1").text, "e1"
        )
        ref = session.read("a.py", call_id="r2")
        assert (ref.kind, ref.base_call_id) == ("unchanged", "e1")  # and it relies on r1 too
        chat.read("a.py", ref.text, call_id="r2")
        result, out = _session_plan(chat, session.ledger(), words(ref.text) + 20)
        assert "r1" not in reasons(result) and tier(bodies(out)["r1"]) == "keep"


def test_without_a_ledger_a_filecache_fileref_keeps_its_base() -> None:
    chat = Chat()
    chat.read("a.py", numbered(100))
    chat.bash("pytest -q", filler(500))
    chat.read("a.py", "[filecache] a.py unchanged since your result call_1 (all 100 lines).")
    result, _ = plan(chat.messages, policy(context_window=1_200, protect_recent=20))
    assert reasons(result) == {"call_2": "old, truncated"}


@pytest.mark.parametrize(
    ("mention_in_tail", "degraded"), [(True, {"call_2"}), (False, {"call_1", "call_2"})]
)
def test_reads_of_files_named_in_the_protected_tail_are_not_degraded(
    mention_in_tail: bool, degraded: set[str]
) -> None:
    named, other = "the bug is in server.py", "the bug is in somewhere"
    chat = Chat(other if mention_in_tail else named)  # the task comes before the tail
    chat.read("server.py", numbered(100))
    chat.read("util.py", numbered(100))
    chat.bash("ls", filler(10))
    chat.say(named if mention_in_tail else other)
    result, _ = plan(chat.messages, policy(context_window=1_000, protect_recent=10))
    assert reasons(result) == dict.fromkeys(degraded, "old, truncated")


# -- tiers ----------------------------------------------------------------------------------


def _tiers_chat() -> tuple[Chat, dict[str, str]]:
    chat = Chat()
    ids = {
        "big.py": chat.read("big.py", numbered(100)),
        "other.txt": chat.read("other.txt", numbered(100)),
        "bash": chat.bash("pytest -q", filler(400)),
        "small": chat.bash("git status", filler(50)),
        "tail": chat.bash("ls", filler(10)),
    }
    return chat, ids


def _outline(info: ResultInfo) -> str | None:
    return "def main():  # lines 1-100" if info.path == "big.py" else None


def test_tier_one_outlines_file_reads_truncates_other_output_and_clears_small_results() -> None:
    chat, ids = _tiers_chat()
    window = int(total(chat.messages) / 0.8)  # over prune_at, under hard_at
    rules = policy(context_window=window, protect_recent=10, target=0.1)
    result, out = plan(chat.messages, rules, outline_for=_outline)
    tiers = {a.call_id: a.tier for a in result.actions}
    assert tiers == {
        ids["big.py"]: "outline",
        ids["other.txt"]: "truncate",
        ids["bash"]: "truncate",
        ids["small"]: "clear",
    }
    after = bodies(out)
    assert after[ids["big.py"]] == (
        f"{OUTLINE_TAG}(read big.py) shown as its outline to save context; read the file again "
        "if you need it (offset/limit or symbol=NAME):\ndef main():  # lines 1-100\n"
    )
    lines, original = after[ids["bash"]].split("\n"), filler(400).split("\n")
    assert len(original) == 41  # 40 rows of 10 words and the empty string after the last \n
    assert lines[:20] == original[:20] and lines[21:] == original[-10:]
    assert lines[20] == (
        f"{TRUNCATION_MARKER}11 lines (220 chars) cut here: old output; run it again if you need "
        "them]"
    )
    assert after[ids["small"]] == (
        "[cleared tool result: bash `git status` (5 lines, 100 chars): old, cleared to save "
        "context; run it again if you need it]"
    )


def test_tier_two_clears_degraded_results_only_over_hard_at() -> None:
    chat, ids = _tiers_chat()
    tokens = total(chat.messages)
    rules = policy(context_window=int(tokens / 0.85), protect_recent=10)
    result, _ = plan(chat.messages, rules, outline_for=_outline)
    assert "clear" not in {a.tier for a in result.actions if a.call_id != ids["small"]}
    rules = policy(context_window=tokens, protect_recent=10, target=0.1)
    result, out = plan(chat.messages, rules, outline_for=_outline)
    assert reasons(result)[ids["big.py"]] == "cleared under context pressure"
    assert tier(bodies(out)[ids["tail"]]) == "keep"


def test_min_reclaim() -> None:
    chat, _ = _tiers_chat()
    rules = policy(context_window=total(chat.messages), protect_recent=10, min_reclaim=10**6)
    result, out = plan(chat.messages, rules)
    assert (result.triggered, result.actions, result.gate) == (True, (), "under min_reclaim")
    assert out == chat.messages


def test_a_result_is_never_replaced_by_something_larger() -> None:
    chat = Chat()
    chat.read("a.py", "x")
    chat.edit("a.py")
    chat.bash("pytest", filler(400))
    result, _ = plan(chat.messages, policy(context_window=300, protect_recent=0))
    assert "call_1" not in reasons(result)


def test_a_restored_diff_keeps_its_own_base_too() -> None:
    chat = Chat()
    chat.read("a.py", numbered(100))
    chat.read("a.py", numbered(10), offset=1, limit=10)
    chat.read("a.py", "[filecache] a.py changed since your result call_1 (xxh3 1 -> 2); all:\n")
    chat.edit("a.py")  # supersedes the three reads
    chat.read("a.py", "[filecache] a.py unchanged since your result call_3 (lines 1-10).")
    result, _ = plan(chat.messages, policy(context_window=500, protect_recent=15))
    # call_5 relies on call_3 (and its lines 1-10 on call_2); call_3 relies on call_1
    assert reasons(result) == {}


# -- the cost gate --------------------------------------------------------------------------


def _gate_chat(deep: bool, recent: bool, recent_words: int = 300) -> Chat:
    chat = Chat()
    if deep:
        chat.bash("pytest -q", filler(300, "deep"))
    chat.say(filler(3_000, "talk"))
    if recent:
        chat.bash("pytest -q", filler(recent_words, "recent"))
    chat.bash("ls", filler(10))
    return chat


def _gated(
    chat: Chat, turns: int, aware: bool = True, hard: bool = False, floor: int = 0
) -> PrunePlan:
    window = total(chat.messages) if hard else int(total(chat.messages) / 0.8)
    rules = policy(
        context_window=window,
        protect_recent=10,
        turns_left=turns,
        cache_aware=aware,
        min_reclaim=floor,
    )
    result, out = plan(chat.messages, rules)
    assert bool(result.actions) == (out != chat.messages)
    return result


def test_the_cost_gate_drops_a_deep_cut_that_does_not_pay() -> None:
    result = _gated(_gate_chat(deep=True, recent=False), turns=4)
    # 0.1 x 280 reclaimed x 4 turns does not pay 1.15 x the 3,000-word suffix it invalidates
    assert (result.triggered, result.actions, result.reclaimed) == (True, (), 0)
    assert result.dropped_by_gate == ("call_1",)
    assert result.gate == "cost gate: no cut pays over 4 turns"


def test_the_cost_gate_keeps_a_cut_that_pays() -> None:
    result = _gated(_gate_chat(deep=False, recent=True), turns=40)
    ((action,),) = [result.actions]
    assert (action.call_id, action.message_index, result.dropped_by_gate) == ("call_1", 4, ())
    messages = _gate_chat(deep=False, recent=True).messages
    suffix = total(messages) - total(messages[:4])
    reclaimed = action.tokens_before - action.tokens_after
    net = 0.1 * reclaimed * 40 - 1.15 * (suffix - reclaimed)
    assert result.gate == f"cost gate: cut at message 4 nets {net:,.0f}"


def test_the_cost_gate_keeps_the_recent_cut_and_drops_the_deep_one() -> None:
    result = _gated(_gate_chat(deep=True, recent=True), turns=40)
    assert [a.call_id for a in result.actions] == ["call_2"]
    assert result.dropped_by_gate == ("call_1",)
    assert result.gate.startswith("cost gate: cut at message 6 nets ")


def test_min_reclaim_applies_to_what_the_gate_keeps() -> None:
    chat = _gate_chat(deep=True, recent=True, recent_words=40)
    assert [a.call_id for a in _gated(chat, turns=40).actions] == ["call_2"]  # 18 words
    result = _gated(chat, turns=40, floor=100)  # 280 + 18 before the gate
    assert (result.actions, result.dropped_by_gate, result.reclaimed) == ((), ("call_1",), 0)
    assert result.gate.startswith("cost gate: cut at message 6 nets ")
    assert result.gate.endswith(": under min_reclaim")


def test_the_cost_gate_settles_in_one_pass() -> None:
    """The gate keeps the cut that pays best (here the newest result alone); once it is made,
    the prompt is smaller, more requests come before it reaches ``hard_at``, and a deeper cut
    pays too. The pass makes it as the next pass would: pruning its output again adds nothing
    (found by ``test_pruning_twice_equals_pruning_once``; the gate alone left it to the next
    pass, a second invalidation of the cache)."""
    chat = Chat()
    chat.read("f3.py", numbered(20))
    chat.read("f2.py", numbered(59))
    chat.bash("cmd0", filler(39, "out"))
    chat.bash("cmd1", filler(24, "out"))
    chat.read("f2.py", numbered(59))
    chat.bash("cmd2", filler(23, "out"))
    rules = policy(
        context_window=1030, prune_at=0.05, target=0.0, protect_recent=0, small_result=0,
        degrade=False, cache_aware=True,
    )  # fmt: skip
    once = prune_messages(chat.messages, policy=rules, count=words)
    assert [a.call_id for a in once.plan.actions] == [f"call_{n}" for n in range(1, 6)]
    again = prune_messages(once.messages, policy=rules, count=words)
    assert again.plan.actions == () and again.messages == once.messages


@pytest.mark.parametrize("deep", [True, False])
def test_without_cache_awareness_or_over_hard_at_both_cuts_are_made(deep: bool) -> None:
    chat = _gate_chat(deep=deep, recent=not deep)
    for result in (_gated(chat, 4, aware=False), _gated(chat, 4, hard=True)):
        assert [a.call_id for a in result.actions] == ["call_1"]
        assert (result.gate, result.dropped_by_gate) == ("", ())


# -- placeholders and sticky projections ----------------------------------------------------


AGAIN = {"read": "read the file again if you need it]", "run": "run it again if you need it]"}
PLACEHOLDERS = [
    ("read src/auth.py 1-120", "x\n" * 120, "(120 lines, 240 chars)", "read"),
    ("bash `pytest -q`", "one line, no newline", "(1 line, 20 chars)", "run"),
    ("grep", "", "(0 lines, 0 chars)", "run"),
    ("write a.py", "a\n" * 1500, "(1,500 lines, 3,000 chars)", "run"),
]


@pytest.mark.parametrize(("description", "original", "size", "how"), PLACEHOLDERS)
def test_render_cleared(description: str, original: str, size: str, how: str) -> None:
    assert render_cleared(description, original, "superseded by edit call_9") == (
        f"[cleared tool result: {description} {size}: superseded by edit call_9; {AGAIN[how]}"
    )


def test_placeholders_say_what_why_and_how() -> None:
    chat = Chat()
    chat.read("src/a.py", numbered(20, start=10), offset=10, limit=20)
    chat.edit("src/a.py")
    long = "python -m pytest tests/test_pruning.py -k 'placeholder and not slow' -x -q --tb=short"
    chat.bash(long, filler(50))
    chat.bash("ls", filler(10))
    result, out = plan(chat.messages, policy(context_window=200, protect_recent=10))
    assert bodies(out)["call_1"] == (
        f"[cleared tool result: read src/a.py 10-29 (20 lines, {len(numbered(20, 10))} chars): "
        "superseded by edit call_2; read the file again if you need it]"
    )
    assert bodies(out)["call_3"] == (
        f"[cleared tool result: bash `{long[:57]}...` (5 lines, 100 chars): old, cleared to save "
        "context; run it again if you need it]"
    )


def test_prior_projections_render_the_same_bytes_and_only_escalate() -> None:
    chat, ids = _tiers_chat()
    outline = f"{OUTLINE_TAG}(read big.py) outline:\n{filler(60, 'def')}"
    prior = {ids["big.py"]: ("outline", outline), "gone": ("clear", "x")}
    result, out = plan(chat.messages, policy(context_window=10**6), prior=prior)
    sticky = prior[ids["big.py"]][1]
    assert not result.triggered and dict(result.replacements) == {ids["big.py"]: sticky}
    assert bodies(out)[ids["big.py"]] == sticky
    rules = policy(context_window=int(total(chat.messages) / 0.8), protect_recent=10)
    result, out = plan(chat.messages, rules, prior=prior, outline_for=_outline)
    assert ids["big.py"] not in reasons(result)  # already outlined: tier 1 leaves it
    assert bodies(out)[ids["big.py"]] == sticky
    rules = policy(context_window=total(chat.messages) // 2, protect_recent=10, target=0.0)
    result, out = plan(chat.messages, rules, prior=prior, outline_for=_outline)
    assert tier(bodies(out)[ids["big.py"]]) == "clear"


def test_keep_alive_uses_the_ledgers_deps_for_every_relied_on_result(tmp_path: Path) -> None:
    """A FileRef over two partial reads relies on both: neither is cleared while it lives."""
    from filecache import FileCache
    from filecache.prune.pruner import prune_messages

    text = "".join(f"line {i}: " + "word " * 12 + "\n" for i in range(80))
    (tmp_path / "a.py").write_text(text)
    messages: list[dict[str, object]] = [{"role": "user", "content": "go"}]
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        for call_id, args in [
            ("top", {"path": "a.py", "offset": 1, "limit": 40}),
            ("bottom", {"path": "a.py", "offset": 41, "limit": 40}),
            ("whole", {"path": "a.py"}),
        ]:
            answer = session.read("a.py", offset=args.get("offset"), limit=args.get("limit"),
                                  call_id=call_id)  # fmt: skip
            call = {"id": call_id, "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps(args)}}  # fmt: skip
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call_id, "content": answer.text},
            ]
        assert session.ledger().calls["whole"].deps == ("bottom", "top")
        policy = PrunePolicy(
            context_window=1_000, protect_recent=10, min_reclaim=1, small_result=10,
            cache_aware=False,
        )  # fmt: skip
        plan = prune_messages(messages, session=session, policy=policy).plan
    assert {"top", "bottom"}.isdisjoint(a.call_id for a in plan.actions)
