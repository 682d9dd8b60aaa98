"""``filecache replay --compare`` and ``--policy``: pruning policies side by side, in one run.

Every session is replayed once with every requested peer policy beside filecache's run
(``replay_session(peers=...)``), and once more per further filecache preset. The table has one
row per policy: cumulative prompt tokens and billed equivalents (and their change against the
recorded transcripts), the largest request, the results the last request shows changed,
stale views, dangling stubs or refs, and recall, all counted alike (``replay_peers``).

Pure but for ``compare``, which runs the replays; the formatting takes records and returns text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from filecache.figures import Prices, prices_for
from filecache.prune.pruning import PrunePolicy
from filecache.replay.policy_runs import Grounding, PolicyRun, combine_runs
from filecache.replay.replay_metrics import SessionReplay, grounding_cell
from filecache.report_html import html_page, line_chart, sortable_table

__all__ = ["Comparison", "compare", "comparison_html", "format_comparison"]

Replay = Callable[..., SessionReplay]


@dataclass(frozen=True)
class Comparison:
    """The runs of every policy, per session and in total.

    Attributes:
        window: the context window (None: each policy's own default).
        names: the policies in table order.
        sessions: per session, its name and each policy's run of it.
        totals: each policy's run over all sessions.
        recorded: (prompt tokens, billed) of the recorded transcripts, in total.
    """

    window: int | None
    names: tuple[str, ...]
    sessions: tuple[tuple[str, dict[str, PolicyRun]], ...]
    totals: dict[str, PolicyRun]
    recorded: tuple[float, float]

    def to_json(self) -> dict[str, Any]:
        rp, rb = self.recorded
        return {
            "window": self.window,
            "recorded": {"prompt_tokens": rp, "billed": round(rb, 1)},
            "policies": {n: self.totals[n].to_json() for n in self.names},
            "sessions": [
                {"name": name, "policies": {n: runs[n].to_json() for n in self.names}}
                for name, runs in self.sessions
            ],
        }


def _filecache_run(name: str, r: SessionReplay) -> PolicyRun:
    return PolicyRun(
        name=name,
        requests=r.requests,
        prompt_tokens=int(r.prompt_tokens.filecache),
        billed=r.billed.filecache,
        cached=r.cached.get("filecache", 0),
        peak=int(r.peak_request.filecache),
        passes=r.pruning.passes,
        results=sum(r.pruning.results.values()),
        stale=r.stale_views,
        dangling=r.dangling_refs,
        recall=r.recall,
        recall_pairs=r.recall_pairs,
        problems=tuple(f"{name}: {p}" for p in r.problems),
        series=tuple(r.series.get("filecache", ())),
        billed_series=tuple(r.billed_series.get("filecache", ())),
        recall_all=r.recall_all,
        recall_all_pairs=r.recall_all_pairs,
        grounding=r.grounding.get("filecache", Grounding()),
    )


def _recorded_run(r: SessionReplay) -> PolicyRun:
    return PolicyRun(
        name="none",
        requests=r.requests,
        prompt_tokens=int(r.prompt_tokens.recorded),
        billed=r.billed.recorded,
        cached=r.cached.get("recorded", 0),
        peak=int(r.peak_request.recorded),
        passes=0,
        results=0,
        stale=0,
        dangling=0,
        recall=1.0,
        recall_pairs=0,
        series=tuple(r.series.get("recorded", ())),
        billed_series=tuple(r.billed_series.get("recorded", ())),
        recall_all=1.0,  # the recording holds all it showed
        recall_all_pairs=r.recall_all_pairs,
        grounding=r.grounding.get("recorded", Grounding()),
    )


def compare(
    dirs: Iterable[Path],
    *,
    replay: Replay,
    window: int | None,
    peers: Sequence[str],
    presets: Sequence[str] = (),
    cache_aware: bool | None = None,
    trigger: int | None = None,
    **options: Any,
) -> Comparison:
    """Replay ``dirs`` with ``peers`` (peer policy names, ``none`` for the recording as is)
    beside filecache with each of ``presets`` (``filecache (cost)``, ...).

    Args:
        replay: ``replay.replay_session`` (given, so this module imports no I/O).
        window: the context window; filecache's presets need one to prune.
        cache_aware: overrides the presets' cost gate setting.
        options: passed to ``replay`` (``tokenizer``, ``read_mode``, ``store``).
    """
    names = [*peers, *(f"filecache ({p})" for p in presets)]
    others = [p for p in peers if p != "none"]
    aware = {} if cache_aware is None else {"cache_aware": cache_aware}
    sessions: list[tuple[str, dict[str, PolicyRun]]] = []
    recorded = [0.0, 0.0]
    for d in dirs:
        runs: dict[str, PolicyRun] = {}
        for k, preset in enumerate(presets or (None,)):
            policy = None
            if window is not None and preset is not None:
                policy = PrunePolicy.preset(preset, context_window=window, **aware)
            r = replay(
                d, window=window, policy=policy, peers=others if k == 0 else (), trigger=trigger,
                **options,
            )  # fmt: skip
            if k == 0:  # the peers ran beside this one
                runs.update(r.policies)
                runs["none"] = _recorded_run(r)
                recorded[0] += r.prompt_tokens.recorded
                recorded[1] += r.billed.recorded
            if preset is not None:
                runs[f"filecache ({preset})"] = _filecache_run(f"filecache ({preset})", r)
        sessions.append((r.name, {n: runs[n] for n in names}))
    combined = combine_runs([runs for _, runs in sessions])
    totals = {n: combined[n] for n in names if n in combined}
    return Comparison(window, tuple(names), tuple(sessions), totals, (recorded[0], recorded[1]))


def _change(base: float, value: float) -> str:
    return f"{100 * (value - base) / base:+.1f}%".replace("-", "−") if base else "n/a"


HEAD = [
    "policy", "prompt tokens", "vs recorded", "billed", "vs recorded", "peak request",
    "results changed", "stale", "dangling", "recall", "recall (all lines)", "edits grounded",
    "net prompt vs recorded", "net billed vs recorded",
]  # fmt: skip


def _rows(c: Comparison) -> list[list[str]]:
    rp, rb = c.recorded
    rows = []
    for name in c.names:
        run = c.totals[name]
        rows.append(
            [
                name, f"{run.prompt_tokens:,}", _change(rp, run.prompt_tokens),
                f"{run.billed:,.0f}", _change(rb, run.billed), f"{run.peak:,}",
                f"{run.results:,}", f"{run.stale:,}", f"{run.dangling:,}",
                f"{100 * run.recall:.1f}%", f"{100 * run.recall_all:.1f}%",
                grounding_cell(run.grounding), _change(rp, run.net_prompt_tokens),
                _change(rb, run.net_billed),
            ]
        )  # fmt: skip
    return rows


def _note(c: Comparison) -> str:
    window = f"a {c.window:,}-token window" if c.window else "each policy's default window"
    sessions = len(c.sessions)
    return (
        f"{sessions} session{'s' if sessions != 1 else ''} at {window}; "
        "changes against the recorded transcripts (billed: the prefix a request shares with "
        "the previous one at 0.1x, the rest at 1.25x); peer policies edit the recorded "
        "requests; stale, dangling and recall are counted by the same model simulator for "
        "every policy. Edits grounded: edits whose old text the request the model answered "
        "showed (lost: shown in the recording, not here); net: each lost edit charged the "
        "re-read of its lines in every later request."
    )


def format_comparison(c: Comparison) -> str:
    """The table (markdown) and a line on what was compared."""
    lines = ["| " + " | ".join(HEAD) + " |", "|---|" + "---:|" * (len(HEAD) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(c)]
    return "\n".join(lines) + "\n\n" + _note(c) + "\n"


_LABELS = {  # short enough for the chart's legend (report_html.COLORS has their colours)
    "anthropic-clear-tool-uses": "anthropic",
    "claude-code-dedup": "cc dedup",
    "claude-code-dedup+anthropic-clear-tool-uses": "cc dedup+anthr.",
    "filecache (cost)": "filecache cost",
    "filecache (context)": "filecache context",
}


def _worse(run: PolicyRun, recorded: PolicyRun) -> bool:
    return run.prompt_tokens > recorded.prompt_tokens or run.billed > recorded.billed


def _lead(c: Comparison, prices: Prices) -> str:
    """The page's first sentence: the saving of filecache's cheapest preset (or the policy
    asked for) against the recorded transcripts, in prompt tokens, billed and money."""
    ours = [n for n in c.names if n.startswith("filecache")] or [n for n in c.names if n != "none"]
    if not ours or "none" not in c.totals:
        return "No policy but the recording was replayed."
    best = min(ours, key=lambda n: c.totals[n].billed)
    run, rec = c.totals[best], c.totals["none"]
    prompt = 100 * (rec.prompt_tokens - run.prompt_tokens) / rec.prompt_tokens
    billed = 100 * (rec.billed - run.billed) / rec.billed if rec.billed else 0.0

    def saved(pct: float, what: str) -> str:
        return f"saved {pct:.1f}% of {what}" if pct >= 0 else f"added {-pct:.1f}% to {what}"

    return (
        f"{best} {saved(prompt, 'the prompt tokens')} and "
        f"{saved(billed, 'the billed cost').removeprefix('saved ')} "
        f"against the recorded transcripts: ${run.cost(prices):,.4f} instead of "
        f"${rec.cost(prices):,.4f} at {prices.model}'s prices, over {len(c.sessions)} "
        f"session{'s' if len(c.sessions) != 1 else ''} ({_window(c)})."
    )


def _window(c: Comparison) -> str:
    return f"a {c.window:,}-token window" if c.window else "each policy's default window"


_SESSION_HEAD = (
    "session", "policy", "prompt tokens", "prompt vs recorded", "billed", "billed vs recorded",
    "cost (USD)", "stale", "dangling", "recall",
)  # fmt: skip


def _session_rows(c: Comparison, prices: Prices) -> tuple[list[list[object]], list[bool]]:
    """One row per session and policy: regressions (costs more than recorded) first."""
    rows: list[tuple[bool, list[object]]] = []
    for session, runs in c.sessions:
        rec = runs.get("none")
        for name in c.names:
            run = runs[name]
            worse = rec is not None and name != "none" and _worse(run, rec)
            rp, rb = (rec.prompt_tokens, rec.billed) if rec is not None else (0, 0.0)
            rows.append((worse, [
                session, name, f"{run.prompt_tokens:,}", _change(rp, run.prompt_tokens),
                f"{run.billed:,.0f}", _change(rb, run.billed), f"${run.cost(prices):,.4f}",
                f"{run.stale:,}", f"{run.dangling:,}", f"{100 * run.recall:.1f}%",
            ]))  # fmt: skip
    rows.sort(key=lambda r: not r[0])  # stable: regressions first, else in order
    return [r for _, r in rows], [w for w, _ in rows]


def comparison_html(c: Comparison, prices: Prices | None = None) -> str:
    """One page: the saving in one sentence, the policies' table, the sessions' table (one
    row per session and policy, regressions first and marked; both sortable), then per
    session a chart of every policy's prompt tokens and one of its billed equivalents."""
    prices = prices or prices_for()
    rec = c.totals.get("none")
    policies = sorted(
        (
            (
                rec is not None and name != "none" and _worse(c.totals[name], rec),
                [*row, f"${c.totals[name].cost(prices):,.4f}"],
            )
            for name, row in zip(c.names, _rows(c), strict=True)
        ),
        key=lambda p: not p[0],
    )
    rows, worse = _session_rows(c, prices)
    body = [
        f'<p class="note">{escape(_note(c))} Cost: {escape(prices.describe())}. Policies that '
        "cost more than the recording come first, marked; click a header to sort.</p>",
        sortable_table(
            [*HEAD, "cost (USD)"], [row for _, row in policies], worse=[w for w, _ in policies]
        ),
        "<h2>Sessions</h2>",
        '<p class="note">One row per session and policy; those that cost more than the '
        "recording (prompt or billed) come first, marked. Click a header to sort.</p>",
        sortable_table(_SESSION_HEAD, rows, worse=worse),
    ]
    for name, runs in c.sessions:
        body.append(f"<h2>{escape(name)}</h2>")
        series = {_LABELS.get(n, n): runs[n].series for n in c.names if runs[n].series}
        body.append(line_chart(series, title=f"prompt tokens per request: {name}"))
        billed = {
            _LABELS.get(n, n): runs[n].billed_series for n in c.names if runs[n].billed_series
        }
        if billed:
            body.append(
                line_chart(
                    billed, title=f"billed equivalents per request: {name}",
                    y_label="billed (uncached-token equivalents)",
                )
            )  # fmt: skip
    return html_page("filecache replay --compare", body, lead=_lead(c, prices))
