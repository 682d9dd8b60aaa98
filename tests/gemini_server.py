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
from typing import Any, ClassVar

from loopback import LoopbackServer, Reply

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


class ScriptedGemini(LoopbackServer):
    """The server; a context manager. ``base_url`` goes into ``GOOGLE_GEMINI_BASE_URL``.
    ``paths``: every POST's path, its query included."""

    not_found: ClassVar[Any] = {"error": {"code": 404, "message": "not found"}}
    bad_json: ClassVar[Any] = {"error": {"code": 400, "message": "bad json"}}

    def __init__(self, responder: Responder) -> None:
        super().__init__()
        self.responder = responder
        self.paths: list[str] = []

    def post(self, reply: Reply, path: str, raw: bytes, body: dict[str, Any]) -> None:
        with self._lock:
            self.paths.append(reply.path)
        if path.endswith(":countTokens"):
            reply.json(200, {"totalTokens": len(raw) // 4})
            return
        if not path.endswith((":streamGenerateContent", ":generateContent")):
            reply.json(404, self.not_found)
            return
        self.record(body)
        parts = self.responder(body)
        if path.endswith(":streamGenerateContent"):
            reply.stream([f"data: {json.dumps(_response(parts))}\r\n\r\n"])
        else:
            reply.json(200, _response(parts))

    def __enter__(self) -> ScriptedGemini:
        super().__enter__()
        return self

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
