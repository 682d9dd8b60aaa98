"""Which cost gate for the gateway? ``replay --gateway`` variants side by side, per set and window.

Run from the repository root (the traces imported first, as in docs/gateway.md)::

    .venv/bin/python bench/bench_gateway_gate.py /tmp/gw/cc /tmp/gw/corpus/swe-agent \
        [--windows 200000,128000] [--variants "a;b"]

For each set (a folder of traces), window and variant (``GatewayPolicy`` overrides,
``VARIANTS``), every session is replayed once with all the variants beside each other (peer runs
of one replay) and one row printed: prompt tokens and billed equivalents against the recorded
transcripts, the sessions billed above their recording and the worst of them, stale and
dangling. Not a timed benchmark.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from filecache.replay import replay_gateway, replay_peers
from filecache.replay.policy_runs import PolicyRun
from filecache.replay.replay import replay_session

VARIANTS: dict[str, dict[str, Any]] = {
    # ``GatewayPolicy`` overrides; "feed": "openai" sends a Claude Code trace as the trace's
    # OpenAI chat requests instead of in Claude Code's own Anthropic shape
    "horizon 10 (default)": {},
    "horizon 10, OpenAI chat feed": {"feed": "openai"},
    "horizon 10 fixed": {"horizon_share": 0.0},
    "horizon 10 or the turns so far": {"horizon_share": 1.0},
    "horizon 5": {"horizon": 5},
    "horizon 20": {"horizon": 20},
    "cost preset (before)": {"horizon": None},
    "cost preset, OpenAI chat feed": {"horizon": None, "feed": "openai"},
    "cost preset, as many again as so far": {"horizon": None, "min_turns_left": 1},
    "gate off (context)": {"prune_preset": "context"},
    "no pruning": {"prune": False},
}


def _install(variants: Mapping[str, Mapping[str, Any]]) -> None:
    """Make each variant name a gateway policy of the replay (its overrides applied)."""
    base = replay_gateway.GatewayRun

    class Variant(base):  # type: ignore[misc,valid-type]
        def __init__(self, name: str, window: int | None) -> None:
            super().__init__("gateway", window)
            self.name = name
            overrides = dict(variants[name])
            self.feed = overrides.pop("feed", "host")
            self.policy = dataclasses.replace(self.policy, **overrides)

        def host_shape(self, calls: Any, cwd: str | None) -> None:
            if self.feed == "host":  # "openai": the trace's OpenAI chat requests
                super().host_shape(calls, cwd)

    replay_gateway.GATEWAY_POLICIES = (*replay_gateway.GATEWAY_POLICIES, *variants)
    replay_peers.GatewayRun = Variant  # type: ignore[misc]


def _pct(base: float, value: float) -> str:
    return f"{value:,.0f} ({100 * (value - base) / base:+.1f}%)" if base else "n/a"


def _recall(runs: Sequence[PolicyRun]) -> float:
    """The simulator's recall over all the runs' pairs (``PolicyRun.recall`` is per run)."""
    pairs = sum(r.recall_pairs for r in runs)
    return sum(r.recall * r.recall_pairs for r in runs) / pairs if pairs else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="+", type=Path)
    parser.add_argument("--windows", default="200000,128000")
    parser.add_argument("--variants", help="only these (names separated by ;)")
    parser.add_argument("--sessions", action="store_true", help="a row per session too")
    args = parser.parse_args()
    names = args.variants.split(";") if args.variants else list(VARIANTS)
    chosen = {f"gw:{n}": VARIANTS[n] for n in names}
    _install(chosen)
    print("| set | window | variant | prompt | billed | sessions above recorded | worst "
          "| recall | stale | dangling |")  # fmt: skip
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for folder in args.sets:
        dirs = sorted(d for d in folder.iterdir() if (d / "transcript.json").exists())
        for window in (int(w) for w in args.windows.split(",")):
            runs = [replay_session(d, window=window, peers=list(chosen)) for d in dirs]
            rec_p = sum(r.prompt_tokens.recorded for r in runs)
            rec_b = sum(r.billed.recorded for r in runs)
            for name in chosen:
                ps = [r.policies[name] for r in runs]
                above = [
                    (p.billed / r.billed.recorded - 1, r.name)
                    for r, p in zip(runs, ps, strict=True)
                    if p.billed > r.billed.recorded * 1.001
                ]
                worst = f"{max(above)[0]:+.1%} {max(above)[1][:24]}" if above else ""
                print(
                    f"| {folder.name} ({len(dirs)}) | {window:,} | {name[3:]} "
                    f"| {_pct(rec_p, sum(p.prompt_tokens for p in ps))} "
                    f"| {_pct(rec_b, sum(p.billed for p in ps))} | {len(above)} | {worst} "
                    f"| {_recall(ps):.1%} | {sum(p.stale for p in ps)} "
                    f"| {sum(p.dangling for p in ps)} |"
                )
                if args.sessions:
                    for r, p in zip(runs, ps, strict=True):
                        print(f"|  | | {r.name[:30]} ({p.requests} req) "
                              f"| {_pct(r.prompt_tokens.recorded, p.prompt_tokens)} "
                              f"| {_pct(r.billed.recorded, p.billed)} | | | | | |")  # fmt: skip


if __name__ == "__main__":
    main()
