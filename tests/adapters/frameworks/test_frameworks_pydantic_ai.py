"""pydantic-ai's real agent loop, scripted with ``FunctionModel``: filecache's tools, a decorated
tool of the agent's own, conversations, and the history processor.

Runs use ``asyncio.run(agent.run(...))``: ``run_sync`` leaves its event loop open for the
process, and a later ``asyncio.run`` elsewhere makes it unreachable (an unclosed-loop
``ResourceWarning``, an error under ``filterwarnings = error``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from needs import need

pytestmark = pytest.mark.frameworks

need("pydantic_ai")

from filecache.adapters.pydantic_ai import (  # noqa: E402
    file_tools,
    history_capability,
    prune_history,
)
from pydantic_ai import Agent, RunContext  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from filecache import FileCache, PrunePolicy  # noqa: E402

# Prune whatever is superseded, at once (no cost gate, nothing protected), so one short scripted
# run shows the hook at work.
EAGER = PrunePolicy(
    context_window=2_000, prune_at=0.0, target=0.0, protect_recent=0, min_reclaim=0,
    cache_aware=False,
)  # fmt: skip


class Script:
    """A scripted model: one list of tool calls (or a final text) per step; records what it saw."""

    def __init__(self, steps: list[list[tuple[str, str, dict[str, Any]]]]) -> None:
        self.steps = steps
        self.seen: list[list[ModelMessage]] = []
        self.tools: list[Any] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.tools = info.function_tools
        step = len(self.seen) - 1
        if step >= len(self.steps):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=cid) for cid, name, args in self.steps[step]
            ]
        )


def returns(messages: list[ModelMessage]) -> dict[str, str]:
    return {
        p.tool_call_id: p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


READ_EDIT_READ = [
    [("call_1", "read_file", {"path": "notes.txt"})],
    [("call_2", "read_file", {"path": "notes.txt"})],
    [("call_3", "edit_file", {"path": "notes.txt", "old_string": "line 5:",
                              "new_string": "line five:"})],
    [("call_4", "read_file", {"path": "notes.txt"})],
]  # fmt: skip


def test_read_twice_then_edit_then_read(cache: FileCache) -> None:
    script = Script(READ_EDIT_READ)
    agent = Agent(FunctionModel(script), tools=file_tools(cache))
    with cache.conversation("pa-1"):
        out = returns(asyncio.run(agent.run("read notes twice, edit, read")).all_messages())
    assert out["call_1"].startswith("[notes.txt: 60 lines")
    ref = "[filecache] notes.txt unchanged since your result "
    assert out["call_2"].startswith(ref + "call_1")
    assert out["call_3"].startswith("[filecache] edited notes.txt")
    assert out["call_4"].startswith(ref)  # the model knows what it wrote
    assert cache.session("pa-1").ledger().calls["call_4"].kind == "unchanged"
    # The schema offers fresh (the FileRef's recovery hint names it).
    read_def = next(t for t in script.tools if t.name == "read_file")
    assert "fresh" in read_def.parameters_json_schema["properties"]


def test_the_history_processor_prunes_and_reads_send_content_again(cache: FileCache) -> None:
    script = Script(READ_EDIT_READ)
    agent = Agent(
        FunctionModel(script), tools=file_tools(cache),
        capabilities=[history_capability(cache, EAGER)],
    )  # fmt: skip
    with cache.conversation("pa-2"):
        out = returns(asyncio.run(agent.run("read notes twice, edit, read")).all_messages())
    assert returns(script.seen[1])["call_1"].startswith("[notes.txt: 60 lines")
    # After the edit, the reads it superseded were pruned in the model's next request (and in
    # the run's history: pydantic-ai keeps the processed list) ...
    assert returns(script.seen[3])["call_1"].startswith("[cleared tool result: read notes.txt")
    assert out["call_1"].startswith("[cleared tool result")
    # ... so the next read sends content, not a FileRef to what is gone.
    assert out["call_4"].startswith("[notes.txt: 60 lines")
    assert "line five:" in out["call_4"]


def test_two_conversations_never_share_filerefs(cache: FileCache) -> None:
    def run(run_id: str, cid: str) -> dict[str, str]:
        script = Script([[(cid, "read_file", {"path": "notes.txt"})]])
        agent = Agent(FunctionModel(script), tools=file_tools(cache))
        with cache.conversation(run_id):
            return returns(asyncio.run(agent.run("read")).all_messages())

    assert run("conv-a", "a1")["a1"].startswith("[notes.txt: 60 lines")
    assert run("conv-b", "b1")["b1"].startswith("[notes.txt: 60 lines")  # not a FileRef to a1
    assert "since your result a1" in run("conv-a", "a2")["a2"]


def test_a_tool_run_with_no_conversation_bound_does_not_guess(cache: FileCache) -> None:
    script = Script([[("x1", "read_file", {"path": "notes.txt"})]])
    agent = Agent(FunctionModel(script), tools=file_tools(cache))
    with pytest.raises(Exception, match=r"no conversation bound"):
        asyncio.run(agent.run("read"))


def test_a_decorated_async_tool_of_the_agents_own(cache: FileCache, root: Path) -> None:
    script = Script(
        [
            [("t1", "cat", {"file": "notes.txt"})],
            [("t2", "cat", {"file": "notes.txt"})],
            [("t3", "cat", {"file": "notes.txt", "fresh": True})],
        ]
    )
    agent = Agent(FunctionModel(script))

    @agent.tool
    @cache.read_tool
    async def cat(ctx: RunContext[None], file: str) -> str:
        """Print a file.

        Args:
            file: the file.
        """
        return (root / file).read_text(encoding="utf-8")

    with cache.conversation("pa-own"):
        out = returns(asyncio.run(agent.run("cat")).all_messages())
    assert out["t1"].startswith("line 1:")  # the framework's id is known: no tag line
    assert out["t2"].startswith("[filecache] notes.txt unchanged since your result t1")
    assert out["t3"].startswith("line 1:")
    schema = next(t for t in script.tools if t.name == "cat").parameters_json_schema
    assert set(schema["properties"]) == {"file", "fresh"}
    assert "no longer in your context" in schema["properties"]["fresh"]["description"]


def test_prune_history_outside_a_run(cache: FileCache) -> None:
    session = cache.session("pa-prune")
    big = session.read("notes.txt", call_id="r1").text
    session.edit("notes.txt", "line 5:", "line five:", call_id="e1")
    history: list[ModelMessage] = [
        ModelRequest.user_text_prompt("go"),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": "notes.txt"}, tool_call_id="r1")]),
        ModelRequest(parts=[ToolReturnPart("read_file", big, tool_call_id="r1")]),
        ModelResponse(
            parts=[
                ToolCallPart(
                    "edit_file",
                    {"path": "notes.txt", "old_string": "line 5:", "new_string": "line five:"},
                    tool_call_id="e1",
                )
            ]
        ),
        ModelRequest(parts=[ToolReturnPart("edit_file", "edited", tool_call_id="e1")]),
    ]
    pruned = prune_history(history, session, EAGER)
    assert returns(pruned)["r1"].startswith("[cleared tool result")
    assert returns(history)["r1"] == big  # the input is not changed
    assert pruned[0] is history[0] and pruned[4] is history[4]
    assert prune_history(pruned, session, EAGER) == pruned  # idempotent


def test_a_sync_plain_tool_runs_in_a_worker_thread_and_keeps_its_conversation(
    cache: FileCache, root: Path
) -> None:
    script = Script(
        [[("s1", "cat", {"file": "notes.txt"})], [("s2", "cat", {"file": "notes.txt"})]]
    )
    agent = Agent(FunctionModel(script))

    @agent.tool_plain
    @cache.read_tool
    def cat(file: str) -> str:
        """Print a file.

        Args:
            file: the file.
        """
        return (root / file).read_text(encoding="utf-8")

    with cache.conversation("pa-sync"):
        out = returns(asyncio.run(agent.run("cat")).all_messages())
    # No context argument, so no framework id: the tag line names the id the FileRef uses.
    tag, _, body = out["s1"].partition("\n")
    fc_id = tag.split()[2].rstrip(":")
    assert tag.startswith("[filecache] result fc-") and body.startswith("line 1:")
    assert out["s2"].startswith(f"[filecache] notes.txt unchanged since your result {fc_id}")


def test_a_failed_call_reaches_the_model_prefixed_once(cache: FileCache) -> None:
    script = Script(
        [
            [("e1", "read_file", {"path": "missing.txt"})],
            [("e2", "edit_file", {"path": "notes.txt", "old_string": "nope", "new_string": ""})],
        ]
    )
    agent = Agent(FunctionModel(script), tools=file_tools(cache))
    with cache.conversation("pa-err"):
        asyncio.run(agent.run("go"))
    sent = returns(script.seen[-1])  # what the model's last request held
    for cid in ("e1", "e2"):
        assert sent[cid].startswith("Error: "), sent[cid]
        assert not sent[cid].startswith("Error: Error"), sent[cid]
    assert "missing.txt" in sent["e1"]
