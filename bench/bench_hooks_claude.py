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

``--claude PATH`` measures instead what the hooks add to each tool call inside the real binary,
against no hook, in one run: ``claude -p`` against the scripted model of
``tests/anthropic_server.py`` reads a 10 KB file, then re-reads it ``--reads`` times (each a
FileRef with filecache), ``--runs`` times per setup, the setups interleaved run by run: no
hook; the command hooks ``filecache install claude-code`` writes (the thin client of the
resident server); the hooks ``filecache install claude-code --http-port PORT`` writes (http
hooks for PostToolUse and PostToolUseFailure to ``hook_http``'s server on 127.0.0.1, started
before the runs by ``hook_http.ensure_running``, what the installed SessionStart hook calls,
so every call is served); an http hook to a server that answers nothing (Claude Code's own
cost of an http hook). A tool call's time is the gap between two requests of the agent loop at
the model server (the tool, its hooks and Claude Code's own work between them); "added" is a
setup's gap minus the no-hook gap of the same call of the same run index.

    .venv/bin/python bench/bench_hooks_claude.py --claude PATH [--runs 5] [--reads 12]
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


TESTS = Path(__file__).resolve().parent.parent / "tests"
SETUPS = (
    "no hook",
    "command hook",
    "http hook (--http)",
    "http, empty answer",
    "http, nothing listening",
)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _empty_server() -> Any:
    """An http hook server in this process that answers every call with nothing."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Empty(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Empty)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _http_settings(port: int) -> dict[str, Any]:
    from filecache.adapters.hosts.hook_http import http_hook

    hook = http_hook(port)
    matcher = "Read|Edit|MultiEdit|Write|NotebookEdit|Bash"
    return {"hooks": {"PostToolUse": [{"matcher": matcher, "hooks": [hook]}]}}


def _one_run(claude: str, setup: str, base: Path, port: int, reads: int) -> tuple[list[float], str]:
    """One ``claude -p``: the gaps between the agent loop's requests (s), and every request."""
    sys.path.insert(0, str(TESTS))
    from anthropic_server import Script, ScriptedModel, is_main_loop, text, tool_use

    home, project = base / "home", base / "project"
    project.mkdir(parents=True)
    (home / ".claude").mkdir(parents=True)
    target = project / "handlers.py"
    line = "def handler(event, context):  # return the event, unchanged\n"
    target.write_text(line * (FILE_BYTES // len(line)))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_API_KEY": "sk-test",
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_RUNTIME_DIR": str(base / "run"),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_TELEMETRY": "1"}  # fmt: skip
    (base / "run").mkdir(mode=0o700)
    if setup == "command hook":
        subprocess.run([sys.executable, "-m", "filecache", "install", "claude-code", "--command"],
                       cwd=project, env=env, check=True, capture_output=True)  # fmt: skip
    elif setup == "http hook (--http)":
        subprocess.run([sys.executable, "-m", "filecache", "install", "claude-code",
                        "--http-port", str(port)],
                       cwd=project, env=env, check=True, capture_output=True)  # fmt: skip
    elif setup.startswith("http"):
        (home / ".claude" / "settings.json").write_text(json.dumps(_http_settings(port)))
    turns: list[Any] = [[tool_use("Read", {"file_path": str(target)}, f"toolu_{i:03d}")]
                        for i in range(reads + 1)]  # fmt: skip
    script = Script([*turns, [text("done")]])
    arrivals: list[float] = []

    def timed_script(body: dict[str, Any]) -> Any:
        if is_main_loop(body):
            arrivals.append(time.perf_counter())
        return script(body)

    with ScriptedModel(timed_script) as model:
        env["ANTHROPIC_BASE_URL"] = model.base_url
        subprocess.run([claude, "-p", "read the file", "--allowedTools", "Read",
                        "--output-format", "json"], cwd=project, env=env, check=True,
                       capture_output=True, timeout=300)  # fmt: skip
        sent = json.dumps(model.main_requests()[-1])  # the last request: every answer
    gaps = [b - a for a, b in zip(arrivals[1:], arrivals[2:], strict=False)]  # the re-reads
    return gaps[:reads], sent


def real_binary(claude: str, runs: int, reads: int) -> None:
    """``--claude``: no hook vs the command hooks vs an http hook, in the real binary."""
    from filecache.adapters.hosts.hook_client import stop_servers

    load_before = os.getloadavg()
    port = _free_port()
    empty = _empty_server()  # Claude Code's own cost of an http hook: an answer of nothing
    empty_port = empty.server_address[1]
    gaps: dict[str, list[list[float]]] = {s: [] for s in SETUPS}
    short = dict.fromkeys(SETUPS, 0)
    with tempfile.TemporaryDirectory(prefix="bench-hooks-real-") as tmp:
        from filecache.adapters.hosts import hook_http

        runtime = Path(tmp) / "server-run"
        runtime.mkdir(mode=0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)  # the server's pid file, for its stop
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "server-cache")
        try:
            hook_http.ensure_running([port])  # as the installed SessionStart hook starts it
            for _ in range(600):  # until it answers
                if hook_http.status(port) is not None:
                    break
                time.sleep(0.05)
            for run in range(runs):
                for number, setup in enumerate(SETUPS):
                    base = Path(tmp) / f"{run}-{number}"
                    try:
                        to = {
                            "http, empty answer": empty_port,
                            "http, nothing listening": _free_port(),
                        }.get(setup, port)
                        got, sent = _one_run(claude, setup, base, to, reads)
                    finally:
                        stop_servers({"XDG_RUNTIME_DIR": str(base / "run"),
                                      "XDG_CACHE_HOME": str(base / "home" / ".cache")})  # fmt: skip
                    gaps[setup].append(got)
                    short[setup] += sent.count("unchanged since your result")
        finally:
            hook_http.stop_servers()  # the server this bench started
            empty.shutdown()
    load_after = os.getloadavg()
    print(f"Claude Code {_version(claude)}, {runs} runs x {reads} re-reads of a 10 KB file per "
          f"setup, interleaved; 'unchanged since your result' in the last requests: "
          + ", ".join(f"{s} {short[s]}" for s in SETUPS)
          + f"; load average {load_before[0]:.1f} -> {load_after[0]:.1f} on "
          f"{os.cpu_count()} cores")  # fmt: skip
    print(f"{'per tool call':36} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    flat = {s: [g for run in gaps[s] for g in run] for s in SETUPS}
    for setup in SETUPS:
        values = flat[setup]
        print(f"{setup:34} {pct(values, 0.5):8.1f} {pct(values, 0.95):8.1f} "
              f"{statistics.fmean(values) * 1000:8.1f}")  # fmt: skip
    base_gaps = gaps["no hook"]
    for setup in SETUPS[1:]:
        added = [g - b for run, plain in zip(gaps[setup], base_gaps, strict=True)
                 for g, b in zip(run, plain, strict=False)]  # fmt: skip
        print(f"{setup + ' - no hook (paired)':34} {pct(added, 0.5):8.1f} "
              f"{pct(added, 0.95):8.1f} {statistics.fmean(added) * 1000:8.1f}")  # fmt: skip
        ratio = pct(flat[setup], 0.5) / pct(flat["no hook"], 0.5)
        print(f"{setup + ' / no hook (p50 ratio)':34} {ratio:8.2f}")


def _version(claude: str) -> str:
    done = subprocess.run([claude, "--version"], capture_output=True, text=True, timeout=60)
    return done.stdout.split()[0] if done.stdout else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--claude", help="the real binary: no hook vs command vs http hook")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--reads", type=int, default=12)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--padding", type=int, default=300)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--cold", type=int, default=8, help="cold starts to time")
    parser.add_argument("--first", action="store_true", help="first reads (content)")
    args = parser.parse_args()
    if args.claude:
        real_binary(args.claude, args.runs, args.reads)
        return
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
