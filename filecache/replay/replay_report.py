"""Replay results as markdown tables (the CLI's default output, docs/benchmarks.md's tables).

Pure: ``SessionReplay`` records in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

from filecache.replay.policy_runs import Grounding
from filecache.replay.replay_metrics import READ_KINDS, Measure, SessionReplay, grounding_cell
from filecache.report_html import Cell, html_page, html_table, line_chart, sortable_table
from filecache.stats import BASELINE

__all__ = [
    "format_replay", "format_table", "format_totals", "grounding_line", "ledger_line",
    "replay_html", "replay_lead", "session_anchor", "worse_line", "worse_than_recorded",
]  # fmt: skip


def _pct(x: float) -> str:
    return f"{-x:+.1f}%".replace("-", "−")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


_MEASURE_HEAD = ["measure", "recorded", "plain", "filecache", "vs recorded", "vs plain"]


def _measure_row(label: str, m: Measure) -> list[str]:
    return [
        label, f"{m.recorded:,.0f}", f"{m.plain:,.0f}", f"{m.filecache:,.0f}",
        _pct(m.saved_vs_recorded_pct), _pct(m.saved_vs_plain_pct),
    ]  # fmt: skip


def format_table(replays: Sequence[SessionReplay], totals: SessionReplay | None = None) -> str:
    """The totals row first, then one row per session: those that cost more than recorded
    (``worse_than_recorded``) first, the others in the order given. ``change``: the headline,
    the smaller saving of the two baselines (recorded, plain), as a change (negative: filecache
    saved)."""
    head = [
        "session", "requests", "prompt recorded", "prompt plain", "prompt filecache",
        "change", "billed change", "reads f/p/u/d/o/err", "pruned", "stale", "dangling",
        "recall", "recall all", "edits grounded", "files",
    ]  # fmt: skip
    lines = [_row(head), _row(["---", *("---:" for _ in head[1:-1]), ":---:"])]
    ordered = sorted(replays, key=lambda r: not _worse(r))  # stable: regressions first
    for r in [*([totals] if totals is not None else []), *ordered]:
        bold = "**" if r is totals else ""
        pruned = sum(r.pruning.results.values())
        lines.append(
            _row(
                [
                    f"{bold}{r.name}{bold}",
                    f"{r.requests:,}",
                    f"{r.prompt_tokens.recorded:,.0f}",
                    f"{r.prompt_tokens.plain:,.0f}",
                    f"{r.prompt_tokens.filecache:,.0f}",
                    f"{bold}{_pct(r.saved_pct)}{bold}",
                    f"{bold}{_pct(r.billed_saved_pct)}{bold}",
                    "/".join(str(r.reads.get(k, 0)) for k in READ_KINDS),
                    f"{pruned:,}" if r.pruning.window else "off",
                    f"{r.stale_views:,}",
                    f"{r.dangling_refs:,}",
                    f"{100 * r.recall:.1f}%",
                    f"{100 * r.recall_all:.1f}%",
                    _grounded(r),
                    "same" if r.files_identical else "DIFFER",
                ]
            )
        )
    return "\n".join(lines) + "\n"


TABLE_LEGEND = """\
columns: requests: one before each assistant message. prompt recorded / plain / filecache:
  prompt tokens summed over every request (recorded: the log as sent; plain: the same tools
  replayed without filecache; filecache: through it). change, billed change: filecache against
  recorded or plain, whichever saved less (negative: saved); billed counts a cached prefix at
  0.1x and the rest at 1.25x. reads f/p/u/d/o/err: full, partial, unchanged (a FileRef), diff,
  outline, error answers. pruned: results pruned ("off": no --window). stale: reads whose lines
  the model cannot rebuild as they are on disk, dangling: FileRefs or diffs whose base result
  is gone (both must be 0). recall: the share of the lines filecache's answers showed of the
  files still in use that the requests hold; recall all: the same over every line the
  recording showed, outlined lines counted as hidden (lower than recall wherever outlines or
  pruning replace text the agent's own tool showed: a measure, not an error). edits grounded:
  edits whose old text the request the model answered showed, in filecache's run (n/a through
  a host's hook). files: whether both runs end with the same files.
"""


def _grounded(r: SessionReplay) -> str:
    if "filecache" not in r.grounding:
        return "n/a"  # a replay that does not measure it (through a host's hook)
    return grounding_cell(r.grounding["filecache"])


def grounding_line(totals: SessionReplay) -> str:
    """Edit grounding in the recording and in filecache's run, and the net saving."""
    fc = totals.grounding.get("filecache", Grounding())
    rec = totals.grounding.get("recorded", Grounding())
    if "filecache" not in totals.grounding:
        return "edit grounding: not measured by this replay (through a host's hook: --host none)."
    if not fc.edits:
        return "edit grounding: no edits replayed."
    named = ", ".join(u.replace("lost: ", "") for u in fc.ungrounded if "lost: " in u)
    lost = (
        f"; {fc.lost:,} lost against the recording ({named})"
        if fc.lost
        else ", none lost against the recording"
    )
    return (
        f"edit grounding: {fc.grounded:,} of {fc.edits:,} edits ({100 * fc.share:.1f}%) had their "
        f"old text in the request the model answered, against {rec.grounded:,} "
        f"({100 * rec.share:.1f}%) in the recording{lost}. Net of the re-reads the lost edits "
        f"would need ({fc.reread_tokens:,} prompt tokens): prompt "
        f"{_pct(totals.net_prompt_tokens.saved_pct)}, billed "
        f"{_pct(totals.net_billed.saved_pct)} (as the headline: the smaller saving)."
    )


def format_totals(totals: SessionReplay) -> str:
    """Every measure of the totals against both baselines."""
    rows = [
        ("cumulative prompt tokens", totals.prompt_tokens),
        ("billed equivalents", totals.billed),
        ("net prompt tokens (lost edits re-read)", totals.net_prompt_tokens),
        ("net billed equivalents", totals.net_billed),
        ("peak request", totals.peak_request),
        ("final requests (sum)", totals.final_request),
        ("tool output tokens", totals.tool_output_tokens),
        ("file tool output tokens", totals.file_tool_tokens),
    ]
    lines = [_row(_MEASURE_HEAD), _row(["---", *("---:" for _ in _MEASURE_HEAD[1:])])]
    lines += [_row(_measure_row(label, m)) for label, m in rows]
    return "\n".join(lines) + "\n"


def format_replay(replays: Sequence[SessionReplay], totals: SessionReplay) -> str:
    """The CLI's text output: the sessions table, the totals table and a one-line verdict."""
    p = totals.pruning
    pruning = (
        f"pruning at a {p.window:,}-token window (cache-aware {'on' if p.cache_aware else 'off'}): "
        f"{sum(p.results.values()):,} results pruned in {p.passes:,} passes"
        if p.window
        else "pruning off (pass --window TOKENS to prune before every request)"
    )
    verdict = (
        f"{totals.sessions} session{'s' if totals.sessions != 1 else ''}: "
        f"prompt tokens {_pct(totals.saved_pct)}, billed {_pct(totals.billed_saved_pct)} "
        f"(against the recorded or the plain run, whichever saved less); "
        f"stale views {totals.stale_views}, dangling refs {totals.dangling_refs}, "
        f"recall {100 * totals.recall:.1f}%; {pruning}."
    )
    file, recorded, held = totals.lines_in_use
    verdict += (
        f"\nrecall over every line: {100 * totals.recall_all:.1f}% of the lines the recording "
        f"showed of the files in use are held by the requests as sent (outlined lines count as "
        f"hidden; {totals.recall_all_pairs:,} (request, file) pairs, {held:,} of {recorded:,} "
        f"lines, of {file:,} in those files)."
    )
    verdict += "\n" + grounding_line(totals)
    lead = "" if totals.headline is None else replay_lead(totals) + "\n\n"
    return (
        lead + format_table(replays, totals) + "\n" + TABLE_LEGEND + "\n"
        + format_totals(totals) + "\n"
        + verdict + "\n"
        + ledger_line(totals) + "\n" + worse_line(replays, totals) + "\n"
    )  # fmt: skip


def _worse(r: SessionReplay) -> bool:
    return r.prompt_tokens.filecache > r.prompt_tokens.recorded or r.billed.filecache > (
        r.billed.recorded
    )


def worse_than_recorded(replays: Sequence[SessionReplay]) -> list[SessionReplay]:
    """Every session whose prompt tokens or billed equivalents exceed the recording's."""
    return [r for r in replays if _worse(r)]


def worse_line(replays: Sequence[SessionReplay], totals: SessionReplay) -> str:
    """The sessions that cost more than recorded, named with their changes (or none)."""
    capped = f"{totals.capped:,} answers larger than the agent's own sent as recorded"
    worse = worse_than_recorded(replays)
    if not worse:
        return f"no session costs more than recorded ({capped})."
    named = ", ".join(
        f"{r.name} (prompt {_pct(r.prompt_tokens.saved_vs_recorded_pct)}, billed "
        f"{_pct(r.billed.saved_vs_recorded_pct)})"
        for r in worse
    )
    plural = "s" if len(worse) != 1 else ""
    return f"{len(worse)} session{plural} cost more than recorded: {named} ({capped})."


def ledger_line(totals: SessionReplay) -> str:
    """What ``filecache stats`` reports on a store this replay wrote, with its baseline named."""
    served, baseline = totals.ledger_reads
    return (
        f"read answers as the ledger records them (what 'filecache stats' reports; baseline: "
        f"{BASELINE}): {served:,} tokens served against {baseline:,}, "
        f"{totals.ledger_saved_pct:.1f}% saved per answer (the change above counts every "
        "request they stay in)."
    )


def _measure_rows(r: SessionReplay) -> list[list[str]]:
    return [
        _measure_row(label, m)
        for label, m in (
            ("cumulative prompt tokens", r.prompt_tokens),
            ("billed equivalents", r.billed),
            ("net prompt tokens (lost edits re-read)", r.net_prompt_tokens),
            ("net billed equivalents", r.net_billed),
            ("peak request", r.peak_request),
            ("final request" if r.sessions == 1 else "final requests (sum)", r.final_request),
            ("tool output tokens", r.tool_output_tokens),
        )
    ]


def _by_regression(r: SessionReplay) -> tuple[bool, float, str]:
    # costs more than recorded (prompt or billed) first, then the least prompt saved
    return not _worse(r), r.prompt_tokens.saved_vs_recorded_pct, r.name


_SESSION_HEAD = (
    "session", "requests", "prompt recorded", "prompt filecache", "prompt vs recorded",
    "billed vs recorded", "prompt vs plain", "billed vs plain", "recall", "recall all",
    "edits grounded", "stale", "dangling",
)  # fmt: skip


def session_anchor(n: int, name: str) -> str:
    """The id of the ``n``-th session's section (unique, readable)."""
    return f"s{n}-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", name)


def _session_cells(r: SessionReplay) -> list[str]:
    return [
        f"{r.requests:,}", f"{r.prompt_tokens.recorded:,.0f}", f"{r.prompt_tokens.filecache:,.0f}",
        _pct(r.prompt_tokens.saved_vs_recorded_pct), _pct(r.billed.saved_vs_recorded_pct),
        _pct(r.prompt_tokens.saved_vs_plain_pct), _pct(r.billed.saved_vs_plain_pct),
        f"{100 * r.recall:.1f}%", f"{100 * r.recall_all:.1f}%", _grounded(r), f"{r.stale_views:,}",
        f"{r.dangling_refs:,}",
    ]  # fmt: skip


def _sessions_table(replays: Sequence[SessionReplay], totals: SessionReplay) -> str:
    """The per-session table: the totals first, then the sessions, those that cost more than
    recorded first and marked; a click on a header sorts by that column."""
    anchors = {id(r): session_anchor(n, r.name) for n, r in enumerate(replays, 1)}
    ordered = sorted(replays, key=_by_regression)
    rows: list[list[object]] = [
        [Cell(f'<a href="#{anchors[id(r)]}">{escape(r.name)}</a>', r.name), *_session_cells(r)]
        for r in ordered
    ]
    return (
        '<p class="note">Sessions: those that cost more than recorded (prompt or billed) come '
        "first, marked; click a header to sort by it. Changes are against the recorded "
        "transcript and against the plain run; negative is a saving.</p>\n"
        + sortable_table(
            _SESSION_HEAD, rows, pinned=[["total", *_session_cells(totals)]],
            worse=[_worse(r) for r in ordered],
        )
    )  # fmt: skip


def replay_lead(totals: SessionReplay) -> str:
    """The page's first sentence: the saving in prompt tokens, billed and money."""
    if totals.headline is not None:
        # the stored session's headline (as `stats` gives it: against plain reads), then the
        # table's change, so the two figures a reader meets first are never unexplained
        return (
            f"{totals.headline.sentence()} Against what the agent actually sent or the plain "
            f"run, whichever saved less (the table's change): prompt tokens "
            f"{_pct(totals.saved_pct)}, billed {_pct(totals.billed_saved_pct)}."
        )
    return (  # a replay through a host's hook: no store session of its own
        f"filecache changed the prompt tokens by {_pct(totals.saved_pct)} and the billed "
        f"cost by {_pct(totals.billed_saved_pct)} (against the recorded or the plain run, "
        "whichever saved less); no cost in money (this replay kept no session)."
    )


def replay_html(replays: Sequence[SessionReplay], totals: SessionReplay) -> str:
    """One page: the saving in one sentence, what was replayed, the per-session table (the
    totals first, regressions first and marked, sortable by any column; each name links to its
    session), the totals' measures, then per session its measures and a chart of every
    request's prompt tokens (recorded, plain, filecache)."""
    counters = (
        f"Stale views {totals.stale_views}, dangling refs {totals.dangling_refs}, "
        f"recall {100 * totals.recall:.1f}% over {totals.recall_pairs:,} (request, file) pairs."
    )
    p = totals.pruning
    pruning = (
        f"Pruning before every request at a {p.window:,}-token window "
        f"(cache-aware {'on' if p.cache_aware else 'off'})."
        if p.window
        else "Pruning off: delta reads (FileRef, diff, outline) only."
    )
    body = [
        f"<p>{totals.sessions} replayed session{'s' if totals.sessions != 1 else ''}, "
        f"{totals.requests:,} requests. {pruning} {counters}</p>",
        f"<p>{escape(grounding_line(totals))}</p>",
        _sessions_table(replays, totals),
        html_table(_MEASURE_HEAD, _measure_rows(totals)),
        '<p class="note">Billed: the prefix a request shares with the previous one at 0.1x, '
        "the rest at 1.25x. Changes are against each baseline; negative is a saving.</p>",
        f'<p class="note">{escape(ledger_line(totals))}</p>',
        f'<p class="note">{escape(worse_line(replays, totals))}</p>',
    ]
    if totals.headline is not None:
        body.append(f'<p class="note">Prices: {escape(totals.headline.prices.describe())}.</p>')
    for n, r in enumerate(replays, 1):
        body.append(f'<h2 id="{session_anchor(n, r.name)}">{escape(r.name)}</h2>')
        if r.source:
            body.append(f'<p class="note">{escape(r.source)}</p>')
        body.append(html_table(_MEASURE_HEAD, _measure_rows(r)))
        order = ("plain", "filecache", "recorded")  # the dashed recorded line on top
        series = {run: r.series[run] for run in order if r.series.get(run)}
        body.append(line_chart(series, title=f"prompt tokens per request: {r.name}"))
    return html_page("filecache replay", body, lead=replay_lead(totals))
