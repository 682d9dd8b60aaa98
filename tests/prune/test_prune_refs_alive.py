"""Pruning never leaves a FileRef dangling (issue 19): the result a later FileRef or diff names
stays intact while the reference does, also when the tool is an MCP tool under a host's name
(``mcp__filecache__read_file``), when the reference names the MCP server's own ``fc-…`` ids
(which the client's transcript never carries), and when the read was a shell ``cat -n`` served
by ``filecache.shell``. Answers come from a real session; the transcripts are what the
client would send."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from filecache import FileCache
from filecache.prune.file_tools import file_access, tool_name
from filecache.prune.pruner import prune_messages
from filecache.prune.pruning import PrunePolicy
from filecache.prune.transcript import parse_transcript
from filecache.shell.bash_reads import serve_bash

BIG = "".join(
    f"def f{i}():\n    return {i}  # padding so that the file is bulky\n" for i in range(300)
)
OTHER = "".join(f"other line {i} with more words to make it bulky\n" for i in range(400))


def _call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(args)}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": cid, "type": "function", "function": function}],
    }


def _result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _text_of(messages: list[dict[str, Any]], cid: str) -> str:
    [found] = [m["content"] for m in messages if m.get("tool_call_id") == cid]
    return str(found)


def _mcp_transcript(root: Path, tool: str) -> tuple[list[dict[str, Any]], str]:
    """Read big.py over MCP (the server's own fc- ids), six bulky other results, read it again
    (a FileRef naming the server's id). Returns the messages and the first result's text."""
    (root / "big.py").write_text(BIG)
    (root / "other.txt").write_text(OTHER)
    with FileCache(root, store=":memory:") as cache:
        server = cache.session("server")  # what filecache serve answers with
        first = server.read("big.py", mode="full")
        messages = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "look at big.py"},
            _call("toolu_1", tool, {"path": "big.py"}),
            _result("toolu_1", first.text),
        ]
        for i in range(2, 8):
            out = server.read("other.txt", fresh=True, mode="full").text
            messages += [
                _call(f"toolu_{i}", "Bash", {"command": f"echo {i}"}),
                _result(f"toolu_{i}", out),
            ]
        again = server.read("big.py")
        assert again.kind == "unchanged" and again.base_call_id == first.call_id
        assert first.call_id.startswith("fc-") and first.call_id in again.text
        messages += [_call("toolu_9", tool, {"path": "big.py"}), _result("toolu_9", again.text)]
        messages.append({"role": "assistant", "content": "ok"})
    return messages, first.text


@pytest.mark.parametrize("preset", ["cost", "context"])
@pytest.mark.parametrize("tool", ["mcp__filecache__read_file", "read_file", "filecache_read_file"])
def test_a_result_named_by_the_mcp_servers_id_stays_intact(
    root: Path, tool: str, preset: str
) -> None:
    messages, first = _mcp_transcript(root, tool)
    pruned = prune_messages(messages, policy=PrunePolicy.preset(preset, context_window=20_000))
    assert pruned.plan.actions, "the window is tight: something must be pruned"
    assert _text_of(pruned.messages, "toolu_1") == first
    assert "unchanged since your result fc-" in _text_of(pruned.messages, "toolu_9")


def test_mcp_tools_under_a_hosts_name_are_file_tools() -> None:
    assert tool_name("mcp__filecache__read_file") == "read_file"
    assert tool_name("mcp__my__server__edit_file") == "edit_file"
    assert tool_name("mcp__filecache__") == "mcp__filecache__"
    assert tool_name("Read") == "Read"
    messages = [_call("c", "mcp__filecache__edit_file", {"path": "a.py", "old_string": "x"})]
    [call] = parse_transcript(messages, "openai").calls()
    access = file_access(call)
    assert access is not None and (access.kind, access.path) == ("edit", "a.py")


def _shell_transcript(root: Path) -> tuple[list[dict[str, Any]], str]:
    (root / "big.py").write_text(BIG)
    with FileCache(root, store=":memory:") as cache:
        session = cache.session("shell")

        def bash(cid: str, command: str) -> list[dict[str, Any]]:
            out = serve_bash(session, command, lambda c: OTHER, call_id=cid)
            return [_call(cid, "bash", {"command": command}), _result(cid, out)]

        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "look at big.py"},
        ]
        messages += bash("call_1", "cat -n big.py")
        first = _text_of(messages, "call_1")
        for i in range(2, 8):
            messages += bash(f"call_{i}", f"python -c 'print({i})'")  # runs: bulky output
        messages += bash("call_9", "cat -n big.py")
        assert "unchanged since your result call_1" in _text_of(messages, "call_9")
        messages.append({"role": "assistant", "content": "ok"})
        ledger_session = session
        with_ledger = [
            prune_messages(
                messages,
                session=ledger_session,
                policy=PrunePolicy.preset(p, context_window=20_000),
            )
            for p in ("cost", "context")
        ]
        for pruned in with_ledger:
            assert _text_of(pruned.messages, "call_1") == first
    return messages, first


@pytest.mark.parametrize("preset", ["cost", "context"])
def test_a_shell_cat_n_read_named_by_a_fileref_stays_intact(root: Path, preset: str) -> None:
    messages, first = _shell_transcript(root)
    pruned = prune_messages(messages, policy=PrunePolicy.preset(preset, context_window=20_000))
    assert pruned.plan.actions, "the window is tight: something must be pruned"
    assert _text_of(pruned.messages, "call_1") == first
