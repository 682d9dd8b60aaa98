"""The real MCP client (stdio and streamable HTTP) for the MCP tests and the MCP benchmark."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ListRootsResult, Root

CALL_TIMEOUT = 20.0  # seconds for any one request; tests also bound their whole run
REPO = Path(__file__).resolve().parent.parent
SAMPLE_SERVER = REPO / "fixtures" / "mcp" / "sample_server.py"


def serve_args(*args: str | Path) -> list[str]:
    """``python -m filecache serve ARGS`` (no console script needed on PATH)."""
    return ["-m", "filecache", "serve", *(str(a) for a in args)]


def _roots_callback(roots: Sequence[Path]) -> Any:
    """Answers roots/list with the current contents of ``roots`` (a test may change them)."""

    async def list_roots(_context: ClientRequestContext) -> ListRootsResult:
        uris = [p.resolve().as_uri() for p in roots]
        return ListRootsResult(roots=[Root(uri=u) for u in uris])  # type: ignore[arg-type]

    return list_roots


@asynccontextmanager
async def stdio_session(
    args: Sequence[str],
    errlog: Path,
    *,
    roots: Sequence[Path] | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized ``ClientSession`` to ``python ARGS`` started as a subprocess (``env`` is
    added to the SDK's small default environment; ``FILECACHE_*`` is not inherited)."""
    params = StdioServerParameters(command=sys.executable, args=list(args), cwd=str(REPO), env=env)
    with errlog.open("a", encoding="utf-8") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            callback = _roots_callback(roots) if roots is not None else None
            async with ClientSession(
                read, write, read_timeout_seconds=CALL_TIMEOUT, list_roots_callback=callback
            ) as session:
                await session.initialize()
                yield session


@asynccontextmanager
async def http_session(
    url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized ``ClientSession`` over streamable HTTP (``headers`` on every request)."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as client:  # the SDK's, with headers
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session:
                await session.initialize()
                yield session


def text_of(result: CallToolResult) -> str:
    """All text blocks of a tool result, joined."""
    return "".join(getattr(block, "text", "") for block in result.content)


def meta_of(result: CallToolResult) -> dict[str, Any]:
    """filecache's machine-readable fields of a tool result."""
    assert result.meta is not None, text_of(result)
    fields: dict[str, Any] = result.meta["filecache"]
    return fields
