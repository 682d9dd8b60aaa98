"""One MCP server alone, over stdio with the real client: its CPU per unchanged re-read, and
(with ``--py-spy``) where that time goes.

``bench_mcp.py`` runs three servers at once and compares their rates; this runs one, so that
its CPU per call (``/proc/<pid>/stat``, after the first reads) is measured without the others,
and, under ``py-spy record`` (not a dependency: install it to use the option), prints the
functions that hold the most of the server's busy samples (idle waits left out), inclusive.

    .venv/bin/python bench/profile_mcp.py [--server serve|plain|middleware] [--files 40]
        [--rounds 30] [--py-spy OUT.txt] [--top 40]
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mcp import ENV, child_pids, cpu_seconds, make_tree  # noqa: E402
from mcp_client import SAMPLE_SERVER, serve_args, stdio_session  # noqa: E402

# The innermost Python frame of a thread that waits: for work (a queue), a lock, epoll
_WAITS = ("Queue.get (", "Condition.wait (", "EpollSelector.select (", "Event.wait (")


def server_args(kind: str, root: Path, work: Path) -> list[str]:
    if kind == "serve":
        return serve_args("--root", root, "--store", work / "store.db")
    return [str(SAMPLE_SERVER), str(root), *(["--plain"] if kind == "plain" else [])]


async def measure(args: list[str], work: Path, names: list[str], rounds: int) -> None:
    before = child_pids()
    async with stdio_session(args, work / "stderr.txt", env=ENV) as client:
        await client.call_tool("read_file", {"path": names[0]})
        pid = max(child_pids() - before)  # under py-spy: py-spy itself (its CPU is not ours)
        for name in names:
            await client.call_tool("read_file", {"path": name})
        cpu, start = cpu_seconds(pid), time.perf_counter()
        for _ in range(rounds):
            for name in names:
                await client.call_tool("read_file", {"path": name})
        seconds, cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu
    calls = rounds * len(names)
    print(f"{calls:,} unchanged re-reads: {calls / seconds:,.0f}/s, server CPU "
          f"{1e6 * cpu / calls:,.0f} µs per re-read")  # fmt: skip


def busy_frames(raw: Path, top: int) -> None:
    """Inclusive share of each function in the busy samples of ``py-spy record -f raw``."""
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        joined = ";".join(frames)
        python = [f for f in frames if ".py)" in f]
        if not python or python[-1].startswith(_WAITS) or "_find_and_load" in joined:
            continue  # waiting, or importing at start-up
        if python[-1].startswith("WorkerThread.run (") and frames[-1].startswith("read ("):
            continue  # the SDK's stdin reader blocked in read(2)
        total += int(count)
        for frame in dict.fromkeys(frames):
            if ".so" not in frame and "<frozen" not in frame:  # C frames, runpy
                inclusive[frame] += int(count)
    print(f"\n{total:,} busy samples; inclusive share of the functions that hold the most:")
    for frame, count in inclusive.most_common(top):
        print(f"{100 * count / total:5.1f}%  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=["serve", "plain", "middleware"], default="serve")
    parser.add_argument("--files", type=int, default=40, help="10 KB files")
    parser.add_argument("--rounds", type=int, default=30, help="re-reads of every file")
    parser.add_argument("--py-spy", dest="py_spy", type=Path, help="record the server here")
    parser.add_argument("--top", type=int, default=40, help="functions to list (--py-spy)")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="profile-mcp-"))
    try:
        root = work / "tree"
        root.mkdir()
        names = make_tree(root, opts.files)
        args = server_args(opts.server, root, work)
        if opts.py_spy:
            spy = shutil.which("py-spy")
            if spy is None:
                sys.exit("profile_mcp: --py-spy needs py-spy on PATH (pip install py-spy)")
            # The client starts ``python ARGS``: this python becomes py-spy, which starts the
            # server. py-spy's first line lands on the MCP stream: the client logs one parse
            # error for it, harmlessly.
            launch = "import os, sys; os.execvp(sys.argv[1], sys.argv[1:])"
            record = [spy, "record", "-r", "997", "-n", "-f", "raw", "-o", str(opts.py_spy)]
            args = ["-c", launch, *record, "--", sys.executable, *args]
        anyio.run(measure, args, work, names, opts.rounds)
        if opts.py_spy:
            for _ in range(50):  # py-spy writes its file once the server has exited
                if opts.py_spy.exists():
                    break
                time.sleep(0.1)
            busy_frames(opts.py_spy, opts.top)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
