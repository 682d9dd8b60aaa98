"""Replay the dev corpus: totals, and the pruning economics at four windows, cache-aware on/off.

Run from the repository root::

    .venv/bin/python bench/bench_replay.py [CORPUS]

``CORPUS`` is a directory of session traces or a ``.tar.gz`` of them (default:
``../shared/corpus/swe-agent-dev.tar.gz``, unpacked to a temporary directory). It prints, as
markdown for docs/benchmarks.md:

1. the totals of ``filecache replay`` without pruning, and the wall time of that replay; the
   file tool answers split into outlines and the rest, against what the recording answered for
   the same calls; and ``--read-mode full`` (no outlines) against both baselines;
2. ``filecache replay --window W [--no-cache-aware]`` for W in 32k, 64k, 128k, 200k: filecache
   whole (delta reads, outlines and pruning) against the recorded transcripts and the plain run;
3. pruning alone (no delta reads), as the design card's cost table measured it: the recorded
   transcripts themselves pruned before every request by ``prune_messages`` (no session: the
   write->read map comes from the transcript), against the recorded transcripts.
"""

from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from filecache.core.tokens import TokenCounter
from filecache.prune.pruner import TokenMemo, prune_messages
from filecache.prune.pruning import PrunePolicy
from filecache.replay.replay import replay_session
from filecache.replay.replay_metrics import (
    MESSAGE_OVERHEAD,
    CostMeter,
    SessionReplay,
    combine,
    message_text,
)
from filecache.store.memory_store import MemoryStore

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT.parent / "shared" / "corpus" / "swe-agent-dev.tar.gz"
WINDOWS = (32_000, 64_000, 128_000, 200_000)


def sessions_in(corpus: Path, tmp: Path) -> list[Path]:
    if corpus.is_file():
        with tarfile.open(corpus) as tar:
            tar.extractall(tmp, filter="data")
        corpus = tmp
    found = sorted(p.parent for p in corpus.rglob("transcript.json"))
    if not found:
        raise SystemExit(f"no session traces under {corpus}")
    return found


def pct(base: float, value: float) -> str:
    return f"{100 * (value - base) / base:+.1f}%".replace("-", "−") if base else "n/a"


def prune_recorded(session: Path, policy: PrunePolicy, counter: TokenCounter) -> tuple[int, float]:
    """Cumulative prompt tokens and billed equivalents of the recorded transcript, pruned."""
    messages: list[dict[str, Any]] = json.loads((session / "transcript.json").read_text())[
        "messages"
    ]
    memo = TokenMemo(counter)
    store = MemoryStore()
    meter = CostMeter()
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        sent = prune_messages(
            messages[:i], store=store, policy=policy, format="openai", count=memo,
            session_id=session.name,
        ).messages  # fmt: skip
        meter.add([((m.get("role"), t), memo(t) + MESSAGE_OVERHEAD) for m in sent
                   for t in [message_text(m)]])  # fmt: skip
    cost = meter.cost()
    return cost.tokens, cost.billed


def answer_tokens(
    dirs: list[Path], replays: list[SessionReplay], memo: TokenMemo
) -> tuple[tuple[int, int], tuple[int, int]]:
    """(recorded, filecache) tokens of the file tool answers that filecache outlined, and of
    the others (the recorded answer of a call counted as replay counts it)."""
    outlines, others = [0, 0], [0, 0]
    for d, r in zip(dirs, replays, strict=True):
        messages = json.loads((d / "transcript.json").read_text())["messages"]
        recorded = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
        for call in r.calls:
            acc = outlines if call["kind"] == "outline" else others
            acc[0] += memo(message_text(recorded[call["call_id"]]))
            acc[1] += call["filecache_tokens"]
    return (outlines[0], outlines[1]), (others[0], others[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dirs = sessions_in(args.corpus, Path(tmp))
        start = time.perf_counter()
        replays = [replay_session(d) for d in dirs]
        elapsed = time.perf_counter() - start
        base = combine(replays)
        p, b = base.prompt_tokens, base.billed
        print(f"{len(dirs)} sessions, {base.requests} requests; replay without pruning in "
              f"{elapsed:.1f} s\n")  # fmt: skip
        print("| run | prompt tokens | vs recorded | vs plain | billed | vs recorded | vs plain |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, tokens, billed in (
            ("recorded", p.recorded, b.recorded),
            ("plain", p.plain, b.plain),
            ("filecache, no pruning", p.filecache, b.filecache),
        ):
            vs_tokens = f"{pct(p.recorded, tokens)} | {pct(p.plain, tokens)}"
            vs_billed = f"{pct(b.recorded, billed)} | {pct(b.plain, billed)}"
            print(f"| {label} | {tokens:,.0f} | {vs_tokens} | {billed:,.0f} | {vs_billed} |")
        print(f"\nstale views {base.stale_views}, dangling refs {base.dangling_refs}, "
              f"recall {100 * base.recall:.1f}%, reads {dict(base.reads)}")  # fmt: skip
        outlines, others = answer_tokens(dirs, replays, TokenMemo(TokenCounter()))
        print(
            f"file tool answers: {base.reads['outline']} outlines {outlines[1]:,} tokens "
            f"(recorded: {outlines[0]:,}), the others {others[1]:,} (recorded: {others[0]:,})"
        )
        full = combine([replay_session(d, read_mode="full") for d in dirs])
        reads = sum(full.reads.values())
        print(
            f"--read-mode full: {full.reads['unchanged']} of {reads} reads FileRefs; prompt "
            f"tokens {pct(full.prompt_tokens.plain, full.prompt_tokens.filecache)} vs plain, "
            f"{pct(full.prompt_tokens.recorded, full.prompt_tokens.filecache)} vs recorded\n"
        )

        print(
            "| window | cache-aware | prompt vs recorded | vs plain | billed vs recorded "
            "| vs plain | pruned | stale | dangling | recall |"
        )
        print("|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for window in WINDOWS:
            for aware in (True, False):
                t = combine([replay_session(d, window=window, cache_aware=aware) for d in dirs])
                tp, tb = t.prompt_tokens, t.billed
                print(
                    f"| {window // 1000}k | {'on' if aware else 'off'} "
                    f"| {pct(tp.recorded, tp.filecache)} | {pct(tp.plain, tp.filecache)} "
                    f"| {pct(tb.recorded, tb.filecache)} | {pct(tb.plain, tb.filecache)} "
                    f"| {sum(t.pruning.results.values())} | {t.stale_views} | {t.dangling_refs} "
                    f"| {100 * t.recall:.1f}% |"
                )

        print("\nPruning alone, on the recorded transcripts (no delta reads):\n")
        print("| window | cache-aware | prompt tokens | billed |")
        print("|---:|:---:|---:|---:|")
        counter = TokenCounter()
        for window in WINDOWS:
            for aware in (True, False):
                policy = PrunePolicy(context_window=window, cache_aware=aware)
                tokens = billed = 0.0
                for d in dirs:
                    n, money = prune_recorded(d, policy, counter)
                    tokens += n
                    billed += money
                print(f"| {window // 1000}k | {'on' if aware else 'off'} "
                      f"| {pct(p.recorded, tokens)} | {pct(b.recorded, billed)} |")  # fmt: skip


if __name__ == "__main__":
    main()
