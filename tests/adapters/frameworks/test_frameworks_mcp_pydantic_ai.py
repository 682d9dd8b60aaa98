"""pydantic-ai's own MCP client (``MCPToolset``, on FastMCP's client) against ``filecache serve``
over stdio, in pydantic-ai's real agent loop with a scripted ``FunctionModel``.

pydantic-ai 2.x removed ``MCPServerStdio``; ``MCPToolset`` runs on ``fastmcp-slim`` (4 next to
mcp 2.3, 3.4 next to mcp 1.x, which negotiate different protocol revisions): this runs in CI's
main test step and in its ``mcp1`` step."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mcp_frameworks import SCRIPT, before_step, check, serve_command
from needs import need

pytestmark = pytest.mark.frameworks

need("pydantic_ai.mcp")
need("fastmcp")

from fastmcp.client.transports import StdioTransport  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.mcp import MCPToolset  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402


def seen_by_the_model(messages: list[ModelMessage]) -> dict[str, str]:
    """Tool call id -> the text the model got back (a retry prompt as the model reads it)."""
    seen = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    seen[part.tool_call_id] = part.model_response_str()
                elif isinstance(part, RetryPromptPart) and part.tool_call_id:
                    seen[part.tool_call_id] = part.model_response()
    return seen


def test_mcp_toolset_against_filecache_serve(root: Path, outside: Path, tmp_path: Path) -> None:
    store = tmp_path / "store" / "cache.db"
    command, args = serve_command(root, store)
    tool_names: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool_names[:] = [t.name for t in info.function_tools]
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step >= len(SCRIPT):
            return ModelResponse(parts=[TextPart("done")])
        before_step(step, root)
        cid, name, arguments = SCRIPT[step]
        return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=cid)])

    transport = StdioTransport(
        command, args, cwd=str(tmp_path), keep_alive=False, log_file=tmp_path / "serve.err"
    )
    agent = Agent(FunctionModel(model), toolsets=[MCPToolset(transport, max_retries=3)])

    async def run() -> list[ModelMessage]:
        async with agent:  # one server process for the whole run
            result = await agent.run("read, edit, read")
        assert result.output == "done"
        return result.all_messages()

    messages = asyncio.run(run())
    assert {"read_file", "edit_file", "write_file", "cache_stats"} <= set(tool_names)
    check(seen_by_the_model(messages), root, store)
