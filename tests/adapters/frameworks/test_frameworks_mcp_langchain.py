"""langchain-mcp-adapters (``MultiServerMCPClient`` + ``load_mcp_tools``) against
``filecache serve`` over stdio, in LangChain's tool-calling loop with its fake chat model.

langchain-mcp-adapters 0.3.2 requires ``mcp<2`` (0.3.1 fails at import next to mcp 2.x): this
runs in CI's ``mcp1`` step, on the newest mcp 1.x."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp_frameworks import INSTALL_MCP1, SCRIPT, before_step, check, serve_command
from needs import need

pytestmark = pytest.mark.frameworks

need("langchain_mcp_adapters.client", INSTALL_MCP1, mcp_major=1)

from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool  # noqa: E402
from langchain_mcp_adapters.client import MultiServerMCPClient  # noqa: E402
from langchain_mcp_adapters.tools import load_mcp_tools  # noqa: E402


def scripted() -> GenericFakeChatModel:
    replies = [
        AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": c, "type": "tool_call"}])
        for c, n, a in SCRIPT
    ]
    return GenericFakeChatModel(messages=iter([*replies, AIMessage(content="done")]))


async def agent_loop(tools: list[BaseTool], root: Path) -> list[BaseMessage]:
    """LangChain's loop: the model's tool calls run with ``await tool.ainvoke(call)`` (MCP
    tools are async)."""
    model = scripted()
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage("read, edit, read")]
    while True:
        before_step(sum(isinstance(m, AIMessage) for m in messages), root)
        reply = await model.ainvoke(messages)
        messages.append(reply)
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            return messages
        for call in reply.tool_calls:
            messages.append(await by_name[call["name"]].ainvoke(call))


def text(message: ToolMessage) -> str:
    """A ToolMessage's content: a string, or a list of text blocks (MCP results)."""
    content: Any = message.content
    if isinstance(content, str):
        return content
    return "".join(b["text"] if isinstance(b, dict) else str(b) for b in content)


def test_a_client_session_against_filecache_serve(
    root: Path, outside: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store" / "cache.db"
    command, args = serve_command(root, store)
    client = MultiServerMCPClient(
        {"files": {"command": command, "args": args, "cwd": str(tmp_path), "transport": "stdio"}}
    )

    async def run() -> list[BaseMessage]:
        async with client.session("files") as session:  # one server process for the run
            tools = await load_mcp_tools(session)
            assert {"read_file", "edit_file", "write_file", "cache_stats"} <= {
                t.name for t in tools
            }
            return await agent_loop(tools, root)

    messages = asyncio.run(run())
    assert messages[-1].content == "done"
    seen = {m.tool_call_id: text(m) for m in messages if isinstance(m, ToolMessage)}
    errors = [
        m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.status == "error"
    ]
    assert errors == ["c6"]  # the MCP tool error is a LangChain tool error the model sees
    check(seen, root, store)


def test_stateless_tools_start_a_server_per_call(root: Path, tmp_path: Path) -> None:
    """``client.get_tools()`` starts a server process per call: each is a new connection, so a
    new session (content every time) unless ``--session`` names one that the processes share."""

    async def read_twice(extra: list[str]) -> list[str]:
        command, args = serve_command(root, tmp_path / "store" / "cache.db")
        args = args[: args.index("--session")] + extra
        client = MultiServerMCPClient(
            {
                "files": {
                    "command": command,
                    "args": args,
                    "cwd": str(tmp_path),
                    "transport": "stdio",
                }
            }
        )
        read = next(t for t in await client.get_tools() if t.name == "read_file")
        call = {"name": "read_file", "args": {"path": "notes.txt"}, "type": "tool_call"}
        return [text(await read.ainvoke({**call, "id": f"r{i}"})) for i in (1, 2)]

    fresh = asyncio.run(read_twice([]))
    assert all(t.startswith("[notes.txt: 60 lines") for t in fresh)
    shared = asyncio.run(read_twice(["--session", "lc-stateless"]))
    assert shared[0].startswith("[notes.txt: 60 lines")
    assert shared[1].startswith("[filecache] notes.txt unchanged since your result fc-")
