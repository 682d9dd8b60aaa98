"""The OpenAI Agents SDK's own MCP client (``agents.mcp.MCPServerStdio``) against
``filecache serve`` over stdio, in the SDK's real run loop with a scripted ``Model``.

openai-agents 0.24 takes ``mcp>=1.19,<3``: this runs in CI's main test step (mcp 2.x) and in its
``mcp1`` step (the newest 1.x)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp_frameworks import INSTALL_MCP1, SCRIPT, before_step, check, serve_command
from needs import need

pytestmark = pytest.mark.frameworks

need("agents.mcp", "pip install -e '.[frameworks]' (or, next to mcp 1.x: " + INSTALL_MCP1 + ")")

from agents import Agent, Runner, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.mcp import MCPServerStdio  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

set_tracing_disabled(True)  # no trace export: these tests make no network calls


class ScriptedModel(Model):
    """Answers each request with the next step of ``SCRIPT``, then a final message."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.steps = 0
        self.tools: list[str] = []

    async def get_response(self, system_instructions, input, model_settings, tools, *a, **k):  # type: ignore[no-untyped-def, override]
        self.tools = [t.name for t in tools]
        step, self.steps = self.steps, self.steps + 1
        if step >= len(SCRIPT):
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            message = ResponseOutputMessage(
                id="msg_1", type="message", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        before_step(step, self.root)
        cid, name, args = SCRIPT[step]
        call = ResponseFunctionToolCall(
            type="function_call", call_id=cid, name=name, arguments=json.dumps(args)
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        raise NotImplementedError("scripted model: no streaming")


def seen_by_the_model(items: list[Any]) -> dict[str, str]:
    seen = {}
    for item in items:
        data = item if isinstance(item, dict) else item.model_dump()
        if data.get("type") == "function_call_output":
            output = data["output"]  # a string, or a list of input_text parts (MCP results)
            if not isinstance(output, str):
                output = "".join(part["text"] for part in output if part["type"] == "input_text")
            seen[data["call_id"]] = output
    return seen


def test_mcp_server_stdio_against_filecache_serve(
    root: Path, outside: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store" / "cache.db"
    command, args = serve_command(root, store)
    model = ScriptedModel(root)

    async def run() -> list[Any]:
        params = {"command": command, "args": args, "cwd": str(tmp_path)}
        async with MCPServerStdio(params, client_session_timeout_seconds=20) as server:
            agent = Agent(name="coder", model=model, mcp_servers=[server])
            result = await Runner.run(agent, "read, edit, read", max_turns=len(SCRIPT) + 2)
        assert result.final_output == "done"
        return result.to_input_list()

    items = asyncio.run(run())
    assert {"read_file", "edit_file", "write_file", "cache_stats"} <= set(model.tools)
    check(seen_by_the_model(items), root, store)
