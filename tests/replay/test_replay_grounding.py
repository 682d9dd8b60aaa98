"""Edit grounding in a replay: whether the request the model answered when it made an edit
showed the edit's old text, per run (the recording, filecache, peer policies), and the net
figures that charge each edit lost against the recording with the re-read it would need."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from filecache.replay.replay import replay_session
from filecache.replay.replay_check import FileCall
from filecache.replay.replay_grounding import (
    GroundingMeter,
    edit_target,
    grounded,
    shown_lines,
)
from filecache.replay.replay_metrics import MESSAGE_OVERHEAD
from filecache.replay.replay_report import format_replay, replay_html

BIG = "".join(
    f"def function_{n}(argument):\n    return argument * {n} + {n}  # body\n\n"
    for n in range(1, 700)
)
OLD = "    return argument * 300 + 300  # body\n"


def turn(n: int, name: str, result: str, **args: Any) -> list[dict[str, Any]]:
    call = {"id": f"call_{n}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(args)}  # type: ignore[assignment]
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": result},
    ]


def outline_hides_the_edit(tmp_path: Path, source: str = "test", runs: int = 0) -> Path:
    """The agent's own tool showed the large file whole (``cat -n``); the model then edits a
    line in the middle of it (after ``runs`` test runs), which it read nowhere else."""
    lines = BIG.splitlines(keepends=True)
    shown = "".join(f"{n:6d}\t{t}" for n, t in enumerate(lines, 1))
    noise = "".join(f"test_{n} PASSED\n" for n in range(50))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "fix it"},
        *turn(
            1,
            "read_file",
            f"Here's the result of running `cat -n` on big.py:\n{shown}",
            path="big.py",
        ),  # fmt: skip
        *(m for k in range(runs) for m in turn(10 + k, "bash", noise, command="pytest -q")),
        *turn(
            2,
            "edit_file",
            "The file big.py has been edited.",
            path="big.py",
            old_string=OLD,
            new_string="    return argument\n",
        ),  # fmt: skip
        *turn(3, "bash", noise, command="pytest -q"),
        *turn(4, "bash", noise, command="pytest -q"),
        {"role": "assistant", "content": "done"},
    ]
    session = tmp_path / "session"
    (session / "files").mkdir(parents=True)
    (session / "files" / "big.py").write_text(BIG, encoding="utf-8")
    body = {"format": "filecache-trace/1", "source": source, "messages": messages}
    (session / "transcript.json").write_text(json.dumps(body), encoding="utf-8")
    return session


def test_an_outline_answer_hides_the_edits_old_text(tmp_path: Path) -> None:
    """Answered with an outline (``auto``), the request the model answered holds only the
    signatures: the edit is lost against the recording, and the net figures charge its re-read
    (its line, in each of the 4 requests from the edit's on: written once, then cached)."""
    r = replay_session(outline_hides_the_edit(tmp_path), read_mode="auto")
    assert r.reads["outline"] == 1
    recorded, fc = r.grounding["recorded"], r.grounding["filecache"]
    assert (recorded.edits, recorded.grounded, recorded.lost) == (1, 1, 0)
    assert (fc.edits, fc.grounded, fc.lost) == (1, 0, 1)
    assert fc.ungrounded == ("lost: call_2 (big.py)",)
    line = edit_target("c", {"old_string": OLD}, BIG.splitlines(keepends=True), lambda t: 1)
    assert line is not None and line.blocks == ((899, (OLD.rstrip("\n"),)),)
    assert fc.reread_tokens > 0 and fc.reread_tokens % 4 == 0
    per = fc.reread_tokens // 4
    assert fc.reread_billed == pytest.approx(per * 1.25 + 3 * per * 0.1)
    assert r.net_prompt_tokens.filecache == r.prompt_tokens.filecache + fc.reread_tokens
    assert r.net_billed.filecache == pytest.approx(r.billed.filecache + fc.reread_billed)
    assert r.net_prompt_tokens.recorded == r.prompt_tokens.recorded
    out = r.to_json()
    assert out["grounding"]["filecache"]["share"] == 0.0
    assert out["net_prompt_tokens"]["filecache"] == r.net_prompt_tokens.filecache
    text = format_replay([r], r)
    assert "| 0/1 (1 lost) |" in text
    assert "edit grounding: 0 of 1 edits (0.0%)" in text and "against 1 (100.0%)" in text
    assert "net prompt tokens (lost edits re-read)" in text
    assert "edit grounding: 0 of 1" in replay_html([r], r)


def test_content_keeps_the_edit_grounded(tmp_path: Path) -> None:
    r = replay_session(outline_hides_the_edit(tmp_path), read_mode="full")
    fc = r.grounding["filecache"]
    assert (fc.edits, fc.grounded, fc.lost, fc.reread_tokens) == (1, 1, 0, 0)
    assert r.net_prompt_tokens == r.prompt_tokens and r.net_billed == r.billed


def test_a_peer_that_clears_the_read_loses_the_edit(tmp_path: Path) -> None:
    """Anthropic's clearing, triggered at once and keeping one tool use, clears the read before
    the edit is made: a placeholder shows nothing."""
    r = replay_session(
        outline_hides_the_edit(tmp_path, runs=4), read_mode="full", window=200_000, trigger=1,
        peers=["anthropic-clear-tool-uses"],
    )  # fmt: skip
    peer = r.policies["anthropic-clear-tool-uses"].grounding
    assert (peer.edits, peer.grounded, peer.lost) == (1, 0, 1) and peer.reread_tokens > 0
    assert r.policies["anthropic-clear-tool-uses"].to_json()["grounding"]["lost"] == 1


def call(kind: str, text: str, inner: str | None = None) -> FileCall:
    return FileCall("c1", "read_file", "a.py", {}, kind, text, None, None, inner)


LINES = ["def f(x):\n", "    y = x + 1\n", "    return y\n", "\n", "def g():\n", "    pass\n"]


@pytest.mark.parametrize(
    ("text", "kind", "seen"),
    [
        ("     1\tdef f(x):\n     2\t    y = x + 1\n     3\t    return y\n", "full", True),
        ("     2\t    y = x + 1\n", "partial", False),  # line 3 is not shown
        # Claude Code's Read numbers its lines with an arrow
        (
            "     1\u2192def f(x):\n     2\u2192    y = x + 1\n     3\u2192    return y\n",
            "full",
            True,
        ),  # fmt: skip
        # the same lines shown at other numbers (an edit above has moved them since)
        ("    11\tdef f(x):\n    12\t    y = x + 1\n    13\t    return y\n", "full", True),
        # an outline that holds the lines counts; one that holds the signature only does not
        (
            "[filecache] a.py outline (python, 6 lines)\n1-3 def f(x):\n5-6 def g():\n",
            "outline",
            False,
        ),  # fmt: skip
        ("[cleared tool result: read a.py 1-6 (6 lines, 60 chars): superseded]", "full", False),
    ],
)
def test_what_shows_an_edits_old_text(text: str, kind: str, seen: bool) -> None:
    target = edit_target("e1", {"path": "a.py", "old_string": "x + 1\n    return"}, LINES, len)
    assert target is not None and target.blocks[0][0] == 2
    assert grounded(target, [shown_lines(call(kind, text), text)]) is seen


def test_an_outline_row_holds_a_one_line_edit() -> None:
    target = edit_target("e1", {"old_string": "def g():"}, LINES, len)
    text = "[filecache] a.py outline (python, 6 lines)\n1-3 def f(x):\n5-6 def g():\n"
    assert target is not None and grounded(target, [shown_lines(call("outline", text), text)])


def test_edits_not_in_the_file_are_not_counted() -> None:
    assert edit_target("e1", {"old_string": "absent"}, LINES, len) is None
    assert edit_target("e1", {"old_string": ""}, LINES, len) is None
    assert edit_target("e1", {"edits": "not a list"}, LINES, len) is None
    both = edit_target(
        "e1", {"edits": [{"old_string": "def f", "new_string": "def h"},
                         {"old_string": "pass", "new_string": "return"}]}, LINES, len,
    )  # fmt: skip
    assert both is not None and [b[0] for b in both.blocks] == [1, 6]


def test_a_lost_edit_is_charged_until_its_call_is_pruned() -> None:
    target = edit_target("e1", {"old_string": "pass"}, LINES, lambda t: 10)
    assert target is not None
    meter = GroundingMeter()
    meter.edit(target, seen=False, seen_recorded=True)
    meter.request(())
    meter.request(())
    meter.request({"e1"})
    meter.request(())
    g = meter.result()
    per = 10 + MESSAGE_OVERHEAD  # the lines' tokens, and the message they would come in
    assert (g.edits, g.grounded, g.lost, g.reread_tokens) == (1, 0, 1, 2 * per)
    assert g.reread_billed == pytest.approx(per * 1.25 + per * 0.1)
    unseen = GroundingMeter()
    unseen.edit(target, seen=False, seen_recorded=False)  # not shown in the recording either
    unseen.request(())
    assert unseen.result().lost == 0 and unseen.result().reread_tokens == 0


@pytest.mark.parametrize(("source", "mode"), [("test", "full"), ("claude-code: s.jsonl", "full"),
                                              ("swe-agent: t.traj", "auto")])  # fmt: skip
def test_the_default_answers_whole_reads_as_the_agents_own_tool(
    tmp_path: Path, source: str, mode: str
) -> None:
    """By default a replay answers a whole-file read as the agent's own tool would: content
    (never an outline) unless the agent's viewer abbreviates a large file, as SWE-agent's does.
    An agent that showed the file keeps every edit grounded."""
    r = replay_session(outline_hides_the_edit(tmp_path, source=source))
    assert r.reads["outline"] == (mode == "auto")
    fc = r.grounding["filecache"]
    assert (fc.grounded, fc.lost) == ((0, 1) if mode == "auto" else (1, 0))
