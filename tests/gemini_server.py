"""A scripted Gemini API (``generateContent``) on 127.0.0.1, for driving the real Gemini CLI.

The server answers ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` (server-sent
events, one ``GenerateContentResponse`` per ``data:`` line, as Gemini CLI asks for),
``:generateContent`` (one JSON response: Gemini CLI's side requests, e.g. the next-speaker
check) and ``:countTokens``. Every request body is RECORDED (``ScriptedGemini.requests``), so a
test asserts what the model saw, i.e. what Gemini CLI sent, never filecache's own records.

Who answers what: ``Script`` answers the requests of the main agent loop (those that offer
function declarations) from its list of turns in order; any other request gets a short text.
A turn is a list of parts (``text(...)``, ``call(...)``) or a function of the request that
returns them (to act at that moment: change a file "outside the agent" between two turns). When
the script runs out the answer is a final text, so the host never hangs on it.

Gemini CLI point at it with ``GOOGLE_GEMINI_BASE_URL`` (``base_url``) and any
``GEMINI_API_KEY``. Nothing here touches the network beyond the loopback socket it binds.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Part = dict[str, Any]
Turn = list[Part] | Callable[[dict[str, Any]], list[Part]]
Responder = Callable[[dict[str, Any]], list[Part]]

_ids = itertools.count(1)


def text(value: str) -> Part:
    return {"text": value}


def call(name: str, args: dict[str, Any], call_id: str | None = None) -> Part:
    """A ``functionCall`` part with an id (Gemini CLI sends it back as ``<name>__<id>``)."""
    return {"functionCall": {"name": name, "args": args, "id": call_id or f"c{next(_ids):03d}"}}


def side_answer(body: dict[str, Any]) -> Any:
    """An answer to a side request (Gemini CLI's model router asks for a JSON object of a
    schema: ``complexity_reasoning``, ``complexity_score``): the schema's required fields,
    each the simplest value of its type."""
    config = body.get("generationConfig") or {}
    return _sample(config.get("responseJsonSchema") or config.get("responseSchema") or {})


def _sample(schema: dict[str, Any]) -> Any:
    kind = str(schema.get("type") or "STRING").upper()
    if kind == "OBJECT":
        props = schema.get("properties") or {}
        return {name: _sample(props.get(name) or {}) for name in schema.get("required") or props}
    if kind == "ARRAY":
        return []
    if kind in ("INTEGER", "NUMBER"):
        return 1
    if kind == "BOOLEAN":
        return False
    return "ok"


def is_main_loop(body: dict[str, Any]) -> bool:
    """A request of the agent loop: it offers the host's tools (side requests offer none)."""
    return any(t.get("functionDeclarations") for t in body.get("tools") or [])


@dataclass
class Script:
    """Turns of the main loop in order; see the module docstring."""

    turns: list[Turn]
    answered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def side_or(self, main: Callable[[dict[str, Any]], list[Part]]) -> Responder:
        """A responder that answers side requests as ``Script`` does and the agent loops'
        requests (the main agent's and its subagents', told apart by their tools) by
        ``main``."""

        def respond(body: dict[str, Any]) -> list[Part]:
            return main(body) if is_main_loop(body) else self(body)

        return respond

    def __call__(self, body: dict[str, Any]) -> list[Part]:
        if not is_main_loop(body):
            return [text(json.dumps(side_answer(body)))]
        with self.lock:
            if self.answered >= len(self.turns):
                return [text("done")]
            turn = self.turns[self.answered]
            self.answered += 1
        return turn(body) if callable(turn) else turn


class ScriptedGemini:
    """The server; a context manager. ``base_url`` goes into ``GOOGLE_GEMINI_BASE_URL``."""

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._json(404, {"error": {"code": 404, "message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._json(400, {"error": {"code": 400, "message": "bad json"}})
                    return
                path = self.path.split("?", 1)[0]
                with model._lock:
                    model.paths.append(self.path)
                if path.endswith(":countTokens"):
                    self._json(200, {"totalTokens": len(raw) // 4})
                    return
                if not path.endswith((":streamGenerateContent", ":generateContent")):
                    self._json(404, {"error": {"code": 404, "message": "not found"}})
                    return
                with model._lock:
                    model.requests.append(body)
                parts = model.responder(body)
                if path.endswith(":streamGenerateContent"):
                    self._stream(parts)
                else:
                    self._json(200, _response(parts))

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, parts: list[Part]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(f"data: {json.dumps(_response(parts))}\r\n\r\n".encode())
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ScriptedGemini:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def main_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [body for body in self.requests if is_main_loop(body)]


def _response(parts: list[Part]) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 10,
            "totalTokenCount": 20,
        },  # fmt: skip
        "modelVersion": "gemini-scripted",
        "responseId": f"r{next(_ids):04d}",
    }


def function_responses(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every ``functionResponse`` in the request's contents, by its id."""
    found: dict[str, dict[str, Any]] = {}
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            response = part.get("functionResponse")
            if isinstance(response, dict):
                found[str(response.get("id"))] = response
    return found


def function_calls(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every ``functionCall`` in the request's contents, by its id."""
    found: dict[str, dict[str, Any]] = {}
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            fn = part.get("functionCall")
            if isinstance(fn, dict):
                found[str(fn.get("id"))] = fn
    return found


def response_text(response: dict[str, Any]) -> str:
    """What the model reads of one ``functionResponse``: its ``output``, or its ``error``."""
    body = response.get("response") or {}
    value = body.get("output", body.get("error", ""))
    return value if isinstance(value, str) else json.dumps(value)
