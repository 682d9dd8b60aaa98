"""What filecache's Codex CLI hook adds to a read, against ``python -c pass``, in one run.

Codex runs the hook command (``python -I -S .../hosts/hook_client.py codex``, as ``filecache
install codex`` writes it) as one process per tool call, after the command ran: the thin client
of the resident hook server. Part 1 times that process on payloads shaped as Codex 0.169 sends
them, against a rollout file like Codex's, interleaved with the floor (``python -c pass``) so a
noisy neighbour hits every row alike:

- a re-read (``cat`` of a file the model holds: the hook answers a FileRef),
- a first read (a new session each time: the hook leaves Codex's output),
- a command that is not a read (``ls``: the view is re-hashed),
- a re-read with a long session's rollout (``--rollout-calls`` calls of ~4 KB outputs),
- an event the hook ignores (its start-up alone: what a PreToolUse rewrite would pay in its
  first process, before the rewritten command starts a second one),
- a re-read in-process (``FILECACHE_HOOK_SERVER=0``: the fallback, and every call before the
  resident server),
- the floor and a re-read through ``$SHELL -lc`` (Codex runs every hook command so),
- a cold start (``--cold`` times: the first call after ``filecache hook --stop``).

The figure for the issue's budget is "added": a row's median minus the floor's median (p50 ≤ 100
ms). Part 2 (``--codex PATH``) drives the real binary against the scripted Responses API of
``tests/responses_server.py``: ``codex exec`` with ``--reads`` re-reads, with and without the
hooks installed, and reports the extra wall time per read. Usage::

    .venv/bin/python bench/bench_hooks_codex.py [--runs 30] [--codex PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CLIENT = Path(__file__).resolve().parent.parent / "adapters" / "hosts" / "hook_client.py"
HOOK = [sys.executable, "-I", "-S", str(CLIENT), "codex"]  # as `filecache install codex` writes
SHELL = os.environ.get("SHELL") or "/bin/sh"
TARGET_MS = 100.0
TESTS = Path(__file__).resolve().parent.parent / "tests"


def _line(kind: str, payload: dict[str, Any]) -> str:
    """A rollout line as Codex writes it (compact JSON, these keys first)."""
    line = {"timestamp": "2026-12-01T20:39:45.145Z", "ordinal": 1, "type": kind,
            "payload": payload}  # fmt: skip
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n"


def _call_lines(cid: str, cmd: str, output: str, cwd: Path) -> str:
    args = json.dumps({"cmd": cmd})
    item = {"type": "CommandExecution", "id": cid, "exit_code": 0, "status": "completed",
            "cwd": f"file://{cwd}", "aggregated_output": output}  # fmt: skip
    return (
        _line("response_item", {"type": "function_call", "call_id": cid, "name": "exec_command",
                                "arguments": args})
        + _line("event_msg", {"type": "item_completed", "item": item})
        + _line("response_item", {"type": "function_call_output", "call_id": cid,
                                  "output": f"Process exited with code 0\nOutput:\n{output}"})
    )  # fmt: skip


class Session:
    """A Codex session in ``root`` with a rollout; ``payload`` makes the hook input of a call."""

    def __init__(self, root: Path, sid: str, history: int = 0) -> None:
        self.root, self.sid = root, sid
        self.rollout = root.parent / f"rollout-{sid}.jsonl"
        filler = "".join(
            f"{i:5d} some output of an earlier command, as wide as code\n" for i in range(70)
        )  # fmt: skip  (~4 KB)
        text = _line("session_meta", {"id": sid, "cwd": str(root), "base_instructions": "x" * 9000})
        text += "".join(_call_lines(f"old_{i}", f"ls dir{i}", filler, root) for i in range(history))
        self.rollout.write_text(text)
        self.n = 0

    def payload(self, cmd: str, output: str, *, pending: bool = True) -> bytes:
        self.n += 1
        cid = f"call_{self.sid}_{self.n}"
        if pending:  # as Codex has it when the hook runs: the call and its end, not the output
            lines = _call_lines(cid, cmd, output, self.root).splitlines(keepends=True)
            with open(self.rollout, "a") as out:
                out.writelines(lines[:2])
        return json.dumps({
            "session_id": self.sid, "turn_id": "t", "transcript_path": str(self.rollout),
            "cwd": str(self.root), "hook_event_name": "PostToolUse", "model": "gpt-5.5",
            "permission_mode": "bypassPermissions", "tool_name": "Bash",
            "tool_input": {"command": cmd}, "tool_response": output, "tool_use_id": cid,
        }).encode()  # fmt: skip

    def done(self, output: str) -> None:
        cid = f"call_{self.sid}_{self.n}"
        with open(self.rollout, "a") as out:
            out.write(
                _line("response_item", {"type": "function_call_output", "call_id": cid,
                                        "output": f"Process exited with code 0\nOutput:\n{output}"})
            )  # fmt: skip


def run(args: list[str], stdin: bytes, cwd: Path, env: dict[str, str]) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    proc = subprocess.run(args, input=stdin, cwd=cwd, env=env, capture_output=True, check=False)
    elapsed = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{args} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed, proc.stdout


def hook_rows(runs: int, warmup: int, rollout_calls: int, colds: int) -> None:
    from filecache.adapters.hosts.hook_client import stop_servers

    base = Path(tempfile.mkdtemp(prefix="bench-codex-hook-"))
    runtime = tempfile.mkdtemp(prefix="fc-bench-", dir="/tmp")  # short: AF_UNIX
    load_before = os.getloadavg()[0]
    try:
        root = base / "project"
        root.mkdir()
        text = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(1, 101))
        (root / "app.py").write_text(text)
        env = dict(os.environ, XDG_CACHE_HOME=str(base / "cache"), XDG_RUNTIME_DIR=runtime)
        env.pop("FILECACHE_STORE", None)
        env.pop("FILECACHE_HOOK_SERVER", None)
        alone = dict(env, FILECACHE_HOOK_SERVER="0")
        shell_hook = " ".join(shlex.quote(a) for a in HOOK)
        warm = Session(root, "warm")
        run(HOOK, warm.payload("cat app.py", text), root, env)  # creates the store
        warm.done(text)
        long = Session(root, "long", history=rollout_calls)
        run(HOOK, long.payload("cat app.py", text), root, env)
        long.done(text)
        counter = iter(range(10**9))

        def reread(session: Session) -> tuple[list[str], bytes]:
            return HOOK, session.payload("cat app.py", text)

        def first() -> tuple[list[str], bytes]:
            return HOOK, Session(root, f"new{next(counter)}").payload("cat app.py", text)

        rows: dict[str, Any] = {
            "floor: `python -c pass`": lambda: ([sys.executable, "-c", "pass"], b""),
            "re-read (FileRef)": lambda: reread(warm),
            "first read (Codex's output stands)": first,
            "not a read (`ls`: re-hash)": lambda: (HOOK, warm.payload("ls", "app.py\n")),
            f"re-read, rollout of {rollout_calls} calls": lambda: reread(long),
            "ignored event (start-up only)": lambda: (HOOK, b'{"hook_event_name": "Stop"}'),
            "re-read in-process (`FILECACHE_HOOK_SERVER=0`)": lambda: reread(warm),
            "floor through `$SHELL -lc`": lambda: (
                [SHELL, "-lc", f"{shlex.quote(sys.executable)} -c pass"], b""),
            "re-read through `$SHELL -lc`": lambda: (
                [SHELL, "-lc", shell_hook], warm.payload("cat app.py", text)),
        }  # fmt: skip
        size = long.rollout.stat().st_size
        times: dict[str, list[float]] = {label: [] for label in rows}
        for i in range(warmup + runs):
            for label, make in rows.items():
                args, stdin = make()
                elapsed, out = run(args, stdin, root, alone if "in-process" in label else env)
                if label.startswith("re-read") and b"unchanged since" not in out:
                    raise SystemExit(f"{label}: expected a FileRef, got {out[:200]!r}")
                if i >= warmup:
                    times[label].append(elapsed)
        cold_label = f"cold start (first call after `--stop`, {colds} runs)"
        times[cold_label] = []
        for _ in range(colds):
            stop_servers(env)
            folder = os.path.join(runtime, "filecache")
            while any(name.endswith(".sock") for name in os.listdir(folder)):
                time.sleep(0.01)  # the stopped server unlinks its socket as it ends
            times[cold_label].append(run(HOOK, warm.payload("cat app.py", text), root, env)[0])
        floor = statistics.median(times["floor: `python -c pass`"])
        load = os.getloadavg()[0]
        print(f"Codex hook process, {runs} runs each (interleaved), ms; "
              f"long rollout {size / 1e6:.1f} MB; load average {load_before:.1f} -> {load:.1f} "
              f"on {os.cpu_count()} cores\n")  # fmt: skip
        print("| call | p50 | p95 | added p50 (vs floor) |")
        print("|---|---:|---:|---:|")
        for label, values in times.items():
            values.sort()
            p50 = statistics.median(values)
            p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
            added = "" if label.startswith("floor") else f"{p50 - floor:.0f}"
            if "$SHELL" in label and not label.startswith("floor"):
                shell_floor = statistics.median(times["floor through `$SHELL -lc`"])
                added = f"{p50 - shell_floor:.0f} (vs the `$SHELL -lc` floor)"
            print(f"| {label} | {p50:.0f} | {p95:.0f} | {added} |")
        added = statistics.median(times["re-read (FileRef)"]) - floor
        verdict = "within" if added <= TARGET_MS else "OVER"
        print(f"\nadded latency per re-read: {added:.0f} ms p50 ({verdict} the {TARGET_MS:.0f} ms "
              f"budget)")  # fmt: skip
    finally:
        stop_servers({"XDG_RUNTIME_DIR": runtime, "XDG_CACHE_HOME": str(base / "cache")})
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)


def codex_rows(binary: str, reads: int, repeats: int) -> None:
    sys.path.insert(0, str(TESTS))
    from codex_driver import CodexWorld
    from responses_server import ScriptedResponses, exec_call, message

    def one(installed: bool) -> float:
        base = Path(tempfile.mkdtemp(prefix="bench-codex-e2e-"))
        try:
            world = CodexWorld(base, binary)
            text = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(1, 101))
            (world.project / "app.py").write_text(text)
            if installed:
                done = world.filecache("install", "codex")
                assert done.returncode == 0, done.stderr
            turns = [[exec_call(f"call_{i}", "cat app.py")] for i in range(reads)]
            server = ScriptedResponses([*turns, [message("done")]]).start()
            try:
                t0 = time.perf_counter()
                result = world.exec(server)
                elapsed = (time.perf_counter() - t0) * 1000
            finally:
                server.stop()
            assert result.returncode == 0, result.stderr[-500:]
            out = server.outputs()
            short = sum("unchanged since" in out.get(f"call_{i}", "") for i in range(reads))
            assert short == (reads - 1 if installed else 0), (short, installed)
            return elapsed
        finally:
            world.close()
            shutil.rmtree(base, ignore_errors=True)

    plain, hooked = [], []
    for _ in range(repeats):
        plain.append(one(False))
        hooked.append(one(True))
    p, h = statistics.median(plain), statistics.median(hooked)
    print(f"\nreal Codex CLI, `codex exec` with {reads} reads of one file, median of {repeats}:")
    print(
        f"without hooks {p:.0f} ms, with filecache's {h:.0f} ms: "
        f"{(h - p) / reads:.0f} ms added per read (4 hook calls per run besides the reads)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rollout-calls", type=int, default=1000)
    parser.add_argument("--codex", help="the codex binary: also time the real thing")
    parser.add_argument("--reads", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold", type=int, default=8)
    opts = parser.parse_args()
    hook_rows(opts.runs, opts.warmup, opts.rollout_calls, opts.cold)
    if opts.codex:
        codex_rows(opts.codex, opts.reads, opts.repeats)


if __name__ == "__main__":
    main()
