"""``FileCacheMiddleware`` on the sample server (real client over stdio), and its edge cases
in process."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from filecache.adapters.mcp_compat import ServerRequestContext
from filecache.adapters.mcp_middleware import FileCacheMiddleware
from mcp_client import REPO, SAMPLE_SERVER, as_json, is_error, meta_of, stdio_session, text_of

from filecache import ConfigError, Session, instructions

pytestmark = pytest.mark.anyio
TEST_TIMEOUT = 60.0
TOOLS = {
    "read": ("read_file", "path"),
    "write": ("write_file", "path"),
    "edit": ("edit_file", "path"),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def errlog(tmp_path: Path) -> Path:
    return tmp_path / "server-stderr.txt"


async def test_sample_server_flow(root: Path, notes: str, errlog: Path) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session([str(SAMPLE_SERVER), str(root)], errlog) as client:
            listed = {t.name: as_json(t) for t in (await client.list_tools()).tools}
            first = await client.call_tool("read_file", {"path": "notes.txt"})
            second = await client.call_tool("read_file", {"path": "notes.txt"})
            edited = await client.call_tool(
                "edit_file", {"path": "notes.txt", "old_string": "line 7:", "new_string": "seven:"}
            )
            after_edit = await client.call_tool("read_file", {"path": "notes.txt"})
            (root / "notes.txt").write_text(
                (root / "notes.txt").read_text().replace("line 40:", "forty:")
            )
            after_change = await client.call_tool("read_file", {"path": "notes.txt"})
            fresh = await client.call_tool("read_file", {"path": "notes.txt", "fresh": True})
            refused = await client.call_tool("read_file", {"path": "../outside/secret.txt"})
            missing = await client.call_tool("read_file", {"path": "missing.txt"})
            other = await client.call_tool("read_file", {"path": "src/app.py"})

    read = listed["read_file"]
    assert read["inputSchema"]["properties"]["fresh"]["type"] == "boolean"
    assert instructions() in read["description"]
    assert "fresh" not in listed["edit_file"]["inputSchema"]["properties"]

    assert text_of(first).startswith(notes)  # the tool's own output, then the tag block
    assert meta_of(first)["call_id"] in text_of(first).removeprefix(notes)
    assert meta_of(second)["kind"] == "unchanged"
    assert meta_of(second)["base_call_id"] == meta_of(first)["call_id"]
    assert len(text_of(second)) * 10 < len(notes)
    assert as_json(second)["structuredContent"] == {"result": text_of(second)}  # no stale full copy

    assert not is_error(edited) and text_of(edited) == "edited notes.txt"
    assert meta_of(after_edit)["kind"] == "diff"  # the host's edit tool says nothing of lines
    assert "-line 7: the quick" in text_of(after_edit)
    assert "+seven: the quick" in text_of(after_edit)
    assert meta_of(after_change)["kind"] == "diff"
    assert "+forty: the quick" in text_of(after_change) and "seven" not in text_of(after_change)
    assert meta_of(fresh)["kind"] == "full" and "forty: the quick" in text_of(fresh)

    assert is_error(refused) and "outside the root" in text_of(refused) and refused.meta is None
    assert is_error(missing) and missing.meta is None
    assert not is_error(other) and "return 1" in text_of(other)


async def test_argument_errors_reach_the_model_as_one_line(
    root: Path, notes: str, errlog: Path
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session([str(SAMPLE_SERVER), str(root)], errlog) as client:
            fresh = await client.call_tool("read_file", {"path": "notes.txt", "fresh": "yes"})
            no_path = await client.call_tool("read_file", {})
            edit = {"path": "notes.txt", "old_string": 1, "new_string": "x"}
            wrong_type = await client.call_tool("edit_file", edit)
            plain = await client.call_tool("read_file", {"path": "notes.txt"})
    assert is_error(fresh)  # refused by filecache: the tool never ran
    assert text_of(fresh) == "read_file: argument 'fresh' must be true or false, got 'yes'"
    assert is_error(no_path)  # the SDK's own (multi-line) validation error, as one line
    assert text_of(no_path) == "read_file: argument 'path': Field required"
    assert text_of(wrong_type) == (
        "edit_file: argument 'old_string': Input should be a valid string (got 1)"
    )
    assert text_of(plain).startswith(notes) and (root / "notes.txt").read_text() == notes


async def test_plain_sample_server_has_no_filecache(root: Path, notes: str, errlog: Path) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with stdio_session([str(SAMPLE_SERVER), str(root), "--plain"], errlog) as client:
            listed = {t.name: as_json(t) for t in (await client.list_tools()).tools}
            reads = [await client.call_tool("read_file", {"path": "notes.txt"}) for _ in range(2)]
    assert "fresh" not in listed["read_file"]["inputSchema"]["properties"]
    assert [text_of(r) for r in reads] == [notes, notes]
    assert all(r.meta is None for r in reads)


def test_docs_example_is_the_sample_server() -> None:
    """docs/mcp.md shows the sample server verbatim, so the documented example is what runs."""
    doc = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    assert SAMPLE_SERVER.read_text(encoding="utf-8") in blocks


# -- in process: the middleware with hand-made contexts ---------------------------------------


class _Request:
    def __init__(self, session_id: str) -> None:
        self.headers = {"mcp-session-id": session_id}


def _ctx(
    method: str, params: dict[str, Any], request: object = None
) -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(
        session=None,  # type: ignore[arg-type]  # the middleware never talks back to the client
        lifespan_context=None,
        protocol_version="2025-11-25",
        method=method,
        params=params,
        request_id=1,
        request=request,
    )


def _text_result(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False, **extra}


async def _read(
    mw: FileCacheMiddleware,
    output: dict[str, Any],
    args: dict[str, Any] | None = None,
    request: object = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Call the read tool through ``mw``; returns (result, the arguments the tool saw)."""
    seen: dict[str, Any] = {}

    async def tool(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        assert ctx.params is not None
        seen.update(ctx.params["arguments"])
        return output

    params = {"name": "read_file", "arguments": args or {"path": "notes.txt"}}
    result = await mw(_ctx("tools/call", params, request), tool)
    assert isinstance(result, dict)
    return result, seen


def _kind(result: dict[str, Any]) -> str | None:
    meta = result.get("_meta") or {}
    kind = meta.get("filecache", {}).get("kind")
    return kind if isinstance(kind, str) else None


async def test_results_it_cannot_carry_pass_through(root: Path, notes: str) -> None:
    mw = FileCacheMiddleware(TOOLS, root=root)
    error = {"content": [{"type": "text", "text": "boom"}], "isError": True}
    two = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    image = {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}
    nul = _text_result("a\x00b\n")
    for output in (error, two, image, nul):
        for _ in range(2):
            result, _ = await _read(mw, output)
            assert result == output
    mw.close()


async def test_fresh_is_consumed_and_structured_copies_stay_honest(root: Path, notes: str) -> None:
    mw = FileCacheMiddleware(TOOLS, root=root)
    plain = _text_result(notes, structuredContent={"result": notes, "lines": 60})
    first, seen = await _read(mw, plain, {"path": "notes.txt", "fresh": True})
    assert "fresh" not in seen and _kind(first) == "full"
    second, _ = await _read(mw, plain)
    assert _kind(second) == "unchanged"
    assert second["structuredContent"]["result"] == second["content"][0]["text"]
    assert second["structuredContent"]["lines"] == 60
    # A structured copy that does not repeat the text cannot be rewritten: content every time.
    other = _text_result(notes, structuredContent={"lines": notes.splitlines()})
    for _ in range(2):
        result, _ = await _read(mw, other, {"path": "notes.txt", "x": 1})
        assert _kind(result) == "full" and result["content"][0] == other["content"][0]
        assert result["structuredContent"] == other["structuredContent"]
    mw.close()


async def test_connections_and_the_ref_window(root: Path, notes: str) -> None:
    mw = FileCacheMiddleware(TOOLS, root=root, max_calls=1)
    out = _text_result(notes)
    a, b = _Request("a"), _Request("b")
    assert _kind((await _read(mw, out, request=a))[0]) == "full"
    assert _kind((await _read(mw, out, request=b))[0]) == "full"  # b is a connection of its own
    assert _kind((await _read(mw, out, request=a))[0]) == "unchanged"

    async def other_tool(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        return _text_result("ok")

    for _ in range(2):
        await mw(_ctx("tools/call", {"name": "bash", "arguments": {}}, a), other_tool)
    assert _kind((await _read(mw, out, request=a))[0]) == "full"  # older than 1 call: expired

    stateless = _Request("")
    stateless.headers = {}
    for _ in range(2):
        assert _kind((await _read(mw, out, request=stateless))[0]) == "full"
    mw.close()


async def test_writes_and_edits_are_recorded(root: Path) -> None:
    mw = FileCacheMiddleware(TOOLS, root=root, session="s1")

    async def ok(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        return _text_result("done")

    async def failed(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "no"}], "isError": True}

    await mw(_ctx("tools/call", {"name": "edit_file", "arguments": {"path": "a.txt"}}), ok)
    await mw(_ctx("tools/call", {"name": "write_file", "arguments": {"path": "b.txt"}}), ok)
    await mw(_ctx("tools/call", {"name": "write_file", "arguments": {"path": "c.txt"}}), failed)
    ledger = mw.cache.session("s1").ledger()
    assert {p: [w.tool for w in ws] for p, ws in ledger.writes.items()} == {
        "a.txt": ["edit"],
        "b.txt": ["write"],
    }
    mw.close()


def test_bad_configuration_is_refused(root: Path) -> None:
    with pytest.raises(ConfigError, match="unknown tool role"):
        FileCacheMiddleware({"delete": ("rm", "path")}, root=root)
    with pytest.raises(ConfigError, match="bad tool spec"):
        FileCacheMiddleware({"read": [("cat",)]}, root=root)  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="mcp_ref_calls"):
        FileCacheMiddleware(TOOLS, root=root, max_calls=-1)
    several = FileCacheMiddleware({"read": [("cat", "file"), ("head", "file")]}, root=root)
    assert several._tools == {"cat": ("read", "file"), "head": ("read", "file")}


async def test_a_fixed_session_is_shared_by_every_connection(root: Path, notes: str) -> None:
    mw = FileCacheMiddleware(TOOLS, root=root, session="agent-1")
    out = _text_result(notes)
    assert _kind((await _read(mw, out, request=_Request("a")))[0]) == "full"
    assert _kind((await _read(mw, out, request=_Request("b")))[0]) == "unchanged"
    mw.close()


async def test_a_filecache_failure_sends_the_tool_result(
    root: Path, notes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mw = FileCacheMiddleware(TOOLS, root=root)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("store on fire")

    monkeypatch.setattr(Session, "answer_output", broken)
    monkeypatch.setattr(Session, "record_write", broken)
    out = _text_result(notes)
    assert (await _read(mw, out))[0] == out

    async def ok(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        return _text_result("done")

    params = {"name": "edit_file", "arguments": {"path": "a.txt"}}
    assert await mw(_ctx("tools/call", params), ok) == _text_result("done")
    mw.close()
