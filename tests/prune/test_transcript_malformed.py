"""Malformed message lists are refused with a ``TranscriptError`` that names the message index."""

from __future__ import annotations

from typing import Any

import pytest

from filecache import prune_messages
from filecache.errors import TranscriptError
from filecache.prune.codecs import anthropic_messages, openai_chat, openai_responses
from filecache.prune.transcript import detect_format

ADAPTERS = {"openai": openai_chat, "responses": openai_responses, "anthropic": anthropic_messages}


def _call(cid: str, name: str = "bash") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _asst(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [_call(i) for i in ids]}


def _tool(cid: str, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def _use(cid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": "Bash", "input": {}}


def _res(cid: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": "ok", **extra}


def _fc(cid: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "shell", "arguments": "{}"}


def _fco(cid: str, output: Any = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": output}


USER = {"role": "user", "content": "go"}

MALFORMED: list[tuple[str, Any, str]] = [
    ("openai", {"messages": []}, "expected a list of messages, got object"),
    ("openai", [USER, "hi"], "message 1: must be an object, got str"),
    (
        "openai",
        [USER, _asst("call_1"), _tool("call_1"), _tool("call_3")],
        "message 3: tool result for call_3, but no earlier assistant message calls it",
    ),
    (
        "openai",
        [_tool("call_1"), _asst("call_1")],
        "message 0: tool result for call_1, but no earlier assistant message calls it",
    ),
    (
        "openai",
        [USER, USER, _asst("call_2"), _tool("call_2"), _asst("call_2")],
        r"message 4: tool call id call_2 used twice \(first at message 2\)",
    ),
    (
        "openai",
        [_asst("call_1", "call_1")],
        r"message 0: tool call id call_1 used twice \(first at message 0\)",
    ),
    (
        "openai",
        [_asst("call_1"), _tool("call_1"), _tool("call_1")],
        r"message 2: a second tool result for call_1 \(first at message 1\)",
    ),
    (
        "openai",
        [USER, USER, USER, {"role": "user", "content": 7}],
        "message 3: content must be a string or a list of blocks, got int",
    ),
    ("openai", [USER, {"content": "x"}], "message 1: role must be a non-empty string, got null"),
    (
        "openai",
        [_asst("call_1"), {"role": "tool", "content": "x"}],
        "message 1: tool_call_id must be a non-empty string, got null",
    ),
    (
        "openai",
        [{"role": "assistant", "tool_calls": {"id": "c"}}],
        "message 0: tool_calls must be a list, got object",
    ),
    (
        "openai",
        [{"role": "user", "tool_calls": [_call("c")]}],
        "message 0: only assistant messages make tool calls, not user",
    ),
    (
        "openai",
        [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "x"}}]}],
        "message 0: tool call 0: id must be a non-empty string, got null",
    ),
    (
        "openai",
        [
            {
                "role": "assistant",
                "tool_calls": [{**_call("c"), "function": {"name": "x", "arguments": 3}}],
            }
        ],
        "message 0: tool call 0: arguments must be a JSON string, got int",
    ),
    (
        "openai",
        [{"role": "assistant", "tool_calls": [{**_call("c"), "type": "mystery"}]}],
        "message 0: tool call 0: unknown type 'mystery'",
    ),
    (
        "openai",
        [_asst("c"), _tool("c", [{"type": "text", "text": 5}])],
        "message 1: text of block 0 must be a string, got int",
    ),
    ("openai", [_asst("c"), _tool("c", ["x"])], "message 1: block 0 must be an object, got str"),
    ("responses", "hello", "expected a list of input items, got str"),
    (
        "responses",
        [USER, _fc("call_1"), _fco("call_9")],
        "message 2: tool result for call_9, but no earlier assistant message calls it",
    ),
    (
        "responses",
        [_fc("call_1"), _fco("call_1"), _fc("call_1")],
        r"message 2: tool call id call_1 used twice \(first at message 0\)",
    ),
    (
        "responses",
        [_fc("call_1"), _fco("call_1", 42)],
        "message 1: output must be a string or a list of blocks, got int",
    ),
    (
        "responses",
        [{**_fc("c"), "arguments": {"a": 1}}],
        "message 0: arguments must be a string, got object",
    ),
    ("responses", [{"type": 3}], "message 0: type must be a string, got int"),
    ("responses", [{"content": "x"}], "message 0: role must be a non-empty string, got null"),
    (
        "anthropic",
        [
            USER,
            {"role": "assistant", "content": [_use("t1")]},
            {"role": "user", "content": [_res("t2")]},
        ],
        "message 2: tool result for t2, but no earlier assistant message calls it",
    ),
    (
        "anthropic",
        [
            {"role": "assistant", "content": [_use("t1")]},
            {"role": "assistant", "content": [_use("t1")]},
        ],
        r"message 1: tool call id t1 used twice \(first at message 0\)",
    ),
    (
        "anthropic",
        [USER, USER, USER, {"role": "assistant", "content": 3}],
        "message 3: content must be a string or a list of blocks, got int",
    ),
    (
        "anthropic",
        [{"role": "user", "content": [_use("t1")]}],
        "message 0: block 0: a tool_use block belongs in an assistant message",
    ),
    (
        "anthropic",
        [{"role": "assistant", "content": [_use("t1"), _res("t1")]}],
        "message 0: block 1: a tool_result block belongs in a user message",
    ),
    (
        "anthropic",
        [
            {"role": "assistant", "content": [_use("t1")]},
            {"role": "user", "content": [_res("t1", is_error="yes")]},
        ],
        "message 1: block 0: is_error must be true or false, got str",
    ),
    (
        "anthropic",
        [
            {"role": "assistant", "content": [_use("t1")]},
            {"role": "user", "content": [_res("t1", content=5)]},
        ],
        r"message 1: block 0 \(tool_result for t1\): content must be a string or a list of blocks",
    ),
    (
        "anthropic",
        [{"role": "assistant", "content": [{**_use("t1"), "input": "ls"}]}],
        "message 0: block 0: input must be an object, got str",
    ),
    (
        "anthropic",
        [{"role": "assistant", "content": [{"text": "x"}]}],
        "message 0: block 0 has no type",
    ),
    (
        "anthropic",
        [{"role": "assistant", "content": [None]}],
        "message 0: block 0 must be an object, got null",
    ),
]


@pytest.mark.parametrize(("fmt", "messages", "message"), MALFORMED)
def test_malformed_input_is_refused_naming_the_index(fmt: str, messages: Any, message: str) -> None:
    with pytest.raises(TranscriptError, match=message) as caught:
        ADAPTERS[fmt].parse(messages)
    assert caught.value.exit_code == 2


def test_pending_calls_are_allowed() -> None:
    transcript = openai_chat.parse([USER, _asst("a", "b"), _tool("b")])
    assert [c.id for c in transcript.pending_calls()] == ["a"]


@pytest.mark.parametrize("kind", [[], {}])
def test_a_type_that_is_no_string_is_no_crash(kind: Any) -> None:
    """A message whose ``type`` is a list or an object names no format (it was a TypeError:
    unhashable, looked up among LangChain's types)."""
    messages = [{**USER, "type": kind}]
    assert detect_format(messages) == "openai"
    assert prune_messages(messages).messages == messages
