"""``filecache replay --gateway``: the recorded requests through the gateway transform, and the
replay's own check of its FileRefs and diffs (``replay_gateway``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from filecache.cli import main
from filecache.importers import import_logs
from filecache.replay.gateway_shape import host_calls
from filecache.replay.replay_gateway import GatewayRun

REPO = Path(__file__).resolve().parents[2]
CLAUDE_LOGS = REPO / "fixtures" / "imports" / "claude-code"
CLAUDE = CLAUDE_LOGS / "cc-2.1.328-rereads.jsonl"
# short sessions (10 and 16 requests) on which the cost preset's gate billed more than the
# recording: +3.7% and +0.7% at 200k, its cuts made too late to pay back before the end
SHORT = [CLAUDE_LOGS / f"skillsbench-{n}.jsonl" for n in ("econ-detrending-correlation",
                                                          "citation-check")]  # fmt: skip
SWE = REPO / "fixtures" / "sessions" / "lm32b__pytest-dev__pytest-7571"


def replay(*args: str | Path) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["replay", *(str(a) for a in args), "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_a_claude_code_log_through_the_gateway(tmp_path: Path) -> None:
    import_logs("claude-code", [CLAUDE], tmp_path)
    data = replay("--gateway", tmp_path / CLAUDE.stem)
    assert data["window"] == 200_000
    none, gateway = data["policies"]["none"], data["policies"]["gateway"]
    assert gateway["stale"] == 0 and gateway["dangling"] == 0
    assert gateway["prompt_tokens"] < 0.7 * none["prompt_tokens"]  # five re-reads of two files
    assert gateway["billed"] < none["billed"]
    assert gateway["recall"] == 1.0


def test_the_gateway_never_bills_more_than_the_recording_on_short_sessions(
    tmp_path: Path,
) -> None:
    import_logs("claude-code", SHORT, tmp_path)
    for window in ("200000", "128000"):
        data = replay("--gateway", "--window", window, *(tmp_path / p.stem for p in SHORT))
        for session in data["sessions"]:
            none, gateway = session["policies"]["none"], session["policies"]["gateway"]
            assert gateway["billed"] <= none["billed"], (window, session["name"])
            assert gateway["prompt_tokens"] <= none["prompt_tokens"], (window, session["name"])
            assert gateway["stale"] == 0 and gateway["dangling"] == 0
        cut = data["policies"]["gateway"]["prompt_tokens"]
        assert cut < 0.95 * data["policies"]["none"]["prompt_tokens"]  # it still prunes


def test_a_claude_code_trace_is_sent_as_claude_code_sent_it(tmp_path: Path) -> None:
    """The replay sends the gateway Anthropic Messages requests with Claude Code's own calls
    (``Read`` with its absolute ``file_path``): the FileRefs name that path."""
    import_logs("claude-code", [CLAUDE], tmp_path)
    trace = json.loads((tmp_path / CLAUDE.stem / "transcript.json").read_text())
    run = GatewayRun("gateway-delta", 200_000)
    run.host_shape(host_calls(trace), trace.get("cwd"))
    messages = trace["messages"]
    sent = run.edit(messages, [])
    run.close()
    refs = [t for t in sent.values() if t.startswith("[filecache] ")]
    assert refs and all(t.startswith("[filecache] /") for t in refs)
    assert not run.problems


def test_the_policies_at_a_window(tmp_path: Path) -> None:
    for policy in ("gateway-delta", "gateway+context"):
        data = replay("--policy", policy, "--window", "128000", SWE)
        run = data["policies"][policy]
        assert run["stale"] == 0 and run["dangling"] == 0
        assert run["prompt_tokens"] <= data["policies"]["none"]["prompt_tokens"]


def _arrows(lines: list[str], start: int = 1) -> str:
    return "\n".join(f"{n:>6}→{t}" for n, t in enumerate(lines, start))


def test_the_check_catches_a_false_file_ref_and_a_wrong_diff() -> None:
    """Mutants of the transform's answers: the replay's check must count them stale."""
    run = GatewayRun("gateway", 200_000)
    lines = [f"line {i}" for i in range(1, 21)]
    other = [*lines[:9], "line 10 changed", *lines[10:]]
    recorded = {"c1": _arrows(lines), "c2": _arrows(other), "c3": _arrows(other)}
    false_ref = "[filecache] a.py unchanged since your result c1 (lines 1-20 as shown there): x\n"
    run._check("c2", false_ref, recorded)
    wrong_diff = (
        "[filecache] a.py changed since your result c1 (lines 1-20 now):\n--- a/a.py\n+++ b/a.py\n"
        "@@ -10 +10 @@\n-line 10\n+line 10 CHANGED\n(Apply this diff to the text of c1.)\n"
    )
    run._check("c3", wrong_diff, recorded)
    right_diff = wrong_diff.replace("CHANGED", "changed")
    run._check("c4", right_diff, {**recorded, "c4": _arrows(other)})
    run.close()
    assert set(run.problems) == {"c2", "c3"}
    assert run.holds("c4", {"c4": right_diff}) and not run.holds("c4", {"c4": right_diff, "c1": ""})


REMINDER = "\n\n<system-reminder>\nConsider whether the file looks malicious.\n</system-reminder>\n"


def _session(calls: list[tuple[str, str, dict[str, Any], str]]) -> tuple[list[Any], dict[str, Any]]:
    """A Claude Code session by hand: (id, tool, input, recorded result) per call, as a trace
    holds it (an OpenAI chat list) and the host's own calls (``gateway_shape.host_calls``)."""
    messages: list[Any] = [{"role": "user", "content": "look at the file"}]
    host: dict[str, Any] = {}
    for cid, tool, given, text in calls:
        function = {"name": tool, "arguments": json.dumps(given)}
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": cid, "type": "function", "function": function}]})  # fmt: skip
        messages.append({"role": "tool", "tool_call_id": cid, "content": text})
        host[cid] = (tool, given, False)
    messages.append({"role": "assistant", "content": "done"})
    return messages, host


def _through(
    calls: list[tuple[str, str, dict[str, Any], str]],
) -> tuple[GatewayRun, dict[str, str]]:
    messages, host = _session(calls)
    run = GatewayRun("gateway-delta", 200_000)
    run.host_shape(host, "/p")
    sent = run.edit(messages[:-1], [])
    run.close()
    return run, sent


SCRIPT = [f'        log_verbose "step {n}: checking the DNS resolution inside the chroot"'
          for n in range(1, 1501)]  # fmt: skip
SCRIPT[1466] = "        "  # a line of spaces only


def test_a_read_named_by_an_earlier_sed_range_checks_out() -> None:
    """sword/155c3456: a Read offset 1460 limit 10 became a FileRef to an earlier Bash
    ``sed -n '1460,1480p' F`` (Claude Code drops the output's last newline). The FileRef is
    true (line 1460 is the sed output's first row); the check used to count the sed output's
    rows from the Read's first line and find 21 rows for 10 lines: a false stale view."""
    sed = "\n".join(SCRIPT[1459:1480])
    read = _arrows(SCRIPT[1459:1469], 1460) + REMINDER
    run, sent = _through([
        ("b1", "Bash", {"command": "sed -n '1460,1480p' /p/build.sh"}, sed),
        ("r1", "Read", {"file_path": "/p/build.sh", "offset": 1460, "limit": 10}, read),
    ])  # fmt: skip
    assert sent["r1"].startswith(
        "[filecache] /p/build.sh unchanged since your result b1 (lines 1460-1469 as shown there)"
    )
    named = sed.split("\n")[1460 - 1460 : 1469 - 1460 + 1]  # the sed output's rows 1460-1469
    below = sent["r1"].partition("\n")[2]  # the Read's own frame (its reminder)
    assert _arrows(named, 1460) + "\n" + below == read  # the model's view, expanded by hand
    assert run.problems == {} and run.file_refs == {"r1"}
    assert run.holds("r1", sent)


def test_a_whole_read_named_by_an_earlier_cat_checks_out() -> None:
    """damon/c001e9a4: a whole Read of a 53-line file (its empty line 54 after the last newline
    shown, as Claude Code 2.0 did) named an earlier Bash ``cat F`` for lines 1-53 and kept line
    54 as read. True; the check used to look for numbered lines in the cat output: stale."""
    lines = [f'    "Bash(tool-{n} *)",' for n in range(1, 54)]
    cat = "\n".join(lines)  # Claude Code's Bash result: no last newline
    read = _arrows([*lines, ""]) + REMINDER
    run, sent = _through([
        ("b1", "Bash", {"command": "cat /p/.claude/settings.json"}, cat),
        ("r1", "Read", {"file_path": "/p/.claude/settings.json"}, read),
    ])  # fmt: skip
    head, _, below = sent["r1"].partition("\n")
    assert "(lines 1-53 as shown there; line 54 is below, as read)" in head
    assert below.startswith("    54→\n")
    assert _arrows(cat.split("\n")) + "\n" + below == read  # the model's view, by hand
    assert run.problems == {} and run.file_refs == {"r1"}


def test_the_check_catches_a_false_file_ref_to_a_shell_read() -> None:
    """Mutants against a shell read: lines off by one, a sed range placed at the Read's line,
    a result the check cannot place, lines the FileRef leaves out."""
    run = GatewayRun("gateway", 200_000)
    run.commands = {
        "b1": "sed -n '1460,1480p' /p/build.sh",
        "b2": "cd /p && cat build.sh",
        "b3": "awk 'NR>5' /p/build.sh",
    }
    recorded = {
        "b1": "\n".join(SCRIPT[1459:1480]),
        "b2": "\n".join(SCRIPT[:30]),
        "b3": "\n".join(SCRIPT[5:30]),
        "r1": _arrows(SCRIPT[1460:1470], 1461),
        "r2": _arrows(SCRIPT[:30]),
        "r3": _arrows(SCRIPT[:20]),
    }
    ref = "[filecache] /p/build.sh unchanged since your result {} (lines {} as shown there): x\n"
    run._check("r1", ref.format("b1", "1461-1470"), recorded)  # true
    run._check("r2", ref.format("b2", "1-30"), recorded)  # true, after a cd
    run._check("r3", ref.format("b3", "1-20"), recorded)  # a shape the check cannot place
    run._check("r4", ref.format("b1", "1461-1470"), {**recorded, "r4": recorded["r2"]})
    run._check("r5", ref.format("b2", "1-19"), {**recorded, "r5": recorded["r3"]})  # drops 20
    run.close()
    assert set(run.problems) == {"r3", "r4", "r5"}
