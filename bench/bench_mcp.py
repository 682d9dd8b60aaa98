"""MCP reads per second over stdio with the real client: filecache serve, the sample server with
filecache's middleware, and the plain sample server (no filecache), in the same run.

Each server gets its own copy of a tree of 10 KB text files. A pass first reads every file
once (first reads: content everywhere), then re-reads them all ``--rounds`` times (unchanged
re-reads: FileRefs through filecache, the content again from the plain server). Calls are
sequential, as an agent makes them. Prints a markdown table and the command that reproduces it.

    .venv/bin/python bench/bench_mcp.py [--files 40] [--rounds 5]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from mcp_client import SAMPLE_SERVER, serve_args, stdio_session, text_of  # noqa: E402

FILE_BYTES = 10 * 1024


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


async def run_pass(
    args: list[str], names: list[str], rounds: int, errlog: Path
) -> dict[str, float | str]:
    # A ref window wider than the run, so that every re-read may be answered by a FileRef.
    env = {"FILECACHE_MCP_REF_CALLS": "1000000"}
    async with stdio_session(args, errlog, env=env) as client:
        await client.call_tool("read_file", {"path": "warmup.txt"})  # start-up costs, untimed
        kinds: Counter[str] = Counter()
        start = time.perf_counter()
        first_chars = 0
        for name in names:
            first_chars += len(text_of(await client.call_tool("read_file", {"path": name})))
        first = time.perf_counter() - start
        start = time.perf_counter()
        again_chars = 0
        for _ in range(rounds):
            for name in names:
                result = await client.call_tool("read_file", {"path": name})
                again_chars += len(text_of(result))
                kinds[(result.meta or {}).get("filecache", {}).get("kind", "content")] += 1
        again = time.perf_counter() - start
    reads = len(names) * rounds
    return {
        "first_rps": len(names) / first,
        "again_rps": reads / again,
        "first_chars": first_chars / len(names),
        "again_chars": again_chars / reads,
        "kinds": ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=40, help="10 KB files to read")
    parser.add_argument("--rounds", type=int, default=5, help="re-reads of every file")
    opts = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    try:
        setups: dict[str, Callable[[Path], list[str]]] = {
            "plain sample server (no filecache)": lambda r: [str(SAMPLE_SERVER), str(r), "--plain"],
            "sample server + FileCacheMiddleware": lambda r: [str(SAMPLE_SERVER), str(r)],
            "filecache serve": lambda r: serve_args("--root", r, "--store", work / f"{r.name}.db"),
        }
        rows: list[tuple[str, dict[str, float | str]]] = []
        for label, make_args in setups.items():
            root = work / f"tree{len(rows)}"
            root.mkdir()
            names = make_tree(root, opts.files)
            (root / "warmup.txt").write_text("warm up\n")
            stats = anyio.run(run_pass, make_args(root), names, opts.rounds, work / "stderr.txt")
            rows.append((label, stats))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"MCP over stdio, real client, {opts.files} files of 10 KB, {opts.rounds} re-read rounds\n"
    )
    print("| server | first reads/s | unchanged re-reads/s | chars/first read | chars/re-read |")
    print("|---|---:|---:|---:|---:|")
    for label, s in rows:
        print(
            f"| {label} | {s['first_rps']:,.0f} | {s['again_rps']:,.0f} | "
            f"{s['first_chars']:,.0f} | {s['again_chars']:,.0f} |"
        )
    print()
    for label, s in rows:
        print(f"- {label}: re-read answers: {s['kinds']}")
    command = f".venv/bin/python bench/bench_mcp.py --files {opts.files} --rounds {opts.rounds}"
    print(f"\nReproduce: {command}")


if __name__ == "__main__":
    main()
