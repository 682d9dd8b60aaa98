"""What one pruning policy's run of a replay measured (``replay --policy`` / ``--compare``).

Pure: numbers in, frozen records out. ``replay_peers.PeerRun`` produces them; ``combine_runs``
adds up several sessions' runs of the same policy.

Invariants:
- ``prompt_tokens`` and ``billed`` are measured as for the three runs of ``replay_metrics``
  (one request before each assistant message; the prefix shared with the previous request at
  the cache-read price, the rest at the cache-write price).
- ``dangling`` counts stubs and refs whose base result is missing or pruned in a request as
  sent; ``stale`` and ``recall`` come from the same model simulator as filecache's run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from filecache.figures import Prices, RunTally

__all__ = ["Grounding", "PolicyRun", "combine_runs"]


@dataclass(frozen=True)
class Grounding:
    """Edit grounding of one run of one session (or, added up, several).

    Attributes:
        edits: edits whose old text was in the file.
        grounded: those whose old text the request the model answered showed.
        lost: edits grounded in the recording but not in this run.
        reread_tokens: prompt tokens the re-reads of the lost edits add (net figures).
        reread_billed: their billed equivalents.
        ungrounded: the call ids of the edits not grounded (lost ones first marked ``lost:``).
    """

    edits: int = 0
    grounded: int = 0
    lost: int = 0
    reread_tokens: int = 0
    reread_billed: float = 0.0
    ungrounded: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        """Grounded edits over edits (1.0 without edits)."""
        return self.grounded / self.edits if self.edits else 1.0

    def __add__(self, other: Grounding) -> Grounding:
        return Grounding(
            self.edits + other.edits, self.grounded + other.grounded, self.lost + other.lost,
            self.reread_tokens + other.reread_tokens, self.reread_billed + other.reread_billed,
            self.ungrounded + other.ungrounded,
        )  # fmt: skip

    def named(self, prefix: str) -> Grounding:
        return dataclasses.replace(
            self, ungrounded=tuple(f"{prefix}: {u}" for u in self.ungrounded)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "edits": self.edits,
            "grounded": self.grounded,
            "share": round(self.share, 4),
            "lost": self.lost,
            "reread_tokens": self.reread_tokens,
            "reread_billed": round(self.reread_billed, 1),
            "ungrounded": list(self.ungrounded),
        }


@dataclass(frozen=True)
class PolicyRun:
    """One policy over one session (or, from ``combine_runs``, several).

    Attributes:
        name: the policy (``openclaw``, ``claude-code-dedup+opencode``, ...).
        requests: requests replayed.
        prompt_tokens: cumulative prompt tokens.
        billed: billed equivalents under prompt caching.
        peak: the largest request.
        passes: requests at which the policy changed a result it had not changed before.
        results: tool results the last request shows changed (cleared, trimmed or a stub).
        stale: answers whose lines the model cannot rebuild as they are on disk.
        dangling: stubs or refs whose base is missing or pruned in some request.
        recall: mean over (request, file in use) pairs of the lines shown and still present.
        recall_pairs: the number of such pairs.
        recall_all: recall over every line the recording showed (outlined lines hidden), the
            mean over its ``recall_all_pairs`` (``SessionReplay.recall_all``).
        problems: one line per stale view or dangling stub.
        series: prompt tokens of every request.
        grounding: its edits' grounding, and the re-reads its lost edits would need.
    """

    name: str
    requests: int
    prompt_tokens: int
    billed: float
    peak: int
    passes: int
    results: int
    stale: int
    dangling: int
    recall: float
    recall_pairs: int
    problems: tuple[str, ...] = ()
    series: tuple[int, ...] = field(default=(), repr=False)
    recall_all: float = 1.0
    recall_all_pairs: int = 0
    grounding: Grounding = field(default_factory=Grounding)
    cached: int = 0  # of ``prompt_tokens``, those read from the prompt cache
    billed_series: tuple[float, ...] = field(default=(), repr=False)  # per request

    def cost(self, prices: Prices) -> float:
        """USD of the prompt tokens at ``prices`` (``figures.RunTally.cost``)."""
        return RunTally(self.requests, self.prompt_tokens, self.cached).cost(prices)

    @property
    def net_prompt_tokens(self) -> int:
        """Prompt tokens with the lost edits' re-reads charged."""
        return self.prompt_tokens + self.grounding.reread_tokens

    @property
    def net_billed(self) -> float:
        return self.billed + self.grounding.reread_billed

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "billed": round(self.billed, 1),
            "peak": self.peak,
            "passes": self.passes,
            "results": self.results,
            "stale": self.stale,
            "dangling": self.dangling,
            "recall": round(self.recall, 4),
            "recall_pairs": self.recall_pairs,
            "recall_all": round(self.recall_all, 4),
            "recall_all_pairs": self.recall_all_pairs,
            "grounding": self.grounding.to_json(),
            "net_prompt_tokens": self.net_prompt_tokens,
            "net_billed": round(self.net_billed, 1),
        }


def combine_runs(runs: Sequence[Mapping[str, PolicyRun]]) -> dict[str, PolicyRun]:
    """Per policy name, the totals over sessions: sums, the largest peak, weighted recall."""
    names = list(dict.fromkeys(name for r in runs for name in r))
    out = {}
    for name in names:
        parts = [r[name] for r in runs if name in r]
        pairs = sum(p.recall_pairs for p in parts)
        recall = sum(p.recall * p.recall_pairs for p in parts) / pairs if pairs else 1.0
        all_pairs = sum(p.recall_all_pairs for p in parts)
        every = sum(p.recall_all * p.recall_all_pairs for p in parts)
        out[name] = PolicyRun(
            name=name,
            requests=sum(p.requests for p in parts),
            prompt_tokens=sum(p.prompt_tokens for p in parts),
            billed=sum(p.billed for p in parts),
            peak=max(p.peak for p in parts),
            passes=sum(p.passes for p in parts),
            results=sum(p.results for p in parts),
            stale=sum(p.stale for p in parts),
            dangling=sum(p.dangling for p in parts),
            recall=recall,
            recall_pairs=pairs,
            problems=tuple(q for p in parts for q in p.problems),
            recall_all=every / all_pairs if all_pairs else 1.0,
            recall_all_pairs=all_pairs,
            grounding=sum((p.grounding for p in parts), Grounding()),
            cached=sum(p.cached for p in parts),
        )
    return out
