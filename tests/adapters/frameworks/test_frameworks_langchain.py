"""LangChain's tool-calling loop with its fake chat model (``GenericFakeChatModel`` scripted with
tool calls): filecache's tools, a decorated tool with ``InjectedToolCallId``, conversations,
pruning LangChain message lists (objects and ``model_dump()`` dicts)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from needs import need

pytestmark = pytest.mark.frameworks

need("langchain_core")

from filecache.adapters.langchain import file_tools, prune_history  # noqa: E402
from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    GenericFakeChatModel,
)
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.tools import InjectedToolCallId, StructuredTool, tool  # noqa: E402

from filecache import FileCache, PrunePolicy, TranscriptError, prune_messages  # noqa: E402
from filecache.prune.transcript import parse_transcript  # noqa: E402

EAGER = PrunePolicy(
    context_window=2_000, prune_at=0.0, target=0.0, protect_recent=0, min_reclaim=0,
    cache_aware=False,
)  # fmt: skip


def scripted(steps: list[list[tuple[str, str, dict[str, Any]]]]) -> GenericFakeChatModel:
    replies = [
        AIMessage(
            content="",
            tool_calls=[{"name": n, "args": a, "id": c, "type": "tool_call"} for c, n, a in step],
        )
        for step in steps
    ]
    return GenericFakeChatModel(messages=iter([*replies, AIMessage(content="done")]))


def agent_loop(
    model: GenericFakeChatModel,
    tools: list[StructuredTool],
    prune: Callable[[list[BaseMessage]], list[BaseMessage]] | None = None,
    seen: list[list[BaseMessage]] | None = None,
) -> list[BaseMessage]:
    """The standard LangChain loop: the model's tool calls run with ``tool.invoke(call)``."""
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage("go")]
    while True:
        if prune is not None:
            messages = prune(messages)
        if seen is not None:
            seen.append(list(messages))
        reply = model.invoke(messages)
        messages.append(reply)
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            return messages
        for call in reply.tool_calls:
            messages.append(by_name[call["name"]].invoke(call))


def results(messages: list[Any]) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}


READ_EDIT_READ = [
    [("call_1", "read_file", {"path": "notes.txt"})],
    [("call_2", "read_file", {"path": "notes.txt"})],
    [("call_3", "edit_file", {"path": "notes.txt", "old_string": "line 5:",
                              "new_string": "line five:"})],
    [("call_4", "read_file", {"path": "notes.txt"})],
]  # fmt: skip


def test_read_twice_then_edit_then_read(cache: FileCache) -> None:
    tools = file_tools(cache)
    with cache.conversation("lc-1"):
        out = results(agent_loop(scripted(READ_EDIT_READ), tools))
    ref = "[filecache] notes.txt unchanged since your result "
    assert out["call_1"].startswith("[notes.txt: 60 lines")
    assert out["call_2"].startswith(ref + "call_1")
    assert out["call_3"].startswith("[filecache] edited notes.txt")
    assert out["call_4"].startswith(ref)
    schema = tools[0].tool_call_schema.model_json_schema()
    assert "fresh" in schema["properties"] and "tool_call_id" not in schema["properties"]


def test_async_tools_and_pruning_between_model_calls(cache: FileCache) -> None:
    tools = file_tools(cache)
    seen: list[list[BaseMessage]] = []

    async def loop() -> list[BaseMessage]:
        model = scripted(READ_EDIT_READ)
        by_name = {t.name: t for t in tools}
        messages: list[BaseMessage] = [HumanMessage("go")]
        while True:
            messages = prune_history(messages, cache, EAGER)
            seen.append(list(messages))
            reply = await model.ainvoke(messages)
            messages.append(reply)
            if not isinstance(reply, AIMessage) or not reply.tool_calls:
                return messages
            for call in reply.tool_calls:
                messages.append(await by_name[call["name"]].ainvoke(call))

    with cache.conversation("lc-2"):
        out = results(asyncio.run(loop()))
    assert results(seen[1])["call_1"].startswith("[notes.txt: 60 lines")
    assert results(seen[3])["call_1"].startswith("[cleared tool result: read notes.txt")
    assert out["call_4"].startswith("[notes.txt: 60 lines") and "line five:" in out["call_4"]
    pruned = next(m for m in seen[3] if isinstance(m, ToolMessage) and m.tool_call_id == "call_1")
    assert pruned.name == "read_file"  # a copy with only the content replaced


def test_two_conversations_never_share_filerefs(cache: FileCache) -> None:
    tools = file_tools(cache)

    def one(run_id: str, cid: str) -> str:
        with cache.conversation(run_id):
            model = scripted([[(cid, "read_file", {"path": "notes.txt"})]])
            return results(agent_loop(model, tools))[cid]

    assert one("lc-a", "a1").startswith("[notes.txt: 60 lines")
    assert one("lc-b", "b1").startswith("[notes.txt: 60 lines")
    assert "since your result a1" in one("lc-a", "a2")


def test_a_decorated_tool_with_the_injected_call_id(cache: FileCache, root: Path) -> None:
    @tool
    @cache.read_tool
    def cat(file: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Print a file.

        Args:
            file: the file.
        """
        return (root / file).read_text(encoding="utf-8")

    steps = [[("t1", "cat", {"file": "notes.txt"})], [("t2", "cat", {"file": "notes.txt"})]]
    with cache.conversation("lc-own"):
        out = results(agent_loop(scripted(steps), [cat]))
    assert out["t1"].startswith("line 1:")
    assert out["t2"].startswith("[filecache] notes.txt unchanged since your result t1")
    assert set(cat.tool_call_schema.model_json_schema()["properties"]) == {"file", "fresh"}


def test_prune_messages_takes_langchain_lists_and_their_dumps(cache: FileCache) -> None:
    session = cache.session("lc-pm")
    big = session.read("notes.txt", call_id="r1").text
    session.edit("notes.txt", "line 5:", "line five:", call_id="e1")
    edit_args = {"path": "notes.txt", "old_string": "line 5:", "new_string": "line five:"}
    history: list[BaseMessage] = [
        HumanMessage("go"),
        AIMessage(
            "", tool_calls=[{"name": "read_file", "args": {"path": "notes.txt"}, "id": "r1"}]
        ),
        ToolMessage(big, tool_call_id="r1", name="read_file"),
        AIMessage("", tool_calls=[{"name": "edit_file", "args": edit_args, "id": "e1"}]),
        ToolMessage("edited", tool_call_id="e1", name="edit_file"),
    ]
    result = prune_messages(history, session=session, policy=EAGER)
    assert isinstance(result.messages[2], ToolMessage)
    assert result.messages[2].content.startswith("[cleared tool result")
    assert result.messages[0] is history[0] and history[2].content == big
    dumped = [m.model_dump() for m in history]
    again = prune_messages(dumped, session=cache.session("lc-pm2"), policy=EAGER)
    assert again.messages[2]["content"].startswith("[cleared tool result")
    assert again.messages[2]["tool_call_id"] == "r1"
    with pytest.raises(TranscriptError, match="message 0: a LangChain message"):
        parse_transcript(dumped)  # not taken as Responses items


def test_unrecognised_objects_are_refused(cache: FileCache) -> None:
    with pytest.raises(TranscriptError, match="message 1: a object object, not a message"):
        prune_messages([{"role": "user", "content": "hi"}, object()])


def test_a_failed_call_reaches_the_model_prefixed_once(cache: FileCache) -> None:
    model = scripted(
        [
            [("e1", "read_file", {"path": "missing.txt"})],
            [("e2", "edit_file", {"path": "notes.txt", "old_string": "nope", "new_string": ""})],
        ]
    )
    seen: list[list[BaseMessage]] = []
    with cache.conversation("lc-err"):
        agent_loop(model, file_tools(cache), seen=seen)
    sent = results(seen[-1])  # what the model's last call was given
    for cid in ("e1", "e2"):
        assert sent[cid].startswith("Error: "), sent[cid]
        assert not sent[cid].startswith("Error: Error"), sent[cid]
    assert "missing.txt" in sent["e1"]
