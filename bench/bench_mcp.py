"""MCP over stdio with the real client: reads per second of filecache serve, the sample server
with filecache's middleware and the plain sample server (no filecache), and the peak memory of
a diff-heavy filecache serve session, in one run.

Throughput: each server gets its own copy of a tree of 10 KB text files, and all three run at
once. Every file is read once (first reads: content everywhere), then the tree is re-read
``--rounds`` times (unchanged re-reads: FileRefs through filecache, the content again from the
plain server). Rounds are interleaved — a round on each server in turn — so that load from
elsewhere on the machine hits every server alike. Calls are sequential, as an agent makes them.

Memory: ``filecache serve`` on a tree of 100 KB source files, each changed in a few scattered
lines before every read (never-seen versions, each answered by a diff), for ``--diff-rounds``
rounds; the server's peak RSS (``VmHWM``) is read from ``/proc`` at the end, once with the
default ``memory_mb`` and once with the LRU effectively unbounded, as before the budget.

    .venv/bin/python bench/bench_mcp.py [--files 40] [--rounds 10] [--diff-files 20]
        [--diff-rounds 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from mcp_client import SAMPLE_SERVER, serve_args, stdio_session, text_of  # noqa: E402

FILE_BYTES = 10 * 1024
DIFF_FILE_BYTES = 100 * 1024
# A ref window wider than the run, so that every re-read may be answered by a FileRef.
ENV = {"FILECACHE_MCP_REF_CALLS": "1000000"}


def make_tree(root: Path, files: int) -> list[str]:
    names = []
    for i in range(files):
        line = f"def handler_{i}(event, context):  # file {i}: return the event, unchanged\n"
        text = (line * (FILE_BYTES // len(line) + 1))[:FILE_BYTES]
        name = f"pkg/module_{i:03d}.py"
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text[: text.rfind("\n") + 1])
        names.append(name)
    return names


async def read_all(client: Any, names: list[str], kinds: Counter[str] | None) -> tuple[float, int]:
    """Read every name once; returns (seconds, characters received)."""
    chars = 0
    start = time.perf_counter()
    for name in names:
        result = await client.call_tool("read_file", {"path": name})
        chars += len(text_of(result))
        if kinds is not None:
            kinds[(result.meta or {}).get("filecache", {}).get("kind", "content")] += 1
    return time.perf_counter() - start, chars


async def throughput(
    setups: dict[str, Callable[[Path], list[str]]], work: Path, files: int, rounds: int
) -> dict[str, dict[str, Any]]:
    """Start every server, then time first reads and interleaved re-read rounds."""
    stats: dict[str, dict[str, Any]] = {}
    async with AsyncExitStack() as stack:
        clients: dict[str, tuple[Any, list[str]]] = {}
        pids: dict[str, int] = {}
        for i, (label, make_args) in enumerate(setups.items()):
            before = child_pids()
            root = work / f"tree{i}"
            root.mkdir()
            names = make_tree(root, files)
            (root / "warmup.txt").write_text("warm up\n")
            client = await stack.enter_async_context(
                stdio_session(make_args(root), work / "stderr.txt", env=ENV)
            )
            await client.call_tool("read_file", {"path": "warmup.txt"})  # start-up, untimed
            clients[label] = (client, names)
            (pids[label],) = child_pids() - before
        for label, (client, names) in clients.items():
            seconds, chars = await read_all(client, names, None)
            stats[label] = {
                "first_rps": len(names) / seconds,
                "first_chars": chars / len(names),
                "again": [],
                "cpu": 0.0,
                "again_chars": 0,
                "kinds": Counter(),
            }
        for _ in range(rounds):
            for label, (client, names) in clients.items():
                cpu = cpu_seconds(pids[label])
                seconds, chars = await read_all(client, names, stats[label]["kinds"])
                stats[label]["cpu"] += cpu_seconds(pids[label]) - cpu
                stats[label]["again"].append(len(names) / seconds)
                stats[label]["again_chars"] += chars
        for label, (_, names) in clients.items():
            s = stats[label]
            s["again_rps"] = statistics.median(s["again"])
            s["cpu_us"] = 1e6 * s["cpu"] / (len(names) * rounds)
            s["again_chars"] /= len(names) * rounds
    return stats


def source_text(size: int) -> str:
    """``size`` bytes of real Python source (the standard library's, in sorted order)."""
    out: list[str] = []
    total = 0
    for path in sorted(Path(os.__file__).parent.glob("*.py")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines(True):
            if total + len(line) > size:
                return "".join(out)
            out.append(line)
            total += len(line)
    return "".join(out)


def child_pids() -> set[int]:
    """Child processes of this one."""
    me = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                found.add(int(entry.name))
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_pids() -> list[int]:
    """Child processes of this one that run ``filecache serve``."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and b"serve" in cmdline and b"filecache" in cmdline:
            found.append(int(entry.name))
    return found


def rss_mib(pid: int, field: str = "VmHWM") -> float:
    """``VmHWM`` (peak resident memory) or ``VmRSS`` (now) of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for {pid}")


async def diff_session(
    work: Path, label: str, files: int, rounds: int, env: dict[str, str]
) -> dict[str, Any]:
    """A diff-heavy session through ``filecache serve``; returns kinds and peak RSS."""
    root = work / f"diff-{label}"
    root.mkdir()
    base = source_text(DIFF_FILE_BYTES).splitlines(True)
    names = []
    for i in range(files):
        name = f"src/big_{i:02d}.py"
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("".join(base))
        names.append(name)
    kinds: Counter[str] = Counter()
    args = serve_args("--root", root, "--store", work / f"diff-{label}.db")
    async with stdio_session(args, work / "stderr.txt", env=ENV | env) as client:
        (pid,) = server_pids()
        await client.call_tool("read_file", {"path": names[0], "mode": "full"})
        started = rss_mib(pid, "VmRSS")  # imports, one session, one version: the baseline
        start = time.perf_counter()
        for name in names:
            await client.call_tool("read_file", {"path": name, "mode": "full"})
        for r in range(rounds):
            for i, name in enumerate(names):
                lines = list(base)
                step = len(lines) // 5
                for k in range(5):  # 5 scattered changed lines: a version never seen before
                    j = step // 2 + k * step
                    lines[j] = lines[j].rstrip("\n") + f"  # round {r} file {i}\n"
                (root / name).write_text("".join(lines))
                result = await client.call_tool("read_file", {"path": name, "mode": "full"})
                kinds[(result.meta or {}).get("filecache", {}).get("kind", "?")] += 1
        seconds = time.perf_counter() - start
        peak = rss_mib(pid)
    return {
        "kinds": kinds,
        "peak": peak,
        "started": started,
        "reads": files * (rounds + 1),
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=40, help="10 KB files to read")
    parser.add_argument("--rounds", type=int, default=10, help="re-reads of every file")
    parser.add_argument("--diff-files", type=int, default=20, help="100 KB files changed")
    parser.add_argument("--diff-rounds", type=int, default=30, help="changes of every file")
    opts = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    try:
        setups: dict[str, Callable[[Path], list[str]]] = {
            "plain sample server (no filecache)": lambda r: [str(SAMPLE_SERVER), str(r), "--plain"],
            "sample server + FileCacheMiddleware": lambda r: [str(SAMPLE_SERVER), str(r)],
            "filecache serve": lambda r: serve_args("--root", r, "--store", work / f"{r.name}.db"),
        }
        rows = anyio.run(throughput, setups, work, opts.files, opts.rounds)
        memory = {
            label: anyio.run(diff_session, work, label, opts.diff_files, opts.diff_rounds, env)
            for label, env in (
                ("default (memory_mb 64)", {}),
                ("memory_mb 4096 (unbounded here)", {"FILECACHE_MEMORY_MB": "4096"}),
            )
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"MCP over stdio, real client, {opts.files} files of 10 KB, {opts.rounds} re-read rounds "
        "interleaved across the three servers (re-reads/s: median over the rounds)\n"
    )
    print(
        "| server | first reads/s | unchanged re-reads/s | server CPU/re-read "
        "| chars/first read | chars/re-read |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for label, s in rows.items():
        print(
            f"| {label} | {s['first_rps']:,.0f} | {s['again_rps']:,.0f} | "
            f"{s['cpu_us']:,.0f} µs | {s['first_chars']:,.0f} | {s['again_chars']:,.0f} |"
        )
    print()
    for label, s in rows.items():
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(s["kinds"].items()))
        print(f"- {label}: re-read answers: {kinds}")
    plain, served = rows["plain sample server (no filecache)"], rows["filecache serve"]
    floor, ours = plain["again_rps"], served["again_rps"]
    verdict = "met" if ours >= floor else "NOT met"
    print(f"\nTarget: filecache serve's re-reads/s ≥ the plain server's — {verdict} "
          f"({ours / floor:.2f}×); server CPU per re-read {served['cpu_us']:,.0f} µs against "
          f"{plain['cpu_us']:,.0f} µs ({served['cpu_us'] / plain['cpu_us']:.2f}×).\n")  # fmt: skip
    print(
        f"Diff-heavy `filecache serve` session: {opts.diff_files} files of 100 KB, each changed "
        f"in 5 lines before each of {opts.diff_rounds} rounds of reads\n"
    )
    print("| setting | reads | answers | RSS after the first read | peak RSS (VmHWM) | reads/s |")
    print("|---|---:|---|---:|---:|---:|")
    for label, m in memory.items():
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(m["kinds"].items()))
        print(
            f"| {label} | {m['reads']:,} | {kinds} | {m['started']:,.0f} MiB | "
            f"{m['peak']:,.0f} MiB | {m['reads'] / m['seconds']:,.0f} |"
        )
    command = (
        f".venv/bin/python bench/bench_mcp.py --files {opts.files} --rounds {opts.rounds} "
        f"--diff-files {opts.diff_files} --diff-rounds {opts.diff_rounds}"
    )
    print(f"\nReproduce: {command}")


if __name__ == "__main__":
    main()
