"""A scripted OpenAI Responses API on 127.0.0.1, for driving the real Codex CLI in tests.

It answers ``POST /v1/responses`` from a script of model turns, one turn per request, streamed as
server-sent events (``response.created``, one ``response.output_item.done`` per item, then
``response.completed``: all Codex needs), and it RECORDS every request body, so a test asserts on
what the model saw (the ``function_call_output`` / ``custom_tool_call_output`` items Codex sent
back), never only on filecache's own records.

A turn is a list of output items (``exec_call``, ``patch_call``, ``message``) or a callable that
gets the request body and returns one (a turn that depends on what the model was sent). When the
script runs out, the model says ``done`` (an assistant message, which ends ``codex exec``).

State: the script and the recorded requests belong to the server; the handler threads append
under one lock. Nothing here reaches the network beyond the loopback port it binds.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Item = dict[str, Any]
Turn = Sequence[Item] | Callable[[dict[str, Any]], Sequence[Item]]


def exec_call(call_id: str, cmd: str) -> Item:
    """The model runs ``cmd`` through Codex's shell tool ``exec_command``."""
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "exec_command",
        "arguments": json.dumps({"cmd": cmd}),
    }


def patch_call(call_id: str, patch: str) -> Item:
    """The model edits files through Codex's freeform ``apply_patch`` tool."""
    return {
        "type": "custom_tool_call",
        "id": f"ctc_{call_id}",
        "call_id": call_id,
        "name": "apply_patch",
        "input": patch,
    }


def message(text: str) -> Item:
    """An assistant message (a turn made only of it ends the exchange)."""
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{abs(hash(text)) % 10**9}",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


class ScriptedResponses:
    """The server: ``url`` (``http://127.0.0.1:PORT/v1``), ``requests`` (the bodies received)."""

    def __init__(self, script: Sequence[Turn] = (), *, input_tokens: int = 100) -> None:
        self.input_tokens = input_tokens  # reported as usage: a high figure makes Codex compact
        self._lock = threading.Lock()
        self._script: list[Turn] = list(script)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.compactions = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def add(self, *turns: Turn) -> None:
        """Append turns to the script (for the next ``codex exec`` on the same server)."""
        with self._lock:
            self._script.extend(turns)

    def start(self) -> ScriptedResponses:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next_turn(self, body: dict[str, Any]) -> list[Item]:
        with self._lock:
            self.requests.append(body)
            if is_compaction(body):  # Codex asks for a summary: answered outside the script
                self.compactions += 1
                return [message(SUMMARY)]
            turn = self._script.pop(0) if self._script else [message("done")]
        return list(turn(body) if callable(turn) else turn)

    # -- what the model saw ------------------------------------------------------------------
    def outputs(self) -> dict[str, str]:
        """Every tool result the model was sent, by call id (the last request that carries it)."""
        found: dict[str, str] = {}
        for body in self.requests:
            for item in body.get("input", []):
                if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                    found[item["call_id"]] = output_text(item.get("output"))
        return found


SUMMARY = "Summary: the files were read; nothing else to report."
_COMPACTION_PROMPT = "CONTEXT CHECKPOINT COMPACTION"  # Codex's summarization prompt (0.169)


def is_compaction(body: dict[str, Any]) -> bool:
    """A request in which Codex asks the model to summarise the context (local compaction)."""
    items = body.get("input") or []
    last = items[-1] if items else {}
    if last.get("type") != "message" or last.get("role") != "user":
        return False
    return any(_COMPACTION_PROMPT in str(p.get("text", "")) for p in last.get("content") or [])


def output_text(output: Any) -> str:
    """The text of a ``*_call_output`` item (a string, or a list of content parts)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    if isinstance(output, dict):
        return str(output.get("content", output))
    return str(output)


@contextmanager
def scripted_responses(script: Sequence[Turn] = ()) -> Iterator[ScriptedResponses]:
    server = ScriptedResponses(script).start()
    try:
        yield server
    finally:
        server.stop()


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _handler_for(server: ScriptedResponses) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib name
            return

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            server.paths.append("GET " + self.path)
            body = json.dumps({"object": "list", "data": []}).encode()
            self.send_response(200 if self.path.rstrip("/").endswith("/models") else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            server.paths.append("POST " + self.path)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            if self.headers.get("content-encoding") == "zstd":
                self._reply_json(415, {"error": {"message": "zstd request bodies unsupported"}})
                return
            body = json.loads(raw or b"{}")
            if not self.path.rstrip("/").endswith("/responses"):
                self._reply_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            items = server._next_turn(body)
            rid = f"resp_{len(server.requests)}"
            events = [{"type": "response.created", "response": {"id": rid}}]
            for index, item in enumerate(items):
                events.append(
                    {"type": "response.output_item.done", "output_index": index, "item": item}
                )
            usage = {
                "input_tokens": server.input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": server.input_tokens + 10,
            }
            events.append({"type": "response.completed", "response": {"id": rid, "usage": usage}})
            payload = b"".join(_sse(e) for e in events)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _reply_json(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
