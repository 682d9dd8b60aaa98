"""Other tools' pruning policies (``peer_policies``) pinned to their documented behaviour on
small synthetic transcripts, and their runs inside a real replay (``replay_peers``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from html_check import check_page
from prune_chat import Chat, filler, numbered, words

from filecache.cli import main
from filecache.prune.peer_policies import (
    ANTHROPIC_PLACEHOLDER,
    CLAUDE_CODE_STUB,
    OPENCLAW_PLACEHOLDER,
    OPENCODE_PLACEHOLDER,
    AnthropicClearToolUses,
    OpenClaw,
    OpenCode,
    ReadDedup,
    make_request_policy,
    parse_policy,
)
from filecache.replay.replay import replay_session

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sessions"
PYTEST = FIXTURES / "lm32b__pytest-dev__pytest-7571"


def sizes(messages: list[dict[str, Any]]) -> list[int]:
    return [words(str(m.get("content") or "")) for m in messages]


def bash_chat(results: list[int]) -> Chat:
    chat = Chat()
    for n in results:
        chat.bash("pytest", filler(n))
    return chat


# -- anthropic-clear-tool-uses --------------------------------------------------------------


def test_anthropic_clears_nothing_at_or_under_its_trigger() -> None:
    chat = bash_chat([100] * 6)
    policy = AnthropicClearToolUses(trigger=sum(sizes(chat.messages)), count=words)
    assert policy.edit(chat.messages, sizes(chat.messages)) == {}


def test_anthropic_over_its_trigger_clears_all_but_the_newest_three_tool_uses() -> None:
    chat = bash_chat([100] * 6)
    policy = AnthropicClearToolUses(trigger=sum(sizes(chat.messages)) - 1, count=words)
    edited = policy.edit(chat.messages, sizes(chat.messages))
    assert edited == {f"call_{i}": ANTHROPIC_PLACEHOLDER for i in (1, 2, 3)}


def test_anthropic_is_stateless_the_kept_three_move_with_the_conversation() -> None:
    chat = bash_chat([100] * 6)
    policy = AnthropicClearToolUses(trigger=100, count=words)
    assert set(policy.edit(chat.messages, sizes(chat.messages))) == {"call_1", "call_2", "call_3"}
    chat.bash("ls", filler(10))
    assert set(policy.edit(chat.messages, sizes(chat.messages))) == {
        "call_1", "call_2", "call_3", "call_4",
    }  # fmt: skip


def test_anthropic_does_not_apply_an_edit_that_clears_less_than_clear_at_least() -> None:
    chat = bash_chat([100, 100, 5, 5, 5])
    at_least = AnthropicClearToolUses(trigger=10, clear_at_least=200, count=words)
    assert at_least.edit(chat.messages, sizes(chat.messages)) == {}  # 2 x (100 - 1) words
    enough = AnthropicClearToolUses(trigger=10, clear_at_least=198, count=words)
    assert set(enough.edit(chat.messages, sizes(chat.messages))) == {"call_1", "call_2"}


@pytest.mark.parametrize(
    ("window", "trigger", "expected"),
    [(None, None, 100_000), (64_000, None, 19_200), (64_000, 5_000, 5_000), (None, 7, 7)],
)
def test_anthropic_trigger_defaults_scales_with_the_window_or_is_given(
    window: int | None, trigger: int | None, expected: int
) -> None:
    policy = make_request_policy(
        "anthropic-clear-tool-uses", window=window, trigger=trigger, count=words
    )
    assert isinstance(policy, AnthropicClearToolUses)
    assert (policy.trigger, policy.keep, policy.clear_at_least) == (expected, 3, 0)


# -- openclaw -------------------------------------------------------------------------------


def claw_chat(results: list[str], tail: int = 3) -> Chat:
    """Tool results, then ``tail`` assistant turns with small results (the protected ones)."""
    chat = Chat()
    for text in results:
        chat.bash("cat big.log", text)
    for _ in range(tail):
        chat.bash("true", "ok")
    return chat


def chars(chat: Chat) -> int:
    total = 0
    for m in chat.messages[1:]:  # the system prompt is not one of OpenClaw's messages
        total += len(str(m.get("content") or ""))
        for call in m.get("tool_calls") or ():
            total += len(
                json.dumps(json.loads(call["function"]["arguments"]), separators=(",", ":"))
            )
    return total


def test_openclaw_under_the_soft_trim_ratio_changes_nothing() -> None:
    chat = claw_chat(["x" * 5_000])
    policy = OpenClaw(window=int(chars(chat) / 4 / 0.29))  # 4 chars a token: ratio 0.29
    assert policy.edit(chat.messages, []) == {}


def test_openclaw_soft_trim_keeps_1500_head_and_1500_tail_of_results_over_4000_chars() -> None:
    big, small = "".join(chr(97 + i % 26) for i in range(6_000)), "y" * 4_000
    chat = claw_chat([big, small])
    policy = OpenClaw(window=int(chars(chat) / 4 / 0.4))  # ratio 0.4: soft trim, no hard clear
    edited = policy.edit(chat.messages, [])
    assert edited == {
        "call_1": big[:1500]
        + "\n...\n"
        + big[-1500:]
        + "\n\n[Tool result trimmed: kept first 1500 chars and last 1500 chars of 6000 chars.]"
    }  # the 4,000-char result is not over maxChars


def test_openclaw_protects_the_last_three_assistant_messages_and_what_follows_them() -> None:
    chat = claw_chat(["z" * 9_000, "z" * 9_000], tail=2)  # call_2 is within the last three
    policy = OpenClaw(window=int(chars(chat) / 4 / 0.4))
    assert set(policy.edit(chat.messages, [])) == {"call_1"}
    short = Chat()
    short.bash("cat", "z" * 9_000)
    short.bash("cat", "z" * 9_000)  # two assistant messages: no protected tail can be set
    assert OpenClaw(window=100).edit(short.messages, []) == {}


def test_openclaw_hard_clears_oldest_first_until_under_half_with_50000_prunable_chars() -> None:
    chat = claw_chat(["a" * 3_000] * 20)  # 60,000 prunable chars, none over maxChars
    total = chars(chat)
    policy = OpenClaw(window=int(total / 4 / 0.6))  # ratio 0.6
    edited = policy.edit(chat.messages, [])
    cleared = [cid for cid, text in edited.items() if text == OPENCLAW_PLACEHOLDER]
    # each clear takes 3,000 - 33 chars: four bring 0.6 to under 0.5 (total x 5/6)
    assert cleared == ["call_1", "call_2", "call_3", "call_4"]
    assert total - 4 * (3_000 - len(OPENCLAW_PLACEHOLDER)) < total * 5 / 6


def test_openclaw_does_not_hard_clear_under_50000_prunable_chars() -> None:
    chat = claw_chat(["a" * 3_000] * 16)  # 48,000 prunable chars
    policy = OpenClaw(window=int(chars(chat) / 4 / 0.6))
    assert policy.edit(chat.messages, []) == {}


def test_openclaw_here_is_sticky_a_trimmed_or_cleared_result_stays_so() -> None:
    chat = claw_chat(["a" * 3_000] * 20)
    policy = OpenClaw(window=int(chars(chat) / 4 / 0.6))
    first = policy.edit(chat.messages, [])
    policy.window *= 100  # far under every ratio now
    chat.bash("true", "ok")
    assert policy.edit(chat.messages, []) == first


# -- opencode -------------------------------------------------------------------------------


def code_chat(turns: list[list[int]]) -> Chat:
    """User turns, each with tool results of ``n * 4`` characters (``n`` opencode tokens)."""
    chat = Chat()
    for k, results in enumerate(turns):
        if k:
            chat.say(f"turn {k + 1}")
        for n in results:
            chat.bash("run", "abcd" * n)
    return chat


def test_opencode_never_prunes_within_the_first_two_user_turns() -> None:
    chat = code_chat([[30_000, 30_000, 30_000]])
    policy = OpenCode()
    assert policy.edit(chat.messages, []) == {}
    chat.say("turn 2")
    assert policy.edit(chat.messages, []) == {}  # the turn that ended is one of the last two


def test_opencode_keeps_40000_tokens_and_prunes_older_output_over_20000() -> None:
    chat = code_chat([[15_000, 15_000, 15_000, 15_000], [100], [100]])
    policy = OpenCode()
    assert policy.edit(chat.messages, []) == {}  # turns 1 and 2 ended: within the last two
    chat.say("turn 4")  # turn 3 ended: turn 1 is prunable
    # from its end call_4 and call_3 (30,000) are kept; call_2 passes 40,000, and with
    # call_1 30,000 > 20,000 tokens are collected: both compacted
    assert policy.edit(chat.messages, []) == {
        "call_1": OPENCODE_PLACEHOLDER,
        "call_2": OPENCODE_PLACEHOLDER,
    }


def test_opencode_prunes_only_when_more_than_20000_tokens_are_collected() -> None:
    chat = code_chat([[20_000, 20_000, 20_000], [100], [100]])
    chat.say("turn 4")
    assert OpenCode().edit(chat.messages, []) == {}  # exactly 20,000 beyond the 40,000


def test_opencode_stops_at_a_result_already_compacted() -> None:
    chat = code_chat([[25_000, 25_000, 25_000, 25_000], [100], [100]])
    policy = OpenCode(compacted={"call_2"})
    policy.prune(chat.messages)
    assert policy.compacted == {"call_2", "call_3"}  # call_1 is beyond the compacted call_2


def test_opencode_never_prunes_the_skill_tool() -> None:
    chat = Chat()
    chat.bash("run", "abcd" * 25_000)
    chat.call("skill", {"name": "x"}, "abcd" * 25_000)
    chat.bash("run", "abcd" * 25_000)
    chat.say("turn 2")
    chat.bash("run", "x")
    chat.say("turn 3")
    policy = OpenCode()
    policy.prune(chat.messages)
    assert policy.compacted == {"call_1"}  # 25,000 + (skill skipped) + 25,000 > 40,000


# -- claude-code-dedup ----------------------------------------------------------------------


def test_claude_code_dedup_answers_its_stub_for_the_same_path_range_and_bytes() -> None:
    dedup = ReadDedup()
    args = {"path": "a.py", "offset": 1, "limit": 10}
    assert dedup.answer("c1", args, "v1", "content") == ("content", None)
    assert dedup.answer("c2", args, "v1", "content") == (CLAUDE_CODE_STUB, "c1")
    assert dedup.answer("c3", {"path": "a.py"}, "v1", "all") == ("all", None)  # another range
    assert dedup.answer("c4", args, "v2", "changed") == ("changed", None)  # other bytes
    assert dedup.answer("c5", args, "v2", "changed") == (CLAUDE_CODE_STUB, "c4")
    assert dedup.answer("c6", args, None, "error text") == ("error text", None)
    assert CLAUDE_CODE_STUB.startswith("Wasted call \u2014 file unchanged since your last Read.")


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("none", (False, None)),
        ("claude-code-dedup", (True, None)),
        ("openclaw", (False, "openclaw")),
        ("claude-code-dedup+opencode", (True, "opencode")),
    ],
)
def test_policy_names(name: str, parsed: tuple[bool, str | None]) -> None:
    assert parse_policy(name) == parsed


@pytest.mark.parametrize("name", ["filecache", "claude", "openclaw+opencode", ""])
def test_unknown_policy_names_say_what_is_known(name: str) -> None:
    with pytest.raises(ValueError, match="unknown policy .*anthropic-clear-tool-uses"):
        parse_policy(name)


# -- in a replay ----------------------------------------------------------------------------


def _trace(tmp_path: Path) -> Path:
    """A real trace: a.py read twice (the second a dedup stub), then a big bash output."""
    root = tmp_path / "trace"
    (root / "files").mkdir(parents=True)
    (root / "files" / "a.py").write_text("".join(f"x_{i} = {i}\n" for i in range(200)))
    chat = Chat()
    chat.read("a.py", numbered(200), call_id="r1")
    chat.read("a.py", numbered(200), call_id="r2")
    chat.bash("pytest", filler(3_000, "log"), call_id="b1")
    chat.bash("pytest", filler(3_000, "log"), call_id="b2")
    chat.bash("pytest", filler(3_000, "log"), call_id="b3")
    chat.say("done", role="assistant")
    trace = {"format": "filecache-trace/1", "source": "test", "messages": chat.messages}
    (root / "transcript.json").write_text(json.dumps(trace))
    return root


def test_a_stub_whose_read_was_cleared_is_dangling_and_its_lines_stale(tmp_path: Path) -> None:
    names = ("none", "claude-code-dedup", "claude-code-dedup+anthropic-clear-tool-uses")
    r = replay_session(_trace(tmp_path), peers=names, trigger=100)
    none, dedup, both = (r.policies[n] for n in names)
    assert (none.prompt_tokens, none.billed) == (r.prompt_tokens.recorded, r.billed.recorded)
    assert (dedup.stale, dedup.dangling, dedup.recall) == (0, 0, 1.0)
    assert dedup.results == 1 and dedup.prompt_tokens < none.prompt_tokens
    # keep 3 of r1, r2, b1, b2: r1 (the content r2's stub stands for) is cleared
    assert (both.stale, both.dangling) == (0, 1)
    assert any("the read r1 its stub stands for was cleared" in p for p in both.problems)


def test_peer_runs_meter_the_recorded_requests(tmp_path: Path) -> None:
    r = replay_session(PYTEST, peers=("none", "anthropic-clear-tool-uses"), trigger=2_000)
    none, clear = r.policies["none"], r.policies["anthropic-clear-tool-uses"]
    assert none.series == r.series["recorded"] and none.passes == 0
    assert clear.prompt_tokens < none.prompt_tokens and clear.passes > 0
    assert clear.requests == r.requests and (clear.stale, clear.dangling) == (0, 0)
    assert 0 < clear.recall < 1


def test_replay_compare_and_policy_on_the_command_line(tmp_path: Path) -> None:
    trace = tmp_path / PYTEST.name
    shutil.copytree(PYTEST, trace)
    runner = CliRunner()
    page = tmp_path / "compare.html"
    args = ["replay", str(trace), "--window", "8000", "--compare", "--json", "--html", str(page)]
    result = runner.invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert list(report["policies"]) == [
        "none", "anthropic-clear-tool-uses", "openclaw", "opencode", "claude-code-dedup",
        "claude-code-dedup+anthropic-clear-tool-uses", "filecache (cost)", "filecache (context)",
    ]  # fmt: skip
    assert report["policies"]["none"]["prompt_tokens"] == report["recorded"]["prompt_tokens"]
    svgs = check_page(page.read_text(), tmp_path)
    assert len(svgs) == 2 and "filecache (context)" in page.read_text()  # prompt and billed
    for svg in svgs:
        legend = {t.text for t in svg.iter() if t.tag.endswith("text")}
        assert {"none", "anthropic", "openclaw", "cc dedup+anthr.", "filecache context"} <= legend
        colours = [line.get("stroke") for line in svg.iter() if line.tag.endswith("polyline")]
        assert len(colours) == 8  # every policy; those sharing a colour differ in dash
        styles = {
            (line.get("stroke"), line.get("stroke-dasharray"))
            for line in svg.iter() if line.tag.endswith("polyline")
        }  # fmt: skip
        assert len(styles) == 8
    table = runner.invoke(main, ["replay", str(trace), "--policy", "openclaw"])
    assert table.exit_code == 0 and table.stdout.splitlines()[3].startswith("| openclaw |")
    one = ["replay", str(trace), "--policy", "anthropic-clear-tool-uses", "--json"]
    default, small = (
        json.loads(runner.invoke(main, args).stdout)["policies"]["anthropic-clear-tool-uses"]
        for args in (one, [*one, "--window", "8000"])  # triggers at 100,000 and at 2,400
    )
    assert default["passes"] == 0 < small["passes"]
    bad = runner.invoke(main, ["replay", str(trace), "--policy", "clear"])
    assert bad.exit_code != 0 and "unknown policy 'clear'" in bad.stderr
    unwindowed = runner.invoke(main, ["replay", str(trace), "--compare"])
    assert unwindowed.exit_code != 0 and "--compare needs --window" in unwindowed.stderr
