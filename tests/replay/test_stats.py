"""``filecache stats``: what the store's ledger and projections say filecache saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from filecache import FileCache
from filecache.cli import main
from filecache.replay.replay import replay_session
from filecache.stats import collect_stats, format_stats, session_rows, stats_html
from filecache.store.sqlite_store import SqliteStore

SESSIONS = Path(__file__).parents[2] / "fixtures" / "sessions"
FIXTURE = SESSIONS / "lm32b__pytest-dev__pytest-7571"
SCRIPTED = SESSIONS / "scripted__polyglot-peek"
SESSION_KEYS = {
    "session_id", "sessions", "created", "last_used", "reads", "writes", "tokens", "tokens_full",
    "saved", "saved_pct", "saved_by_kind", "pruning", "top_files",
}  # fmt: skip


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding both fixture sessions as replayed, the scripted one pruned at 16k."""
    store = tmp_path_factory.mktemp("stats") / "cache.db"
    replay_session(FIXTURE, store=store)
    replay_session(SCRIPTED, store=store, window=16_000)
    return store


def stats(*args: str) -> object:
    return CliRunner().invoke(main, ["stats", *args])


def test_collect_stats_from_replayed_sessions(replayed: Path) -> None:
    with SqliteStore(replayed) as store:
        report = collect_stats(store)
        # a replay runs on a temporary root: off the store's home root it is ID#<root hash>
        events = {s.session_id.split("#")[0]: store.events(s.session_id) for s in store.sessions()}
    by_id = {s.session_id.split("#")[0]: s for s in report.sessions}
    assert set(by_id) == {FIXTURE.name, SCRIPTED.name}
    o = report.overall
    assert o.sessions == 2
    assert o.tokens == sum(s.tokens for s in report.sessions)
    assert o.tokens_full == sum(s.tokens_full for s in report.sessions)
    assert o.saved == o.tokens_full - o.tokens > 0
    assert set(o.saved_by_kind) >= {"FileRef", "diff", "pruning"}
    # the real session's large file was outlined: counted as what it showed, not as saved
    real = by_id[FIXTURE.name]
    assert "outline" not in real.saved_by_kind and real.outlines == real.reads["outline"] == 1
    assert 0 < real.outline_tokens < real.outlined_whole
    assert by_id[SCRIPTED.name].saved_by_kind["FileRef"] > 0
    pruned = by_id[SCRIPTED.name]
    assert sum(pruned.pruned.values()) > 0 and pruned.reclaimed > 0
    assert pruned.saved_by_kind["pruning"] == pruned.reclaimed
    assert by_id[FIXTURE.name].pruned == {}
    for sid, s in by_id.items():
        reads = [e for e in events[sid] if e.tool == "read"]
        assert sum(s.reads.values()) == len(reads)
        assert s.saved == sum(e.tokens_full - e.tokens for e in reads if e.kind != "outline")
        assert len(s.series["plain"]) == len(reads) and s.series["plain"][-1] == s.tokens_full
    savings = [f.saved for f in o.top_files]
    assert savings == sorted(savings, reverse=True) and all(x > 0 for x in savings)
    text = format_stats(report)
    assert "**overall**" in text and "saved by kind: FileRef" in text and "pruning:" in text


def test_one_session_and_unknown_ones(replayed: Path) -> None:
    with SqliteStore(replayed) as store:
        one = collect_stats(store, FIXTURE.name, top=1)
        assert [s.session_id for s in one.sessions] == [FIXTURE.name]
        assert one.overall.tokens == one.sessions[0].tokens and len(one.overall.top_files) == 1
    result = stats("--store", str(replayed), "--session", "nope")
    assert result.exit_code == 2 and "no session 'nope'" in result.stderr


def test_stats_of_a_live_session_count_refs_and_diffs(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("".join(f"line {i} of some text\n" for i in range(80)))
    store = tmp_path / "s.db"
    with FileCache(tmp_path, store=store) as cache:
        s = cache.session("live")
        s.read("a.txt")
        s.read("a.txt")  # a FileRef
        (tmp_path / "a.txt").write_text("".join(f"line {i} of some text\n" for i in range(81)))
        s.read("a.txt")  # a diff
    result = stats("--store", str(store), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"overall", "sessions", "side_requests"} and data["side_requests"] is None
    [live] = data["sessions"]
    assert SESSION_KEYS <= set(live) and SESSION_KEYS <= set(data["overall"])
    assert live["reads"] == {"full": 1, "unchanged": 1, "diff": 1}
    assert live["saved_by_kind"]["FileRef"] > 0 and live["saved_by_kind"]["diff"] > 0
    assert live["saved"] == live["tokens_full"] - live["tokens"]
    assert live["pruning"] == {"results": {}, "tokens_before": 0, "tokens_after": 0, "reclaimed": 0}
    assert live["top_files"][0]["path"] == "a.txt"


def test_cli_table_json_html_and_errors(replayed: Path, tmp_path: Path) -> None:
    from html_check import check_page

    result = stats("--store", str(replayed))
    assert result.exit_code == 0, result.output
    assert FIXTURE.name in result.stdout and "top files by saving" in result.stdout
    data = json.loads(stats("--store", str(replayed), "--json", "--top", "2").stdout)
    assert data["overall"]["sessions"] == 2 and len(data["overall"]["top_files"]) == 2
    assert data["overall"]["pruning"]["reclaimed"] > 0
    out = tmp_path / "stats.html"
    result = stats("--store", str(replayed), "--html", str(out))
    assert result.exit_code == 0, result.output
    svgs = check_page(out.read_text(encoding="utf-8"), tmp_path)
    assert len(svgs) == 2
    missing = stats("--store", str(tmp_path / "none.db"))
    assert missing.exit_code == 2 and "no store at" in missing.stderr
    assert stats("--top", "0").exit_code == 2
    for flag in ("-h", "--help"):
        helped = stats(flag)
        assert helped.exit_code == 0 and "--session" in helped.stdout and "--html" in helped.stdout


def test_stats_html_of_an_empty_store(tmp_path: Path) -> None:
    from html_check import check_page

    with SqliteStore(tmp_path / "empty.db") as store:
        report = collect_stats(store)
    assert report.sessions == () and report.overall.tokens == 0
    assert check_page(stats_html(report), tmp_path) == []


def test_every_command_finds_the_store_the_roots_pyproject_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One store resolution (flag, env, [tool.filecache] store, default) for every command:
    ``read`` writes where ``stats`` and ``sessions`` then look."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.filecache]\nstore = "state/elsewhere.db"\n')
    (project / "a.txt").write_text("".join(f"line {i}\n" for i in range(40)))
    monkeypatch.chdir(project)
    runner = CliRunner()
    for call in (["read", "a.txt", "--session", "s1"], ["read", "a.txt", "--session", "s1"]):
        assert runner.invoke(main, call).exit_code == 0
    assert (project / "state" / "elsewhere.db").exists() and not (project / ".filecache").exists()
    stats = runner.invoke(main, ["stats", "--json"])
    assert stats.exit_code == 0, stats.output
    listed = runner.invoke(main, ["sessions", "list", "--json"])
    assert listed.exit_code == 0 and "s1" in listed.output, listed.output


def test_stats_and_replay_agree_on_the_same_sessions(tmp_path: Path) -> None:
    """One truth: ``stats`` on a store a replay wrote reports what the replay's ledger line
    says, against the baseline both name; an outline is not credited with the whole file."""
    from filecache.replay.replay_metrics import combine
    from filecache.replay.replay_report import format_replay, replay_html
    from filecache.stats import BASELINE

    store = tmp_path / "cache.db"
    replays = [replay_session(FIXTURE, store=store), replay_session(SCRIPTED, store=store)]
    totals = combine(replays)
    with SqliteStore(store) as opened:
        report = collect_stats(opened)
        rows = {r["session_id"]: r for r in session_rows(opened)}
    assert (report.overall.tokens, report.overall.tokens_full) == totals.ledger_reads
    for r in replays:  # a replay's root is a temporary one: off the home root, ID#<root hash>
        one = next(s for s in report.sessions if s.session_id.split("#")[0] == r.name)
        assert (one.tokens, one.tokens_full) == r.ledger_reads
        assert rows[one.session_id]["saved"] == one.saved  # 'sessions list' counts alike
    real = next(r for r in replays if r.name == FIXTURE.name)
    outline = next(c for c in real.calls if c["kind"] == "outline")
    assert outline["plain_tokens"] > 4 * outline["filecache_tokens"]  # what it was credited
    assert real.ledger_saved_pct < 50 < 100 * (1 - real.ledger_reads[0] / (
        real.ledger_reads[1] + outline["plain_tokens"] - outline["filecache_tokens"]
    ))  # fmt: skip
    text = format_replay(replays, totals)
    assert BASELINE in text and f"{totals.ledger_saved_pct:.1f}% saved" in text
    assert f"{report.overall.saved_pct:.1f}%" in text.split("read answers")[1]
    stats_text = format_stats(report)
    assert f"baseline: {BASELINE}" in stats_text
    # the overall row first, in the text, the JSON and the HTML of both reports
    table = [line for line in stats_text.splitlines() if line.startswith("| ")]
    assert table[2].startswith("| **overall**") and FIXTURE.name in "".join(table[3:])
    assert SCRIPTED.name in "".join(table[3:])
    replay_rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert replay_rows[2].startswith("| **total**")
    assert list(report.to_json()) == ["overall", "sessions", "side_requests"]
    html = stats_html(report)
    assert html.index("<td>overall</td>") < html.index(f"<td>{FIXTURE.name}</td>")
    page = replay_html(replays, totals)
    assert page.index(">total<") < page.index(f">{FIXTURE.name}<")
