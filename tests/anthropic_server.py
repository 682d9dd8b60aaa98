"""A scripted Anthropic Messages API on 127.0.0.1, for driving real hosts (Claude Code) in tests.

The server answers ``POST /v1/messages`` (streamed as server-sent events when the request asks
for ``stream``, as Claude Code does; a JSON message otherwise), ``POST
/v1/messages/count_tokens``, and ``GET /api/claude_code/policy_limits`` with no restrictions (what
Claude Code asks the Anthropic API at start-up, when it reaches it as ``api.anthropic.com``:
``anthropic_tls``). Every request body is RECORDED (``ScriptedModel.requests``), so a
test asserts what the model saw, i.e. what the host sent, never filecache's own records.

Who answers what: a test gives a ``responder``, a function from the request body to the assistant
turn (a list of content blocks: ``text(...)``, ``tool_use(...)``). ``Script`` is the usual
responder: the requests of the main agent loop (those that offer tools and are not a
compaction) are answered from its list of turns in order; a compaction request gets a
``<summary>`` answer; anything else Claude Code asks on the side (titles, topic checks) gets a
short text. When the script runs out the answer is a final text, so a host never hangs on it.

Nothing here touches the network beyond the loopback socket it binds (port 0: the OS picks).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from loopback import LoopbackServer, Reply

Block = dict[str, Any]
Responder = Callable[[dict[str, Any]], list[Block]]
# A scripted turn: its blocks, or a function of the request that returns them (to act at that
# moment, e.g. change a file "outside the agent" between two turns).
Turn = list[Block] | Callable[[dict[str, Any]], list[Block]]

_ids = itertools.count(1)


class Refuse(Exception):  # noqa: N818  (a reply, not a failure of the server)
    """Raised by a responder: the upstream answers HTTP ``status`` with an Anthropic error of
    ``kind`` (a refused key, an overload, a bad request) instead of a message."""

    def __init__(self, status: int, kind: str) -> None:
        super().__init__(f"{status} {kind}")
        self.status, self.kind = status, kind


def text(value: str) -> Block:
    return {"type": "text", "text": value}


def tool_use(name: str, tool_input: dict[str, Any], call_id: str | None = None) -> Block:
    return {
        "type": "tool_use",
        "id": call_id or f"toolu_{next(_ids):04d}",
        "name": name,
        "input": tool_input,
    }


def is_compaction(body: dict[str, Any]) -> bool:
    """Claude Code's summary request (``/compact``, auto-compact): its last user message asks
    for an ``<analysis>`` and a ``<summary>`` block (it offers tools, and forbids them)."""
    return "<summary>" in _last_user_text(body)


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(
            str(block.get("text", "")) for block in content if block.get("type") == "text"
        )
    return ""


def is_main_loop(body: dict[str, Any]) -> bool:
    """A request of the agent loop: it offers the host's tools (side requests offer none)."""
    return bool(body.get("tools")) and not is_compaction(body)


@dataclass
class Script:
    """Turns of the main loop in order; see the module docstring."""

    turns: list[Turn]
    summary: str = "The user asked to read files; they were read."
    answered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> list[Block]:
        if is_compaction(body):
            return [text(f"<analysis>ok</analysis>\n<summary>{self.summary}</summary>")]
        if not is_main_loop(body):
            return [text("ok")]
        with self.lock:
            if self.answered >= len(self.turns):
                return [text("done")]
            turn = self.turns[self.answered]
            self.answered += 1
        return turn(body) if callable(turn) else turn


class ScriptedModel(LoopbackServer):
    """The server; a context manager. ``base_url`` goes into ``ANTHROPIC_BASE_URL``."""

    not_found: ClassVar[Any] = {"type": "error", "error": {"type": "not_found_error"}}
    bad_json: ClassVar[Any] = {"type": "error", "error": {"type": "invalid_request_error"}}

    def __init__(self, responder: Responder) -> None:
        super().__init__()
        self.responder = responder

    def post(self, reply: Reply, path: str, raw: bytes, body: dict[str, Any]) -> None:
        if path.endswith("/count_tokens"):
            reply.json(200, {"input_tokens": len(raw) // 4})
            return
        if not path.endswith("/v1/messages"):
            reply.json(404, self.not_found)
            return
        self.record(body)
        try:
            blocks = self.responder(body)
        except Refuse as refused:
            error = {"type": refused.kind, "message": "refused by the script"}
            reply.json(refused.status, {"type": "error", "error": error})
            return
        if not body.get("stream"):
            reply.json(200, _message(body, blocks))
            return
        events = _events(body, blocks)
        reply.stream((f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events),
                     no_cache=True)  # fmt: skip

    def get(self, reply: Reply, path: str) -> None:
        if path == "/api/claude_code/policy_limits":  # as for an account without restrictions
            reply.json(200, {"restrictions": {}})
            return
        reply.json(404, self.not_found)

    def __enter__(self) -> ScriptedModel:
        super().__enter__()
        return self

    def main_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [body for body in self.requests if is_main_loop(body)]


def _stop_reason(blocks: Iterable[Block]) -> str:
    return "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"


def _message(body: dict[str, Any], blocks: list[Block]) -> dict[str, Any]:
    return {
        "id": f"msg_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-scripted"),
        "content": blocks,
        "stop_reason": _stop_reason(blocks),
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def _events(body: dict[str, Any], blocks: list[Block]) -> Iterable[dict[str, Any]]:
    start = _message(body, [])
    start["stop_reason"] = None
    yield {"type": "message_start", "message": start}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
            yield {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": block["text"]},
            }
        else:
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {**block, "input": {}},
            }
            yield {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
            }
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": _stop_reason(blocks), "stop_sequence": None},
        "usage": {"output_tokens": 10},
    }
    yield {"type": "message_stop"}


def tool_results(body: dict[str, Any]) -> dict[str, Any]:
    """Every ``tool_result`` block in the request's messages, by ``tool_use_id``."""
    found: dict[str, Any] = {}
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_result":
                found[block["tool_use_id"]] = block
    return found


def result_text(block: dict[str, Any]) -> str:
    """The text of a ``tool_result`` block (a string, or text blocks joined)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) for part in content if part.get("type") == "text"
        )
    return ""
