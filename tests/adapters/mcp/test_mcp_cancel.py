"""``filecache serve`` and a client that cancels a slow ``read_file`` (stdio and HTTP): the real
mcp client gives up on the call (its task is cancelled; the SDK sends ``notifications/cancelled``),
and the answer it never received is no fact: the next read is content, never ``unchanged``
naming the cancelled call.

The read is made slow without the clock: the test process holds the session's store lock (the
SQLite store's record lock, which the server's turn takes too), cancels, then lets go.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from listening import wait_until_listening
from mcp_client import MCP_MAJOR, http_session, meta_of, serve_args, stdio_session, text_of

from filecache import FileCache
from filecache.store.sqlite_store import SqliteStore

# The mcp 1.x client sends no notifications/cancelled when a call's task is cancelled (and its
# HTTP transport breaks when one is): these tests need the 2.x client (the server side works on
# both: 1.x's SDK cancels a running call's task, which abandons it; see docs/mcp.md).
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(MCP_MAJOR == 1, reason="the mcp 1.x client does not cancel calls"),
]
TEST_TIMEOUT = 60.0
GIVE_UP = 1.0  # seconds the client waits before it cancels (the server is blocked meanwhile)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def cancel_a_blocked_read(session: object, store: Path, *, inline: bool) -> None:
    """Start a read while the session's lock is held here, cancel it, then let the server go
    (``inline``: the server's loop is blocked by the read, so it answers a ping only after)."""
    with SqliteStore(store) as held, held.lock("session:agent"):
        with anyio.move_on_after(GIVE_UP):
            await session.call_tool("read_file", {"path": "notes.txt"})  # type: ignore[attr-defined]
            raise AssertionError("the read should have been blocked")
        if not inline:  # the cancel is handled while the read still waits
            await session.send_ping()  # type: ignore[attr-defined]
    await session.send_ping()  # type: ignore[attr-defined]


def read_events(root: Path, store: Path) -> list[str]:
    with FileCache(root, store=store) as cache:
        return [e.kind for e in cache.engine.store.events("agent") if e.tool == "read"]


async def test_a_cancelled_stdio_read_is_no_fact(root: Path, tmp_path: Path) -> None:
    store = tmp_path / "cache.db"
    args = serve_args("--root", root, "--store", store, "--session", "agent")
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(args, tmp_path / "stderr.txt") as session:
            await cancel_a_blocked_read(session, store, inline=True)
            # the server finished the read after the cancel (its answer was dropped)
            after = await session.call_tool("read_file", {"path": "notes.txt"})
    # on 114493c: "unchanged", naming the cancelled call
    assert meta_of(after)["kind"] == "full", text_of(after)
    # answered before the server read the cancel: committed, then its forgetting recorded
    assert read_events(root, store) == ["full", "full"]
    with FileCache(root, store=store) as cache:
        assert [e.kind for e in cache.engine.store.events("agent")][1] == "forgot"


async def test_a_cancelled_http_read_is_no_fact(root: Path, tmp_path: Path) -> None:
    store = tmp_path / "cache.db"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = serve_args("--root", root, "--store", store, "--session", "agent",
                      "--transport", "http", "--port", str(port))  # fmt: skip
    errlog = tmp_path / "stderr.txt"
    with errlog.open("w") as log:
        proc = subprocess.Popen([sys.executable, *args], stdout=log, stderr=log)
    try:
        wait_until_listening(proc, port, errlog)
        with anyio.fail_after(TEST_TIMEOUT):
            async with http_session(f"http://127.0.0.1:{port}/mcp") as session:
                await cancel_a_blocked_read(session, store, inline=False)
                # the cancelled read's thread holds the session first: it ends before this
                after = await session.call_tool("read_file", {"path": "notes.txt"})
                again = await session.call_tool("read_file", {"path": "notes.txt"})
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    # on 114493c: "unchanged", naming the cancelled call
    assert meta_of(after)["kind"] == "full", text_of(after)
    assert meta_of(again)["base_call_id"] == meta_of(after)["call_id"]
    assert read_events(root, store) == ["full", "unchanged"]
