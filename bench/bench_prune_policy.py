"""Pruning triggers under prompt caching: which defaults save money on the dev corpus.

Run from the repository root::

    .venv/bin/python bench/bench_prune_policy.py [CORPUS] [--window 32000]

For a few trigger profiles (``prune_at`` / ``target`` / ``hard_at``), cache-aware on and off, at
one window: filecache whole (delta reads, outlines, pruning before every request) and pruning
alone (the recorded transcripts pruned, DESIGN's measure), both against the recorded
transcripts, with the requests that still exceed the window.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_replay import DEFAULT, pct, prune_recorded, sessions_in

from filecache.pruning import PrunePolicy
from filecache.replay import replay_session
from filecache.replay_metrics import combine
from filecache.tokens import TokenCounter

PROFILES = {
    "default (0.65 / 0.5 / 0.9)": {},
    "later (0.75 / 0.6 / 0.9)": {"prune_at": 0.75, "target": 0.6},
    "late (0.85 / 0.7 / 0.95)": {"prune_at": 0.85, "target": 0.7, "hard_at": 0.95},
    "at the edge (0.9 / 0.75 / 0.97)": {"prune_at": 0.9, "target": 0.75, "hard_at": 0.97},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--window", type=int, default=32_000)
    args = parser.parse_args()
    counter = TokenCounter()
    with tempfile.TemporaryDirectory() as tmp:
        dirs = sessions_in(args.corpus, Path(tmp))
        base = combine([replay_session(d) for d in dirs])
        rp, rb = base.prompt_tokens.recorded, base.billed.recorded
        print(f"`.venv/bin/python bench/bench_prune_policy.py --window {args.window}`: "
              f"{len(dirs)} sessions, changes against the recorded transcripts\n")  # fmt: skip
        print("| profile (prune_at / target / hard_at) | cache-aware | filecache: prompt | billed "
              "| over the window | recall | pruning alone: prompt | billed |")  # fmt: skip
        print("|---|:---:|---:|---:|---:|---:|---:|---:|")
        for name, overrides in PROFILES.items():
            for aware in (True, False):
                policy = PrunePolicy(context_window=args.window, cache_aware=aware, **overrides)
                runs = [replay_session(d, policy=policy) for d in dirs]
                whole = combine(runs)
                over = sum(1 for r in runs for n in r.series["filecache"] if n > args.window)
                alone = [prune_recorded(d, policy, counter) for d in dirs]
                ap, ab = sum(a[0] for a in alone), sum(a[1] for a in alone)
                prompt, billed = whole.prompt_tokens.filecache, whole.billed.filecache
                on = "on" if aware else "off"
                print(
                    f"| {name} | {on} | {pct(rp, prompt)} | {pct(rb, billed)} | {over} "
                    f"| {100 * whole.recall:.1f}% | {pct(rp, ap)} | {pct(rb, ab)} |"
                )


if __name__ == "__main__":
    main()
