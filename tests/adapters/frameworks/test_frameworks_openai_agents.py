"""The OpenAI Agents SDK's real run loop with a scripted ``Model``: filecache's tools, a decorated
tool of the agent's own, conversations, and ``call_model_input_filter`` pruning."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from needs import need

pytestmark = pytest.mark.frameworks

need("agents")

from agents import (  # noqa: E402
    Agent,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402
from agents.usage import Usage  # noqa: E402
from filecache.adapters.openai_agents import file_tools, input_filter  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from filecache import FileCache, PrunePolicy  # noqa: E402

set_tracing_disabled(True)  # no trace export: these tests make no network calls

EAGER = PrunePolicy(
    context_window=2_000, prune_at=0.0, target=0.0, protect_recent=0, min_reclaim=0,
    cache_aware=False,
)  # fmt: skip


class ScriptedModel(Model):
    """Answers each request with the next step's tool calls, then a final message."""

    def __init__(self, steps: list[list[tuple[str, str, dict[str, Any]]]]) -> None:
        self.steps = steps
        self.seen: list[list[Any]] = []
        self.tools: list[Any] = []

    async def get_response(self, system_instructions, input, model_settings, tools, *a, **k):  # type: ignore[no-untyped-def, override]
        self.seen.append(list(input) if isinstance(input, list) else [input])
        self.tools = tools
        step = len(self.seen) - 1
        if step >= len(self.steps):
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            message = ResponseOutputMessage(
                id="msg_1", type="message", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        calls = [
            ResponseFunctionToolCall(
                type="function_call", call_id=cid, name=name, arguments=json.dumps(args)
            )
            for cid, name, args in self.steps[step]
        ]
        return ModelResponse(output=calls, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        raise NotImplementedError("scripted model: no streaming")


def outputs(items: list[Any]) -> dict[str, str]:
    out = {}
    for item in items:
        data = item if isinstance(item, dict) else item.model_dump()
        if data.get("type") == "function_call_output":
            out[data["call_id"]] = data["output"]
    return out


def run(agent: Agent[Any], config: RunConfig | None = None) -> Any:
    return asyncio.run(Runner.run(agent, "go", run_config=config or RunConfig()))


READ_EDIT_READ = [
    [("call_1", "read_file", {"path": "notes.txt"})],
    [("call_2", "read_file", {"path": "notes.txt"})],
    [("call_3", "edit_file", {"path": "notes.txt", "old_string": "line 5:",
                              "new_string": "line five:"})],
    [("call_4", "read_file", {"path": "notes.txt"})],
]  # fmt: skip


def test_read_twice_then_edit_then_read(cache: FileCache) -> None:
    model = ScriptedModel(READ_EDIT_READ)
    agent = Agent(name="coder", model=model, tools=file_tools(cache))
    with cache.conversation("oa-1"):
        out = outputs(run(agent).to_input_list())
    ref = "[filecache] notes.txt unchanged since your result "
    assert out["call_1"].startswith("[notes.txt: 60 lines")
    assert out["call_2"].startswith(ref + "call_1")
    assert out["call_3"].startswith("[filecache] edited notes.txt")
    assert out["call_4"].startswith(ref)
    read = next(t for t in model.tools if t.name == "read_file")
    assert "fresh" in read.params_json_schema["properties"]


def test_the_input_filter_prunes_and_reads_send_content_again(cache: FileCache) -> None:
    model = ScriptedModel(READ_EDIT_READ)
    agent = Agent(name="coder", model=model, tools=file_tools(cache))
    config = RunConfig(call_model_input_filter=input_filter(cache, EAGER))
    with cache.conversation("oa-2"):
        out = outputs(run(agent, config).to_input_list())
    assert outputs(model.seen[1])["call_1"].startswith("[notes.txt: 60 lines")
    assert outputs(model.seen[3])["call_1"].startswith("[cleared tool result: read notes.txt")
    assert out["call_4"].startswith("[notes.txt: 60 lines") and "line five:" in out["call_4"]


def test_two_conversations_never_share_filerefs(cache: FileCache) -> None:
    def one(run_id: str, cid: str) -> str:
        model = ScriptedModel([[(cid, "read_file", {"path": "notes.txt"})]])
        agent = Agent(name="coder", model=model, tools=file_tools(cache))
        with cache.conversation(run_id):
            return outputs(run(agent).to_input_list())[cid]

    assert one("oa-a", "a1").startswith("[notes.txt: 60 lines")
    assert one("oa-b", "b1").startswith("[notes.txt: 60 lines")
    assert "since your result a1" in one("oa-a", "a2")


def test_a_decorated_tool_with_tool_context(cache: FileCache, root: Path) -> None:
    @cache.read_tool
    async def cat(ctx: ToolContext[Any], file: str) -> str:
        """Print a file.

        Args:
            file: the file.
        """
        return (root / file).read_text(encoding="utf-8")

    model = ScriptedModel(
        [[("t1", "cat", {"file": "notes.txt"})], [("t2", "cat", {"file": "notes.txt"})]]
    )
    agent = Agent(name="coder", model=model, tools=[function_tool(cat)])
    with cache.conversation("oa-own"):
        out = outputs(run(agent).to_input_list())
    assert out["t1"].startswith("line 1:")
    assert out["t2"].startswith("[filecache] notes.txt unchanged since your result t1")
    tool = next(t for t in model.tools if t.name == "cat")
    assert set(tool.params_json_schema["properties"]) == {"file", "fresh"}


def test_a_failed_call_reaches_the_model_prefixed_once(cache: FileCache) -> None:
    model = ScriptedModel(
        [
            [("call_1", "read_file", {"path": "missing.txt"})],
            [
                (
                    "call_2",
                    "edit_file",
                    {"path": "notes.txt", "old_string": "nope", "new_string": ""},
                )
            ],
        ]
    )
    agent = Agent(name="coder", model=model, tools=file_tools(cache))
    with cache.conversation("oa-err"):
        out = outputs(run(agent).to_input_list())
    for cid in ("call_1", "call_2"):
        assert out[cid].startswith("Error: "), out[cid]
        assert not out[cid].startswith("Error: Error"), out[cid]
    assert "missing.txt" in out["call_1"]
