"""The Claude Code transcript index per hook call, against the index it replaced, in one run.

``claude_index.read_held`` as one hook call makes it (the transcript grew by one tool call since
the last), on a short session and on one with ``--earlier`` earlier tool calls, next to the same
call through the previous index: one JSON file per transcript, loaded and rewritten whole by
every call, taken from the repository's history at ``--before`` (the last commit that had it).
Both read the same transcripts, written as Claude Code 2.1.328 writes them
(``bench_long_session.Transcript``); each index is built once before the timed calls.

    .venv/bin/python bench/bench_transcript_index.py [--earlier 50000] [--calls 9]
        [--before 4295443]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_long_session import Transcript, earlier_calls  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def previous_index(commit: str, folder: Path) -> Any:
    """``claude_index`` as it was at ``commit``, loaded beside today's modules."""
    source = subprocess.run(
        ["git", "show", f"{commit}:adapters/hosts/claude_index.py"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout  # fmt: skip
    path = folder / "claude_index_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("claude_index_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--earlier", type=int, default=50_000)
    parser.add_argument("--calls", type=int, default=9)
    parser.add_argument("--before", default="4295443")
    args = parser.parse_args()
    from filecache.adapters.hosts.claude_index import read_held

    with tempfile.TemporaryDirectory(prefix="bench-transcript-index-") as tmp:
        base = Path(tmp)
        before = previous_index(args.before, base)
        rows: list[tuple[str, str, float, int]] = []
        for name, earlier in (("short", 10), ("long", args.earlier)):
            t = Transcript(base / f"{name}.jsonl", name, base)
            earlier_calls(t, earlier)
            asked = [f"toolu_pad_{k:06d}" for k in range(min(10, earlier))]
            calls: dict[str, Callable[[], Any]] = {
                "before (JSON, whole)": lambda t=t: before.read_held(
                    t.path, cache_dir=base / "before", current="toolu_now"
                ),
                "now (SQLite, appended)": lambda t=t, asked=asked: read_held(
                    t.path, cache_dir=base / "now", current="toolu_now", among=asked
                ),
            }
            for call in calls.values():
                call()  # built once
            times: dict[str, list[float]] = {label: [] for label in calls}
            for n in range(args.calls):
                for label, call in calls.items():
                    t.bash(f"toolu_{n}_{len(times[label])}", "ls", "a\nb\n")
                    t.flush()
                    started = time.perf_counter()
                    call()
                    times[label].append(time.perf_counter() - started)
            size = t.path.stat().st_size
            for label, values in times.items():
                rows.append((name, label, statistics.median(values) * 1000, size))
    print(f"read_held per hook call, the transcript one tool call longer each time "
          f"({args.calls} calls; previous index from {args.before})")  # fmt: skip
    print(f"{'session':28} {'index':24} {'p50 ms':>9}")
    for name, label, p50, size in rows:
        print(f"{name + f' ({size / 1e6:.1f} MB)':28} {label:24} {p50:9.1f}")
    long_before, long_now = rows[2][2], rows[3][2]
    short_now = rows[1][2]
    print(f"long session: now / before {long_now / long_before:.4f}x; now long / short "
          f"{long_now / short_now:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
