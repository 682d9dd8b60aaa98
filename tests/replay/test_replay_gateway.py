"""``filecache replay --gateway``: the recorded requests through the gateway transform, and the
replay's own check of its FileRefs and diffs (``replay_gateway``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from filecache.cli import main
from filecache.importers import import_logs
from filecache.replay.replay_gateway import GatewayRun

REPO = Path(__file__).resolve().parents[2]
CLAUDE = REPO / "fixtures" / "imports" / "claude-code" / "cc-2.1.328-rereads.jsonl"
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
