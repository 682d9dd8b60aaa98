"""The gateway against the replay's transcript pruning: one table per set and window.

Run from the repository root (the traces imported first, as in docs/gateway.md)::

    .venv/bin/python bench/bench_gateway_gap.py /tmp/gw/cc /tmp/corpus/swe-agent \
        [--windows 200000,128000] [--hook]

For each set (a folder of traces) and window, every session is replayed once: the recording,
``filecache replay --window W`` (the library's transcript pruning, ``cost`` preset: what a
request-level filecache could do with the session's own ledger), ``replay --gateway --window W``
(the request transform, which sees only the requests) and Anthropic's ``clear_tool_uses`` (its
trigger at 30% of the window) beside each other; ``--hook`` adds the host hook's own replay
(``filecache replay`` of a Claude Code trace). Each row: prompt tokens and billed equivalents
against the recording, recall (the simulator's, and over every line the recording showed), edits
grounded, stale, dangling. Not a timed benchmark.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import filecache.cli  # noqa: F401  (registers the hosts' replays)
from filecache.prune.pruning import PrunePolicy
from filecache.replay.policy_runs import Grounding, PolicyRun
from filecache.replay.replay import replay_session
from filecache.replay.replay_host import host_replay, trace_host
from filecache.replay.replay_metrics import SessionReplay

PEERS = ("gateway", "anthropic-clear-tool-uses")


def _pct(base: float, value: float) -> str:
    return f"{value:,.0f} ({100 * (value - base) / base:+.1f}%)" if base else "n/a"


def _mean(pairs: Sequence[tuple[float, int]]) -> float:
    total = sum(n for _, n in pairs)
    return sum(v * n for v, n in pairs) / total if total else 1.0


def _row(name: str, base: tuple[float, float], prompt: float, billed: float, recall: float,
         every: float, grounding: Grounding, stale: int, dangling: int) -> str:  # fmt: skip
    return (
        f"| | {name} | {_pct(base[0], prompt)} | {_pct(base[1], billed)} | {recall:.1%} "
        f"| {every:.1%} | {grounding.grounded}/{grounding.edits} ({grounding.lost} lost) "
        f"| {stale} | {dangling} |"
    )


def _hook(dirs: Sequence[Path]) -> list[SessionReplay] | None:
    hosts = {trace_host(d) for d in dirs}
    if len(hosts) != 1 or None in hosts:
        return None
    return [host_replay(str(next(iter(hosts))))(d, tokenizer="o200k") for d in dirs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="+", type=Path)
    parser.add_argument("--windows", default="200000,128000")
    parser.add_argument("--hook", action="store_true", help="the host hook's replay too")
    parser.add_argument("--sessions", action="store_true", help="a row per session too")
    parser.add_argument(
        "--read-mode", default="full", choices=("agent", "auto", "full"),
        help="the replay's whole-file reads (full: as the agent's tool showed them, no outline)",
    )  # fmt: skip
    args = parser.parse_args()
    print("| set, window | run | prompt tokens | billed | recall | recall (all lines) "
          "| edits grounded | stale | dangling |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for folder in args.sets:
        dirs = sorted(d for d in folder.iterdir() if (d / "transcript.json").exists())
        hook = _hook(dirs) if args.hook else None
        for window in (int(w) for w in args.windows.split(",")):
            rules = PrunePolicy.preset("cost", context_window=window)
            runs = [
                replay_session(
                    d, window=window, policy=rules, peers=PEERS, read_mode=args.read_mode
                )
                for d in dirs
            ]
            base = (
                sum(r.prompt_tokens.recorded for r in runs),
                sum(r.billed.recorded for r in runs),
            )
            print(f"| {folder.name} ({len(dirs)}), {window:,} | recorded | {base[0]:,.0f} "
                  f"| {base[1]:,.0f} | | | | | |")  # fmt: skip
            if hook is not None:
                print(_row(
                    "hook", base, sum(h.prompt_tokens.filecache for h in hook),
                    sum(h.billed.filecache for h in hook),
                    _mean([(h.recall, h.recall_pairs) for h in hook]),
                    _mean([(h.recall_all, h.recall_all_pairs) for h in hook]),
                    sum((h.grounding.get("filecache", Grounding()) for h in hook), Grounding()),
                    sum(h.stale_views for h in hook), sum(h.dangling_refs for h in hook),
                ))  # fmt: skip
            print(f"| | replay's plain run (its own read format, no filecache) "
                  f"| {_pct(base[0], sum(r.prompt_tokens.plain for r in runs))} "
                  f"| {_pct(base[1], sum(r.billed.plain for r in runs))} | | | | | |")  # fmt: skip
            print(_row(
                "replay --window (transcript pruning)", base,
                sum(r.prompt_tokens.filecache for r in runs), sum(r.billed.filecache for r in runs),
                _mean([(r.recall, r.recall_pairs) for r in runs]),
                _mean([(r.recall_all, r.recall_all_pairs) for r in runs]),
                sum((r.grounding.get("filecache", Grounding()) for r in runs), Grounding()),
                sum(r.stale_views for r in runs), sum(r.dangling_refs for r in runs),
            ))  # fmt: skip
            for peer in PEERS:
                ps: list[PolicyRun] = [r.policies[peer] for r in runs]
                print(_row(
                    peer, base, sum(p.prompt_tokens for p in ps), sum(p.billed for p in ps),
                    _mean([(p.recall, p.recall_pairs) for p in ps]),
                    _mean([(p.recall_all, p.recall_all_pairs) for p in ps]),
                    sum((p.grounding for p in ps), Grounding()),
                    sum(p.stale for p in ps), sum(p.dangling for p in ps),
                ))  # fmt: skip
            if args.sessions:
                for r in runs:
                    g = r.policies["gateway"]
                    print(f"| | {r.name[:40]} ({r.requests} req): plain / replay / gateway "
                          f"| {_pct(r.prompt_tokens.recorded, r.prompt_tokens.plain)} / "
                          f"{_pct(r.prompt_tokens.recorded, r.prompt_tokens.filecache)} / "
                          f"{_pct(r.prompt_tokens.recorded, g.prompt_tokens)} "
                          f"| {_pct(r.billed.recorded, r.billed.plain)} / "
                          f"{_pct(r.billed.recorded, r.billed.filecache)} / "
                          f"{_pct(r.billed.recorded, g.billed)} | {r.recall:.0%} / {g.recall:.0%} "
                          f"| peak {r.peak_request.recorded:,.0f} | | | |")  # fmt: skip


if __name__ == "__main__":
    main()
