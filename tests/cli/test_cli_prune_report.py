"""``prune --json`` reports the output against the input as given: a second pass over the same
input (its projections sticky in the store) said ``reclaimed: 0, actions: []`` although its
output was as pruned as the first's, and ``-o`` printed nothing."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from filecache.cli import main

TRANSCRIPT = Path(__file__).parents[2] / "fixtures" / "transcripts" / "swe-agent-astropy-13033.json"


def _prune(runner: CliRunner, store: Path, out: Path, *extra: str) -> tuple[str, str]:
    args = ["prune", str(TRANSCRIPT), "--window", "4000", "--preset", "context",
            "--store", str(store), "-o", str(out), *extra]  # fmt: skip
    result = runner.invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def test_a_second_pass_reports_what_its_output_changed(runner: CliRunner, tmp_path: Path) -> None:
    store = tmp_path / "cache.db"
    first = json.loads(_prune(runner, store, tmp_path / "a.json", "--json")[0])
    again = json.loads(_prune(runner, store, tmp_path / "b.json", "--json")[0])
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    assert first["results_changed"] == again["results_changed"] == 2
    assert first["reclaimed_total"] == again["reclaimed_total"] == first["reclaimed"] > 0
    assert again["reclaimed"] == 0 and again["actions"] == []  # this pass's plan: nothing new
    assert [p["this_pass"] for p in first["changed"]] == [True, True]
    assert [p["this_pass"] for p in again["changed"]] == [False, False]
    assert again["prompt_tokens_in"] == first["prompt_tokens_in"] == first["prompt_tokens"]
    assert again["prompt_tokens_out"] == first["prompt_tokens_out"] == again["prompt_tokens"]
    assert again["baseline"] == "the input as given" and again["tool_results"] == 15


def test_output_to_a_file_says_what_was_pruned(runner: CliRunner, tmp_path: Path) -> None:
    out, err = _prune(runner, tmp_path / "cache.db", tmp_path / "a.json")
    assert out == ""
    assert "2 of 15 tool results changed" in err and "against the input as given" in err
