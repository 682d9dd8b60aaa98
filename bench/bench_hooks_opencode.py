"""Added latency per read of filecache's opencode plugin, inside the real opencode, with a floor.

One ``opencode run`` (the pinned binary, ``tests/opencode_run.py``) against the scripted model
reads N files once (content), again (a FileRef) and a range of each again (a FileRef), one call
per model turn. Two timing plugins stand around filecache's in opencode's plugin list (opencode
runs each ``tool.execute.after`` hook in that order, awaiting each): the time between them for a
``read`` is what filecache added to that read, measured inside opencode. The floor, in the same
run: the same pair of timestamps around filecache's hook for ``todowrite`` calls, which the plugin
passes by (the cost of the hook chain itself), and for a directory ``read`` (a round trip to the
resident process that filecache declines). For comparison, the one-shot form of the same
answer (``python -m filecache.adapters.hosts opencode`` per call, a process each) and
``python -c pass``, interleaved in this run. Usage::

    .venv/bin/python bench/bench_hooks_opencode.py [--files 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from opencode_run import BINARY, OpencodeHome  # noqa: E402
from scripted_chat import Call, Step  # noqa: E402

TARGET_MS = 100.0  # issue 20/21: p50 added per read
TIMER = """import fs from "fs"
export const Timer{name} = async () => ({{
  "tool.execute.after": async (call) => {{
    fs.appendFileSync({log}, JSON.stringify({{at: "{name}", call: call.callID, tool: call.tool,
                                             ns: String(process.hrtime.bigint())}}) + "\\n")
  }},
}})
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def in_opencode(base: Path, files: int) -> tuple[dict[str, list[float]], int]:
    home = OpencodeHome(base)
    home.install()
    log = base / "timings.jsonl"
    specs = []
    for name in ("A", "B"):
        path = base / f"timer{name}.js"
        path.write_text(TIMER.format(name=name, log=json.dumps(str(log))))
        specs.append(path.as_uri())
    config_path = home.config / "opencode.json"
    config = json.loads(config_path.read_text())
    config["plugin"] = [specs[0], *config["plugin"], specs[1]]  # A, filecache, B
    config_path.write_text(json.dumps(config))
    paths = []
    for i in range(files):
        path = home.project / f"module_{i}.py"
        path.write_text("".join(f"def f{i}_{n}(x):\n    return x + {n}\n\n" for n in range(70)))
        paths.append(str(path))
    steps: list[Step] = []
    kinds: dict[str, str] = {}
    for round_, args in (("first", {}), ("again", {}), ("range", {"offset": 20, "limit": 40})):
        for i, path in enumerate(paths):
            call = f"{round_}_{i}"
            kinds[call] = round_
            steps.append(Step(calls=(Call(call, "read", {"filePath": path, **args}),)))
            if round_ == "first":  # the floors: a call the plugin passes by; a round trip
                todo = {"todos": [{"content": f"step {i}", "status": "pending", "priority": "low"}]}
                kinds[f"todo_{i}"] = "floor"
                steps.append(Step(calls=(Call(f"todo_{i}", "todowrite", todo),)))
                kinds[f"dir_{i}"] = "trip"
                folder = {"filePath": str(home.project)}
                steps.append(Step(calls=(Call(f"dir_{i}", "read", folder),)))
    chat = home.run(steps)
    for call, kind in kinds.items():  # the reads were served as the bench expects
        if kind == "again":
            assert "unchanged since your result first_" in chat.result(call), chat.result(call)
    stamps: dict[tuple[str, str], int] = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        stamps[(entry["call"], entry["at"])] = int(entry["ns"])
    missing = [k for k in ((c, at) for c in kinds for at in "AB") if k not in stamps]
    assert not missing, (missing[:4], log.read_text()[:2000])
    out: dict[str, list[float]] = {k: [] for k in ("first", "again", "range", "floor", "trip")}
    for call, kind in kinds.items():
        out[kind].append((stamps[(call, "B")] - stamps[(call, "A")]) / 1e6)
    return out, len(chat.requests)


def one_shot(base: Path, runs: int) -> tuple[list[float], list[float]]:
    """The per-process form of a re-read, and ``python -c pass``, interleaved."""
    root = base / "oneshot"
    root.mkdir()
    path = root / "notes.txt"
    text = "".join(f"line {n}\n" for n in range(1, 201))
    path.write_text(text)
    shown = "\n".join(f"{n}: line {n}" for n in range(1, 201))
    output = (f"<path>{path}</path>\n<type>file</type>\n<content>\n{shown}\n\n"
              "(End of file - total 200 lines)\n</content>")  # fmt: skip

    def request(call: str) -> bytes:
        return json.dumps({"id": 1, "op": "read", "session": "bench", "root": str(root),
                           "call": call, "path": str(path), "output": output}).encode()  # fmt: skip

    hook = [sys.executable, "-m", "filecache.adapters.hosts", "opencode"]
    subprocess.run(hook, input=request("c0"), capture_output=True, check=True)
    hooks, floors = [], []
    for n in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(hook, input=request(f"c{n + 1}"), capture_output=True, check=True)
        hooks.append((time.perf_counter() - t0) * 1000)
        assert b"unchanged since your result c0" in done.stdout, done.stdout
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        floors.append((time.perf_counter() - t0) * 1000)
    return hooks, floors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-opencode-") as tmp:
        started = time.perf_counter()
        timings, requests = in_opencode(Path(tmp), args.files)
        elapsed = time.perf_counter() - started
        hooks, floors = one_shot(Path(tmp), 20)
    print(f"opencode {BINARY}: {requests} model requests in {elapsed:.0f} s")
    print(f"{'':44} {'n':>3} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    rows = [
        ("in opencode: first read (content)", timings["first"]),
        ("in opencode: re-read (FileRef)", timings["again"]),
        ("in opencode: ranged re-read (FileRef)", timings["range"]),
        ("in opencode: floor (hook chain, todowrite)", timings["floor"]),
        ("in opencode: round trip (a directory read)", timings["trip"]),
        ("one-shot python -m ... opencode (re-read)", hooks),
        ("one-shot floor: python -c pass", floors),
    ]
    for label, values in rows:
        print(f"{label:44} {len(values):>3} {statistics.median(values):>8.1f} "
              f"{pct(values, 0.95):>8.1f} {max(values):>8.1f}")  # fmt: skip
    reads = timings["first"] + timings["again"] + timings["range"]
    added = statistics.median(reads) - statistics.median(timings["floor"])
    verdict = "within" if statistics.median(reads) <= TARGET_MS else "OVER"
    print(
        f"added per read (p50, all reads, minus the floor): {added:.1f} ms; "
        f"p50 {statistics.median(reads):.1f} ms is {verdict} the {TARGET_MS:.0f} ms budget"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
