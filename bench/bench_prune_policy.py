"""Pruning policies side by side on the dev corpus, and which triggers pay under caching.

Run from the repository root::

    .venv/bin/python bench/bench_prune_policy.py [CORPUS] [--windows 32000,64000,128000,200000]
    .venv/bin/python bench/bench_prune_policy.py [CORPUS] --profiles [--window 32000]
    .venv/bin/python bench/bench_prune_policy.py [CORPUS] --in-use-turns 24,25,26 --window 64000

Default: for each window, ``filecache replay --compare`` (every peer policy over the recorded
transcripts, filecache's ``cost`` and ``context`` presets), one table of policy x window with
cumulative prompt tokens and billed equivalents against the recorded transcripts, recall,
stale views and dangling refs; then whether each acceptance goal of the presets is met.

``--in-use-turns 20,24,25,26``: the ``context`` preset at ``--window`` with each of these
``in_use_turns`` (how far back a named file keeps its reads): prompt, billed and recall, the
sensitivity of its margin over ``anthropic-clear-tool-uses``.

``--profiles``: for a few trigger profiles (``prune_at`` / ``target`` / ``hard_at``), cache-aware
on and off, at one window: filecache whole (delta reads, outlines, pruning before every request)
and pruning alone (the recorded transcripts pruned, no delta reads), both against the
recorded transcripts, with the requests that still exceed the window.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_replay import DEFAULT, pct, prune_recorded, sessions_in

from filecache.core.tokens import TokenCounter
from filecache.prune.peer_policies import PEER_POLICIES
from filecache.prune.pruning import PrunePolicy
from filecache.replay.replay import replay_session
from filecache.replay.replay_compare import Comparison, compare
from filecache.replay.replay_metrics import combine

PEERS = ("none", *PEER_POLICIES, "claude-code-dedup+anthropic-clear-tool-uses")

PROFILES = {
    "default (0.65 / 0.5 / 0.9)": {},
    "later (0.75 / 0.6 / 0.9)": {"prune_at": 0.75, "target": 0.6},
    "late (0.85 / 0.7 / 0.95)": {"prune_at": 0.85, "target": 0.7, "hard_at": 0.95},
    "at the edge (0.9 / 0.75 / 0.97)": {"prune_at": 0.9, "target": 0.75, "hard_at": 0.97},
}


def policies(dirs: list[Path], windows: list[int]) -> None:
    runs: dict[int, Comparison] = {
        w: compare(dirs, replay=replay_session, window=w, peers=PEERS, presets=("cost", "context"))
        for w in windows
    }
    first = runs[windows[0]]
    rp, rb = first.recorded
    print(f"`.venv/bin/python bench/bench_prune_policy.py --windows "
          f"{','.join(str(w) for w in windows)}`: {len(dirs)} sessions; prompt and billed are "
          f"changes against the recorded transcripts ({rp:,.0f} prompt tokens, {rb:,.0f} "
          "billed)\n")  # fmt: skip
    print("| policy | window | prompt | billed | recall | stale | dangling |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in first.names:
        for w in windows:
            run = runs[w].totals[name]
            print(f"| {name} | {w // 1000}k | {pct(rp, run.prompt_tokens)} | {pct(rb, run.billed)} "
                  f"| {100 * run.recall:.1f}% | {run.stale} | {run.dangling} |")  # fmt: skip
    print(
        "\nThe same, a row per policy (prompt / billed, recall; stale and dangling where not 0):\n"
    )
    print("| policy | " + " | ".join(f"{w // 1000}k window" for w in windows) + " |")
    print("|---|" + "---:|" * len(windows))
    for name in first.names:
        cells = []
        for w in windows:
            run = runs[w].totals[name]
            cell = f"{pct(rp, run.prompt_tokens)} / {pct(rb, run.billed)}, {100 * run.recall:.1f}%"
            if run.stale or run.dangling:
                cell += f"; stale {run.stale}, dangling {run.dangling}"
            cells.append(cell)
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    at64 = runs.get(64_000)
    if at64 is not None:
        ctx, clear = at64.totals["filecache (context)"], at64.totals["anthropic-clear-tool-uses"]
        goals = {
            "prompt >= anthropic's": ctx.prompt_tokens <= clear.prompt_tokens,
            "billed >= anthropic's": ctx.billed <= clear.billed,
            "recall >= 95%": ctx.recall >= 0.95,
            "0 stale, 0 dangling": ctx.stale == ctx.dangling == 0,
        }
        verdicts = ", ".join(f"{g}: {'met' if ok else 'MISSED'}" for g, ok in goals.items())
        print(f"context preset at 64k against anthropic-clear-tool-uses (30% of 64k): {verdicts}")
    for w, c in runs.items():
        cost = c.totals["filecache (cost)"].billed
        peers = {n: c.totals[n].billed for n in c.names if not n.startswith(("filecache", "none"))}
        best = min(peers, key=lambda n: peers[n])
        verdict = "met" if cost < peers[best] else "MISSED"
        print(
            f"cost preset at {w // 1000}k bills less than every peer policy: {verdict} "
            f"({pct(rb, cost)} against {best}'s {pct(rb, peers[best])})"
        )


def in_use_sweep(dirs: list[Path], window: int, turns: list[int]) -> None:
    base = combine([replay_session(d) for d in dirs])
    rp, rb = base.prompt_tokens.recorded, base.billed.recorded
    print(f"`.venv/bin/python bench/bench_prune_policy.py --in-use-turns "
          f"{','.join(map(str, turns))} --window {window}`: the context preset, {len(dirs)} "
          "sessions, changes against the recorded transcripts\n")  # fmt: skip
    print("| in_use_turns | prompt | billed | recall | stale | dangling |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in turns:
        policy = PrunePolicy.preset("context", context_window=window, in_use_turns=n)
        run = combine([replay_session(d, policy=policy) for d in dirs])
        print(f"| {n} | {pct(rp, run.prompt_tokens.filecache)} | {pct(rb, run.billed.filecache)} "
              f"| {100 * run.recall:.1f}% | {run.stale_views} | {run.dangling_refs} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--windows", default="32000,64000,128000,200000")
    parser.add_argument("--profiles", action="store_true", help="the trigger profiles instead")
    parser.add_argument("--window", type=int, default=32_000, help="with --profiles")
    parser.add_argument("--in-use-turns", help="the context preset with each of these, N,N,...")
    args = parser.parse_args()
    counter = TokenCounter()
    with tempfile.TemporaryDirectory() as tmp:
        dirs = sessions_in(args.corpus, Path(tmp))
        if args.in_use_turns:
            in_use_sweep(dirs, args.window, [int(n) for n in args.in_use_turns.split(",")])
            return
        if not args.profiles:
            policies(dirs, [int(w) for w in args.windows.split(",")])
            return
        base = combine([replay_session(d) for d in dirs])
        rp, rb = base.prompt_tokens.recorded, base.billed.recorded
        print(f"`.venv/bin/python bench/bench_prune_policy.py --profiles --window {args.window}`: "
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
