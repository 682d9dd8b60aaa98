"""Pruning presets (``PrunePolicy.preset``), the knobs the ``context`` preset turns, and the
cost gate's model of the requests after a cut (``prune_cost``)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prune_chat import Chat, bodies, filler, numbered, tier, words

from filecache.cli import main
from filecache.core.render import render_outline_answer
from filecache.errors import ConfigError
from filecache.prune.prune_cost import cut_net, session_growth
from filecache.prune.pruning import PRESETS, PrunePlan, PrunePolicy, apply_plan, plan_prune
from filecache.prune.transcript import parse_transcript
from filecache.replay.replay import replay_session

PYTEST = Path(__file__).resolve().parents[2] / "fixtures" / "sessions"
PYTEST = PYTEST / "lm32b__pytest-dev__pytest-7571"


def plan(messages: list[Any], policy: PrunePolicy) -> tuple[PrunePlan, list[Any]]:
    transcript = parse_transcript(messages)
    result = plan_prune(transcript, None, policy, words)
    return result, apply_plan(transcript, result)


def total(messages: list[Any]) -> int:
    return plan(messages, PrunePolicy(context_window=10**9))[0].prompt_tokens


# -- presets --------------------------------------------------------------------------------


def test_the_cost_preset_is_the_context_rules_with_the_cost_gate() -> None:
    cost = PrunePolicy.preset("cost", context_window=64_000)
    context = PrunePolicy.preset("context", context_window=64_000)
    assert cost.cache_aware and not context.cache_aware
    assert cost == dataclasses.replace(context, cache_aware=True, min_turns_left=20)
    assert PrunePolicy().prune_at == 0.65 and PrunePolicy().cache_aware  # the seeds' defaults


def test_the_context_preset_prunes_early_and_without_the_cost_gate() -> None:
    context = PrunePolicy.preset("context", context_window=32_000)
    assert context.context_window == 32_000 and not context.cache_aware
    assert (context.prune_at, context.target) == (0.05, 0.0)
    assert (context.in_use_turns, context.keep_edited, context.output_first) == (25, True, True)
    assert not context.degrade and PrunePolicy().degrade
    assert PrunePolicy.preset("context", cache_aware=True).cache_aware  # overrides win
    assert set(PRESETS) == {"cost", "context", "seeds"}
    assert PrunePolicy.preset("seeds") == PrunePolicy()


def test_an_unknown_preset_says_which_exist() -> None:
    with pytest.raises(
        ConfigError, match="unknown preset 'small'; choose one of cost, context, seeds"
    ):
        PrunePolicy.preset("small")


# -- the context preset's knobs -------------------------------------------------------------


def knobs(**changes: Any) -> PrunePolicy:
    base: dict[str, Any] = dict(
        context_window=1_000, prune_at=0.05, target=0.0, protect_recent=20, min_reclaim=0,
        small_result=1_000, cache_aware=False,
    )  # fmt: skip
    return PrunePolicy(**(base | changes))


def working_chat() -> Chat:
    chat = Chat()
    chat.read("src/parser.py", numbered(50))  # call_1: named again four turns later
    chat.read("src/other.py", numbered(50))  # call_2
    chat.bash("pytest -q", filler(200))  # call_3
    chat.bash("ls", filler(10))
    chat.bash("ls", filler(10))
    chat.bash("grep -n parse src/parser.py", filler(10))  # call_6 names parser.py
    chat.bash("true", filler(10))
    return chat


def test_in_use_turns_keeps_reads_of_files_the_last_turns_name() -> None:
    chat = working_chat()
    _, narrow = plan(chat.messages, knobs())
    _, wide = plan(chat.messages, knobs(in_use_turns=2))
    assert tier(bodies(narrow)["call_1"]) == "clear"  # the protected tail does not name it
    assert tier(bodies(wide)["call_1"]) == "keep"  # the last two turns do
    assert tier(bodies(wide)["call_2"]) == tier(bodies(wide)["call_3"]) == "clear"


def test_in_use_turns_finds_a_windows_paths_file_name() -> None:
    # a Windows Claude Code session: its reads name X:\\...\\app.php, later turns app.php or
    # X:/.../app.php; the whole path taken for the file's name cleared every read five turns
    # after it was made (gateway recall 41% on that session)
    chat = Chat()
    chat.read("X:\\proj\\src\\parser.py", numbered(50))  # call_1: named again
    chat.read("X:\\proj\\src\\other.py", numbered(50))  # call_2: never again
    chat.bash("ls", filler(10))
    chat.bash("grep -n parse X:/proj/src/parser.py", filler(10))
    chat.bash("true", filler(10))
    out = bodies(plan(chat.messages, knobs(in_use_turns=2))[1])
    assert tier(out["call_1"]) == "keep"
    assert tier(out["call_2"]) == "clear"


def test_revisit_turns_keeps_reads_of_files_the_model_came_back_to() -> None:
    # sympy-14531: printer.py read whole, grepped 15 turns later, then not named for 26 turns;
    # its read cleared at the very request where the model turned to it again (recall 79.6%)
    chat = Chat()
    chat.read("src/printer.py", numbered(50))  # call_1: read, then come back to it
    chat.read("src/runner.py", numbered(50))  # call_2: named only in the very next turn
    chat.bash("cat src/runner.py | head -1", filler(10))  # call_3: still reading it
    chat.bash("grep -n Printer src/printer.py", filler(10))  # call_4: back to printer.py
    for _ in range(4):
        chat.bash("true", filler(10))
    off, on = knobs(in_use_turns=2), knobs(in_use_turns=2, revisit_turns=8)
    assert tier(bodies(plan(chat.messages, off)[1])["call_1"]) == "clear"  # named 5 turns ago
    out = bodies(plan(chat.messages, on)[1])
    assert tier(out["call_1"]) == "keep"  # named again after other work: a working file
    assert tier(out["call_2"]) == "clear"  # named in the turn after its read only
    gone = bodies(plan(chat.messages, knobs(in_use_turns=2, revisit_turns=4))[1])
    assert tier(gone["call_1"]) == "clear"  # outside the last revisit_turns turns: done with
    assert PrunePolicy.preset("cost").revisit_turns == 50 == 2 * PRESETS["cost"]["in_use_turns"]


def test_keep_edited_keeps_a_read_the_models_edit_builds_on_but_not_a_covered_one() -> None:
    chat = Chat()
    chat.read("a.py", numbered(50))  # call_1, then edited
    chat.edit("a.py")
    chat.read("b.py", numbered(50))  # call_3, then read again whole
    chat.read("b.py", numbered(50))
    chat.bash("true", filler(40))
    for keep, expected in ((False, "clear"), (True, "keep")):
        result, out = plan(chat.messages, knobs(keep_edited=keep, small_result=10))
        assert tier(bodies(out)["call_1"]) == expected
        assert "call_3" in {a.call_id for a in result.actions}


def test_keep_edited_does_not_keep_an_outline_answer_the_edit_superseded() -> None:
    chat = Chat()
    outline = render_outline_answer(
        "a.py outline (xxh3 0a1b2c3d):\n" + "".join(f"  def f{n}(): {n}-{n}\n" for n in range(30)),
        large=True, tokens_full=5_000,
    )  # fmt: skip
    chat.read("a.py", outline)  # call_1: the whole-file read answered with an outline
    chat.read("a.py", numbered(20), offset=1, limit=20)  # call_2: the lines the edit is on
    chat.edit("a.py")
    chat.bash("true", filler(40))
    _, out = plan(chat.messages, knobs(keep_edited=True, small_result=10))
    assert tier(bodies(out)["call_1"]) == "clear"
    assert tier(bodies(out)["call_2"]) == "keep"


def test_without_degrade_large_old_results_clear_at_once() -> None:
    chat = Chat()
    chat.read("src/parser.py", numbered(200))  # call_1: large, outlined when degrading
    chat.bash("pytest -q", filler(800))  # call_2: large, head and tail when degrading
    chat.bash("true", filler(10))

    def outline_for(info: Any) -> str:
        return "def parse(): 1-200"

    tiers = {}
    for degrade in (True, False):
        transcript = parse_transcript(chat.messages)
        rules = knobs(context_window=10_000, small_result=100, degrade=degrade)
        result = plan_prune(transcript, None, rules, words, outline_for=outline_for)
        out = bodies(apply_plan(transcript, result))
        tiers[degrade] = (tier(out["call_1"]), tier(out["call_2"]), tier(out["call_3"]))
    assert tiers == {True: ("outline", "truncate", "keep"), False: ("clear", "clear", "keep")}


def test_output_first_degrades_other_output_before_file_reads() -> None:
    chat = Chat()
    chat.read("a.py", numbered(50))  # 200 words, the oldest
    chat.bash("pytest -q", filler(200))
    chat.bash("true", filler(20))
    window = total(chat.messages) * 2  # target: 250 words under what is there
    rules = knobs(context_window=window, target=(total(chat.messages) - 150) / window)
    first = {a.call_id for a in plan(chat.messages, rules)[0].actions}
    later = {
        a.call_id
        for a in plan(chat.messages, knobs(**{**vars(rules), "output_first": True}))[0].actions
    }
    assert (first, later) == ({"call_1"}, {"call_2"})


# -- the cost gate's model ------------------------------------------------------------------


@pytest.mark.parametrize(("suffix", "reclaimed", "turns"), [(5_000, 1_000, 10), (900, 800, 3)])
def test_without_growth_a_cut_nets_the_closed_form(suffix: int, reclaimed: int, turns: int) -> None:
    net = cut_net(
        total=20_000, suffix=suffix, reclaimed=reclaimed, growth=0, turns=turns,
        limit=float("inf"), read=0.1, write=1.25,
    )  # fmt: skip
    assert net == pytest.approx(0.1 * reclaimed * (turns + 1) - 1.15 * (suffix - reclaimed))


def test_a_cut_saves_only_until_the_prompt_would_pass_the_limit() -> None:
    args: dict[str, Any] = dict(total=50_000, suffix=30_000, reclaimed=3_000, turns=5)
    args |= dict(read=0.1, write=1.25)
    calm = cut_net(**args, growth=1_000, limit=100_000)  # 55,000 after 5 turns: never forced
    assert calm == pytest.approx(0.1 * 3_000 * 6 - 1.15 * 27_000)
    # passed in the third turn: from then on the planner clears with or without this cut, so
    # the cut saves in this request and the two before it (it is not credited with sparing the
    # forced pass its rewrite: that pass comes in both runs)
    forced = cut_net(**args, growth=1_000, limit=52_500)
    assert forced == pytest.approx(0.1 * 3_000 * 3 - 1.15 * 27_000)
    assert forced < calm < 0
    # a deep cut of much that pays over the turns to come, and then not once the limit is near
    many: dict[str, Any] = args | dict(reclaimed=20_000, turns=30, growth=100)
    assert cut_net(**many, limit=100_000) > 0 > cut_net(**many, limit=50_150)


def test_growth_is_what_the_turns_added_after_the_first_request() -> None:
    roles = ["system", "user", "assistant", "tool", "assistant", "tool"]
    growth = session_growth(roles, [500, 100, 10, 1_000, 10, 990])
    assert (growth.turns, growth.per_turn, growth.turns_left) == (2, 1_005, 2)
    assert session_growth(["system", "user"], [5, 5]).turns_left == 1


def gate_chat() -> Chat:
    chat = Chat()
    chat.bash("pytest -q", filler(300, "deep"))  # call_1: deep
    chat.say(filler(3_000, "talk"))
    chat.bash("ls", filler(10))
    return chat


@pytest.mark.parametrize(
    ("hard_at", "turns", "cut"), [(500.0, 200, True), (0.9, 200, False), (500.0, 2, False)]
)
def test_the_gate_takes_a_deep_cut_only_when_it_pays_before_the_limit(
    hard_at: float, turns: int, cut: bool
) -> None:
    chat = gate_chat()
    rules = PrunePolicy(
        context_window=int(total(chat.messages) / 0.8), protect_recent=10, min_reclaim=0,
        hard_at=hard_at, min_turns_left=turns,
    )  # fmt: skip
    result, _ = plan(chat.messages, rules)
    # a 300-word result under 3,000 words of later talk: cutting it rewrites those, and saves
    # its tokens in every request to come; two turns so far of about 1,650 words each, at 80%
    # of the window: the next request passes 90%, where the planner clears without asking
    assert bool(result.actions) is cut
    assert result.gate.startswith("cost gate: cut at message 3" if cut else "cost gate: no cut")
    if not cut:
        assert result.gate == f"cost gate: no cut pays over {turns} turns"


@pytest.mark.parametrize(("at_most", "cut"), [(None, True), (200, True), (2, False)])
def test_a_cap_on_the_requests_to_come_declines_a_cut_that_pays_back_later(
    at_most: int | None, cut: bool
) -> None:
    """``max_turns_left`` (the gateway's horizon): the same deep cut, counted over at most that
    many requests, pays or does not."""
    chat = gate_chat()
    rules = PrunePolicy(
        context_window=int(total(chat.messages) / 0.8), protect_recent=10, min_reclaim=0,
        hard_at=500.0, min_turns_left=200, max_turns_left=at_most,
    )  # fmt: skip
    result, _ = plan(chat.messages, rules)
    assert bool(result.actions) is cut
    if not cut:
        assert result.gate == f"cost gate: no cut pays over {at_most} turns"


# -- in a replay and on the command line ----------------------------------------------------


def test_the_presets_in_a_replay_the_gate_decides_and_both_stay_correct() -> None:
    window = 32_000
    cost = replay_session(PYTEST, policy=PrunePolicy.preset("cost", context_window=window))
    context = replay_session(PYTEST, policy=PrunePolicy.preset("context", context_window=window))
    seeds = replay_session(PYTEST, policy=PrunePolicy(context_window=window))
    gate_early = dataclasses.replace(
        PrunePolicy.preset("cost", context_window=window), min_turns_left=1
    )  # "as many requests again as so far": early cuts look as if they could not pay
    early = replay_session(PYTEST, policy=gate_early)
    assert context.prompt_tokens.filecache < cost.prompt_tokens.filecache
    # the gate decides: it declines cuts, and bills less than cutting everything (context),
    # than the seeds' late trigger, and than the gate that expects too few requests to come
    assert cost.pruning.dropped_by_gate > 0 == context.pruning.dropped_by_gate
    assert cost.billed.filecache < min(
        context.billed.filecache, seeds.billed.filecache, early.billed.filecache
    )  # fmt: skip
    for r in (cost, context):
        assert (r.stale_views, r.dangling_refs, r.files_identical) == (0, 0, True)
    assert context.pruning.passes > cost.pruning.passes


def test_preset_on_the_command_line(tmp_path: Path) -> None:
    trace = tmp_path / PYTEST.name
    shutil.copytree(PYTEST, trace)
    runner = CliRunner()
    runs = {}
    for preset in ("cost", "context"):
        args = ["replay", str(trace), "--window", "32000", "--preset", preset, "--json"]
        result = runner.invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        runs[preset] = json.loads(result.stdout)["totals"]
    assert runs["context"]["pruning"]["cache_aware"] is False
    assert runs["cost"]["pruning"]["cache_aware"] is True
    assert (
        runs["context"]["prompt_tokens"]["filecache"] < runs["cost"]["prompt_tokens"]["filecache"]
    )
    chat = Chat()
    chat.bash("pytest -q", filler(3_000))  # about 3,000 tokens, then a protected tail
    chat.bash("true", filler(100))
    source = tmp_path / "in.json"
    source.write_text(json.dumps(chat.messages))
    out = {}
    for preset in ("cost", "context"):
        args = ["prune", str(source), "--window", "10000", "--preset", preset]
        result = runner.invoke(main, [*args, "--store", str(tmp_path / f"{preset}.db")])
        assert result.exit_code == 0, result.stderr
        out[preset] = json.loads(result.stdout)
    # both clear the old output: a cut right before the protected tail pays at once
    assert out["cost"] != chat.messages and out["context"] != chat.messages
    bad = runner.invoke(main, ["prune", str(source), "--preset", "small"])
    assert bad.exit_code == 2 and "'small' is not one of 'cost', 'context', 'seeds'" in bad.stderr


def test_a_read_whose_lines_later_reads_show_between_them_is_superseded() -> None:
    chat = Chat()
    chat.read("a.py", numbered(100), offset=1, limit=100)  # call_1
    chat.read("a.py", numbered(60), offset=1, limit=60)  # call_2
    chat.read("a.py", numbered(50, start=41), offset=41, limit=50)  # call_3: up to line 90
    chat.read("a.py", numbered(20, start=81), offset=81, limit=20)  # call_4: 81-100
    chat.bash("true", filler(40))
    result, _ = plan(chat.messages, knobs(small_result=10, in_use_turns=10))
    why = {a.call_id: a.reason for a in result.actions}
    assert why["call_1"] == "superseded by later reads up to call_4 of these lines"
    assert "call_2" not in why  # lines 1-40 are shown by nothing later


def test_an_outline_answer_is_superseded_once_the_model_read_from_the_file() -> None:
    outline = render_outline_answer(
        "a.py outline (xxh3 0a1b2c3d):\n" + "".join(f"  def f{n}(): {n}-{n}\n" for n in range(30)),
        large=True, tokens_full=5_000,
    )  # fmt: skip
    chat = Chat()
    chat.read("a.py", outline)  # call_1: the map of a large file
    chat.read("b.py", outline.replace("a.py", "b.py"))  # call_2: a map nothing was read from
    chat.read("a.py", numbered(20, start=11), offset=11, limit=20)  # call_3: found with it
    chat.bash("true", filler(40))
    # in use (the last turns name both files): only supersession clears here
    result, out = plan(chat.messages, knobs(small_result=10, in_use_turns=10))
    why = {a.call_id: a.reason for a in result.actions}
    assert why == {"call_1": "superseded by a later read call_3 of the file"}
    assert tier(bodies(out)["call_2"]) == tier(bodies(out)["call_3"]) == "keep"
    assert "read the file again" in bodies(out)["call_1"]  # how to get the map back
