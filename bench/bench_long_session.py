"""Per-call cost of the Claude Code hook late in a long session, and the server's memory on a huge
transcript (issue 31: "cost grows with the session").

Two sessions on one project, in one run, their calls interleaved so that load from elsewhere on
the machine hits both alike:

- ``short``: a prompt, then the first read of each of ``--files`` files through the hook;
- ``long``: the same after ``--earlier`` earlier tool calls (Bash commands with outputs of about
  300 bytes, no compaction: the live chain is the whole session, the worst case for the index).

Both transcripts are written as Claude Code 2.1.328 writes them (``fixtures/imports/claude-code/
cc-2.1.328-rereads.jsonl``: one assistant entry per tool_use with the model's usage and request
fields, then the user entry with the tool_result and ``toolUseResult``). Each measured call is
what Claude Code does for a Read: the assistant entry is appended, the hook runs (a re-read: a
FileRef comes back), then the result entry is appended. The hook runs as installed (the thin
client of the resident server), and in-process (``FILECACHE_HOOK_SERVER=0``, the fallback).
The ratio of the long session's time to the short one's is the figure (target: at most 2x); an
interpreter doing nothing (``python -c pass``), timed in the same loop, is the floor of both.
The long transcript's index is built once before the measured calls (timed: what the first hook
of a session pays when filecache is installed late in it; a session that had it from the start
built it call by call).

Then the memory: a fresh server, a transcript of ``--memory-mb`` MB in the same format, and
``--parallel`` Read calls on it at once, twice (the first time the index is built, the second it
is current); the server's peak resident memory (``VmHWM`` of ``/proc/<pid>/status``) before and
after (target: at most 300 MB).

    .venv/bin/python bench/bench_long_session.py [--earlier 50000] [--calls 30] [--files 10]
        [--memory-mb 200] [--parallel 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

CLIENT = Path(__file__).resolve().parent.parent / "adapters" / "hosts" / "hook_client.py"
HOOK = [sys.executable, "-I", "-S", str(CLIENT), "claude-code"]
FLOOR = [sys.executable, "-c", "pass"]
IN_PROCESS = {"FILECACHE_HOOK_SERVER": "0"}
FILE_BYTES = 10 * 1024
USAGE = {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
         "output_tokens": 10, "output_tokens_details": {"thinking_tokens": 0},
         "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
         "service_tier": "standard", "cache_creation": {"ephemeral_1h_input_tokens": 0,
         "ephemeral_5m_input_tokens": 0}, "inference_geo": "", "iterations": [],
         "speed": "standard", "fallback_credit": None}  # fmt: skip


class Transcript:
    """A Claude Code 2.1.328 transcript being written (one tool call: two entries)."""

    def __init__(self, path: Path, session: str, cwd: Path) -> None:
        self.path, self.session, self.cwd = path, session, cwd
        self.parent: str | None = None
        self.prompt = str(uuid.uuid4())
        self.out: TextIO = path.open("w", encoding="utf-8")
        self.turn = 0
        self.add({"type": "user", "promptId": self.prompt,
                  "message": {"role": "user", "content": "work through the project"}})  # fmt: skip

    def add(self, entry: dict[str, Any]) -> None:
        entry = {"parentUuid": self.parent, "isSidechain": False, **entry,
                 "uuid": str(uuid.uuid4()), "timestamp": "2026-12-02T00:47:59.711Z",
                 "userType": "external", "entrypoint": "sdk-cli", "cwd": str(self.cwd),
                 "sessionId": self.session, "version": "2.1.328", "gitBranch": "HEAD"}  # fmt: skip
        self.parent = entry["uuid"]
        self.out.write(json.dumps(entry, separators=(",", ":")) + "\n")

    def use(self, call: str, name: str, tool_input: dict[str, Any]) -> None:
        self.turn += 1
        block = {"type": "tool_use", "id": call, "name": name, "input": tool_input}
        self.add({"message": {"id": f"msg_{self.turn:06d}", "type": "message",
                              "role": "assistant", "model": "claude-opus-5-5", "content": [block],
                              "stop_reason": "tool_use", "stop_sequence": None, "usage": USAGE,
                              "stop_details": None},
                  "toolInputStreamMs": 1, "apiBlockIndex": 0, "requestRef": str(uuid.uuid4()),
                  "requestedModel": "claude-opus-5-5", "promptCacheRequested": "5m",
                  "type": "assistant", "effort": "medium", "perTurnEffort": "medium",
                  "madeBy": "model"})  # fmt: skip

    def result(self, call: str, content: str, tool_result: dict[str, Any]) -> None:
        block = {"tool_use_id": call, "type": "tool_result", "content": content}
        self.add({"promptId": self.prompt, "type": "user",
                  "message": {"role": "user", "content": [block]},
                  "toolUseResult": tool_result,
                  "sourceToolAssistantUUID": self.parent})  # fmt: skip

    def bash(self, call: str, command: str, stdout: str) -> None:
        self.use(call, "Bash", {"command": command, "description": "Run it"})
        self.result(call, stdout, {"stdout": stdout, "stderr": "", "interrupted": False,
                                   "isImage": False, "noOutputExpected": False})  # fmt: skip

    def read_result(self, call: str, path: Path, shown: str | None = None) -> None:
        text = path.read_text()
        total = text.count("\n") + 1
        numbered = "".join(f"{i}\t{line}\n" for i, line in enumerate(text.split("\n"), 1))
        self.result(call, shown if shown is not None else numbered,
                    {"type": "text", "file": {"filePath": str(path), "content": text,
                                              "numLines": total, "startLine": 1,
                                              "totalLines": total}})  # fmt: skip

    def flush(self) -> None:
        self.out.flush()


def read_payload(t: Transcript, path: Path, call: str) -> bytes:
    text = path.read_text()
    total = text.count("\n") + 1
    return json.dumps({
        "session_id": t.session, "transcript_path": str(t.path), "cwd": str(t.cwd),
        "permission_mode": "default", "hook_event_name": "PostToolUse", "tool_name": "Read",
        "tool_input": {"file_path": str(path)}, "tool_use_id": call,
        "tool_response": {"type": "text", "file": {"filePath": str(path), "content": text,
                          "numLines": total, "startLine": 1, "totalLines": total}},
    }).encode()  # fmt: skip


def timed(argv: list[str], stdin: bytes, env: dict[str, str], cwd: Path) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, check=True)
    return time.perf_counter() - start, done.stdout


def read_call(
    t: Transcript, path: Path, call: str, env: dict[str, str], argv: list[str] = HOOK
) -> tuple[float, bytes]:
    """One Read as Claude Code makes it: its tool_use written, the hook, its result written."""
    t.use(call, "Read", {"file_path": str(path)})
    t.flush()
    took, out = timed(argv, read_payload(t, path, call), env, t.cwd)
    shown = None
    if out:
        shown = json.loads(out)["hookSpecificOutput"]["updatedToolOutput"]["file"]["content"]
    t.read_result(call, path, shown)
    t.flush()
    return took, out


def earlier_calls(t: Transcript, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        stdout = "".join(f"step {i}: line {k} of the build output, nothing to see\n" for k in
                         range(6))  # fmt: skip
        t.bash(f"toolu_pad_{i:06d}", f"make step{i} 2>&1 | tail -6", stdout)
    t.flush()


def server_status(env: dict[str, str]) -> tuple[int, int, int] | None:
    """(pid, VmHWM kB, VmRSS kB) of the running hook server."""
    from filecache.adapters.hosts.hook_client import ping, server_sockets

    for sock in server_sockets(env):
        found = ping(sock)
        if found is None or found[0] is None:
            continue
        fields = {}
        with open(f"/proc/{found[0]}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                fields[key] = value.split()[0] if value.split() else ""
        return found[0], int(fields["VmHWM"]), int(fields["VmRSS"])
    return None


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--earlier", type=int, default=50_000)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--memory-mb", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args()
    from filecache.adapters.hosts.claude_index import read_held
    from filecache.adapters.hosts.hook_client import stop_servers

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-long-session-") as tmp:
        base = Path(tmp)
        project = base / "project"
        project.mkdir()
        env = {**os.environ, "XDG_CACHE_HOME": str(base / "cache"), "HOME": str(base)}
        env.pop("CLAUDE_PROJECT_DIR", None)
        env.pop("FILECACHE_HOOK_SERVER", None)
        env["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="fc-bench-", dir="/tmp")  # AF_UNIX
        index_dir = base / "cache" / "filecache" / "claude-code-transcripts"
        files = []
        for i in range(args.files):
            line = f"def handler_{i}(event, context):  # file {i}: return the event, unchanged\n"
            path = project / f"mod_{i}.py"
            path.write_text((line * (FILE_BYTES // len(line) + 1))[:FILE_BYTES].rsplit("\n", 1)[0]
                            + "\n")  # fmt: skip
            files.append(path)

        def session(name: str, earlier: int) -> Transcript:
            sid = str(uuid.uuid4())
            t = Transcript(base / f"{sid}.jsonl", sid, project)
            earlier_calls(t, earlier)
            return t

        started = time.perf_counter()
        short, long = session("short", 0), session("long", args.earlier)
        made = time.perf_counter() - started
        started = time.perf_counter()
        read_held(long.path, cache_dir=index_dir, among=[])  # the index, built once
        built = time.perf_counter() - started
        try:
            for t in (short, long):  # the first reads, through the hook (content)
                for i, path in enumerate(files):
                    read_call(t, path, f"toolu_first_{i:04d}", env)
            rows: dict[str, list[float]] = {
                k: [] for k in ("floor", "short", "long", "short-i", "long-i")
            }
            answered = 0
            for n in range(args.calls):
                path = files[n % len(files)]
                rows["floor"].append(timed(FLOOR, b"", env, project)[0])
                order = (short, long) if n % 2 else (long, short)
                for t in order:
                    took, out = read_call(t, path, f"toolu_m_{n:04d}", env)
                    rows["short" if t is short else "long"].append(took)
                    answered += t is long and b"[filecache]" in out
                for t in order:
                    took, _ = read_call(t, path, f"toolu_i_{n:04d}", {**env, **IN_PROCESS},
                                        HOOK)  # fmt: skip
                    rows["short-i" if t is short else "long-i"].append(took)
            sizes = (short.path.stat().st_size, long.path.stat().st_size)

            # -- memory: a fresh server, a huge transcript, parallel calls --------------------
            stop_servers(env)
            folder = os.path.join(env["XDG_RUNTIME_DIR"], "filecache")
            while os.path.isdir(folder) and any(n.endswith(".sock") for n in os.listdir(folder)):
                time.sleep(0.01)
            warm = session("warm", 0)
            read_call(warm, files[0], "toolu_warm", env)
            status = server_status(env)
            assert status is not None, "no hook server"
            pid, base_hwm, base_rss = status
            huge = session("huge", 0)
            target = args.memory_mb * 1_000_000
            i = 0
            while huge.path.stat().st_size < target:
                earlier_calls(huge, 5000, i)
                i += 5000
            huge_size = huge.path.stat().st_size
            stages = []
            for stage in ("first", "again"):
                calls = [f"toolu_{stage}_{k}" for k in range(args.parallel)]
                for call, path in zip(calls, files, strict=False):
                    huge.use(call, "Read", {"file_path": str(path)})
                huge.flush()
                payloads = [read_payload(huge, p, c) for c, p in zip(calls, files, strict=False)]
                started = time.perf_counter()
                with ThreadPoolExecutor(args.parallel) as pool:
                    took = list(pool.map(lambda p: timed(HOOK, p, env, project)[0], payloads))
                wall = time.perf_counter() - started
                for call, path in zip(calls, files, strict=False):
                    huge.read_result(call, path)
                huge.flush()
                after = server_status(env)
                assert after is not None and after[0] == pid, "the server changed"
                stages.append((stage, wall, max(took), after[1], after[2]))
        finally:
            stop_servers(env)
        log = base / "cache" / "filecache" / "hooks.log"
        failures = log.read_text() if log.exists() else ""

    load_after = os.getloadavg()
    print(f"Claude Code hook, long session: {args.earlier:,} earlier tool calls "
          f"({sizes[1] / 1e6:.1f} MB transcript) against a short one ({sizes[0] / 1e3:.0f} kB); "
          f"{args.calls} re-reads each (FileRef), interleaved; {answered} of {args.calls} "
          f"resident answers in the long session replaced; load average {load_before[0]:.1f} "
          f"-> {load_after[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
    print(f"transcripts written in {made:.1f} s; the long one's index built once in {built:.1f} s")
    print(f"{'':32} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    table = [
        ("python -c pass (floor)", rows["floor"]),
        ("short session, resident", rows["short"]),
        ("long session, resident", rows["long"]),
        ("short session, in-process", rows["short-i"]),
        ("long session, in-process", rows["long-i"]),
    ]
    for name, values in table:
        print(f"{name:32} {pct(values, 0.5):8.1f} {pct(values, 0.95):8.1f} "
              f"{statistics.fmean(values) * 1000:8.1f}")  # fmt: skip
    for label, a, b in (("resident", "long", "short"), ("in-process", "long-i", "short-i")):
        p50 = pct(rows[a], 0.5) / pct(rows[b], 0.5)
        mean = statistics.fmean(rows[a]) / statistics.fmean(rows[b])
        more = pct(rows[a], 0.5) - pct(rows[b], 0.5)
        print(f"long / short, {label}: {p50:.2f}x p50, {mean:.2f}x mean ({more:+.1f} ms p50; "
              f"target <= 2x)")  # fmt: skip
    print(f"\nhook server memory, {args.parallel} parallel Reads on a {huge_size / 1e6:.0f} MB "
          f"transcript (VmHWM: peak resident; target <= 300 MB)")  # fmt: skip
    print(f"  server after one call on a short session: VmHWM {base_hwm / 1024:.0f} MB, "
          f"VmRSS {base_rss / 1024:.0f} MB")  # fmt: skip
    for stage, wall, slowest, hwm, rss in stages:
        what = "index built" if stage == "first" else "index current"
        print(f"  {args.parallel} parallel calls ({what}): {wall:.1f} s wall, slowest "
              f"{slowest:.1f} s; VmHWM {hwm / 1024:.0f} MB, VmRSS {rss / 1024:.0f} MB")  # fmt: skip
    if failures:
        print(f"\nthe hook logged failures:\n{failures}")


if __name__ == "__main__":
    main()
