"""A scripted OpenAI Chat Completions server on 127.0.0.1 for driving a real host binary.

The host (opencode, through its bundled ``@ai-sdk/openai-compatible`` provider) streams from
``POST /v1/chat/completions`` with ``"stream": true``. This server answers each request that offers
tools with the next step of a script: the tool calls of one assistant turn (``Call``), or a final
text. Requests without tools (title generation, a compaction summary) get a short text and do not
advance the script. Every request body is recorded, so a test asserts what the model saw: the
``tool`` messages the host sent back, by the call ids this server chose.

Owned state: ``requests`` and the script position, both behind one lock (the server thread
appends, the test thread reads).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SUMMARY = "Summary of the conversation so far: the scripted session read and edited files."


@dataclass(frozen=True)
class Call:
    """One tool call of an assistant turn: the id the host will report back as ``callID``."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Step:
    """One assistant turn: tool calls (run in parallel by the host), or a final text."""

    calls: tuple[Call, ...] = ()
    text: str = ""
    prompt_tokens: int = 100  # the usage reported: a large figure makes the host compact
    before: Callable[[], None] | None = None  # run as the step is served (an outside change)


@dataclass
class ScriptedChat:
    """The server; ``with ScriptedChat(steps) as chat:`` serves on ``chat.base_url``."""

    steps: Sequence[Step]
    requests: list[dict[str, Any]] = field(default_factory=list)
    _position: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ScriptedChat:
        chat = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # /v1/models and the like: nothing to offer
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                step = chat._record(body)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for chunk in _chunks(step, body.get("model", "scripted")):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def _record(self, body: dict[str, Any]) -> Step:
        step: Step
        with self._lock:
            self.requests.append(body)
            if not body.get("tools"):
                return Step(text=SUMMARY if _asks_summary(body) else "Scripted title")
            if self._position >= len(self.steps):
                return Step(text="done")
            step = self.steps[self._position]
            self._position += 1
        if step.before is not None:
            step.before()
        return step

    # -- what the model saw ----------------------------------------------------------------
    def tool_requests(self) -> list[dict[str, Any]]:
        """The recorded requests that offered tools (the agent's own turns), in order."""
        with self._lock:
            return [r for r in self.requests if r.get("tools")]

    def result(self, call_id: str) -> str:
        """The text the model was shown for ``call_id``: its ``tool`` message in the first
        request that carried it."""
        for body in self.tool_requests():
            for message in body.get("messages", []):
                if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
                    return _text(message.get("content"))
        raise KeyError(f"no request carried a result for {call_id}")

    def last_result(self, call_id: str) -> str | None:
        """The text of ``call_id``'s result in the last request (None: no longer sent)."""
        requests = self.tool_requests()
        for message in requests[-1].get("messages", []) if requests else []:
            if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
                return _text(message.get("content"))
        return None

    def finished(self) -> bool:
        with self._lock:
            return self._position >= len(self.steps)


def _asks_summary(body: dict[str, Any]) -> bool:
    return any("summar" in _text(m.get("content")).lower() for m in body.get("messages", []))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _chunks(step: Step, model: str) -> Iterator[dict[str, Any]]:
    base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0}
    base["model"] = model
    if step.calls:
        for index, call in enumerate(step.calls):
            delta = {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                ],
            }
            yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        finish = "tool_calls"
    else:
        delta = {"role": "assistant", "content": step.text}
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        finish = "stop"
    usage = {"prompt_tokens": step.prompt_tokens, "completion_tokens": 10}
    usage["total_tokens"] = step.prompt_tokens + 10
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}
