"""The latency the gateway adds to each model request, and what it holds per conversation.

A scripted upstream on 127.0.0.1 (the stdlib's threading HTTP server: it reads the body and
streams a short server-sent-events answer) is called two ways in the same run, request by
request interleaved, so load from elsewhere on the machine hits both alike:
- ``direct``: the client to the upstream;
- ``gateway``: the client to ``filecache gateway --upstream <it>`` (a subprocess, its store a
  fresh SQLite file), which reads the body, runs the transform and relays the stream.

The requests are what Claude Code sends late in a long session: an Anthropic Messages body
(``stream: true``, tools, a system prompt) with ``--files`` files read (``Read`` results in
Claude Code's ``N<TAB>line`` shape), some re-read whole or in part, some changed and read
again, and Bash output; each request is the conversation so far plus one turn, so the last
``--measure`` requests are all about ``--tokens`` tokens (~4 bytes a token). Each is sent
``--repeat`` times through each path (a host resends its history every turn: the repeats meet
the conversation's remembered decisions).

Printed: p50 / p99 of each path and of the added latency (gateway minus direct, request by
request), their ratio, the targets (p50 <= 5 ms, p99 <= 20 ms at 150k tokens); then memory:
the store's bytes and the gateway's resident memory after ``--conversations`` conversations
(per conversation); and the count of requests whose bytes before the newest turn differ from the
previous request's rewrite (cache-breaking rewrites), beside the prunes the transform reported.

    .venv/bin/python bench/bench_gateway.py [--tokens 150000] [--measure 20] [--repeat 5]
        [--conversations 20] [--window 200000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SSE = b"".join(
    b"event: %s\ndata: %s\n\n" % (kind.encode(), json.dumps({"type": kind}).encode())
    for kind in ("message_start", "content_block_start", "content_block_delta",
                 "content_block_stop", "message_delta", "message_stop")
)  # fmt: skip
SYSTEM = "You are a coding agent. " * 400  # ~10k chars, as a host's system prompt
TOOLS = [{"name": n, "description": "tool " * 200, "input_schema": {"type": "object"}}
         for n in ("Read", "Edit", "Write", "Bash", "Grep", "Glob")]  # fmt: skip


class Upstream:
    """Reads each request and answers the same short stream; records each body's messages."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def setup(self) -> None:
                super().setup()
                nodelay(self.connection)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if upstream.keep:
                    upstream.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(SSE)))
                self.end_headers()
                self.wfile.write(SSE)

        self.keep = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


def nodelay(sock: socket.socket) -> None:
    """No Nagle: a small write is sent at once. Without it the stdlib server's header and
    body writes meet the peer's delayed ACK, and a path measures 40 ms of that instead of
    itself (either path, depending on the connection's state)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def connect(port: int) -> http.client.HTTPConnection:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.connect()
    assert conn.sock is not None
    nodelay(conn.sock)
    return conn


def file_text(n: int, version: int = 0) -> str:
    return "".join(
        f"def f{n}_{i}(x):  # file {n} line {i}{_mark(version, i)}\n    return x + {i} * {n}\n"
        for i in range(1, 121)
    )


def _mark(version: int, line: int) -> str:
    return f" v{version}" if version and line % 40 == 7 else ""


def numbered(text: str, start: int = 1) -> str:
    return "".join(f"{i}\t{line}\n" for i, line in enumerate(text.splitlines(), start))


def conversation(tokens: int, key: str) -> list[list[dict[str, Any]]]:
    """The messages of each request, growing by one turn, until about ``tokens`` tokens."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"work on the project {key}"}]
    requests: list[list[dict[str, Any]]] = []
    size, turn, versions = 0, 0, {}
    while size < tokens * 4:
        n = turn % 45
        call = f"toolu_{key}_{turn:04d}"
        if turn < 45 or turn % 5 == 1:  # first reads, then some whole re-reads
            tool, args = "Read", {"file_path": f"/p/f{n}.py"}
            text = numbered(file_text(n, versions.get(n, 0)))
        elif turn % 5 == 2:  # a part of a file read before
            tool, args = "Read", {"file_path": f"/p/f{n}.py", "offset": 20, "limit": 30}
            text = numbered("".join(file_text(n, versions.get(n, 0)).splitlines(True)[19:49]), 20)
        elif turn % 5 == 3:  # changed, then read again
            versions[n] = versions.get(n, 0) + 1
            tool, args = "Read", {"file_path": f"/p/f{n}.py"}
            text = numbered(file_text(n, versions[n]))
        else:  # test output
            tool, args = "Bash", {"command": "pytest -q", "description": "tests"}
            text = "".join(f"tests/test_{turn}_{i}.py ....... [ {i}%]\n" for i in range(60))
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": call, "name": tool, "input": args}]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call, "content": text}]})  # fmt: skip
        size += len(text) + 120
        requests.append([*messages])
        turn += 1
    return requests


def body(messages: list[dict[str, Any]], key: str) -> bytes:
    return json.dumps({
        "model": "claude-bench", "max_tokens": 4096, "stream": True, "system": SYSTEM,
        "tools": TOOLS, "metadata": {"user_id": f"user_bench_account__session_{key}"},
        "messages": messages,
    }).encode()  # fmt: skip


HEADERS = {"content-type": "application/json", "x-api-key": "sk-bench",
           "anthropic-version": "2023-06-01"}  # fmt: skip


def send(conn: http.client.HTTPConnection, data: bytes, path: str = "/v1/messages") -> float:
    started = time.perf_counter()
    conn.request("POST", path, body=data, headers=HEADERS)
    got = conn.getresponse()
    payload = got.read()
    elapsed = time.perf_counter() - started
    assert got.status == 200 and payload == SSE, (got.status, payload[:200])
    return elapsed * 1000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(found[1]) if found else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=150_000)
    parser.add_argument("--measure", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--window", type=int, default=200_000)
    args = parser.parse_args()

    upstream = Upstream()
    work = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    store = work / "gateway.db"
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "HOME": str(work)}
    gateway = subprocess.Popen(
        [sys.executable, "-m", "filecache", "gateway", "--port", "0", "--upstream",
         f"http://127.0.0.1:{upstream.port}", "--store", str(store), "--window", str(args.window)],
        stdout=subprocess.PIPE, stderr=open(work / "gateway.log", "wb"), env=env,
    )  # fmt: skip
    assert gateway.stdout is not None
    port = int(gateway.stdout.readline().decode().strip().rsplit(":", 1)[1])
    try:
        direct_conn, gateway_conn = connect(upstream.port), connect(port)
        requests = conversation(args.tokens, "main")
        for messages in requests[: -args.measure]:  # the session up to the measured turns
            send(gateway_conn, body(messages, "main"))
        direct: list[float] = []
        through: list[float] = []
        added: list[float] = []
        relay: list[float] = []  # the same bytes on a path the transform does not read
        sizes = []
        for messages in requests[-args.measure :]:
            data = body(messages, "main")
            sizes.append(len(data))
            for _ in range(args.repeat):
                d = send(direct_conn, data)
                g = send(gateway_conn, data)
                r = send(gateway_conn, data, "/v1/messages/count_tokens")
                direct.append(d)
                through.append(g)
                added.append(g - d)
                relay.append(r - d)
        # Cache-breaking rewrites: the bytes before the newest turn differ from the previous
        # request's (as the upstream received them).
        upstream.keep = True
        fresh = conversation(args.tokens // 3, "cache")
        for messages in fresh:
            send(gateway_conn, body(messages, "cache"))
        upstream.keep = False
        pruned_fresh = _pruned_in((work / "gateway.log").read_text(), len(fresh))
        breaks = 0
        previous: list[Any] | None = None
        for raw in upstream.bodies:
            sent = json.loads(raw)["messages"]
            if previous is not None and sent[: len(previous)] != previous:
                breaks += 1
            previous = sent
        # Memory per conversation: more conversations of the same size.
        rss_before, store_before = rss_kb(gateway.pid), _size(store)
        for c in range(args.conversations):
            for messages in conversation(args.tokens // 3, f"c{c}")[-3:]:
                send(gateway_conn, body(messages, f"c{c}"))
        rss_after, store_after = rss_kb(gateway.pid), _size(store)
    finally:
        gateway.terminate()
        gateway.wait(60)
    log = (work / "gateway.log").read_text()
    counts = [
        tuple(map(int, m))
        for m in re.findall(r"tokens=(\d+)->(\d+) refs=(\d+) diffs=(\d+) pruned=(\d+)", log)
    ]
    tokens_in = statistics.mean(sizes) / 4
    print(f"requests: {args.measure} x {args.repeat} per path, ~{tokens_in:,.0f} tokens "
          f"({statistics.mean(sizes) / 1e6:.2f} MB) each; window {args.window:,}")  # fmt: skip
    print(f"{'path':<48}{'p50 ms':>10}{'p99 ms':>10}")
    rows = (("direct", direct), ("gateway", through), ("added", added),
            ("added, relay only (count_tokens: no transform)", relay))  # fmt: skip
    for name, values in rows:
        print(f"{name:<48}{pct(values, 0.5):>10.2f}{pct(values, 0.99):>10.2f}")
    print(f"ratio gateway/direct: p50 {pct(through, 0.5) / pct(direct, 0.5):.2f}x, "
          f"p99 {pct(through, 0.99) / pct(direct, 0.99):.2f}x")  # fmt: skip
    p50, p99 = pct(added, 0.5), pct(added, 0.99)
    print(f"target added p50 <= 5 ms: {'met' if p50 <= 5 else 'NOT met'} ({p50:.2f}); "
          f"p99 <= 20 ms: {'met' if p99 <= 20 else 'NOT met'} ({p99:.2f})")  # fmt: skip
    before = sum(c[0] for c in counts)
    after = sum(c[1] for c in counts)
    fewer = 100 * (1 - after / max(before, 1))
    print(f"transform over {len(counts)} requests: tokens {before:,} -> {after:,} "
          f"({fewer:.1f}% fewer), FileRefs {sum(c[2] for c in counts)}, "
          f"diffs {sum(c[3] for c in counts)}, pruned {sum(c[4] for c in counts)}")  # fmt: skip
    print(f"cache-breaking rewrites: {breaks} of {len(upstream.bodies) - 1} consecutive requests "
          f"(results the transform pruned there: {pruned_fresh})")  # fmt: skip
    per = max(args.conversations, 1)
    store_kb = (store_after - store_before) / per / 1024
    rss_per = (rss_after - rss_before) / per
    print(
        f"memory per conversation ({args.conversations} more): store {store_kb:.1f} KB, "
        f"gateway RSS {rss_per:.0f} KB (RSS now {rss_after / 1024:.0f} MB)"
    )


def _size(store: Path) -> int:
    return sum(p.stat().st_size for p in store.parent.glob(store.name + "*"))


def _pruned_in(log: str, last: int) -> int:
    lines = [line for line in log.splitlines() if "pruned=" in line]
    return sum(int(re.search(r"pruned=(\d+)", line)[1]) for line in lines[-last:])  # type: ignore[index]


if __name__ == "__main__":
    main()
