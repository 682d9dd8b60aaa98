"""smolagents' real agents (``ToolCallingAgent`` and ``CodeAgent``) with a scripted ``Model``:
filecache's tools, the tag line that names a content answer, conversations, and the marker
guard when a CodeAgent's code writes a FileRef back."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from needs import need

pytestmark = pytest.mark.frameworks

need("smolagents")

from filecache.adapters.smolagents import file_tools  # noqa: E402
from smolagents import CodeAgent, ToolCallingAgent, tool  # noqa: E402
from smolagents.models import (  # noqa: E402
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)

from filecache import FileCache  # noqa: E402

TAG = re.compile(r"\[filecache\] result (fc-[0-9a-f]+): notes.txt, xxh3 [0-9a-f]{8}\n")


class ScriptedCalls(Model):
    """A ToolCallingAgent's model: the next step's tool calls, then ``final_answer``."""

    def __init__(self, steps: list[list[tuple[str, str, dict[str, Any]]]]) -> None:
        super().__init__(model_id="scripted")
        self.steps = [*steps, [("final", "final_answer", {"answer": "done"})]]
        self.calls = 0

    def generate(
        self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs
    ):  # type: ignore[no-untyped-def, override]  # noqa: E501
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        calls = [
            ChatMessageToolCall(
                function=ChatMessageToolCallFunction(name=name, arguments=args),
                id=cid,
                type="function",
            )
            for cid, name, args in step
        ]
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=calls)


class ScriptedCode(Model):
    """A CodeAgent's model: the next step's code."""

    def __init__(self, codes: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.codes = [*codes, 'final_answer("done")']
        self.calls = 0
        self.seen: list[Any] = []

    def generate(
        self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs
    ):  # type: ignore[no-untyped-def, override]  # noqa: E501
        self.seen.append(messages)
        code = self.codes[min(self.calls, len(self.codes) - 1)]
        self.calls += 1
        return ChatMessage(
            role=MessageRole.ASSISTANT, content=f"Thought: next.\n<code>\n{code}\n</code>"
        )


def observations(agent: Any) -> list[str]:
    return [step.observations for step in agent.memory.steps if getattr(step, "observations", None)]


def test_tool_calling_agent_read_twice_edit_read(cache: FileCache) -> None:
    steps = [
        [("call_1", "read_file", {"path": "notes.txt"})],
        [("call_2", "read_file", {"path": "notes.txt"})],
        [("call_3", "edit_file", {"path": "notes.txt", "old_string": "line 5:",
                                  "new_string": "line five:"})],
        [("call_4", "read_file", {"path": "notes.txt"})],
    ]  # fmt: skip
    agent = ToolCallingAgent(tools=file_tools(cache), model=ScriptedCalls(steps), max_steps=6)
    with cache.conversation("sa-1"):
        assert agent.run("go") == "done"
    first, second, edit, last = observations(agent)[:4]
    tag = TAG.match(first)
    assert tag is not None and "[notes.txt: 60 lines" in first
    assert second.startswith(f"[filecache] notes.txt unchanged since your result {tag.group(1)}")
    assert edit.startswith("[filecache] edited notes.txt")
    assert last.startswith("[filecache] notes.txt unchanged since your result")


def test_two_conversations_never_share_filerefs(cache: FileCache) -> None:
    tools = file_tools(cache)

    def one(run_id: str) -> str:
        model = ScriptedCalls([[("c", "read_file", {"path": "notes.txt"})]])
        agent = ToolCallingAgent(tools=tools, model=model, max_steps=3)
        with cache.conversation(run_id):
            agent.run("go")
        return observations(agent)[0]

    assert TAG.match(one("sa-a"))
    assert TAG.match(one("sa-b"))  # content, not a FileRef into sa-a
    assert one("sa-a").startswith("[filecache] notes.txt unchanged since your result fc-")


def test_code_agent_writing_a_fileref_back_is_refused(cache: FileCache, root: Path) -> None:
    before = (root / "notes.txt").read_text()
    codes = [
        'text = read_file(path="notes.txt")\nprint(len(text))',
        'text = read_file(path="notes.txt")\nprint(write_file(path="notes.txt", content=text))',
    ]
    # smolagents runs a CodeAgent's code in a thread of its own (for its timeout) that does not
    # see the conversation bound around the run: give a CodeAgent its conversation's Session.
    session = cache.session("sa-code")
    agent = CodeAgent(tools=file_tools(session), model=ScriptedCode(codes), max_steps=4)
    agent.run("go")
    assert (root / "notes.txt").read_text() == before
    logs = "\n".join(observations(agent))
    assert "Error: notes.txt: the new content contains '[filecache]'" in logs
    assert "fresh=true" in logs


@pytest.mark.filterwarnings("ignore:Function '.*' has decorators other than @tool")
def test_code_agent_with_decorated_tools_of_its_own(cache: FileCache, root: Path) -> None:
    @tool
    @cache.read_tool
    def cat(path: str) -> str:
        """Print a file.

        Args:
            path: the file.
        """
        return (root / path).read_text(encoding="utf-8")

    @tool
    @cache.write_tool
    def save(path: str, content: str) -> str:
        """Write a file.

        Args:
            path: the file.
            content: its new text.
        """
        (root / path).write_text(content, encoding="utf-8")
        return "saved"

    before = (root / "notes.txt").read_text()
    codes = [
        'print(cat(path="notes.txt")[:300])',
        'ref = cat(path="notes.txt")\nprint(ref)\nsave(path="notes.txt", content=ref)',
    ]
    # Without smolagents' timeout thread the code runs where the conversation is bound.
    agent = CodeAgent(
        tools=[cat, save], model=ScriptedCode(codes), max_steps=4,
        executor_kwargs={"timeout_seconds": None},
    )  # fmt: skip
    with cache.conversation("sa-own"):
        agent.run("go")
    assert (root / "notes.txt").read_text() == before  # the FileRef was not written
    first, second = observations(agent)[:2]
    tag = TAG.search(first)  # after smolagents' "Execution logs:" line
    assert tag is not None
    assert f"unchanged since your result {tag.group(1)}" in second
    errors = [str(s.error) for s in agent.memory.steps if getattr(s, "error", None)]
    assert any("the new content contains '[filecache]'" in e for e in errors), errors
    assert "fresh" in cat.inputs


def test_a_failed_call_reaches_the_model_prefixed_once(cache: FileCache) -> None:
    steps = [
        [("e1", "read_file", {"path": "missing.txt"})],
        [("e2", "edit_file", {"path": "notes.txt", "old_string": "nope", "new_string": ""})],
    ]
    agent = ToolCallingAgent(tools=file_tools(cache), model=ScriptedCalls(steps), max_steps=4)
    with cache.conversation("sa-err"):
        assert agent.run("go") == "done"
    read, edit = observations(agent)[:2]  # what the model's next steps were shown
    for seen in (read, edit):
        assert seen.startswith("Error: "), seen
        assert "Error: Error" not in seen, seen
    assert "missing.txt" in read
