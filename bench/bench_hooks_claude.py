"""The latency filecache's Claude Code hook adds to each Read, against ``python -c pass``.

Claude Code runs the hook command (``filecache install claude-code`` writes
``<python> -I -S <.../hosts/hook_client.py> claude-code``) as one process per tool call and
waits for it. That process is the thin client of the resident hook server (``hook_client``): a bare
interpreter start and a round trip to the server, which reads the transcript and the store and
answers. The floor is the same interpreter doing nothing (``python -c pass``), measured in the
same run, interleaved call by call with the hook so that load from elsewhere on the machine hits
both alike. Rows:

- ``resident (warm)``: the server is running (the normal case); ``resident, -m form``: the same
  through ``python -I -m filecache.adapters.hosts`` (with ``site``: what earlier installs wrote);
- ``in-process``: ``FILECACHE_HOOK_SERVER=0``, the whole hook in the process (the fallback, and
  what every call cost before the server);
- ``cold start``: the first call after the server stopped (``--cold`` times, each after
  ``filecache hook --stop``): it starts the server and waits until it listens.

The setup is a long session: a project of ``--files`` files of 10 KB, and a transcript (in
Claude Code's format, as ``fixtures/hosts/claude-code/session.jsonl`` has it) in which each of
them was read once (``--files`` tool calls whose results are the files' text, numbered, as
Claude Code writes them), plus ``--padding`` further Bash calls with 2 KB outputs, so the hook
parses a transcript of a few MB as it would late in a real session. Each measured call is a
re-read of one of the files (a FileRef comes back); ``--first`` measures first reads instead
(content: the hook answers nothing).

    .venv/bin/python bench/bench_hooks_claude.py [--files 50] [--padding 300] [--calls 60]
        [--cold 8] [--first]
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
from pathlib import Path
from typing import Any

from filecache.adapters.hosts.config_files import GUARD

FILE_BYTES = 10 * 1024
CLIENT = Path(__file__).resolve().parent.parent / "adapters" / "hosts" / "hook_client.py"
HOOK = [sys.executable, "-I", "-S", str(CLIENT), "claude-code"]  # the client, unguarded
# The command as `filecache install` writes it: the client inside the /bin/sh guard
# (config_files.GUARD: run only when the interpreter and the client exist; output only on exit 0).
GUARDED = ["/bin/sh", "-c", GUARD, "filecache-hook", sys.executable, str(CLIENT), "claude-code"]
HOOK_M = [sys.executable, "-I", "-m", "filecache.adapters.hosts", "claude-code"]  # earlier installs
FLOOR = [sys.executable, "-c", "pass"]
IN_PROCESS = {"FILECACHE_HOOK_SERVER": "0"}


def numbered(text: str) -> str:
    return "\n".join(f"{i}\t{line}" for i, line in enumerate(text.split("\n"), 1))


class Transcript:
    """Entries in Claude Code's shape: a chain of uuids, one assistant entry per tool_use."""

    def __init__(self, path: Path, session: str, cwd: Path) -> None:
        self.path, self.session, self.cwd = path, session, cwd
        self.parent: str | None = None
        self.out = path.open("w", encoding="utf-8")
        self.add("user", {"role": "user", "content": "work on the project"})

    def add(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        entry = {"parentUuid": self.parent, "isSidechain": False, "type": kind,
                 "message": message, "uuid": str(uuid.uuid4()), "sessionId": self.session,
                 "cwd": str(self.cwd), "version": "2.1.328", **extra}  # fmt: skip
        self.parent = entry["uuid"]
        self.out.write(json.dumps(entry) + "\n")

    def call(self, call_id: str, name: str, tool_input: dict[str, Any], result: str) -> None:
        use = {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}
        self.add("assistant", {"id": f"msg_{call_id}", "role": "assistant", "content": [use]})
        block = {"tool_use_id": call_id, "type": "tool_result", "content": result}
        self.add("user", {"role": "user", "content": [block]})


def read_payload(session: str, transcript: Path, cwd: Path, path: Path, call: str) -> bytes:
    text = path.read_text()
    total = text.count("\n") + 1
    return json.dumps({
        "session_id": session, "transcript_path": str(transcript), "cwd": str(cwd),
        "permission_mode": "default", "hook_event_name": "PostToolUse", "tool_name": "Read",
        "tool_input": {"file_path": str(path)}, "tool_use_id": call,
        "tool_response": {"type": "text", "file": {"filePath": str(path), "content": text,
                          "numLines": total, "startLine": 1, "totalLines": total}},
    }).encode()  # fmt: skip


def timed(argv: list[str], stdin: bytes, env: dict[str, str], cwd: Path) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, check=True)
    return time.perf_counter() - start, done.stdout


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--padding", type=int, default=300)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--cold", type=int, default=8, help="cold starts to time")
    parser.add_argument("--first", action="store_true", help="first reads (content)")
    args = parser.parse_args()
    from filecache.adapters.hosts.hook_client import stop_servers

    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="bench-hooks-claude-") as tmp:
        base = Path(tmp)
        project = base / "project"
        project.mkdir()
        env = {**os.environ, "XDG_CACHE_HOME": str(base / "cache"), "HOME": str(base)}
        env.pop("CLAUDE_PROJECT_DIR", None)
        env.pop("FILECACHE_HOOK_SERVER", None)
        env["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="fc-bench-", dir="/tmp")  # AF_UNIX
        session = str(uuid.uuid4())
        transcript_path = base / f"{session}.jsonl"
        transcript = Transcript(transcript_path, session, project)
        files = []
        for i in range(args.files):
            line = f"def handler_{i}(event, context):  # file {i}: return the event, unchanged\n"
            path = project / f"mod_{i}.py"
            text = (line * (FILE_BYTES // len(line) + 1))[:FILE_BYTES]
            path.write_text(text.rsplit("\n", 1)[0] + "\n")
            files.append(path)
        if not args.first:  # the first read of each file, through the hook as in a session
            for i, path in enumerate(files):
                call = f"toolu_first_{i:04d}"
                transcript.call(call, "Read", {"file_path": str(path)}, numbered(path.read_text()))
                transcript.out.flush()
                payload = read_payload(session, transcript_path, project, path, call)
                timed(HOOK, payload, env, project)
        for i in range(args.padding):
            transcript.call(f"toolu_pad_{i:04d}", "Bash", {"command": f"make step{i}"}, "x" * 2048)
        transcript.out.close()
        size = transcript_path.stat().st_size

        rows: dict[str, list[float]] = {
            "floor": [],
            "resident": [],
            "m": [],
            "guarded": [],
            "in-process": [],
        }
        short = 0
        try:
            for n in range(args.calls):
                path = files[n % len(files)]
                if args.first:
                    path = project / f"new_{n}.py"
                    path.write_text(files[0].read_text())
                payload = read_payload(session, transcript_path, project, path, f"toolu_m_{n:04d}")
                floor, _ = timed(FLOOR, b"", env, project)
                took, out = timed(HOOK, payload, env, project)
                payload = read_payload(session, transcript_path, project, path, f"toolu_d_{n:04d}")
                rows["m"].append(timed(HOOK_M, payload, env, project)[0])
                payload = read_payload(session, transcript_path, project, path, f"toolu_g_{n:04d}")
                guarded, out_guarded = timed(GUARDED, payload, env, project)
                rows["guarded"].append(guarded)
                if (b"[filecache]" in out) != (b"[filecache]" in out_guarded):
                    sys.exit(f"the guarded command answers otherwise: {out_guarded!r}")
                payload = read_payload(session, transcript_path, project, path, f"toolu_i_{n:04d}")
                alone, out_alone = timed(HOOK, payload, {**env, **IN_PROCESS}, project)
                rows["floor"].append(floor)
                rows["resident"].append(took)
                rows["in-process"].append(alone)
                short += b"[filecache]" in out
                if (b"[filecache]" in out) != (b"[filecache]" in out_alone):
                    sys.exit(f"the resident and in-process answers differ: {out!r} {out_alone!r}")
            cold, cold_floor = [], []
            for n in range(args.cold):
                stop_servers(env)
                folder = os.path.join(env["XDG_RUNTIME_DIR"], "filecache")
                while any(name.endswith(".sock") for name in os.listdir(folder)):
                    time.sleep(0.01)  # the stopped server unlinks its socket as it ends
                path = files[n % len(files)]
                payload = read_payload(session, transcript_path, project, path, f"toolu_c_{n:04d}")
                cold_floor.append(timed(FLOOR, b"", env, project)[0])
                cold.append(timed(HOOK, payload, env, project)[0])
        finally:
            stop_servers(env)
        log = base / "cache" / "filecache" / "hooks.log"
        if log.exists():
            sys.exit(f"the hook logged failures:\n{log.read_text()}")

    load_after = os.getloadavg()
    kind = "first reads (content)" if args.first else "re-reads (FileRef)"
    print(f"Claude Code hook, {args.calls} {kind}; transcript {size / 1e6:.1f} MB "
          f"({args.files + args.padding} tool calls); {short} answers replaced; load average "
          f"{load_before[0]:.1f} -> {load_after[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
    print(f"{'':34} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    floor_times = rows["floor"]
    table = [
        ("python -c pass (floor)", floor_times),
        ("hook, resident (warm)", rows["resident"]),
        ("hook, resident, -m form", rows["m"]),
        ("hook as installed (guarded), warm", rows["guarded"]),
        ("hook, in-process", rows["in-process"]),
        ("resident - floor", [h - f for h, f in zip(rows["resident"], floor_times, strict=True)]),
        ("resident -m form - floor", [h - f for h, f in zip(rows["m"], floor_times, strict=True)]),
        (
            "guarded - floor",
            [h - f for h, f in zip(rows["guarded"], floor_times, strict=True)],
        ),
        (
            "in-process - floor",
            [h - f for h, f in zip(rows["in-process"], floor_times, strict=True)],
        ),
        (f"cold start ({args.cold})", cold),
        ("cold start - floor", [h - f for h, f in zip(cold, cold_floor, strict=True)]),
    ]
    for name, values in table:
        if values:
            print(f"{name:34} {pct(values, 0.5):8.1f} {pct(values, 0.95):8.1f} "
                  f"{statistics.fmean(values) * 1000:8.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
