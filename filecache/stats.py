"""``filecache stats`` and ``filecache sessions``: what the store's ledger says filecache saved.

Pure over what the store returns: ``collect_stats`` reads events and projections through the
``Store`` protocol and folds them into frozen records; the ``format_*`` functions and
``stats_html`` render them.

Invariants:
- One baseline, named ``BASELINE`` in every report (and the same in ``filecache replay``'s
  ledger line, which calls ``read_baseline``): "saved" by a read is its baseline minus what
  filecache answered, per answer (not per request it stays in). The baseline is the plain read
  (same range, same format: ``tokens_full``), but for an outline: an outline counts as what it
  showed, with no saving claimed. It stands in for the whole file only where the agent's own
  tool would have shown something else (SWE-agent's abbreviated view, an explicit outline
  request), which the ledger does not know; crediting it with the whole file made ``stats``
  report 65% saved on sessions that ``replay`` measured at 22% (and one at +55%).
- Only answers the model got are credited: a read whose answer the caller withdrew (a host
  hook that left the host's own output: ``Session.withdraw``) counts as the plain read it
  showed, with no saving.
- "Pruning reclaimed" is, per pruned result, the tokens of the original minus the tokens of
  its current projection: what every later request no longer carries.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from filecache.core.host_labels import HOST_LABELS, register_host
from filecache.core.kinds import CHANGES, Kind, Tool
from filecache.errors import RequestError
from filecache.figures import (
    ANSWERS_BASELINE,
    BILLED_BASIS,
    REQUESTS_BASELINE,
    Headline,
    Prices,
    SessionMeta,
    headline_of,
    load_session_meta,
    model_prices,
    prices_for,
    read_baseline,
    sum_headlines,
)
from filecache.figures import load_tally as load_request_tally
from filecache.report_html import html_page, line_chart, sortable_table
from filecache.store.store import Event, Projection, Store

__all__ = [
    "BASELINE", "FileSaving", "GATEWAY_PREFIX", "HOST_LABELS", "SIDE_REQUESTS", "SessionStats",
    "StatsReport", "collect_stats", "format_events", "format_sessions", "format_stats", "host_of",
    "read_baseline", "register_host", "session_label", "session_rows", "side_label", "stats_html",
]  # fmt: skip

KIND_NAMES = {"unchanged": "FileRef", "diff": "diff", "symbol": "symbol"}
BASELINE = ANSWERS_BASELINE


@dataclass(frozen=True)
class FileSaving:
    """Reads of one path and what they saved."""

    path: str
    reads: int
    tokens: int
    tokens_full: int

    @property
    def saved(self) -> int:
        return self.tokens_full - self.tokens


_HOST_SESSION = re.compile(r"^(?P<host>[a-z-]+):(?P<sid>.+)@(?P<root>[0-9a-f]{8})$")


def host_of(session_id: str) -> tuple[str, str] | None:
    """(the host's display name, its own session id) of a session a host hook recorded (as
    ``claude-code:<session_id>@<root>``), or None for any other session."""
    match = _HOST_SESSION.match(session_id)
    if match is None or match["host"] not in HOST_LABELS:
        return None
    return HOST_LABELS[match["host"]], match["sid"]


GATEWAY_PREFIX = "gateway:"
"""The sessions of the gateway's conversations (``filecache.gateway.tally.session_of``)."""
_API_NAMES = {"anthropic-messages": "Anthropic Messages", "openai-chat": "OpenAI Chat",
              "openai-responses": "OpenAI Responses"}  # fmt: skip


def session_label(session_id: str, meta: SessionMeta | None = None) -> str:
    """How a report names a session: a host's sessions by the host and its own id, a
    gateway's conversation by the program that sent it (``meta``) and the host's own id."""
    if session_id.startswith(GATEWAY_PREFIX):
        kind, _, rest = session_id[len(GATEWAY_PREFIX) :].partition(":")
        parts = rest.split(":")
        ident = parts[1] if kind == "prefix" and len(parts) > 1 else parts[0]
        who = meta.host or _API_NAMES.get(meta.api, "") if meta is not None else ""
        return f"gateway{f' ({who})' if who else ''} conversation {ident} ({session_id})"
    host = host_of(session_id)
    return session_id if host is None else f"{host[0]} session {host[1]} ({session_id})"


@dataclass(frozen=True)
class SessionStats:
    """One session's (or, as ``overall``, every selected session's) statistics.

    Attributes:
        session_id: the id (``"overall"`` for the aggregate).
        sessions: sessions aggregated (1 for one session).
        created / last_used: UNIX times (the earliest / latest for the aggregate).
        reads: read answers by kind (``full``, ``partial``, ``unchanged``, ``diff``, ...).
        writes: writes, edits and changes seen outside, by tool.
        tokens / tokens_full: tokens the reads answered, and their baseline (``BASELINE``).
        saved_by_kind: tokens saved per answer kind (``FileRef``, ``diff``, ``symbol``) and
            ``pruning`` (reclaimed).
        outlines / outline_tokens / outlined_whole: outline answers, the tokens they showed,
            and the whole files' plain tokens they stood in for (not credited as saved).
        headline: the figures every report leads with (``filecache.figures``): prompt, billed
            and cost against the same requests plain and unpruned, and per answer.
        pruned: pruned results by tier.
        pruned_before / pruned_after: tokens of the pruned results originally and now.
        top_files: the paths whose reads saved most.
        series: cumulative read tokens over the reads, ``plain`` and ``filecache``.
    """

    session_id: str
    sessions: int
    created: float
    last_used: float
    reads: Mapping[str, int]
    writes: Mapping[str, int]
    tokens: int
    tokens_full: int
    saved_by_kind: Mapping[str, int]
    pruned: Mapping[str, int]
    pruned_before: int
    pruned_after: int
    top_files: tuple[FileSaving, ...] = ()
    series: Mapping[str, tuple[int, ...]] = field(default_factory=dict, repr=False)
    outlines: int = 0
    outline_tokens: int = 0
    outlined_whole: int = 0
    headline: Headline | None = field(default=None, compare=False)
    meta: SessionMeta | None = field(default=None, compare=False)
    """What the session's requests named (a gateway conversation: the model, the host)."""

    @property
    def label(self) -> str:
        """How a report names the session (``session_label``)."""
        return session_label(self.session_id, self.meta)

    @property
    def saved(self) -> int:
        """Tokens the reads saved (FileRefs, diffs, outlines)."""
        return self.tokens_full - self.tokens

    @property
    def saved_pct(self) -> float:
        return 100.0 * self.saved / self.tokens_full if self.tokens_full else 0.0

    @property
    def reclaimed(self) -> int:
        return self.pruned_before - self.pruned_after

    def to_json(self) -> dict[str, Any]:
        host = host_of(self.session_id)
        gateway = None
        if self.session_id.startswith(GATEWAY_PREFIX):
            conversation = self.session_id[len(GATEWAY_PREFIX) :]
            gateway = {"conversation": conversation, **(self.meta or SessionMeta()).to_json()}
        return {
            "session_id": self.session_id,
            "label": self.label,
            "host": None if host is None else host[0],
            "host_session_id": None if host is None else host[1],
            "gateway": gateway,
            "sessions": self.sessions,
            "created": _iso(self.created),
            "last_used": _iso(self.last_used),
            "reads": dict(self.reads),
            "writes": dict(self.writes),
            "tokens": self.tokens,
            "tokens_full": self.tokens_full,
            "baseline": BASELINE,
            "saved": self.saved,
            "saved_pct": round(self.saved_pct, 2),
            "saved_by_kind": dict(self.saved_by_kind),
            "outlines": {
                "answers": self.outlines,
                "tokens": self.outline_tokens,
                "whole_files_plain": self.outlined_whole,
            },
            "pruning": {
                "results": dict(self.pruned),
                "tokens_before": self.pruned_before,
                "tokens_after": self.pruned_after,
                "reclaimed": self.reclaimed,
            },
            "top_files": [
                {
                    "path": f.path,
                    "reads": f.reads,
                    "tokens": f.tokens,
                    "tokens_full": f.tokens_full,
                    "saved": f.saved,
                }
                for f in self.top_files
            ],  # fmt: skip
            "headline": None if self.headline is None else self.headline.to_json(),
        }


SIDE_REQUESTS = "side requests"
"""The session id of ``StatsReport.side``: the gateway's conversations whose requests carried
no tool result (``SessionMeta.side``), summed."""


@dataclass(frozen=True)
class StatsReport:
    """Per-session statistics and the aggregate over them (``overall``: every session,
    ``side`` included). ``side``: the host's side requests through the gateway (titles,
    summaries, quota checks: conversations none of whose requests carried a tool result), summed
    into one row rather than a row each; None when there were none."""

    sessions: tuple[SessionStats, ...]
    overall: SessionStats
    side: SessionStats | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "overall": self.overall.to_json(),
            "sessions": [s.to_json() for s in self.sessions],
            "side_requests": None if self.side is None else self.side.to_json(),
        }


def side_label(side: SessionStats) -> str:
    """How a report names ``StatsReport.side``."""
    requests = (
        side.headline.tally.filecache.requests if side.headline and side.headline.tally else 0
    )
    many = "s" if side.sessions != 1 else ""
    return (
        f"side requests: {side.sessions:,} conversation{many} without a tool result "
        f"({requests:,} requests: titles, summaries, quota checks)"
    )


def _iso(ts: float) -> str | None:
    if not ts:
        return None
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat(timespec="seconds")


def _fold(
    session_id: str,
    events: Sequence[Event],
    projections: Sequence[Projection],
    times: tuple[float, float],
    sessions: int,
    top: int,
    headline: Headline | None = None,
) -> SessionStats:
    withdrawn = {
        call for e in events if e.tool == Tool.FORGET and e.kind == Kind.WITHDRAWN
        for call in e.deps
    }  # fmt: skip
    reads = [_as_sent(e) if e.call_id in withdrawn else e for e in events if e.tool == Tool.READ]
    kinds = Counter(e.kind for e in reads)
    saved: Counter[str] = Counter({name: 0 for name in ("FileRef", "diff")})
    by_path: dict[str, list[int]] = {}
    series_plain: list[int] = []
    series_fc: list[int] = []
    baselines = [read_baseline(e.kind, e.tokens, e.tokens_full) for e in reads]
    for e, base in zip(reads, baselines, strict=True):
        name = KIND_NAMES.get(e.kind)
        if name is not None:
            saved[name] += base - e.tokens
        acc = by_path.setdefault(e.path, [0, 0, 0])
        acc[0] += 1
        acc[1] += e.tokens
        acc[2] += base
        series_plain.append((series_plain[-1] if series_plain else 0) + base)
        series_fc.append((series_fc[-1] if series_fc else 0) + e.tokens)
    outlines = [e for e in reads if e.kind == Kind.OUTLINE]
    before = sum(p.tokens_before for p in projections)
    after = sum(p.tokens_after for p in projections)
    saved["pruning"] = before - after
    files = sorted(
        (FileSaving(path, n, t, full) for path, (n, t, full) in by_path.items()),
        key=lambda f: (-f.saved, f.path),
    )
    return SessionStats(
        session_id=session_id,
        sessions=sessions,
        created=times[0],
        last_used=times[1],
        reads=dict(kinds),
        writes=dict(Counter(e.tool for e in events if e.tool in CHANGES)),
        tokens=sum(e.tokens for e in reads),
        tokens_full=sum(baselines),
        saved_by_kind=dict(saved),
        pruned=dict(Counter(p.tier for p in projections)),
        pruned_before=before,
        pruned_after=after,
        top_files=tuple(f for f in files[:top] if f.saved > 0),
        series={"plain": tuple(series_plain), "filecache": tuple(series_fc)},
        outlines=len(outlines),
        outline_tokens=sum(e.tokens for e in outlines),
        outlined_whole=sum(e.tokens_full for e in outlines),
        headline=headline,
    )


def _as_sent(read: Event) -> Event:
    """A read whose answer the caller withdrew (``Session.withdraw``: a host hook left the
    host's own output): what the model got, the plain read (its baseline, no saving), counted
    as ``withdrawn`` among the reads."""
    if read.kind not in KIND_NAMES:
        return read
    return dataclasses.replace(read, kind=Kind.WITHDRAWN, tokens=read.tokens_full)


def collect_stats(
    store: Store,
    session_id: str | None = None,
    *,
    top: int = 10,
    model: str | None = None,
    also: Sequence[Store] = (),
) -> StatsReport:
    """Statistics of every session in ``store`` and the stores ``also`` (the gateway's), or of
    ``session_id`` only, each with its headline (``filecache.figures``). The cost is at
    ``model``'s prices; with None, a session whose requests named a model the price table has
    (a gateway conversation, ``SessionMeta``) is priced at that model's, any other at
    ``prices_for()``'s.

    Raises:
        RequestError: ``session_id`` is not in the stores, or ``model`` has no prices.
    """
    prices = prices_for(model)
    found = [(each, info) for each in (store, *also) for info in each.sessions()]
    if session_id is not None:
        found = [(each, s) for each, s in found if s.session_id == session_id]
        if not found:
            raise RequestError(f"no session {session_id!r}; 'filecache sessions list' shows them")
    infos = [info for _, info in found]
    per: list[SessionStats] = []
    side: list[SessionStats] = []
    all_events: list[Event] = []
    all_projections: list[Projection] = []
    for each, info in found:
        events = each.events(info.session_id)
        projections = each.projection_records(info.session_id)
        all_events += events
        all_projections += projections
        tally = load_request_tally(each, info.session_id)
        meta = load_session_meta(each, info.session_id)
        own = model_prices(meta.model) if meta is not None and model is None else None
        headline = headline_of(info.session_id, events, tally, own or prices)
        times = (info.created, info.last_used)
        folded = dataclasses.replace(
            _fold(info.session_id, events, projections, times, 1, top, headline), meta=meta
        )
        aside = session_id is None and meta is not None and meta.side and not events
        (side if aside else per).append(folded)
    times = (
        min((s.created for s in infos), default=0.0),
        max((s.last_used for s in infos), default=0.0),
    )
    headlines = [s.headline for s in (*per, *side) if s.headline is not None]
    overall = _fold(
        "overall", all_events, all_projections, times, len(infos), top,
        sum_headlines(headlines, prices=prices),
    )  # fmt: skip
    return StatsReport(tuple(per), overall, _sum_side(side, prices))


def _sum_side(side: Sequence[SessionStats], prices: Prices) -> SessionStats | None:
    """The side requests' conversations as one row (``StatsReport.side``)."""
    if not side:
        return None
    headlines = [s.headline for s in side if s.headline is not None]
    times = (min(s.created for s in side), max(s.last_used for s in side))
    summed = sum_headlines(headlines, SIDE_REQUESTS, prices=prices)
    return _fold(SIDE_REQUESTS, [], [], times, len(side), 0, summed)


def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _cell(value: object) -> str:
    """A table cell on one line: control characters (a session id or path a store holds from
    before they were refused) are escaped, and ``|`` is quoted."""
    text = str(value)
    if text.isprintable() and "|" not in text:
        return text
    return "".join(
        "\\|" if ch == "|" else ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text
    )


def _reads(reads: Mapping[str, int]) -> str:
    order = ("full", "partial", "unchanged", "diff", "outline", "symbol")
    return ", ".join(f"{k} {reads[k]}" for k in sorted(reads, key=lambda k: (k not in order, k)))


_STATS_HEAD = ("session", "reads", "tokens served", "plain reads", "saved", "saved %",
               "prompt saved", "billed saved", "cost saved", "pruned", "reclaimed")  # fmt: skip


def _ordered(report: StatsReport) -> list[SessionStats]:
    """The overall row first, then the sessions, those that cost more than their baseline
    first (one session: its row only)."""
    if len(report.sessions) == 1 and report.side is None:
        one = report.sessions[0]
        return [dataclasses.replace(report.overall, session_id=one.session_id, meta=one.meta)]
    side = [] if report.side is None else [report.side]
    return [report.overall, *sorted(report.sessions, key=lambda s: not _regressed(s)), *side]


def _label(s: SessionStats) -> str:
    if s.session_id == "overall":
        return f"**{s.session_id}**"
    return side_label(s) if s.session_id == SIDE_REQUESTS else s.label


def _cells(s: SessionStats) -> list[str]:
    h = s.headline
    prompt, billed, cost = (None, None, None) if h is None else (h.prompt, h.billed, h.cost)
    return [
        f"{sum(s.reads.values()):,}", f"{s.tokens:,}", f"{s.tokens_full:,}", f"{s.saved:,}",
        f"{s.saved_pct:.1f}%",
        "n/a" if prompt is None else f"{prompt.saved_pct:.1f}%",
        "n/a" if billed is None else f"{billed.saved_pct:.1f}%",
        "n/a" if cost is None else f"${cost.saved:,.4f}",
        f"{sum(s.pruned.values()):,}", f"{s.reclaimed:,}",
    ]  # fmt: skip


def _regressed(s: SessionStats) -> bool:
    """Costs more than its baseline: in prompt tokens, billed, or per answer."""
    h = s.headline
    if s.saved < 0:
        return True
    return h is not None and any(p is not None and p.saved < 0 for p in (h.prompt, h.billed))


def stats_legend(prices_line: str) -> str:
    """What the columns of ``format_stats`` mean."""
    return (
        f"columns: saved, saved %: read answers against {BASELINE} (per answer). prompt saved, "
        f"billed saved, cost saved: the session's requests against {REQUESTS_BASELINE} "
        "(pruning included; billed: "
        f"{BILLED_BASIS}; cost: {prices_line}); n/a: no request of the session was seen "
        "(filecache sees requests where it prunes them: 'filecache prune --session', replay). "
        "pruned, reclaimed: results pruning changed, and the tokens they no longer take.\n"
    )


def _outlines_note(o: SessionStats) -> str:
    if not o.outlines:
        return ""
    return (
        f"outlines: {o.outlines:,} answers showed {o.outline_tokens:,} tokens in place of "
        f"whole files of {o.outlined_whole:,} (counted as shown, not as saved)\n"
    )


def format_stats(report: StatsReport) -> str:
    """Markdown: the overall row, then one row per session; saved by kind and top files."""
    lines = [_row(_STATS_HEAD), _row(["---", *("---:" for _ in _STATS_HEAD[1:])])]
    for s in _ordered(report):
        mark = " (costs more)" if _regressed(s) else ""
        lines.append(_row([_label(s) + mark, *_cells(s)]))
    o = report.overall
    out = "" if o.headline is None else o.headline.sentence() + "\n\n"
    out += "\n".join(lines) + "\n\n"
    if o.headline is not None:
        out += stats_legend(o.headline.prices.describe())
    out += f"baseline: {BASELINE}\n"
    out += f"reads by kind: {_reads(o.reads) or 'none'}\n"
    out += "saved by kind: " + ", ".join(f"{k} {v:,}" for k, v in o.saved_by_kind.items()) + "\n"
    out += _outlines_note(o)
    if o.pruned:
        out += (
            f"pruning: {sum(o.pruned.values()):,} results ("
            + ", ".join(f"{t} {n}" for t, n in sorted(o.pruned.items()))
            + f"), {o.pruned_before:,} tokens -> {o.pruned_after:,}\n"
        )
    if o.top_files:
        out += "\n" + _row(["top files by saving", "reads", "served", "plain", "saved"]) + "\n"
        out += _row(["---", "---:", "---:", "---:", "---:"]) + "\n"
        for f in o.top_files:
            out += _row([f.path, f.reads, f"{f.tokens:,}", f"{f.tokens_full:,}", f"{f.saved:,}"])
            out += "\n"
    return out


def stats_html(report: StatsReport) -> str:
    """One page: the saving in one sentence, the table of ``format_stats`` (overall first, then
    the sessions, those that cost more first and marked, sortable by any column), and per
    session its cumulative read tokens."""
    o = report.overall
    ordered = _ordered(report)
    rows = [[s.label if s.session_id == "overall" else _label(s), *_cells(s)] for s in ordered]
    pinned, sessions = (rows[:1], rows[1:]) if len(rows) > 1 else ([], rows)
    worse = [_regressed(s) for s in (ordered[1:] if len(rows) > 1 else ordered)]
    legend = "" if o.headline is None else stats_legend(o.headline.prices.describe())
    body = [
        sortable_table(_STATS_HEAD, sessions, pinned=pinned, worse=worse),
        f'<p class="note">{escape(legend.strip())}</p>',
        f'<p class="note">Baseline: {escape(BASELINE)}. {escape(_outlines_note(o).strip())}</p>',
        "<h2>Saved by kind</h2>",
        sortable_table(
            ["kind", "tokens saved"], [[k, f"{v:,}"] for k, v in o.saved_by_kind.items()]
        ),
        "<h2>Top files by saving</h2>",
        sortable_table(
            ["path", "reads", "served", "plain", "saved"],
            [
                [f.path, f.reads, f"{f.tokens:,}", f"{f.tokens_full:,}", f"{f.saved:,}"]
                for f in o.top_files
            ],
        ),  # fmt: skip
    ]
    for s in report.sessions:
        if not s.series.get("plain"):
            continue
        body.append(f"<h2>{escape(s.label)}</h2>")
        body.append(
            line_chart(
                dict(s.series), title=f"cumulative read tokens: {s.session_id}", x_label="read",
                y_label="tokens",
            )
        )  # fmt: skip
    lead = "No session in the store yet." if o.headline is None or not report.sessions else (
        o.headline.sentence()
    )  # fmt: skip
    return html_page("filecache stats", body, lead=lead)


def session_rows(store: Store) -> list[dict[str, Any]]:
    """Every session in the store, most recently used first, with its tokens and savings
    (against ``BASELINE``, as ``collect_stats`` counts them)."""
    rows = []
    for s in store.sessions():
        pruned = store.projection_records(s.session_id)
        outlined = [e for e in store.events(s.session_id) if e.kind == Kind.OUTLINE]
        plain = s.tokens_full - sum(e.tokens_full - e.tokens for e in outlined)
        host = host_of(s.session_id)
        rows.append(
            {
                "session_id": s.session_id,
                "host": None if host is None else host[0],
                "created": _iso(s.created),
                "last_used": _iso(s.last_used),
                "events": s.events,
                "tokens": s.tokens,
                "tokens_full": plain,
                "saved": plain - s.tokens,
                "saved_pct": round(100 * (plain - s.tokens) / plain, 2) if plain else 0.0,
                "pruned": len(pruned),
                "reclaimed": sum(p.tokens_before - p.tokens_after for p in pruned),
            }
        )
    return rows


def format_sessions(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of ``session_rows``."""
    if not rows:
        return "no sessions in the store\n"
    head = ["session", "last used", "events", "tokens", "plain", "saved", "pruned"]
    lines = [_row(head), _row(["---", "---", *("---:" for _ in head[2:])])]
    for r in rows:
        lines.append(
            _row([
                session_label(r["session_id"]), r["last_used"], f"{r['events']:,}",
                f"{r['tokens']:,}",
                f"{r['tokens_full']:,}", f"{r['saved']:,} ({r['saved_pct']:.1f}%)",
                f"{r['pruned']:,}",
            ])
        )  # fmt: skip
    return "\n".join(lines) + "\n"


def format_events(events: Sequence[Event]) -> str:
    """Markdown table of a session's ledger."""
    head = ["seq", "call", "tool", "path", "lines", "kind", "tokens", "plain"]
    lines = [_row(head), _row(["---:", "---", "---", "---", "---", "---", "---:", "---:"])]
    for e in events:
        span = f"{e.start}-{e.end}" if e.start is not None else ""
        lines.append(
            _row([e.seq, e.call_id, e.tool, e.path, span, e.kind, e.tokens, e.tokens_full])
        )
    return "\n".join(lines) + "\n"
