"""Replay of recorded sessions: recorded, plain and filecache runs of one trace, and the CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from filecache.cache import Session
from filecache.cli import main
from filecache.core.tokens import TokenCounter
from filecache.replay.replay import replay_session
from filecache.replay.replay_metrics import (
    CACHE_READ,
    CACHE_WRITE,
    MESSAGE_OVERHEAD,
    combine,
    message_text,
    prompt_cost,
)
from filecache.replay.replay_report import format_replay, format_table

SESSIONS = Path(__file__).parents[2] / "fixtures" / "sessions"
FIXTURE = SESSIONS / "lm32b__pytest-dev__pytest-7571"  # real, SWE-agent's output format
SCRIPTED = SESSIONS / "scripted__polyglot-peek"  # scripted, in the plain tools' format
TOTALS_KEYS = {
    "sessions",
    "stale_views",
    "dangling_refs",
    "saved_pct",
    "billed_saved_pct",
    "recall",
}


def _call(n: int, name: str, **args: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def _result(n: int, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{n}", "content": text}


def _trace(tmp_path: Path, messages: list[dict[str, Any]], files: dict[str, str]) -> Path:
    session = tmp_path / "session"
    for rel, text in files.items():
        (session / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (session / "files" / rel).write_text(text, encoding="utf-8")
    session.mkdir(exist_ok=True)
    trace = {"format": "filecache-trace/1", "source": "test", "messages": messages}
    (session / "transcript.json").write_text(json.dumps(trace), encoding="utf-8")
    return session


def test_fixture_replay_saves_tokens_and_ends_identical() -> None:
    r = replay_session(FIXTURE)
    assert r.requests == 17 and r.sessions == 1
    assert r.prompt_tokens.filecache < r.prompt_tokens.plain
    assert r.prompt_tokens.filecache < r.prompt_tokens.recorded
    assert r.billed.filecache < min(r.billed.plain, r.billed.recorded)
    assert r.saved_pct == min(
        r.prompt_tokens.saved_vs_plain_pct, r.prompt_tokens.saved_vs_recorded_pct
    )
    assert r.file_tool_tokens.filecache < r.file_tool_tokens.plain
    assert r.peak_request.filecache <= r.peak_request.plain
    assert r.files_identical and r.mismatches == ()
    assert r.file_calls == {"read_file": 6, "write_file": 1, "edit_file": 4}
    # auto read mode: the 9,000-token logging.py is outlined, as SWE-agent abbreviated it
    assert r.reads["outline"] == 1 and r.reads["error"] == 0
    assert sum(r.reads.values()) == 6
    assert (r.stale_views, r.dangling_refs, r.recall) == (0, 0, 1.0)
    assert r.recall_pairs > 0 and r.pruning.window is None and r.pruning.passes == 0


def test_full_read_mode_sends_file_refs() -> None:
    r = replay_session(FIXTURE, read_mode="full", cap=False)
    assert r.reads["outline"] == 0 and r.reads["unchanged"] >= 4 and r.capped == 0
    # capped, the whole 9,000-token file goes as SWE-agent's own abbreviated view instead
    capped = replay_session(FIXTURE, read_mode="full")
    assert capped.capped >= 1 and (capped.stale_views, capped.dangling_refs) == (0, 0)
    assert capped.prompt_tokens.filecache < r.prompt_tokens.filecache
    assert (r.stale_views, r.dangling_refs) == (0, 0)


def test_plain_baseline_equals_the_recording_in_the_same_format() -> None:
    """The scripted session was recorded with the plain tools: the plain run is the recording."""
    r = replay_session(SCRIPTED)
    trace = json.loads((SCRIPTED / "transcript.json").read_text(encoding="utf-8"))
    assert list(r.plain_messages) == trace["messages"]
    for measure in (r.prompt_tokens, r.billed, r.peak_request, r.final_request):
        assert measure.plain == measure.recorded
    assert r.tool_output_tokens.plain == r.tool_output_tokens.recorded
    assert r.file_tool_tokens.plain == r.file_tool_tokens.recorded
    assert r.series["plain"] == r.series["recorded"] and len(r.series["plain"]) == r.requests
    # ... and the recording's token count is the sum over its requests, counted independently
    counter = TokenCounter()
    sizes = [counter.count(message_text(m)) + MESSAGE_OVERHEAD for m in trace["messages"]]
    requests = [sum(sizes[:i]) for i, m in enumerate(trace["messages"]) if m["role"] == "assistant"]
    assert r.prompt_tokens.recorded == sum(requests)
    assert r.prompt_tokens.filecache < r.prompt_tokens.plain
    assert (r.stale_views, r.dangling_refs, r.recall) == (0, 0, 1.0)
    assert r.files_identical


@pytest.mark.parametrize("cache_aware", [True, False])
@pytest.mark.parametrize("session", [SCRIPTED, FIXTURE])
def test_pruned_replays_are_never_stale_nor_dangling(session: Path, cache_aware: bool) -> None:
    unpruned = replay_session(session)
    r = replay_session(session, window=16_000, cache_aware=cache_aware)
    assert (r.stale_views, r.dangling_refs) == (0, 0), r.problems
    assert r.files_identical
    assert r.pruning.window == 16_000 and r.pruning.cache_aware is cache_aware
    if session == SCRIPTED:
        assert r.pruning.passes >= 1 and sum(r.pruning.results.values()) >= 1
        assert r.pruning.reclaimed_final > 0
        assert r.prompt_tokens.filecache < unpruned.prompt_tokens.filecache
        assert 0 < r.recall < 1
        # a re-read of a pruned file sends content again (no FileRef to what is gone)
        assert r.reads["unchanged"] < unpruned.reads["unchanged"]


def test_the_checker_notices_a_session_that_does_not_forget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without ``forget``, FileRefs point at pruned results: the counters must say so."""
    monkeypatch.setattr(Session, "forget", lambda self, ids: None)
    r = replay_session(SCRIPTED, window=16_000, cache_aware=False)
    assert r.stale_views > 0 and r.dangling_refs > 0
    assert any("cannot be rebuilt" in p for p in r.problems)
    assert any("is pruned" in p for p in r.problems)


def test_bash_results_are_followed_by_a_rehash(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []
    original = Session.rehash

    def rehash(self: Session, call_id: str | None = None) -> list[str]:
        seen.append(call_id)
        return original(self, call_id)

    monkeypatch.setattr(Session, "rehash", rehash)
    r = replay_session(SCRIPTED)
    trace = json.loads((SCRIPTED / "transcript.json").read_text(encoding="utf-8"))
    bash = [
        c["id"]
        for m in trace["messages"]
        for c in m.get("tool_calls") or ()
        if c["function"]["name"] == "bash"
    ]
    assert seen == bash and len(bash) == 6
    assert r.files_identical


def test_tool_errors_replay_as_error_text_in_both_runs(tmp_path: Path) -> None:
    session = _trace(
        tmp_path,
        [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "Fix it."},
            _call(1, "read_file", path="missing.py"),
            _result(1, "recorded: no such file"),
            _call(2, "edit_file", path="a.py", old_string="not there", new_string="x"),
            _result(2, "recorded: no match"),
            _call(3, "read_file", path="a.py", offset=99, limit=5),
            _result(3, "recorded: bad range"),
            _call(4, "bash", command="ls"),
            _result(4, "a.py\n"),
            _call(5, "read_file", path="a.py"),
            _result(5, "recorded content"),
            {"role": "assistant", "content": "Done."},
        ],
        {"a.py": "def f():\n    return 1\n"},
    )
    r = replay_session(session)
    errors = [c for c in r.calls if c["kind"] == "error"]
    assert [c["call_id"] for c in errors] == ["call_1", "call_2", "call_3"]
    assert "missing.py: no such file" in errors[0]["error"]
    assert "a.py: old_string not found" in errors[1]["error"]
    assert "a.py: offset 99 is past the end; the file has 2 lines" in errors[2]["error"]
    by_id = {m.get("tool_call_id"): i for i, m in enumerate(r.plain_messages)}
    for c in errors:
        i = by_id[c["call_id"]]
        assert r.plain_messages[i]["content"] == r.filecache_messages[i]["content"] == c["error"]
    bash = by_id["call_4"]
    assert r.plain_messages[bash]["content"] == r.filecache_messages[bash]["content"] == "a.py\n"
    assert r.reads["error"] == 2 and r.reads["full"] == 1
    assert r.files_identical and r.requests == 6
    assert (r.stale_views, r.dangling_refs) == (0, 0)


def test_replayed_edits_match_a_plain_application(tmp_path: Path) -> None:
    text = "".join(f"line {i} of a file that is long enough to matter\n" for i in range(1, 41))
    session = _trace(
        tmp_path,
        [
            {"role": "user", "content": "Edit it."},
            _call(1, "read_file", path="notes.txt"),
            _result(1, "recorded"),
            _call(2, "edit_file", path="notes.txt", old_string="line 7 ", new_string="LINE 7 "),
            _result(2, "recorded"),
            _call(3, "write_file", path="new/made.txt", content="hello\n"),
            _result(3, "recorded"),
            _call(4, "read_file", path="notes.txt", offset=5, limit=5),
            _result(4, "recorded"),
            _call(5, "read_file", path="new/made.txt"),
            _result(5, "recorded"),
            {"role": "assistant", "content": "Done."},
        ],
        {"notes.txt": text},
    )
    r = replay_session(session, cap=False)  # the recorded results are placeholders
    assert r.files_identical
    # A FileRef is never larger than the content: the one-line file is sent again.
    assert [c["kind"] for c in r.calls] == ["full", "edited", "written", "unchanged", "full"]
    edit = r.plain_messages[4]["content"]
    assert edit == r.filecache_messages[4]["content"]
    assert "edited notes.txt: 40 lines" in edit and "1 replacement" in edit
    assert (r.stale_views, r.dangling_refs, r.recall) == (0, 0, 1.0)


def test_prompt_cost_bills_the_shared_prefix_as_cache_reads() -> None:
    requests = [
        [("sys", 100)],
        [("sys", 100), ("a", 10)],
        [("sys", 100), ("a2", 5), ("b", 20)],  # "a" rewritten: only "sys" is cached
    ]
    cost = prompt_cost(requests)
    assert cost.requests == 3
    assert cost.tokens == 100 + 110 + 125
    assert (cost.peak, cost.final, cost.sizes) == (125, 125, (100, 110, 125))
    expected = 100 * CACHE_WRITE + (100 * CACHE_READ + 10 * CACHE_WRITE)
    expected += 100 * CACHE_READ + 25 * CACHE_WRITE
    assert cost.billed == pytest.approx(expected)
    assert prompt_cost([]).tokens == 0


def test_combine_and_tables() -> None:
    r = replay_session(FIXTURE, tokenizer="estimate")
    assert r.tokenizer == "estimate"
    total = combine([r, r])
    assert total.sessions == 2 and total.requests == 2 * r.requests
    assert total.prompt_tokens.plain == 2 * r.prompt_tokens.plain
    assert total.final_request.filecache == 2 * r.final_request.filecache
    assert total.peak_request == r.peak_request
    assert total.recall == 1.0 and total.recall_pairs == 2 * r.recall_pairs
    table = format_table([r], total)
    assert r.name in table and "**total**" in table
    assert len(table.splitlines()) == 4
    text = format_replay([r], total)
    assert "cumulative prompt tokens" in text and "pruning off" in text


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, ["replay", *args])


def test_cli_json_schema() -> None:
    result = _invoke(str(FIXTURE), str(SCRIPTED), "--json", "--window", "16000")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no progress bar when not on a terminal
    data = json.loads(result.stdout)
    assert set(data) == {"totals", "sessions"}
    totals, sessions = data["totals"], data["sessions"]
    assert TOTALS_KEYS <= set(totals)
    assert totals["sessions"] == len(sessions) == 2
    assert totals["stale_views"] == totals["dangling_refs"] == 0
    assert 0 < totals["recall"] <= 1
    measures = ("prompt_tokens", "billed", "peak_request", "final_request", "tool_output_tokens")
    for entry in [totals, *sessions]:
        assert TOTALS_KEYS <= set(entry)
        for measure in measures:
            assert set(entry[measure]) == {
                "recorded", "plain", "filecache", "saved_vs_recorded_pct", "saved_vs_plain_pct",
                "saved_pct",
            }  # fmt: skip
        assert entry["saved_pct"] == entry["prompt_tokens"]["saved_pct"]
        assert entry["pruning"]["window"] == 16000 and entry["pruning"]["cache_aware"] is True
    assert "series" not in totals and "calls" not in totals
    for s in sessions:
        assert s["sessions"] == 1
        assert set(s["series"]) == {"recorded", "plain", "filecache"}
        assert all(len(v) == s["requests"] for v in s["series"].values())
        assert {
            "call_id", "tool", "path", "kind", "plain_tokens", "filecache_tokens",
            "recorded_tokens", "error", "capped",
        } == set(s["calls"][0])  # fmt: skip
    assert sessions[0]["name"] == FIXTURE.name and sessions[0]["files_identical"] is True


def test_cli_table_and_errors(tmp_path: Path) -> None:
    result = _invoke(str(FIXTURE), "--tokenizer", "cl100k", "--no-cache-aware")
    assert result.exit_code == 0, result.output
    assert FIXTURE.name in result.stdout and "**total**" in result.stdout
    assert "stale views 0, dangling refs 0" in result.stdout
    (tmp_path / "transcript.json").write_text('{"format": "other"}', encoding="utf-8")
    bad = _invoke(str(tmp_path))
    assert bad.exit_code == 2
    assert "expected 'filecache-trace/1'" in bad.stderr
    assert _invoke(str(tmp_path / "missing")).exit_code == 2
    assert _invoke(str(FIXTURE), "--window", "10").exit_code == 2  # below the minimum
    assert _invoke().exit_code == 2  # DIR is required
    for args in (["replay", "-h"], ["replay", "--help"]):
        helped = CliRunner().invoke(main, args)
        assert helped.exit_code == 0 and "--window" in helped.stdout and "--html" in helped.stdout


def test_cli_html_page(tmp_path: Path) -> None:
    from html_check import check_page

    out = tmp_path / "replay.html"
    result = _invoke(str(SCRIPTED), "--window", "16000", "--html", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    svgs = check_page(page, tmp_path)
    assert len(svgs) == 1
    lines = svgs[0].findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 3  # recorded, plain, filecache
    assert SCRIPTED.name in page
    assert page.index('<p class="lead">filecache saved ') < page.index("<table")  # the saving


def test_html_opens_with_a_sortable_table_of_the_sessions(tmp_path: Path) -> None:
    """The page starts with its saving, then the per-session table: the totals first (in the
    head, where sorting leaves it), regressions first and marked in words, every name a link
    to that session's chart; each number carries its value for the page's sort script
    (tests/test_report_pages.py clicks it in Chromium)."""
    import re

    from html_check import check_page

    from filecache.replay.replay_report import replay_html

    good, worse = replay_session(FIXTURE), replay_session(SCRIPTED, read_mode="full")
    cost = {"prompt_tokens": dataclasses.replace(worse.prompt_tokens, filecache=10**7)}
    worse = dataclasses.replace(worse, **cost)  # a regression, whatever the code does
    page = replay_html([good, worse], combine([good, worse]))
    check_page(page, tmp_path)
    table = re.search(r'<table class="sortable">(.*?)</table>', page, flags=re.S)
    assert table is not None and page.index('class="sortable"') < page.index("<svg")
    head, body = table.group(1).split("<tbody>")
    assert re.search(r'<tr class="total"><td>total</td>', head)  # the totals row stays first
    rows = re.findall(r'<tr( class="worse")?><td><a href="#([^"]+)">([^<]+)</a>(.*?)</td>', body)
    assert [(w, n) for w, _, n, _ in rows] == [
        (' class="worse"', SCRIPTED.name),
        ("", FIXTURE.name),
    ]
    assert "costs more" in rows[0][3] and "costs more" not in rows[1][3]
    for _, anchor, _, _ in rows:
        assert f'<h2 id="{anchor}">' in page  # every name links to its chart
    assert re.search(r'<td data-sort="-?[\d.e+]+">−?[\d.,]+%</td>', body)  # sortable numbers
    assert "<script>" in page and "fcSort" in page


def test_a_session_that_bills_more_than_recorded_leads_both_tables() -> None:
    """A regression in billed tokens alone (its prompt saves more than the other session's)
    comes first in the text table and in the page's default order, marked."""
    import re

    from filecache.replay.replay_report import replay_html

    fine, good = replay_session(SCRIPTED), replay_session(FIXTURE)
    assert good.prompt_tokens.saved_vs_recorded_pct > fine.prompt_tokens.saved_vs_recorded_pct
    billed = dataclasses.replace(good.billed, filecache=10**9)
    worse = dataclasses.replace(good, billed=billed)
    totals = combine([fine, worse])
    rows = [line.split(" | ")[0].strip("| *") for line in format_table([fine, worse], totals)
            .splitlines()[2:]]  # fmt: skip
    assert rows == ["total", FIXTURE.name, SCRIPTED.name]
    page = replay_html([fine, worse], totals)
    body = page.split("<tbody>")[1].split("</tbody>")[0]
    names = re.findall(r'<tr( class="worse")?><td><a href="#[^"]+">([^<]+)', body)
    assert names == [(' class="worse"', FIXTURE.name), ("", SCRIPTED.name)]


def test_progress_a_line_per_session_off_a_terminal_and_nothing_under_json() -> None:
    result = _invoke(str(FIXTURE), str(SCRIPTED))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("replayed ")]
    assert [line.split(" (")[0] for line in lines] == [
        f"replayed 1/2: {FIXTURE.name}", f"replayed 2/2: {SCRIPTED.name}"
    ]  # fmt: skip
    quiet = _invoke(str(FIXTURE), str(SCRIPTED), "--json")
    assert quiet.exit_code == 0 and "replayed" not in quiet.stderr
    json.loads(quiet.stdout)
    compared = _invoke(str(FIXTURE), "--window", "16000", "--compare")
    assert f"replayed 1/1: {FIXTURE.name}" in compared.stderr
    quiet = _invoke(str(FIXTURE), "--compare", "--window", "16000", "--json")
    assert quiet.exit_code == 0 and "replayed" not in quiet.stderr


@pytest.mark.parametrize("offset", [None, 5])
def test_an_undone_edit_notice_is_read_as_a_notice(tmp_path: Path, offset: int | None) -> None:
    """After ``git checkout FILE`` undoes the model's edit, a read answers with a line saying
    so, then the diff or the content. The checker read that line as the answer's header: a
    stale view and a dangling reference on a real Claude Code log."""
    text = "".join(f"line {i} of a file that is long enough to matter\n" for i in range(1, 41))
    window = {} if offset is None else {"offset": offset, "limit": 10}
    session = _trace(
        tmp_path,
        [
            {"role": "user", "content": "Edit it."},
            _call(1, "read_file", path="notes.txt"),
            _result(1, "recorded"),
            _call(2, "edit_file", path="notes.txt", old_string="line 7 ", new_string="LINE 7 "),
            _result(2, "recorded"),
            _call(3, "bash", command="git checkout notes.txt"),
            _result(3, "Updated 1 path from the index\n"),
            _call(4, "read_file", path="notes.txt", **window),
            _result(4, "recorded"),
            {"role": "assistant", "content": "Done."},
        ],
        {"notes.txt": text},
    )
    r = replay_session(session, cap=False)  # the recorded results are placeholders
    undone = r.filecache_messages[-2]["content"]
    assert "your edit call_2 is no longer on disk" in undone
    assert r.files_identical
    assert (r.stale_views, r.dangling_refs, r.recall) == (0, 0, 1.0)


def test_recall_over_every_line_reads_claude_codes_numbered_read_results(tmp_path: Path) -> None:
    """Claude Code's Read shows ``     N→text`` (2.1.x before 2.1.32x): recall over every line
    found no line in it and read 100% of nothing (0 pairs)."""
    lines = [f"line {i} of a file that is long enough to matter\n" for i in range(1, 41)]
    shown = "".join(f"{n:6d}\u2192{t}" for n, t in enumerate(lines[:20], 1))
    reminder = "\n<system-reminder>\nConsider whether it is malware.\n</system-reminder>\n"
    session = _trace(
        tmp_path,
        [
            {"role": "user", "content": "Look."},
            _call(1, "read_file", path="notes.txt", offset=1, limit=20),
            _result(1, shown + reminder),
            _call(2, "read_file", path="notes.txt", offset=1, limit=20),
            _result(2, shown + reminder),
            {"role": "assistant", "content": "Done."},
        ],
        {"notes.txt": "".join(lines)},
    )
    r = replay_session(session)
    assert r.recall_all_pairs == 1 and r.recall_all == 1.0
    assert r.lines_in_use == (40, 20, 20)
