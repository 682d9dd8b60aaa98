"""A trace's recorded requests in the shape the host sent them, for ``replay --gateway``.

A trace stores its messages as an OpenAI chat list. An importer that kept the host's own tool
calls (``filecache import claude-code``: ``claude_code.calls``, each call's tool name, input and
whether it failed) lets the replay send the gateway what Claude Code sends: an Anthropic
Messages request, ``tool_use`` blocks with the original names and inputs (``Read`` with an
absolute ``file_path``, ``offset``, ``limit``) and ``tool_result`` blocks holding the recorded
result text (``N→`` lines, a ``<system-reminder>`` after them), consecutive results and the user
text after them in one user message, and a system prompt that states the working folder as
Claude Code's does. Calls the importer did not keep (``Glob``, ``Grep``, ...) keep the trace's
name and arguments, as they were recorded.

Pure: messages in, a request out; the rewritten results are read back by call id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["HostCall", "anthropic_request", "host_calls", "rewritten_results"]

HostCall = tuple[str, Mapping[str, Any], bool]
"""A call as the host made it: its tool name, its input, whether it failed."""


def host_calls(trace: Mapping[str, Any]) -> dict[str, HostCall]:
    """Call id -> the host's own call, from a trace imported from Claude Code's logs (empty for
    any other trace)."""
    kept = trace.get("claude_code")
    calls = kept.get("calls") if isinstance(kept, Mapping) else None
    out: dict[str, HostCall] = {}
    if isinstance(calls, Mapping):
        for cid, call in calls.items():
            if isinstance(call, Mapping) and isinstance(call.get("tool_input"), Mapping):
                name = str(call.get("tool_name") or "")
                out[str(cid)] = (name, call["tool_input"], bool(call.get("failed")))
    return out


def _arguments(call: Mapping[str, Any]) -> Any:
    function = call.get("function") or {}
    try:
        parsed = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def anthropic_request(
    messages: Sequence[Mapping[str, Any]],
    calls: Mapping[str, HostCall],
    cwd: str | None,
) -> dict[str, Any]:
    """The Anthropic Messages request for an OpenAI chat list (see the module docstring)."""
    out: list[dict[str, Any]] = []
    failed: set[str] = set()
    for message in messages:
        role = message.get("role")
        text = message.get("content")
        if role == "assistant":
            blocks: list[dict[str, Any]] = []
            if isinstance(text, str) and text:
                blocks.append({"type": "text", "text": text})
            for call in message.get("tool_calls") or ():
                cid = str(call.get("id"))
                host = calls.get(cid)
                if host is not None and host[2]:
                    failed.add(cid)
                name = host[0] if host else str((call.get("function") or {}).get("name"))
                given = dict(host[1]) if host else _arguments(call)
                blocks.append({"type": "tool_use", "id": cid, "name": name, "input": given})
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]})
            continue
        if role == "tool":
            cid = str(message.get("tool_call_id"))
            block: dict[str, Any] = {
                "type": "tool_result", "tool_use_id": cid, "content": str(text or ""),
            }  # fmt: skip
            if cid in failed:
                block["is_error"] = True
        else:
            block = {"type": "text", "text": str(text or "")}
        if out and out[-1]["role"] == "user":
            out[-1]["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})
    system = f"You are Claude Code.\nWorking directory: {cwd}" if cwd else "You are Claude Code."
    return {"model": "replay", "system": system, "max_tokens": 1024, "messages": out}


def rewritten_results(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, str]:
    """Call id -> the text of each ``tool_result`` the rewrite changed (a block list joined)."""
    old = _results(before)
    out: dict[str, str] = {}
    for cid, content in _results(after).items():
        if content is old.get(cid) or content == old.get(cid):
            continue
        if isinstance(content, list):
            content = "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
        out[cid] = str(content)
    return out


def _results(request: Mapping[str, Any]) -> dict[str, Any]:
    return {
        str(block.get("tool_use_id")): block.get("content")
        for message in request.get("messages") or ()
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, Mapping) and block.get("type") == "tool_result"
    }
