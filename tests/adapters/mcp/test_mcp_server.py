"""``filecache serve`` driven by the real MCP client over stdio (and streamable HTTP)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from filecache.adapters.mcp_compat import ServerRequestContext
from filecache.adapters.mcp_server import FileCacheServer, ServeOptions
from filecache.adapters.mcp_sessions import RefWindow, connection_key
from listening import wait_until_listening
from mcp_client import (
    as_json,
    http_session,
    is_error,
    meta_of,
    roots_changed,
    serve_args,
    stdio_session,
    text_of,
)

from filecache import instructions
from filecache.tools import schemas

pytestmark = pytest.mark.anyio
TEST_TIMEOUT = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def errlog(tmp_path: Path) -> Path:
    """Where the server's stderr goes (shown when a test fails)."""
    return tmp_path / "server-stderr.txt"


def _serve(root: Path, store: Path, *extra: str | Path) -> list[str]:
    return serve_args("--root", root, "--store", store, *extra)


async def test_lists_tools_with_schemas_and_instructions(
    root: Path, store_path: Path, errlog: Path
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(_serve(root, store_path), errlog) as client:
            listed = await client.list_tools()
    tools = {t.name: as_json(t) for t in listed.tools}
    assert set(tools) == {"read_file", "write_file", "edit_file", "cache_stats"}
    read = tools["read_file"]
    assert set(read["inputSchema"]["properties"]) == {
        "path",
        "offset",
        "limit",
        "mode",
        "symbol",
        "fresh",
    }
    assert read["inputSchema"]["required"] == ["path"]
    assert read["inputSchema"]["additionalProperties"] is False
    assert all("description" in p for p in read["inputSchema"]["properties"].values())
    assert instructions() in read["description"]
    assert "fresh=true" in read["description"]
    assert read["annotations"]["readOnlyHint"]
    assert set(tools["edit_file"]["inputSchema"]["required"]) == {
        "path",
        "old_string",
        "new_string",
    }
    assert tools["write_file"]["annotations"]["destructiveHint"]
    assert tools["cache_stats"]["inputSchema"]["properties"] == {}
    # every definition is the tool table's, as schemas("mcp") generates it
    assert list(tools.values()) == schemas("mcp")


async def test_read_edit_change_fresh(
    root: Path, store_path: Path, notes: str, errlog: Path
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(_serve(root, store_path), errlog) as client:
            first = await client.call_tool("read_file", {"path": "notes.txt"})
            second = await client.call_tool("read_file", {"path": "notes.txt"})
            edited = await client.call_tool(
                "edit_file",
                {"path": "notes.txt", "old_string": "line 7:", "new_string": "line seven:"},
            )
            after_edit = await client.call_tool("read_file", {"path": "notes.txt"})
            (root / "notes.txt").write_text(
                (root / "notes.txt").read_text().replace("line 40:", "line forty:")
            )
            after_change = await client.call_tool("read_file", {"path": "notes.txt"})
            fresh = await client.call_tool("read_file", {"path": "notes.txt", "fresh": True})
            part = await client.call_tool(
                "read_file", {"path": "notes.txt", "offset": 3, "limit": 2}
            )
            stats = await client.call_tool("cache_stats", {})

    assert not is_error(first) and meta_of(first)["kind"] == "full"
    assert "line 60: the quick brown fox" in text_of(first)
    assert meta_of(second)["kind"] == "unchanged"
    assert meta_of(second)["base_call_id"] == meta_of(first)["call_id"]
    assert len(text_of(second)) * 10 < len(text_of(first))
    assert text_of(second).count("\n") == 1  # one line; the tool description says fresh=true

    assert not is_error(edited) and meta_of(edited)["kind"] == "edited"
    assert meta_of(after_edit)["kind"] == "unchanged"  # the model knows its own edit
    assert meta_of(after_edit)["base_call_id"] == meta_of(edited)["call_id"]

    diff = text_of(after_change)
    assert meta_of(after_change)["kind"] == "diff"
    assert "-line 40: the quick" in diff and "+line forty: the quick" in diff
    assert "line 7" not in diff and len(diff) * 3 < len(text_of(first))

    assert meta_of(fresh)["kind"] == "full"
    assert "line seven:" in text_of(fresh) and "line forty:" in text_of(fresh)
    assert meta_of(part)["kind"] in ("unchanged", "partial")
    assert (meta_of(part)["start"], meta_of(part)["end"]) == (3, 4)

    numbers = meta_of(stats)
    assert numbers["answers"]["unchanged"] >= 2 and numbers["answers"]["diff"] == 1
    assert 0 < numbers["read_tokens_sent"] < numbers["read_tokens_plain"]


async def test_refusals_are_tool_errors_and_the_server_keeps_answering(
    root: Path, outside: Path, store_path: Path, errlog: Path
) -> None:
    secret = outside / "secret.txt"
    (root / "link_out.txt").symlink_to(secret)
    (root / "dir_out").symlink_to(outside, target_is_directory=True)
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (root / "blob.bin").write_bytes(b"abc\x00def\n")
    os.mkfifo(root / "pipe")
    before = {p: p.read_bytes() for p in outside.iterdir()}
    attempts = [
        ("write_file", {"path": str(outside / "new.txt"), "content": "x\n"}, "outside the root"),
        ("write_file", {"path": "../outside/new.txt", "content": "x\n"}, "outside the root"),
        ("write_file", {"path": "dir_out/new.txt", "content": "x\n"}, "outside the root"),
        ("write_file", {"path": "link_out.txt", "content": "x\n"}, "outside the root"),
        ("read_file", {"path": "../outside/secret.txt"}, "outside the root"),
        ("read_file", {"path": str(secret)}, "outside the root"),
        ("read_file", {"path": "/etc/passwd"}, "outside the root"),
        ("read_file", {"path": "link_out.txt"}, "outside the root"),
        ("read_file", {"path": "dir_out/secret.txt"}, "outside the root"),
        (
            "edit_file",
            {"path": "link_out.txt", "old_string": "outside", "new_string": "inside"},
            "outside the root",
        ),
        ("read_file", {"path": "notes\x00.txt"}, "NUL byte"),
        ("write_file", {"path": "a\x00b.txt", "content": "x\n"}, "NUL byte"),
        ("read_file", {"path": "src"}, "is a directory"),
        ("write_file", {"path": "src", "content": "x\n"}, "is a directory"),
        ("read_file", {"path": "image.png"}, "PNG"),
        ("read_file", {"path": "blob.bin"}, "text files only"),
        ("read_file", {"path": "pipe"}, "FIFO"),
        ("write_file", {"path": "pipe", "content": "x\n"}, "FIFO"),
        ("read_file", {"path": "missing.txt"}, "no such file"),
        ("read_file", {"path": "notes.txt", "offset": 999}, "past the end"),
        ("read_file", {"path": "notes.txt", "mode": "sideways"}, "mode"),
        ("edit_file", {"path": "notes.txt", "old_string": "nope", "new_string": "x"}, "not found"),
        ("read_file", {"path": "notes.txt", "offset": "ten"}, "offset"),
        # strict argument types: no coercion, nothing ignored
        ("read_file", {"path": "notes.txt", "offset": "5"}, "'offset' must be an integer"),
        ("read_file", {"path": "notes.txt", "limit": True}, "'limit' must be an integer"),
        ("read_file", {"path": "notes.txt", "fresh": "yes"}, "'fresh' must be true or false"),
        ("read_file", {"path": "notes.txt", "fresh": 1}, "'fresh' must be true or false"),
        ("read_file", {"path": "notes.txt", "ofset": 5}, "unknown argument 'ofset'"),
        ("read_file", {}, "missing argument 'path'"),
        ("write_file", {"path": "notes.txt"}, "missing argument 'content'"),
        ("write_file", {"path": "n.txt", "content": "x\n", "mode": "w"}, "unknown argument"),
        (
            "edit_file",
            {"path": "notes.txt", "old_string": "line", "new_string": "l", "replace_all": "yes"},
            "'replace_all' must be true or false",
        ),
        ("cache_stats", {"verbose": True}, "cache_stats takes no arguments"),
        ("delete_file", {"path": "notes.txt"}, "unknown tool 'delete_file'"),
    ]
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(_serve(root, store_path), errlog) as client:
            for tool, args, message in attempts:
                result = await client.call_tool(tool, args)
                assert is_error(result), (tool, args, text_of(result))
                assert message in text_of(result), (tool, args, text_of(result))
                assert "\n" not in text_of(result), text_of(result)  # one line
            still = await client.call_tool("read_file", {"path": "notes.txt"})
    assert not is_error(still) and meta_of(still)["kind"] == "full"
    assert {p: p.read_bytes() for p in outside.iterdir()} == before
    names = {p.name for p in root.iterdir()} - {".filecache"}
    assert names == {
        "blob.bin",
        "dir_out",
        "empty.txt",
        "image.png",
        "link_out.txt",
        "notes.txt",
        "pipe",
        "src",
    }
    assert "Traceback" not in errlog.read_text()


async def test_concurrent_stdio_clients_have_separate_views(
    root: Path, store_path: Path, errlog: Path
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            stdio_session(_serve(root, store_path), errlog) as a,
            stdio_session(_serve(root, store_path), errlog) as b,
        ):
            a1 = await a.call_tool("read_file", {"path": "notes.txt"})
            b1 = await b.call_tool("read_file", {"path": "notes.txt"})
            a2 = await a.call_tool("read_file", {"path": "notes.txt"})
            await b.call_tool(
                "edit_file", {"path": "notes.txt", "old_string": "line 9:", "new_string": "nine:"}
            )
            b2 = await b.call_tool("read_file", {"path": "notes.txt"})
            a3 = await a.call_tool("read_file", {"path": "notes.txt"})
    assert meta_of(a1)["kind"] == "full" and meta_of(b1)["kind"] == "full"
    assert meta_of(a2)["kind"] == "unchanged"
    assert meta_of(b2)["kind"] == "unchanged"  # b made the edit
    assert meta_of(a3)["kind"] == "diff" and "+nine:" in text_of(a3)  # a did not


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_http_connections_have_separate_views(
    root: Path, store_path: Path, errlog: Path
) -> None:
    port = _free_port()
    args = _serve(root, store_path, "--transport", "http", "--port", str(port))
    with errlog.open("w") as log:
        proc = subprocess.Popen([sys.executable, *args], stdout=log, stderr=log)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        wait_until_listening(proc, port, errlog)
        with anyio.fail_after(TEST_TIMEOUT):
            async with http_session(url) as a, http_session(url) as b:
                a1 = await a.call_tool("read_file", {"path": "notes.txt"})
                a2 = await a.call_tool("read_file", {"path": "notes.txt"})
                b1 = await b.call_tool("read_file", {"path": "notes.txt"})
                b2 = await b.call_tool("read_file", {"path": "notes.txt"})
                sa = meta_of(await a.call_tool("cache_stats", {}))
                sb = meta_of(await b.call_tool("cache_stats", {}))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert [meta_of(r)["kind"] for r in (a1, a2, b1, b2)] == ["full", "unchanged"] * 2
    assert sa["session"] != sb["session"]
    assert f"at http://127.0.0.1:{port}/mcp;" in errlog.read_text()  # where to point a client


async def test_refs_expire_after_the_call_window(
    root: Path, store_path: Path, errlog: Path
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(_serve(root, store_path, "--ref-calls", "2"), errlog) as client:
            kinds = []
            for path in ["notes.txt", "notes.txt", "src/app.py", "empty.txt", "notes.txt"]:
                kinds.append(meta_of(await client.call_tool("read_file", {"path": path}))["kind"])
        env = {"FILECACHE_MCP_REF_MINUTES": "0"}  # the setting, from the environment
        async with stdio_session(_serve(root, store_path), errlog, env=env) as client:
            for _ in range(2):
                kinds.append(
                    meta_of(await client.call_tool("read_file", {"path": "notes.txt"}))["kind"]
                )
    assert kinds == ["full", "unchanged", "full", "full", "full", "full", "full"]


async def test_fixed_session_continues_across_processes(
    root: Path, store_path: Path, errlog: Path
) -> None:
    args = _serve(root, store_path, "--session", "agent-1")
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(args, errlog) as client:
            first = await client.call_tool("read_file", {"path": "notes.txt"})
        async with stdio_session(args, errlog) as client:
            again = await client.call_tool("read_file", {"path": "notes.txt"})
            stats = meta_of(await client.call_tool("cache_stats", {}))
    assert meta_of(again)["kind"] == "unchanged"
    assert meta_of(again)["base_call_id"] == meta_of(first)["call_id"]
    assert stats["session"] == "agent-1"


async def test_client_roots_narrow_the_served_roots(
    root: Path, store_path: Path, errlog: Path
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(_serve(root, store_path), errlog, roots=[root / "src"]) as client:
            inside = await client.call_tool("read_file", {"path": "src/app.py"})
            outside = await client.call_tool("read_file", {"path": "notes.txt"})
            write = await client.call_tool("write_file", {"path": "new.txt", "content": "x\n"})
    assert not is_error(inside)
    assert is_error(outside) and "outside the roots your client shared" in text_of(outside)
    assert is_error(write) and not (root / "new.txt").exists()


async def test_client_roots_are_fetched_again_after_list_changed(
    root: Path, store_path: Path, errlog: Path
) -> None:
    roots = [root / "src"]
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(_serve(root, store_path), errlog, roots=roots) as client:
            before = await client.call_tool("read_file", {"path": "notes.txt"})
            roots[:] = [root]
            await roots_changed(client)
            await anyio.sleep(0.2)  # a notification has no answer to wait for
            after = await client.call_tool("read_file", {"path": "notes.txt"})
    assert is_error(before) and not is_error(after)


async def test_several_roots(tmp_path: Path, root: Path, store_path: Path, errlog: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("other notes\n" * 40)
    (other / "only.txt").write_text("only in other\n")
    args = _serve(root, store_path, "--root", other)
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(args, errlog) as client:
            rel = await client.call_tool("read_file", {"path": "notes.txt"})
            absolute = await client.call_tool("read_file", {"path": str(other / "notes.txt")})
            only = await client.call_tool("read_file", {"path": "only.txt"})
            again = await client.call_tool("read_file", {"path": str(other / "notes.txt")})
            nowhere = await client.call_tool("read_file", {"path": str(tmp_path / "x.txt")})
    assert "line 1: the quick" in text_of(rel)
    assert "other notes" in text_of(absolute) and meta_of(absolute)["kind"] == "full"
    assert "only in other" in text_of(only)
    assert meta_of(again)["kind"] == "unchanged"
    assert is_error(nowhere) and "outside every root" in text_of(nowhere)


@pytest.mark.parametrize("missing", ["mcp", "anyio", "pydantic"])
def test_serve_without_the_extra_says_what_to_install(missing: str) -> None:
    """Any module of the mcp extra missing: one line, exit 2. (.ci/run also runs `filecache
    serve` from the built wheel in a clean environment without the extra.)"""
    code = f"import sys; sys.modules[{missing!r}] = None\nfrom filecache.cli import main\nmain()\n"
    proc = subprocess.run(
        [sys.executable, "-c", code, "serve"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "filecache: filecache's MCP server and middleware need the mcp extra: "
        "pip install 'filecache-agent[mcp]' (from a clone: pip install '.[mcp]')"
    ]


# -- pure parts ------------------------------------------------------------------------------


def test_ref_window_expires_by_calls_and_by_time() -> None:
    now = [1000.0]
    window = RefWindow(max_calls=2, max_minutes=1, clock=lambda: now[0])
    window.begin_call()
    window.record("a")
    window.begin_call()
    window.record("b")
    window.begin_call()
    assert window.expired() == []
    window.begin_call()
    assert window.expired() == ["a"]
    now[0] += 61
    assert window.expired() == ["b"]
    assert RefWindow(0, 30).expired() == []
    zero = RefWindow(0, 30)
    zero.begin_call()
    zero.record("c")
    zero.begin_call()
    assert zero.expired() == ["c"]
    with pytest.raises(ValueError):
        RefWindow(-1, 30)


def test_connection_keys() -> None:
    class Request:
        def __init__(self, headers: dict[str, str]) -> None:
            self.headers = headers

    assert connection_key(None) == "stdio"
    assert connection_key(Request({"mcp-session-id": "abc"})) == "http:abc"
    assert connection_key(Request({})) is None


async def test_outline_and_symbol_reads_pass_through(
    root: Path, store_path: Path, errlog: Path
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session(_serve(root, store_path), errlog) as client:
            outline = await client.call_tool("read_file", {"path": "src/app.py", "mode": "outline"})
            symbol = await client.call_tool("read_file", {"path": "src/app.py", "symbol": "main"})
    assert not is_error(outline) and meta_of(outline)["kind"] == "outline"
    assert "main" in text_of(outline)
    assert not is_error(symbol) and meta_of(symbol)["kind"] == "symbol"
    assert "return 1" in text_of(symbol)


async def test_a_fixed_session_is_one_session_under_every_connection(root: Path) -> None:
    """Every connection reaches the fixed session (one ``Session`` object), each with a state
    of its own: its lease, window and client roots (``test_mcp_identity``)."""
    state = FileCacheServer(ServeOptions(roots=(root,), store=":memory:", session="agent-1"))
    state.open()
    try:
        contexts = [_request_context({"mcp-session-id": sid}) for sid in ("a", "b")]
        first, second = [await state._connection(rc) for rc in contexts]
        assert first is not second and first.lease != second.lease
        assert first.sessions[0] is second.sessions[0] and first.sessions[0].id == "agent-1"
        per_connection = FileCacheServer(ServeOptions(roots=(root,), store=":memory:"))
        per_connection.open()
        try:
            a, b = [await per_connection._connection(rc) for rc in contexts]
            assert a is not b and a.sessions[0].id != b.sessions[0].id
        finally:
            per_connection.close()
    finally:
        state.close()


def _request_context(headers: dict[str, str]) -> ServerRequestContext[Any, Any]:
    class Request:
        def __init__(self) -> None:
            self.headers = headers

    return ServerRequestContext(
        session=None,  # type: ignore[arg-type]
        lifespan_context=None,
        protocol_version="2025-11-25",
        method="tools/call",
        request=Request(),
    )
