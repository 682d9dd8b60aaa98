"""Benchmark the gateway's request transform against the floor, at ~150k-token requests.

Run from the repository root::

    .venv/bin/python bench/bench_gateway_transform.py [--tokens 150000] [--requests 40] [--cpu]

A Claude Code conversation is generated deterministically (a seeded RNG over the sorted ``.py``
files of the venv's site-packages): ``Read`` results in Claude Code's ``N→`` form (whole files
and ranges, re-reads of a working set), ``Edit`` confirmations, Bash ``cat``/``sed -n`` reads
and test output, grown until a request holds about ``--tokens`` tokens (estimated). The last
``--requests`` requests (each one turn longer than the one before, as a host sends them) go
through ``rewrite_request`` in order, with one memory on a SQLite store in a temporary folder,
pruning on (``cost`` preset at a 200k window).

The floor is what any proxy that reads the body pays: ``json.loads`` of the same body and
``json.dumps(..., ensure_ascii=False)`` of the result, timed on the same request in the same
run. Printed: p50 and p99 of the floor, of the transform, of what the transform adds over the
floor, and the ratio transform / floor. The gateway's target (issue 35) is p50 <= 5 ms and
p99 <= 20 ms added per request. Also timed: counting each request for the figures
(``record_rewrite``), which the server does after the answer was relayed, off the request's path.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filecache.core.tokens import fast_estimate_text
from filecache.gateway import GatewayPolicy, open_memory, record_rewrite, rewrite_request


def _sources(limit: int = 400) -> list[tuple[str, list[str]]]:
    root = Path(sysconfig.get_paths()["purelib"])
    out = []
    for path in sorted(root.rglob("*.py"))[:4000]:
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError):
            continue
        if 40 <= len(lines) <= 600:
            out.append((f"/work/proj/{path.relative_to(root)}", lines))
        if len(out) >= limit:
            break
    return out


def _arrows(lines: list[str], start: int) -> str:
    return "\n".join(f"{n:>6}→{t}" for n, t in enumerate(lines, start))


def conversation(tokens: int, seed: int = 7) -> list[dict[str, Any]]:
    """Messages until the request holds about ``tokens`` tokens."""
    rng = random.Random(seed)
    files = _sources()
    working = files[:12]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    size = 0
    n = 0
    while size < tokens:
        n += 1
        cid = f"toolu_{n:04d}"
        path, lines = rng.choice(working if rng.random() < 0.7 else files)
        op = rng.random()
        if op < 0.45:
            if rng.random() < 0.5:
                name, args, text = "Read", {"file_path": path}, _arrows(lines, 1)
            else:
                a = rng.randint(1, max(1, len(lines) - 30))
                b = min(len(lines), a + rng.randint(10, 80))
                name, args = "Read", {"file_path": path, "offset": a, "limit": b - a + 1}
                text = _arrows(lines[a - 1 : b], a)
        elif op < 0.6:
            k = rng.randrange(len(lines))
            lines[k] = lines[k] + "  # edited"
            name = "Edit"
            args = {"file_path": path, "old_string": lines[k][:-10], "new_string": lines[k]}
            text = f"The file {path} has been updated successfully."
        elif op < 0.75:
            name, args, text = "Bash", {"command": f"cat {path}"}, "\n".join(lines)
        else:
            out = "\n".join(
                f"tests/test_{rng.randint(1, 99)}.py::test_{i} PASSED" for i in range(80)
            )
            name, args, text = "Bash", {"command": "pytest -q"}, out
        messages.append(
            {"role": "assistant", "content": [
                {"type": "text", "text": "Next step."},
                {"type": "tool_use", "id": cid, "name": name, "input": args}]}
        )  # fmt: skip
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid,
                                           "content": text}]}
        )  # fmt: skip
        size += fast_estimate_text(text) + 30
    return messages


def body_of(messages: list[dict[str, Any]]) -> bytes:
    payload = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "system": [{"type": "text", "text": "You are Claude Code.\nWorking directory: /work/proj"}],
        "messages": messages,
        "metadata": {"user_id": "user_0_account_0_session_5e1f0a77-1c2d"},
        "stream": True,
    }
    return json.dumps(payload, ensure_ascii=False).encode()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=150_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time the thread's CPU (time.thread_time) instead of the wall clock: on a loaded "
        "machine, what the work costs rather than how long it waited for a core",
    )
    args = parser.parse_args(argv)
    messages = conversation(args.tokens)
    clock = time.thread_time if args.cpu else time.perf_counter
    print("clock: " + ("thread CPU time" if args.cpu else "wall clock"))
    for replan in (0, 4_000):
        print(f"\nreplan_tokens={replan:,}" + (" (the default)" if not replan else ""))
        policy = GatewayPolicy(context_window=200_000, replan_tokens=replan)
        run(messages, args.requests, policy, clock)
    return 0


def run(
    messages: list[dict[str, Any]],
    requests: int,
    policy: GatewayPolicy,
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Time the last ``requests`` requests of ``messages`` and print the table."""
    last = len(messages)
    first = max(3, last - 2 * requests)
    bodies = [body_of(messages[:k]) for k in range(first, last + 1, 2)]
    floor: list[float] = []
    spent: list[float] = []
    counting: list[float] = []
    changed = refs = diffs = pruned = 0
    with tempfile.TemporaryDirectory() as tmp:
        memory = open_memory(str(Path(tmp) / "gw.db"))
        rewrite_request("anthropic-messages", body_of(messages[: first - 2]), memory=memory,
                        policy=policy)  # fmt: skip
        for body in bodies:
            t0 = clock()
            json.dumps(json.loads(body), ensure_ascii=False).encode()
            t1 = clock()
            rewrite = rewrite_request("anthropic-messages", body, memory=memory, policy=policy)
            t2 = clock()
            record_rewrite(memory, rewrite.conversation, rewrite.forms)
            t3 = clock()
            floor.append((t1 - t0) * 1000)
            spent.append((t2 - t1) * 1000)
            counting.append((t3 - t2) * 1000)
            changed += rewrite.changed
            refs, diffs, pruned = (
                rewrite.counts.file_refs,
                rewrite.counts.diffs,
                rewrite.counts.pruned,
            )
        memory.close()
    added = [s - f for s, f in zip(spent, floor, strict=True)]
    kb = statistics.mean(len(b) for b in bodies) / 1024
    tokens = fast_estimate_text(bodies[-1].decode())
    print(f"{len(bodies)} requests of {kb:,.0f} KB on average (last: ~{tokens:,} tokens), "
          f"{changed} rewritten; last request: {refs} FileRefs, {diffs} diffs, "
          f"{pruned} pruned")  # fmt: skip
    print("| measure | p50 ms | p99 ms |")
    print("|---|---:|---:|")
    print(f"| floor (json parse + serialize) | {_pct(floor, 0.5):.1f} | {_pct(floor, 0.99):.1f} |")
    print(f"| transform | {_pct(spent, 0.5):.1f} | {_pct(spent, 0.99):.1f} |")
    print(f"| added over the floor | {_pct(added, 0.5):.1f} | {_pct(added, 0.99):.1f} |")
    ratios = [s / f for s, f in zip(spent, floor, strict=True)]
    print(f"| transform / floor | {_pct(ratios, 0.5):.2f}x | {_pct(ratios, 0.99):.2f}x |")
    print(f"| counting for the figures, after the answer | {_pct(counting, 0.5):.1f} | "
          f"{_pct(counting, 0.99):.1f} |")  # fmt: skip
    shares = [c / f for c, f in zip(counting, floor, strict=True)]
    print(f"| counting / floor | {_pct(shares, 0.5):.2f}x | {_pct(shares, 0.99):.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
