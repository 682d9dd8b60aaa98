"""Session identity over MCP (issue 19): a ``filecache-session`` header or a fixed ``--session``
names a session that no second live client can borrow, and sessions on several roots of one
store never share a view. Driven by the real MCP client against ``filecache serve``."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from listening import wait_until_listening
from mcp_client import http_session, meta_of, serve_args, stdio_session, text_of

pytestmark = pytest.mark.anyio
TEST_TIMEOUT = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def _http_server(log: Path, *args: str | Path) -> Iterator[str]:
    """``filecache serve --transport http ARGS`` on a free port; yields its URL."""
    port = _free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, *serve_args(*args, "--transport", "http", "--port", str(port))],
            stdout=out,
            stderr=out,
        )
    try:
        wait_until_listening(proc, port, log)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def _read(client: Any, path: str) -> dict[str, Any]:
    result = await client.call_tool("read_file", {"path": path})
    assert not result.is_error, text_of(result)
    return meta_of(result) | {"text": text_of(result)}


async def test_two_live_clients_on_one_header_never_share_a_view(
    root: Path, store_path: Path, tmp_path: Path
) -> None:
    """The first client's read after the second's edit is never ``unchanged`` (nor a FileRef to
    the second's results), and the second never gets a FileRef to the first's."""
    header = {"filecache-session": "agent-7"}
    with _http_server(tmp_path / "server.log", "--root", root, "--store", store_path) as url:
        with anyio.fail_after(TEST_TIMEOUT):
            async with http_session(url, header) as one, http_session(url, header) as two:
                a1 = await _read(one, "notes.txt")
                a2 = await _read(one, "notes.txt")  # one alone: FileRefs as usual
                b1 = await _read(two, "notes.txt")
                edit = await two.call_tool(
                    "edit_file",
                    {"path": "notes.txt", "old_string": "line 7:", "new_string": "line 7 (b):"},
                )
                assert not edit.is_error, text_of(edit)
                a3 = await _read(one, "notes.txt")
                b2 = await _read(two, "notes.txt")
    assert a1["kind"] == "full" and a2["kind"] == "unchanged"
    assert b1["kind"] == "full" and b1.get("base_call_id") is None
    assert a3["kind"] == "full" and "line 7 (b):" in a3["text"]
    assert a3.get("base_call_id") is None
    assert b2["kind"] == "full"  # one took the session back in between: two holds nothing


async def test_a_borrowed_header_learns_nothing_of_the_owners_reads(
    root: Path, store_path: Path, tmp_path: Path
) -> None:
    """A client that sends another's header value sees none of its answers in cache_stats and
    gets no FileRef or diff naming its results."""
    header = {"filecache-session": "owner-session"}
    with _http_server(tmp_path / "server.log", "--root", root, "--store", store_path) as url:
        with anyio.fail_after(TEST_TIMEOUT):
            async with http_session(url, header) as owner:
                owned = [await _read(owner, p) for p in ("notes.txt", "src/app.py", "notes.txt")]
                async with http_session(url, header) as thief:
                    stats = meta_of(await thief.call_tool("cache_stats", {}))
                    stolen = [await _read(thief, p) for p in ("src/app.py", "notes.txt")]
                    stats_after = meta_of(await thief.call_tool("cache_stats", {}))
    assert [r["kind"] for r in owned] == ["full", "full", "unchanged"]
    assert stats["answers"] == {} and stats["read_tokens_plain"] == 0
    # nor in the headline: no read of the owner's, no request figure
    assert stats["headline"]["per_answer"]["reads"] == 0
    assert stats["headline"]["prompt_tokens"] is None
    owner_ids = {r["call_id"] for r in owned}
    for answer in stolen:
        assert answer["kind"] == "full" and answer.get("base_call_id") is None
        assert not any(cid in answer["text"] for cid in owner_ids)
    assert stats_after["answers"] == {"full": 2}


async def test_a_header_that_looks_like_another_roots_name_shares_nothing(
    tmp_path: Path, store_path: Path
) -> None:
    """Two roots, one store: header ``agent.1`` does not inherit ``agent``'s view of the
    second root (0.x stored it as ``agent.1``)."""
    text = "".join(f"row {i}: the same text under both roots\n" for i in range(80))
    roots = [tmp_path / "first", tmp_path / "second"]
    for r in roots:
        r.mkdir()
        (r / "same.txt").write_text(text, encoding="utf-8")
    args = ("--root", roots[0], "--root", roots[1], "--store", store_path)
    with _http_server(tmp_path / "server.log", *args) as url:
        with anyio.fail_after(TEST_TIMEOUT):
            async with http_session(url, {"filecache-session": "agent"}) as agent:
                first = await _read(agent, str(roots[1] / "same.txt"))
            async with http_session(url, {"filecache-session": "agent.1"}) as other:
                borrowed = await _read(other, str(roots[0] / "same.txt"))
                again = await _read(other, str(roots[1] / "same.txt"))
    assert first["kind"] == "full"
    assert borrowed["kind"] == "full" and borrowed.get("base_call_id") is None
    assert again["kind"] == "full" and again.get("base_call_id") is None


async def test_a_fixed_session_still_continues_in_the_next_process(
    root: Path, store_path: Path, tmp_path: Path
) -> None:
    """A stdio server that exits releases its lease: the next process with the same
    ``--session`` continues the view; two live ones at once do not share it."""
    args = serve_args("--root", root, "--store", store_path, "--session", "fixed-1")
    errlog = tmp_path / "stderr.txt"
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(args, errlog) as client:
            first = await _read(client, "notes.txt")
        async with stdio_session(args, errlog) as client:
            again = await _read(client, "notes.txt")
            async with stdio_session(args, errlog) as rival:
                rivals = await _read(rival, "notes.txt")
            after = await _read(client, "notes.txt")
    assert again["kind"] == "unchanged" and again["base_call_id"] == first["call_id"]
    assert rivals["kind"] == "full"  # the first process still held the session
    assert after["kind"] == "full"  # and the rival's read is not in its context
