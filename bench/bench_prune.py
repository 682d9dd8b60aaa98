"""Benchmark pruning: ``prune_messages`` on OpenAI chat transcripts of 250 to 2,000 messages.

Run from the repository root::

    .venv/bin/python bench/bench_prune.py [--repeat 5] [--sizes 250,500,1000,2000]

Each transcript is generated deterministically (a seeded RNG over the sorted ``.py`` files of
the venv's site-packages): file reads in filecache's ``cat -n`` format (whole files and ranges,
re-reads of a working set, some answered with FileRefs), edits, bash output (test logs, grep
hits, listings) and user turns, about 5 KB of tool output per message: ~10 MB at 2,000
messages. ``prune_messages`` runs without a session (the write→read map comes from the
transcript) on a fresh ``MemoryStore`` each time (archive and projections included), with the
default policy and a window at which the prompt is at 80% (over ``prune_at``, under
``hard_at``: every pass runs, the cost gate too).

Two timings, medians over ``--repeat`` runs:

- **counting**: ``prune_messages`` as a client calls it, with its default counter (exact
  o200k through a fresh ``TokenMemo``: every text is counted again; toktok keeps its own cache
  of pre-token pieces within a process, so this is the steady state of a long-running agent,
  not a process's very first call);
- **memo warm**: with a ``TokenMemo`` that has seen these texts (an agent re-sends the same
  messages every turn): what is left is the planner, rendering and the store.

``ms/msg`` is the time divided by the message count: flat means linear growth.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from filecache.core.hashing import version_of
from filecache.core.render import render_file_ref
from filecache.core.text import render_lines, split_lines
from filecache.core.tokens import TokenCounter
from filecache.prune.pruner import PruneResult, TokenMemo, prune_messages
from filecache.prune.pruning import PrunePolicy
from filecache.store.memory_store import MemoryStore

SEED = 20_240_611


def sources(limit: int = 400) -> list[tuple[str, str]]:
    """(path, text) of real Python files: every k-th of the venv's, in a fixed order."""
    site = Path(sysconfig.get_paths()["purelib"])
    files = sorted(p for p in site.rglob("*.py") if 6_000 < p.stat().st_size < 120_000)
    step = max(1, len(files) // limit)
    out = []
    for path in files[::step][:limit]:
        text = path.read_text(encoding="utf-8", errors="replace")
        out.append((path.relative_to(site).as_posix(), text))
    return out


class Generator:
    """Builds one transcript: a working set of files that grows, edits, and bash output."""

    def __init__(self, files: list[tuple[str, str]], seed: int) -> None:
        self.files = files
        self.rng = random.Random(seed)
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a coding agent. Use the tools."},
            {"role": "user", "content": "The test suite fails on CI; find out why and fix it."},
        ]
        self.serial = 0
        self.working: list[int] = []
        self.seen: dict[int, tuple[str, str]] = {}  # file index -> (call id, version) read whole
        self.edits: dict[int, int] = {}

    def call(self, name: str, args: dict[str, Any], result: str) -> str:
        self.serial += 1
        cid = f"call_{self.serial:05d}"
        function = {"name": name, "arguments": json.dumps(args)}
        self.messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": function}],
            }
        )
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": result})
        return cid

    def pick(self) -> int:
        if self.working and self.rng.random() < 0.7:
            return self.rng.choice(self.working)
        index = self.rng.randrange(len(self.files))
        self.working.append(index)
        return index

    def text_of(self, index: int) -> str:
        _, text = self.files[index]
        edits = self.edits.get(index, 0)
        return text + "".join(f"# edit {n}\n" for n in range(edits))

    def read(self) -> None:
        index = self.pick()
        path, _ = self.files[index]
        text = self.text_of(index)
        version = version_of(text.encode())
        lines = split_lines(text)
        known = self.seen.get(index)
        if known is not None and known[1] == version and self.rng.random() < 0.5:
            body = render_file_ref(path, version, 1, len(lines), len(lines), known[0])
            self.call("read_file", {"path": path}, body)
        elif self.rng.random() < 0.7:
            body = render_lines(path, lines, 1, len(lines), version=version)
            self.seen[index] = (self.call("read_file", {"path": path}, body), version)
        else:
            start = self.rng.randint(1, max(1, len(lines) - 10))
            end = min(len(lines), start + self.rng.randint(20, 200) - 1)
            body = render_lines(path, lines, start, end, version=version)
            args = {"path": path, "offset": start, "limit": end - start + 1}
            self.call("read_file", args, body)

    def edit(self) -> None:
        index = self.pick()
        path, _ = self.files[index]
        self.edits[index] = self.edits.get(index, 0) + 1
        count = len(split_lines(self.text_of(index)))
        args = {"path": path, "old_string": "return None", "new_string": "return result"}
        self.call("edit_file", args, f"[filecache] edited {path}: {count} lines.\n")

    def bash(self) -> None:
        kind = self.rng.random()
        _, text = self.files[self.rng.randrange(len(self.files))]
        lines = text.splitlines()
        if kind < 0.5:  # a test run: progress, then a traceback quoting real code
            quoted = lines[: self.rng.randint(100, 600)]
            body = "\n".join(
                ["============ test session starts ============", "collected 412 items", ""]
                + [f"tests/test_{i}.py ....F..s.." for i in range(self.rng.randint(5, 40))]
                + ["", "================== FAILURES =================="]
                + [f"    {line}" for line in quoted]
                + ["E   AssertionError: expected 3, got 4", "1 failed, 411 passed in 9.81s"]
            )
            self.call("bash", {"command": "python -m pytest -x -q"}, body)
        elif kind < 0.8:
            hits = [
                f"src/mod_{i % 17}.py:{i}:{line}" for i, line in enumerate(lines) if "def " in line
            ]
            self.call("bash", {"command": "grep -rn 'def ' src"}, "\n".join(hits) + "\n")
        else:
            names = [path for path, _ in self.files[: self.rng.randint(20, 120)]]
            self.call("bash", {"command": "ls -la"}, "\n".join(names) + "\n")

    def build(self, messages: int) -> list[dict[str, Any]]:
        while len(self.messages) < messages:
            r = self.rng.random()
            if r < 0.5:
                self.read()
            elif r < 0.62:
                self.edit()
            elif r < 0.92:
                self.bash()
            elif r < 0.96:
                self.messages.append({"role": "user", "content": "Keep going; check the tests."})
            else:
                self.messages.append(
                    {"role": "assistant", "content": "The failure is in the parser."}
                )
        return self.messages[:messages]


def run(messages: list[Any], policy: PrunePolicy, memo: TokenMemo | None) -> PruneResult:
    """One request's pruning, as a client does it: a fresh store (archive, projections)."""
    return prune_messages(messages, store=MemoryStore(), policy=policy, count=memo)


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="250,500,1000,2000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    files = sources()
    counter = TokenCounter()
    command = " ".join([".venv/bin/python", f"bench/{Path(__file__).name}", *sys.argv[1:]])
    print(f"Command: `{command}`\n")
    print(f"Python {sys.version.split()[0]}, medians of {args.repeat} runs, exact o200k counts.\n")
    header = (
        "| messages | tool output | results | prompt tokens | actions | reclaimed "
        "| counting ms | ms/msg | memo warm ms | ms/msg |"
    )
    print(header)
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        messages = Generator(files, SEED).build(size)
        output = sum(len(m["content"]) for m in messages if m["role"] == "tool")
        results = sum(1 for m in messages if m["role"] == "tool")
        memo = TokenMemo(counter)
        total = prune_messages(messages, policy=PrunePolicy(context_window=10**9), count=memo)
        policy = PrunePolicy(context_window=int(total.plan.prompt_tokens / 0.8))
        counting = partial(run, messages, policy, None)
        warm = partial(run, messages, policy, memo)
        plan = warm().plan
        cold_ms, warm_ms = median_ms(counting, args.repeat), median_ms(warm, args.repeat)
        print(
            f"| {size:,} | {output / 1e6:.1f} MB | {results:,} | {plan.prompt_tokens:,} "
            f"| {len(plan.actions):,} | {plan.reclaimed:,} | {cold_ms:,.0f} | {cold_ms / size:.2f} "
            f"| {warm_ms:,.1f} | {warm_ms / size:.3f} |"
        )


if __name__ == "__main__":
    main()
