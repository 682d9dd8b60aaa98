"""Does the cost gate decide? filecache's pruning variants, gate on and off, at several windows.

Run from the repository root::

    .venv/bin/python bench/bench_cost_gate.py [CORPUS] [--windows 32000,64000,128000]

For each window and each variant (a preset with overrides, ``VARIANTS``), the corpus is
replayed (delta reads, outlines capped at the agent's view, pruning before every request) and
one row printed: cumulative prompt tokens and billed equivalents against the recorded
transcripts, recall, recall over every line, the passes that pruned, the cuts the gate declined,
stale views and dangling refs. Not a timed benchmark.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_replay import DEFAULT, pct, sessions_in

from filecache.prune.pruning import PrunePolicy
from filecache.replay.replay import replay_session
from filecache.replay.replay_metrics import combine

VARIANTS: dict[str, tuple[str, dict[str, object]]] = {
    "cost": ("cost", {}),
    "cost, gate off": ("cost", {"cache_aware": False}),
    "context": ("context", {}),
    "context, gate on": ("context", {"cache_aware": True}),
    "context, gate on, 10 turns at least": ("context", {"cache_aware": True, "min_turns_left": 10}),
    "context, gate on, 20 turns at least": ("context", {"cache_aware": True, "min_turns_left": 20}),
    "cost, from 5% of the window": ("cost", {"prune_at": 0.05, "target": 0.0}),
    "cost, from 5%, gate off": ("cost", {"prune_at": 0.05, "target": 0.0, "cache_aware": False}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--windows", default="32000,64000,128000")
    parser.add_argument("--variants", help="only these (names separated by ;)")
    args = parser.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    names = args.variants.split(";") if args.variants else list(VARIANTS)
    with tempfile.TemporaryDirectory() as tmp:
        dirs = sessions_in(args.corpus, Path(tmp))
        print(f"`.venv/bin/python bench/bench_cost_gate.py --windows {args.windows}`: "
              f"{len(dirs)} sessions, changes against the recorded transcripts\n")  # fmt: skip
        print("| variant | window | prompt | billed | recall | recall all | passes | declined "
              "| stale | dangling |")  # fmt: skip
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for window in windows:
            for name in names:
                preset, overrides = VARIANTS[name]
                policy = PrunePolicy.preset(preset, context_window=window, **overrides)
                t = combine([replay_session(d, policy=policy) for d in dirs])
                p, b = t.prompt_tokens, t.billed
                print(
                    f"| {name} | {window:,} | {pct(p.recorded, p.filecache)} | "
                    f"{pct(b.recorded, b.filecache)} | {100 * t.recall:.1f}% | "
                    f"{100 * t.recall_all:.1f}% | {t.pruning.passes} | "
                    f"{t.pruning.dropped_by_gate} | {t.stale_views} | {t.dangling_refs} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
