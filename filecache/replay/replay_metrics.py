"""What a replay measures: prompt tokens, billed equivalents and the counters, for three runs.

Pure: numbers in, frozen records out. ``replay.py`` produces the inputs; ``replay_check.py``
the correctness counters and recall.

The three runs of one session:

- ``recorded``: the transcript as recorded, unchanged (what the agent actually paid);
- ``plain``: the trace's file tools re-executed plain (same format as filecache's content, no
  cache, no pruning);
- ``filecache``: the file tools through one ``Session``, pruned before every request when a
  window is given.

Invariants:
- A request holds every message before an assistant message; its size is the sum of its
  messages' tokens plus ``MESSAGE_OVERHEAD`` each (every distinct text is counted once).
- Billed equivalents: a request's longest message prefix equal to the previous request's is a
  cache read (``CACHE_READ``), the rest a cache write (``CACHE_WRITE``); the first request is
  all writes.
- The headline saving is the smaller of the savings against ``plain`` and ``recorded``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from filecache.figures import (
    CACHE_READ,
    CACHE_WRITE,
    MESSAGE_OVERHEAD,
    Headline,
    cached_prefix,
    sum_headlines,
)
from filecache.replay.policy_runs import Grounding, PolicyRun, combine_runs

__all__ = [
    "CACHE_READ", "CACHE_WRITE", "MESSAGE_OVERHEAD", "READ_KINDS", "RUNS", "CostMeter", "Measure",
    "PromptCost", "PruneSummary", "SessionReplay", "combine", "grounding_cell", "message_text",
    "prompt_cost",
]  # fmt: skip

READ_KINDS = ("full", "partial", "unchanged", "diff", "outline", "error")
RUNS = ("recorded", "plain", "filecache")


def _pct(base: float, value: float) -> float:
    return 100.0 * (base - value) / base if base else 0.0


@dataclass(frozen=True)
class Measure:
    """One measure in the three runs; savings are percent of the baseline (negative: cost)."""

    recorded: float
    plain: float
    filecache: float

    @property
    def saved_vs_plain_pct(self) -> float:
        return _pct(self.plain, self.filecache)

    @property
    def saved_vs_recorded_pct(self) -> float:
        return _pct(self.recorded, self.filecache)

    @property
    def saved_pct(self) -> float:
        """The headline: the smaller of the two savings."""
        return min(self.saved_vs_plain_pct, self.saved_vs_recorded_pct)

    def __add__(self, other: Measure) -> Measure:
        return Measure(
            self.recorded + other.recorded,
            self.plain + other.plain,
            self.filecache + other.filecache,
        )

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> float | int:
            return x if isinstance(x, int) else round(x, 1)

        return {
            "recorded": num(self.recorded),
            "plain": num(self.plain),
            "filecache": num(self.filecache),
            "saved_vs_recorded_pct": round(self.saved_vs_recorded_pct, 2),
            "saved_vs_plain_pct": round(self.saved_vs_plain_pct, 2),
            "saved_pct": round(self.saved_pct, 2),
        }


ZERO = Measure(0, 0, 0)


@dataclass(frozen=True)
class PromptCost:
    """The prompt side of a list of requests."""

    requests: int
    tokens: int
    peak: int
    final: int
    billed: float
    sizes: tuple[int, ...] = ()
    cached: int = 0  # of ``tokens``, those read from the prompt cache (the rest: written)
    bills: tuple[float, ...] = ()  # each request's billed equivalents


class CostMeter:
    """Adds up requests one at a time (see ``prompt_cost``); keeps only the previous request."""

    def __init__(self, cache_read: float = CACHE_READ, cache_write: float = CACHE_WRITE) -> None:
        self.cache_read = cache_read
        self.cache_write = cache_write
        self.billed = 0.0
        self.cached = 0
        self.sizes: list[int] = []
        self.bills: list[float] = []
        self._previous: Sequence[tuple[object, int]] = ()

    def add(self, request: Sequence[tuple[object, int]]) -> int:
        """Bill one request, a list of ``(message key, tokens)``; returns its size."""
        size = sum(tokens for _, tokens in request)
        cached = cached_prefix(request, [key for key, _ in self._previous])
        self.cached += cached
        bill = cached * self.cache_read + (size - cached) * self.cache_write
        self.billed += bill
        self.bills.append(bill)
        self.sizes.append(size)
        self._previous = request
        return size

    def cost(self) -> PromptCost:
        sizes = self.sizes
        return PromptCost(
            len(sizes), sum(sizes), max(sizes, default=0), sizes[-1] if sizes else 0,
            self.billed, tuple(sizes), self.cached, tuple(self.bills),
        )  # fmt: skip


def prompt_cost(
    requests: Sequence[Sequence[tuple[object, int]]],
    *,
    cache_read: float = CACHE_READ,
    cache_write: float = CACHE_WRITE,
) -> PromptCost:
    """Tokens and billed equivalents of ``requests``, each a list of ``(message key, tokens)``.

    A request's longest prefix of messages equal (by key) to the previous request's is billed at
    ``cache_read``, the rest at ``cache_write``; the first request is all writes.
    """
    meter = CostMeter(cache_read, cache_write)
    for request in requests:
        meter.add(request)
    return meter.cost()


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a chat message that its tokens are counted on: content plus tool calls."""
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    parts = [content if isinstance(content, str) else ""]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.extend((str(fn.get("name", "")), str(fn.get("arguments", ""))))
    return "\n".join(p for p in parts if p)


@dataclass(frozen=True)
class PruneSummary:
    """What pruning did in the filecache run.

    Attributes:
        window: the context window pruned for (None: pruning off).
        cache_aware: whether the cost gate was on.
        passes: requests at which a pass changed something new.
        results: tool results pruned by the end, by final tier (``outline``, ``truncate``,
            ``clear``).
        reclaimed_final: tokens the pruned results no longer take in the last request.
        dropped_by_gate: actions the cost gate declined (summed over passes).
        inputs: writes and edits whose input (the payload in the model's own call) was
            cleared by the end (``input_pruning``).
    """

    window: int | None
    cache_aware: bool
    passes: int = 0
    results: Mapping[str, int] = field(default_factory=dict)
    reclaimed_final: int = 0
    dropped_by_gate: int = 0
    inputs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "cache_aware": self.cache_aware,
            "passes": self.passes,
            "results": dict(self.results),
            "reclaimed_final": self.reclaimed_final,
            "dropped_by_gate": self.dropped_by_gate,
            "inputs": self.inputs,
        }


@dataclass(frozen=True)
class SessionReplay:
    """What replaying one session (or, from ``combine``, several) measured.

    Attributes:
        name: the session directory's name (``"total"`` for a combination).
        source: the trace's ``source``.
        tokenizer: the encoding counted with.
        sessions: sessions combined (1 for one session).
        messages: messages in the transcript.
        requests: requests replayed (one before each assistant message).
        prompt_tokens: cumulative prompt tokens over all requests.
        billed: billed equivalents under prompt caching.
        peak_request / final_request: the largest and the last request's prompt tokens (in a
            combination: the largest of any session, and the sum of the last ones).
        tool_output_tokens: tokens of every tool output as first answered (before pruning).
        file_tool_tokens: the same for the file tools only.
        reads: filecache's reads by kind (``error`` for failed reads).
        file_calls: file tool calls by tool.
        pruning: what pruning did.
        stale_views: answers from which the model's reconstructed view differs from disk.
        dangling_refs: FileRefs/diffs whose base was missing or pruned in a request as sent.
        recall: mean over (request, file in use) pairs of the lines shown and still present.
        recall_pairs: the number of such pairs.
        recall_all: recall over every line: the mean over (request, file in use) pairs of the
            lines the recording showed (``replay_check.RecordedView``, current on disk) that
            the request as sent holds; lines only outlined count as hidden.
        recall_all_pairs: the number of such pairs (those where the recording showed lines).
        lines_in_use: summed over those pairs: the files' lines, the lines the recording
            showed, the lines the request as sent holds of them.
        problems: one line per stale view or dangling ref.
        files_identical: the plain and filecache copies matched after every write and at the end.
        mismatches: what differed between the copies.
        skipped: file tool calls the trace marks unknown (``trace_format``), kept as recorded in
            every run and not executed: call id -> why.
        series: prompt tokens of every request, per run (``recorded``/``plain``/``filecache``).
        calls: every file tool call (``call_id``, ``tool``, ``path``, ``kind``, tokens, error).
        policies: other tools' policies run beside filecache (``replay_peers``), by name.
        ledger_reads: (tokens served, baseline) of the filecache run's read answers as its
            ledger records them, counted as ``filecache stats`` counts them
            (``stats.read_baseline``): what ``stats`` reports on a store this replay wrote.
        capped: read answers larger than the recorded ones, sent as recorded instead
            (``replay_session(cap=True)``).
        cached: per run, the prompt tokens read from the prompt cache (the rest were written).
        headline: the figures every report leads with (``filecache.figures``), computed
            from the filecache run's store as ``filecache stats`` computes them: its requests
            against the plain run's, and its read answers.
        grounding: per run (``recorded``, ``filecache``), its edits' grounding
            (``replay_grounding``): the share of edits whose old text the request the model
            answered showed, and the re-reads the edits lost against the recording would need.
    """

    name: str
    source: str
    tokenizer: str
    sessions: int
    messages: int
    requests: int
    prompt_tokens: Measure
    billed: Measure
    peak_request: Measure
    final_request: Measure
    tool_output_tokens: Measure
    file_tool_tokens: Measure
    reads: Mapping[str, int]
    file_calls: Mapping[str, int]
    pruning: PruneSummary
    stale_views: int
    dangling_refs: int
    recall: float
    recall_pairs: int
    recall_all: float = 1.0
    recall_all_pairs: int = 0
    lines_in_use: tuple[int, int, int] = (0, 0, 0)
    problems: tuple[str, ...] = ()
    files_identical: bool = True
    mismatches: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)
    series: Mapping[str, tuple[int, ...]] = field(default_factory=dict, repr=False)
    calls: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    plain_messages: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)
    filecache_messages: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)
    policies: Mapping[str, PolicyRun] = field(default_factory=dict, repr=False)
    ledger_reads: tuple[int, int] = (0, 0)
    capped: int = 0
    grounding: Mapping[str, Grounding] = field(default_factory=dict)
    headline: Headline | None = field(default=None, compare=False)
    cached: Mapping[str, int] = field(default_factory=dict)
    billed_series: Mapping[str, tuple[float, ...]] = field(default_factory=dict, repr=False)

    @property
    def net_prompt_tokens(self) -> Measure:
        """Prompt tokens with the filecache run's lost edits charged their re-reads."""
        extra = self.grounding.get("filecache", Grounding()).reread_tokens
        return self.prompt_tokens + Measure(0, 0, extra)

    @property
    def net_billed(self) -> Measure:
        extra = self.grounding.get("filecache", Grounding()).reread_billed
        return self.billed + Measure(0, 0, extra)

    @property
    def ledger_saved_pct(self) -> float:
        """Read answers saved against ``stats.BASELINE``, as ``filecache stats`` reports."""
        served, baseline = self.ledger_reads
        return _pct(baseline, served)

    @property
    def saved_pct(self) -> float:
        """Headline: cumulative prompt tokens saved, the smaller of the two baselines."""
        return self.prompt_tokens.saved_pct

    @property
    def billed_saved_pct(self) -> float:
        return self.billed.saved_pct

    def to_json(self, *, detail: bool = True) -> dict[str, Any]:
        """Every measure as JSON; ``detail`` adds ``series`` and ``calls``."""
        out: dict[str, Any] = {
            "headline": None if self.headline is None else self.headline.to_json(),
            "name": self.name,
            "source": self.source,
            "tokenizer": self.tokenizer,
            "sessions": self.sessions,
            "messages": self.messages,
            "requests": self.requests,
            "saved_pct": round(self.saved_pct, 2),
            "billed_saved_pct": round(self.billed_saved_pct, 2),
            "stale_views": self.stale_views,
            "dangling_refs": self.dangling_refs,
            "recall": round(self.recall, 4),
            "recall_pairs": self.recall_pairs,
            "recall_all": round(self.recall_all, 4),
            "recall_all_pairs": self.recall_all_pairs,
            "capped": self.capped,
            "lines_in_use": dict(zip(("file", "recorded", "held"), self.lines_in_use, strict=True)),
        }
        for name in (
            "prompt_tokens", "billed", "peak_request", "final_request", "tool_output_tokens",
            "file_tool_tokens",
        ):  # fmt: skip
            out[name] = getattr(self, name).to_json()
        out["reads"] = dict(self.reads)
        out["file_calls"] = dict(self.file_calls)
        out["pruning"] = self.pruning.to_json()
        out["problems"] = list(self.problems)
        out["files_identical"] = self.files_identical
        out["mismatches"] = list(self.mismatches)
        out["skipped"] = dict(self.skipped)
        served, baseline = self.ledger_reads
        out["ledger_reads"] = {
            "served": served, "baseline": baseline,
            "saved_pct": round(self.ledger_saved_pct, 2),
        }  # fmt: skip
        out["grounding"] = {run: g.to_json() for run, g in self.grounding.items()}
        out["net_prompt_tokens"] = self.net_prompt_tokens.to_json()
        out["net_billed"] = self.net_billed.to_json()
        if self.policies:
            out["policies"] = {name: run.to_json() for name, run in self.policies.items()}
        if detail:
            out["series"] = {run: list(self.series.get(run, ())) for run in RUNS}
            out["calls"] = [dict(c) for c in self.calls]
        return out


def grounding_cell(g: Grounding) -> str:
    """``34/35 (1 lost)``: edits grounded, of those made; how many the recording showed."""
    if not g.edits:
        return "no edits"
    lost = f" ({g.lost:,} lost)" if g.lost else ""
    return f"{g.grounded:,}/{g.edits:,}{lost}"


def combine(replays: Sequence[SessionReplay], name: str = "total") -> SessionReplay:
    """Totals over several replays: sums, the largest peak, recall weighted by its pairs."""

    def total(attr: str) -> Measure:
        out = ZERO
        for r in replays:
            out = out + getattr(r, attr)
        return out

    def largest(attr: str) -> Measure:
        values = [getattr(r, attr) for r in replays]
        return Measure(*(max((getattr(v, run) for v in values), default=0) for run in RUNS))

    reads: Counter[str] = Counter({kind: 0 for kind in READ_KINDS})
    file_calls: Counter[str] = Counter()
    tiers: Counter[str] = Counter()
    for r in replays:
        reads.update(r.reads)
        file_calls.update(r.file_calls)
        tiers.update(r.pruning.results)
    pairs = sum(r.recall_pairs for r in replays)
    recall = sum(r.recall * r.recall_pairs for r in replays) / pairs if pairs else 1.0
    all_pairs = sum(r.recall_all_pairs for r in replays)
    recall_all = (
        sum(r.recall_all * r.recall_all_pairs for r in replays) / all_pairs if all_pairs else 1.0
    )
    first = replays[0].pruning if replays else PruneSummary(None, True)
    return SessionReplay(
        name=name,
        source="",
        tokenizer=",".join(sorted({r.tokenizer for r in replays})),
        sessions=sum(r.sessions for r in replays),
        messages=sum(r.messages for r in replays),
        requests=sum(r.requests for r in replays),
        prompt_tokens=total("prompt_tokens"),
        billed=total("billed"),
        peak_request=largest("peak_request"),
        final_request=total("final_request"),
        tool_output_tokens=total("tool_output_tokens"),
        file_tool_tokens=total("file_tool_tokens"),
        reads=dict(reads),
        file_calls=dict(file_calls),
        pruning=PruneSummary(
            first.window,
            first.cache_aware,
            sum(r.pruning.passes for r in replays),
            dict(tiers),
            sum(r.pruning.reclaimed_final for r in replays),
            sum(r.pruning.dropped_by_gate for r in replays),
            sum(r.pruning.inputs for r in replays),
        ),
        stale_views=sum(r.stale_views for r in replays),
        dangling_refs=sum(r.dangling_refs for r in replays),
        recall=recall,
        recall_pairs=pairs,
        recall_all=recall_all,
        recall_all_pairs=all_pairs,
        lines_in_use=(
            sum(r.lines_in_use[0] for r in replays),
            sum(r.lines_in_use[1] for r in replays),
            sum(r.lines_in_use[2] for r in replays),
        ),  # fmt: skip
        problems=tuple(f"{r.name}: {p}" for r in replays for p in r.problems),
        files_identical=all(r.files_identical for r in replays),
        mismatches=tuple(f"{r.name}: {m}" for r in replays for m in r.mismatches),
        skipped={f"{r.name}: {k}": v for r in replays for k, v in r.skipped.items()},
        policies=combine_runs([r.policies for r in replays]),
        ledger_reads=(
            sum(r.ledger_reads[0] for r in replays),
            sum(r.ledger_reads[1] for r in replays),
        ),
        capped=sum(r.capped for r in replays),
        cached={run: sum(r.cached.get(run, 0) for r in replays) for run in RUNS},
        headline=(
            sum_headlines([r.headline for r in replays if r.headline is not None], name)
            if any(r.headline is not None for r in replays)
            else None
        ),
        grounding={
            run: sum(
                (r.grounding[run].named(r.name) for r in replays if run in r.grounding), Grounding()
            )
            for run in dict.fromkeys(run for r in replays for run in r.grounding)
        },  # fmt: skip
    )
