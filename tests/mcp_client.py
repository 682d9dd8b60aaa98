"""The real MCP client (stdio and streamable HTTP) for the MCP tests and the MCP benchmark.

Written for mcp 1.x and 2.x: results are read through ``as_json`` (the wire form, the same on
both) and the helpers below, never through attributes whose names differ (``is_error`` on 2.x,
``isError`` on 1.x).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import mcp.client.streamable_http as streamable_http
from filecache.adapters.mcp_compat import MCP_MAJOR, is_error  # noqa: F401  (for the tests)
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, ListRootsResult, Root, RootsListChangedNotification
from pydantic import BaseModel

CALL_TIMEOUT = 20.0  # seconds for any one request; tests also bound their whole run
# 2.x takes seconds, 1.x a timedelta
_TIMEOUT: Any = CALL_TIMEOUT if MCP_MAJOR == 2 else timedelta(seconds=CALL_TIMEOUT)
# 1.x before 1.24 has only the older name
_http_client: Any = getattr(streamable_http, "streamable_http_client", None)
if _http_client is None:
    _http_client = streamable_http.streamablehttp_client
REPO = Path(__file__).resolve().parent.parent
SAMPLE_SERVER = REPO / "fixtures" / "mcp" / "sample_server.py"


def serve_args(*args: str | Path) -> list[str]:
    """``python -m filecache serve ARGS`` (no console script needed on PATH)."""
    return ["-m", "filecache", "serve", *(str(a) for a in args)]


def _roots_callback(roots: Sequence[Path]) -> Any:
    """Answers roots/list with the current contents of ``roots`` (a test may change them)."""

    async def list_roots(_context: Any) -> ListRootsResult:
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
    try:
        with errlog.open("a", encoding="utf-8") as log:
            async with stdio_client(params, errlog=log) as (read, write):
                callback = _roots_callback(roots) if roots is not None else None
                async with ClientSession(
                    read, write, read_timeout_seconds=_TIMEOUT, list_roots_callback=callback
                ) as session:
                    await session.initialize()
                    yield session
    except BaseException as exc:  # the server's stderr says why it closed the connection
        told = errlog.read_text(encoding="utf-8", errors="replace") if errlog.exists() else ""
        exc.add_note(f"server stderr ({errlog}):\n{told[-4000:] or '(empty)'}")
        raise


@asynccontextmanager
async def http_session(
    url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized ``ClientSession`` over streamable HTTP (``headers`` on every request)."""
    if headers:
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with create_mcp_http_client(headers=headers) as client:  # the SDK's, with headers
            if MCP_MAJOR == 2:
                opened = _http_client(url, http_client=client)
            else:  # 1.x takes the headers itself
                opened = _http_client(url, headers=headers)
            async with opened as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write, read_timeout_seconds=_TIMEOUT) as session:
                    await session.initialize()
                    yield session
        return
    async with _http_client(url) as streams:
        read, write = streams[0], streams[1]  # 1.x yields a third item (the session id)
        async with ClientSession(read, write, read_timeout_seconds=_TIMEOUT) as session:
            await session.initialize()
            yield session


async def roots_changed(session: ClientSession) -> None:
    """Send notifications/roots/list_changed (2.x deprecates the 1.x helper for it)."""
    if MCP_MAJOR == 2:
        await session.send_notification(RootsListChangedNotification())
    else:
        await session.send_roots_list_changed()


def text_of(result: CallToolResult) -> str:
    """All text blocks of a tool result, joined."""
    return "".join(getattr(block, "text", "") for block in result.content)


def as_json(model: BaseModel) -> dict[str, Any]:
    """A result or tool definition in its wire form (camelCase keys, on 1.x and 2.x)."""
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def meta_of(result: CallToolResult) -> dict[str, Any]:
    """filecache's machine-readable fields of a tool result."""
    assert result.meta is not None, text_of(result)
    fields: dict[str, Any] = result.meta["filecache"]
    return fields
