"""``filecache serve`` and ``FileCacheMiddleware`` on the modern MCP protocol (2026-07-28), which
a client negotiates with ``server/discover`` instead of ``initialize`` (FastMCP 4's client does:
pydantic-ai's ``MCPToolset``).

That revision requires ``resultType`` on results (and ``ttlMs``/``cacheScope`` on ``tools/list``);
the SDK's client rejects a result without them. The answers filecache makes itself (every
``tools/list`` and ``tools/call`` of the server, the middleware's own errors) once lacked them.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp_client import MCP_MAJOR, REPO, SAMPLE_SERVER, as_json, is_error, serve_args, text_of
from needs import need

if MCP_MAJOR != 2:
    pytest.skip("mcp 1.x has no modern protocol (server/discover)", allow_module_level=True)

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.anyio
TEST_TIMEOUT = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def modern_session(args: list[str], errlog: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO))
    with errlog.open("a", encoding="utf-8") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=20.0) as session:
                await session.discover()
                yield session


async def test_serve_answers_a_modern_client(root: Path, store_path: Path, tmp_path: Path) -> None:
    args = serve_args("--root", root, "--store", store_path)
    with anyio.fail_after(TEST_TIMEOUT):
        async with modern_session(args, tmp_path / "err.txt") as client:
            assert client.protocol_version == "2026-07-28"
            listed = await client.list_tools()
            first = await client.call_tool("read_file", {"path": "notes.txt"})
            second = await client.call_tool("read_file", {"path": "notes.txt"})
            bad = await client.call_tool("read_file", {"path": "../outside.txt"})
    assert {t.name for t in listed.tools} == {"read_file", "write_file", "edit_file", "cache_stats"}
    assert text_of(first).startswith("[notes.txt: 60 lines")
    call_id = as_json(first)["_meta"]["filecache"]["call_id"]
    assert text_of(second).startswith(
        f"[filecache] notes.txt unchanged since your result {call_id}"
    )
    assert is_error(bad) and "outside the root" in text_of(bad)


async def test_the_middleware_answers_a_modern_client(root: Path, tmp_path: Path) -> None:
    args = [str(SAMPLE_SERVER), str(root)]
    with anyio.fail_after(TEST_TIMEOUT):
        async with modern_session(args, tmp_path / "err.txt") as client:
            first = await client.call_tool("read_file", {"path": "notes.txt"})
            second = await client.call_tool("read_file", {"path": "notes.txt"})
            bad = await client.call_tool("read_file", {"path": "notes.txt", "fresh": "yes"})
    assert "[filecache] result fc-" in text_of(first)  # the tag line, after the output
    assert "unchanged since your result" in text_of(second)
    assert is_error(bad) and text_of(bad) == (
        "read_file: argument 'fresh' must be true or false, got 'yes'"
    )


@pytest.mark.frameworks
def test_is_error_next_to_fastmcp() -> None:
    """FastMCP (under pydantic-ai's MCP client), once imported, answers mcp 2.x's old camelCase
    names with a FastMCPDeprecationWarning (an error in these tests): ``is_error`` reads only the
    installed SDK's name."""
    need("fastmcp.client.transports")
    from mcp.types import CallToolResult, TextContent

    with warnings.catch_warnings():  # importing fastmcp installed its own filter for them
        warnings.simplefilter("error")
        assert not is_error(CallToolResult(content=[TextContent(type="text", text="fine")]))
        assert is_error(CallToolResult(content=[], is_error=True))
