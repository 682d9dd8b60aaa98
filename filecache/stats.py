"""``filecache stats`` and ``filecache sessions``: what the store's ledger says filecache saved.

Pure over what the store returns: ``collect_stats`` reads events and projections through the
``Store`` protocol and folds them into frozen records; the ``format_*`` functions and
``stats_html`` render them.

Invariants:
- "Saved" by a read is ``tokens_full - tokens``: what the plain read (same range, same format)
  would have cost minus what filecache answered, per answer (not per request it stays in).
- "Pruning reclaimed" is, per pruned result, the tokens of the original minus the tokens of
  its current projection: what every later request no longer carries.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from filecache.errors import RequestError
from filecache.replay.report_html import html_page, html_table, line_chart
from filecache.store.store import Event, Projection, Store

__all__ = [
    "FileSaving", "SessionStats", "StatsReport", "collect_stats", "format_events",
    "format_sessions", "format_stats", "session_rows", "stats_html",
]  # fmt: skip

KIND_NAMES = {"unchanged": "FileRef", "diff": "diff", "outline": "outline", "symbol": "symbol"}


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


@dataclass(frozen=True)
class SessionStats:
    """One session's (or, as ``overall``, every selected session's) statistics.

    Attributes:
        session_id: the id (``"overall"`` for the aggregate).
        sessions: sessions aggregated (1 for one session).
        created / last_used: UNIX times (the earliest / latest for the aggregate).
        reads: read answers by kind (``full``, ``partial``, ``unchanged``, ``diff``, ...).
        writes: writes, edits and changes seen outside, by tool.
        tokens / tokens_full: tokens the reads answered, and what plain reads would have cost.
        saved_by_kind: tokens saved per answer kind (``FileRef``, ``diff``, ``outline``,
            ``symbol``) and ``pruning`` (reclaimed).
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
        return {
            "session_id": self.session_id,
            "sessions": self.sessions,
            "created": _iso(self.created),
            "last_used": _iso(self.last_used),
            "reads": dict(self.reads),
            "writes": dict(self.writes),
            "tokens": self.tokens,
            "tokens_full": self.tokens_full,
            "saved": self.saved,
            "saved_pct": round(self.saved_pct, 2),
            "saved_by_kind": dict(self.saved_by_kind),
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
        }


@dataclass(frozen=True)
class StatsReport:
    """Per-session statistics and the aggregate over them."""

    sessions: tuple[SessionStats, ...]
    overall: SessionStats

    def to_json(self) -> dict[str, Any]:
        return {
            "overall": self.overall.to_json(),
            "sessions": [s.to_json() for s in self.sessions],
        }


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
) -> SessionStats:
    reads = [e for e in events if e.tool == "read"]
    kinds = Counter(e.kind for e in reads)
    saved: Counter[str] = Counter({name: 0 for name in ("FileRef", "diff", "outline")})
    by_path: dict[str, list[int]] = {}
    series_plain: list[int] = []
    series_fc: list[int] = []
    for e in reads:
        name = KIND_NAMES.get(e.kind)
        if name is not None:
            saved[name] += e.tokens_full - e.tokens
        acc = by_path.setdefault(e.path, [0, 0, 0])
        acc[0] += 1
        acc[1] += e.tokens
        acc[2] += e.tokens_full
        series_plain.append((series_plain[-1] if series_plain else 0) + e.tokens_full)
        series_fc.append((series_fc[-1] if series_fc else 0) + e.tokens)
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
        writes=dict(Counter(e.tool for e in events if e.tool in ("write", "edit", "change"))),
        tokens=sum(e.tokens for e in reads),
        tokens_full=sum(e.tokens_full for e in reads),
        saved_by_kind=dict(saved),
        pruned=dict(Counter(p.tier for p in projections)),
        pruned_before=before,
        pruned_after=after,
        top_files=tuple(f for f in files[:top] if f.saved > 0),
        series={"plain": tuple(series_plain), "filecache": tuple(series_fc)},
    )


def collect_stats(store: Store, session_id: str | None = None, *, top: int = 10) -> StatsReport:
    """Statistics of every session in ``store`` (or of ``session_id`` only).

    Raises:
        RequestError: ``session_id`` is not in the store.
    """
    infos = store.sessions()
    if session_id is not None:
        infos = [s for s in infos if s.session_id == session_id]
        if not infos:
            raise RequestError(f"no session {session_id!r}; 'filecache sessions list' shows them")
    per: list[SessionStats] = []
    all_events: list[Event] = []
    all_projections: list[Projection] = []
    for info in infos:
        events = store.events(info.session_id)
        projections = store.projection_records(info.session_id)
        all_events += events
        all_projections += projections
        per.append(
            _fold(info.session_id, events, projections, (info.created, info.last_used), 1, top)
        )
    times = (
        min((s.created for s in infos), default=0.0),
        max((s.last_used for s in infos), default=0.0),
    )
    overall = _fold("overall", all_events, all_projections, times, len(infos), top)
    return StatsReport(tuple(per), overall)


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


_STATS_HEAD = ("session", "reads", "tokens served", "plain reads", "saved", "saved %", "pruned",
               "reclaimed")  # fmt: skip


def format_stats(report: StatsReport) -> str:
    """Markdown: one row per session and the overall row, then saved by kind and top files."""
    lines = [_row(_STATS_HEAD), _row(["---", *("---:" for _ in _STATS_HEAD[1:])])]
    rows = [*report.sessions, report.overall] if len(report.sessions) != 1 else [report.overall]
    for s in rows:
        label = f"**{s.session_id}**" if s is report.overall else s.session_id
        if s is report.overall and len(report.sessions) == 1:
            label = report.sessions[0].session_id
        lines.append(
            _row([
                label, f"{sum(s.reads.values()):,}", f"{s.tokens:,}", f"{s.tokens_full:,}",
                f"{s.saved:,}", f"{s.saved_pct:.1f}%", f"{sum(s.pruned.values()):,}",
                f"{s.reclaimed:,}",
            ])
        )  # fmt: skip
    o = report.overall
    out = "\n".join(lines) + "\n\n"
    out += f"reads by kind: {_reads(o.reads) or 'none'}\n"
    out += "saved by kind: " + ", ".join(f"{k} {v:,}" for k, v in o.saved_by_kind.items()) + "\n"
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
    """One page: the tables of ``format_stats`` and, per session, its cumulative read tokens."""
    o = report.overall
    rows = [
        [s.session_id, sum(s.reads.values()), f"{s.tokens:,}", f"{s.tokens_full:,}",
         f"{s.saved:,}", f"{s.saved_pct:.1f}%", sum(s.pruned.values()), f"{s.reclaimed:,}"]
        for s in [*report.sessions, o]
    ]  # fmt: skip
    body = [
        html_table(_STATS_HEAD, rows),
        "<h2>Saved by kind</h2>",
        html_table(["kind", "tokens saved"], [[k, f"{v:,}"] for k, v in o.saved_by_kind.items()]),
        "<h2>Top files by saving</h2>",
        html_table(
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
        body.append(f"<h2>{escape(s.session_id)}</h2>")
        body.append(
            line_chart(
                dict(s.series), title=f"cumulative read tokens: {s.session_id}", x_label="read",
                y_label="tokens",
            )
        )  # fmt: skip
    return html_page("filecache stats", body)


def session_rows(store: Store) -> list[dict[str, Any]]:
    """Every session in the store, most recently used first, with its tokens and savings."""
    rows = []
    for s in store.sessions():
        pruned = store.projection_records(s.session_id)
        rows.append(
            {
                "session_id": s.session_id,
                "created": _iso(s.created),
                "last_used": _iso(s.last_used),
                "events": s.events,
                "tokens": s.tokens,
                "tokens_full": s.tokens_full,
                "saved": s.tokens_full - s.tokens,
                "saved_pct": round(100 * (s.tokens_full - s.tokens) / s.tokens_full, 2)
                if s.tokens_full
                else 0.0,
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
                r["session_id"], r["last_used"], f"{r['events']:,}", f"{r['tokens']:,}",
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
