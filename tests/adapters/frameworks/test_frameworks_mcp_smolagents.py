"""smolagents' own MCP client (``smolagents.MCPClient``, on mcpadapt) against ``filecache serve``
over stdio, in a real ``ToolCallingAgent`` loop with a scripted ``Model``.

mcpadapt 0.1.19 fails at import next to mcp 2.x (``streamablehttp_client`` is gone): this runs
in CI's ``mcp1`` step, on the newest mcp 1.x."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_frameworks import INSTALL_MCP1, SCRIPT, before_step, check, serve_command
from needs import need

pytestmark = pytest.mark.frameworks

need("mcpadapt.smolagents_adapter", INSTALL_MCP1, mcp_major=1)

from mcp import StdioServerParameters  # noqa: E402
from smolagents import MCPClient, ToolCallingAgent  # noqa: E402
from smolagents.memory import ActionStep  # noqa: E402
from smolagents.models import (  # noqa: E402
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)


class ScriptedCalls(Model):
    """The next step of ``SCRIPT`` as a tool call, then ``final_answer``."""

    def __init__(self, root: Path) -> None:
        super().__init__(model_id="scripted")
        self.root = root
        self.calls = 0

    def generate(
        self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs
    ):  # type: ignore[no-untyped-def, override]  # noqa: E501
        step, self.calls = self.calls, self.calls + 1
        if step < len(SCRIPT):
            before_step(step, self.root)
            cid, name, args = SCRIPT[step]
        else:
            cid, name, args = "final", "final_answer", {"answer": "done"}
        call = ChatMessageToolCall(
            function=ChatMessageToolCallFunction(name=name, arguments=args), id=cid, type="function"
        )
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


def seen_by_the_model(agent: Any) -> dict[str, str]:
    """Tool call id -> the step's observation (one call per step)."""
    seen = {}
    for step in agent.memory.steps:
        if isinstance(step, ActionStep) and step.tool_calls:
            (call,) = step.tool_calls
            if call.name != "final_answer":
                seen[call.id] = step.observations or str(step.error)
    return seen


def test_mcp_client_against_filecache_serve(root: Path, outside: Path, tmp_path: Path) -> None:
    store = tmp_path / "store" / "cache.db"
    command, args = serve_command(root, store)
    params = StdioServerParameters(command=command, args=args, cwd=str(tmp_path))
    with MCPClient(params, structured_output=False) as tools:
        names = {t.name for t in tools}
        # as served: the optional inputs come marked nullable (mcpadapt drops ``required``)
        assert all(
            spec.get("nullable")
            for t in tools
            for n, spec in t.inputs.items()
            if n != "path" and t.name == "read_file"
        )
        agent = ToolCallingAgent(
            tools=tools, model=ScriptedCalls(root), max_steps=len(SCRIPT) + 2, verbosity_level=0
        )
        assert agent.run("read, edit, read") == "done"
    assert {"read_file", "edit_file", "write_file", "cache_stats"} <= names
    check(seen_by_the_model(agent), root, store)
