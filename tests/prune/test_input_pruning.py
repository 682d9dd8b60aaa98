"""The model's own write and edit inputs, cleared once superseded (``prune/input_pruning.py``).

A real ``Session`` answers the calls; ``prune_messages`` replaces the payload of a superseded
write or edit in the assistant's own call, in every format it prunes, archives the original
arguments and keeps the projection sticky; an input that a live FileRef relies on, or that only
a read being cleared shows, stays.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from needs import need
from prune_chat import Chat, filler, words
from test_prune_replay import run_loop

from filecache import FileCache, Session
from filecache.core.render import INPUT_MARKER
from filecache.prune.input_pruning import INPUT_SUFFIX, MIN_PAYLOAD
from filecache.prune.pruner import prune_messages
from filecache.prune.pruning import PrunePolicy
from filecache.prune.transcript import parse_transcript
from filecache.store.memory_store import MemoryStore

FIRST = "".join(f"print('first version, line {i}')\n" for i in range(40))
SECOND = "".join(f"print('second version, line {i}')\n" for i in range(40))


def policy(**changes: Any) -> PrunePolicy:
    base: dict[str, Any] = dict(
        context_window=2_000, protect_recent=50, min_reclaim=0, cache_aware=False,
        small_result=10, prune_at=0.05, target=0.0,
    )  # fmt: skip
    return PrunePolicy(**(base | changes))


def rewrite(session: Session, chat: Chat) -> None:
    """Write gen.py, run it, write it again, run it: w1's content is superseded by w2."""
    chat.write("gen.py", FIRST, call_id="w1")
    session.write("gen.py", FIRST, call_id="w1")
    chat.bash("python gen.py", filler(200, "first"), call_id="b1")
    chat.write("gen.py", SECOND, call_id="w2")
    session.write("gen.py", SECOND, call_id="w2")
    chat.bash("python gen.py", filler(200, "second"), call_id="b2")


def arguments(messages: list[Any]) -> dict[str, dict[str, Any]]:
    transcript = parse_transcript(messages)
    return {c.id: dict(c.arguments) for c in transcript.calls()}


def test_a_rewritten_files_first_input_is_replaced_archived_and_sticky(tmp_path: Path) -> None:
    with FileCache(tmp_path, store=":memory:") as cache:
        session, chat = cache.session("s"), Chat()
        rewrite(session, chat)
        before = copy.deepcopy(chat.messages)
        result = prune_messages(chat.messages, session=session, policy=policy(), count=words)
        assert chat.messages == before  # never mutated
        plan = result.plan
        assert set(plan.inputs) == {"w1"}  # w2 is the file as it is
        (action,) = [a for a in plan.actions if a.target == "input"]
        assert action.reason == "superseded by write w2" and action.kind == "write"
        new = arguments(result.messages)["w1"]
        assert set(new) == {"path", "content"} and new["path"] == "gen.py"
        assert new["content"].startswith(INPUT_MARKER) and "read gen.py" in new["content"]
        assert len(new["content"]) < len(FIRST)
        # the chain: the same calls, ids and results in the same places
        sent, original = parse_transcript(result.messages), parse_transcript(chat.messages)
        assert [(c.id, c.name, c.message_index) for c in sent.calls()] == [
            (c.id, c.name, c.message_index) for c in original.calls()
        ]
        assert [r.call_id for r in sent.results()] == [r.call_id for r in original.results()]
        raw = original.calls_by_id()["w1"].raw_arguments
        assert cache.engine.store.archive_get("w1" + INPUT_SUFFIX, "s") == raw
        assert cache.engine.store.projections("s")["w1" + INPUT_SUFFIX][1] == plan.inputs["w1"]
        # the model no longer holds w1's version: its facts are gone, w2's stay
        assert "w1" not in session.held_call_ids() and "w2" in session.held_call_ids()
        # sticky: a calm pass (no trigger) renders the same bytes
        calm = prune_messages(chat.messages, session=session, policy=PrunePolicy(), count=words)
        assert not calm.plan.triggered
        assert json.dumps(calm.messages) == json.dumps(result.messages)
        # idempotent on its own output
        again = prune_messages(result.messages, session=session, policy=policy(), count=words)
        assert json.dumps(again.messages) == json.dumps(result.messages)
        assert not [a for a in again.plan.actions if a.target == "input"]


def test_a_write_a_live_fileref_relies_on_keeps_its_input(tmp_path: Path) -> None:
    """The FileRef r1 says "unchanged since your result w1": the lines are in w1's input."""
    with FileCache(tmp_path, store=":memory:") as cache:
        session, chat = cache.session("s"), Chat()
        chat.write("gen.py", FIRST, call_id="w1")
        session.write("gen.py", FIRST, call_id="w1")
        ref = session.read("gen.py", call_id="r1")
        assert ref.kind == "unchanged" and ref.base_call_id == "w1"
        chat.read("gen.py", ref.text, call_id="r1")
        chat.bash("python gen.py", filler(400, "out"), call_id="b1")
        # a later outside change (a shell rewrote it) supersedes w1, but r1 stays live
        result = prune_messages(chat.messages, session=session, policy=policy(), count=words)
        assert "w1" not in result.plan.inputs


def test_a_full_read_supersedes_the_input_only_while_it_stays(tmp_path: Path) -> None:
    """w1's facts were dropped (its confirmation pruned elsewhere), so the next read is content:
    that read shows the whole file, and w1's input may go, unless the read goes too."""
    with FileCache(tmp_path, store=":memory:") as cache:
        session, chat = cache.session("s"), Chat()
        chat.write("gen.py", FIRST, call_id="w1")
        session.write("gen.py", FIRST, call_id="w1")
        session.forget(["w1"])
        chat.bash("python gen.py", filler(300, "out"), call_id="b0")
        read = session.read("gen.py", call_id="r1")
        assert read.kind == "full"
        chat.read("gen.py", read.text, call_id="r1")
        chat.bash("python gen.py", filler(400, "out"), call_id="b1")
        protect = policy(protect_recent=650)  # b1 and r1, not b0 nor w1
        kept = prune_messages(chat.messages, session=session, policy=protect, count=words)
        assert kept.plan.actions and "r1" not in kept.plan.replacements
        assert set(kept.plan.inputs) == {"w1"}
        assert "the file is shown in full by read r1" in kept.plan.inputs["w1"]
    with FileCache(tmp_path, store=":memory:") as cache:  # the read is cleared in the same pass
        session, chat = cache.session("s"), Chat()
        chat.write("gen.py", FIRST, call_id="w1")
        session.write("gen.py", FIRST, call_id="w1")
        session.forget(["w1"])
        chat.read("gen.py", session.read("gen.py", call_id="r1").text, call_id="r1")
        chat.write("other.py", SECOND, call_id="w2")
        session.write("other.py", SECOND, call_id="w2")
        chat.bash("python gen.py", filler(400, "out"), call_id="b1")
        cleared = prune_messages(chat.messages, session=session, policy=policy(), count=words)
        assert "r1" in cleared.plan.replacements and "w1" not in cleared.plan.inputs


@pytest.mark.parametrize("path", [".env", "config.txt"])
def test_a_denied_files_input_is_never_replaced_nor_archived(tmp_path: Path, path: str) -> None:
    secret = "".join(f"TOKEN_{i}=s3cr3t-value-number-{i}\n" for i in range(20))
    with FileCache(tmp_path, store=":memory:") as cache:
        session, chat = cache.session("s"), Chat()
        for cid in ("w1", "w2"):
            chat.write(path, secret + cid, call_id=cid)
        chat.bash("env", filler(400, "out"), call_id="b1")
        strict = policy(context_window=4_000)
        result = prune_messages(chat.messages, session=session, policy=strict, count=len)
        archived = cache.engine.store.archive_get("w1" + INPUT_SUFFIX, "s")
        if path == ".env":
            assert not result.plan.inputs and archived is None
        else:  # the same calls on a file that is not denied
            assert set(result.plan.inputs) == {"w1"} and archived is not None


def test_short_inputs_and_the_policy_switch_leave_calls_alone(tmp_path: Path) -> None:
    with FileCache(tmp_path, store=":memory:") as cache:
        session, chat = cache.session("s"), Chat()
        rewrite(session, chat)
        off = prune_messages(
            chat.messages, session=session, policy=policy(inputs=False), count=words
        )
        assert off.plan.actions and not off.plan.inputs
    with FileCache(tmp_path, store=":memory:") as cache:
        session, chat = cache.session("s"), Chat()
        small = "x = 1\n" * (MIN_PAYLOAD // 12)
        for cid in ("w1", "w2"):
            chat.write("gen.py", small, call_id=cid)
            session.write("gen.py", small, call_id=cid)
        chat.bash("python gen.py", filler(400, "out"), call_id="b1")
        result = prune_messages(chat.messages, session=session, policy=policy(), count=words)
        assert not result.plan.inputs


# -- every format --------------------------------------------------------------------------


def to_anthropic(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in chat:
        if m["role"] == "assistant" and m.get("tool_calls"):
            blocks = [
                {"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                 "input": json.loads(c["function"]["arguments"])}
                for c in m["tool_calls"]
            ]  # fmt: skip
            out.append({"role": "assistant", "content": blocks})
        elif m["role"] == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
            out.append({"role": "user", "content": [block]})
        elif m["role"] == "system":
            continue
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def to_responses(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in chat:
        if m["role"] == "assistant" and m.get("tool_calls"):
            out += [
                {"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                 "arguments": c["function"]["arguments"]}
                for c in m["tool_calls"]
            ]  # fmt: skip
        elif m["role"] == "tool":
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": m["content"],
                }
            )
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def to_langchain(chat: list[dict[str, Any]]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for m in chat:
        if m["role"] == "assistant":
            calls = [
                {"id": c["id"], "name": c["function"]["name"],
                 "args": json.loads(c["function"]["arguments"])}
                for c in m.get("tool_calls") or []
            ]  # fmt: skip
            out.append(AIMessage(content=m["content"] or "", tool_calls=calls))
        elif m["role"] == "tool":
            out.append(ToolMessage(content=m["content"], tool_call_id=m["tool_call_id"]))
        elif m["role"] == "system":
            out.append(SystemMessage(content=m["content"]))
        else:
            out.append(HumanMessage(content=m["content"]))
    return out


def to_pydantic_ai(chat: list[dict[str, Any]]) -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    names = {c["id"]: c["function"]["name"] for m in chat for c in m.get("tool_calls") or []}
    out: list[Any] = []
    for m in chat:
        if m["role"] == "assistant":
            parts = [
                ToolCallPart(c["function"]["name"], c["function"]["arguments"], c["id"])
                for c in m.get("tool_calls") or []
            ]
            out.append(ModelResponse(parts=parts))
        elif m["role"] == "tool":
            part = ToolReturnPart(names[m["tool_call_id"]], m["content"], m["tool_call_id"])
            out.append(ModelRequest(parts=[part]))
        elif m["role"] == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(m["content"])]))
        else:
            out.append(ModelRequest(parts=[UserPromptPart(m["content"])]))
    return out


def _input_of(messages: list[Any], cid: str) -> dict[str, Any]:
    for m in messages:
        if isinstance(m, dict):
            for c in m.get("tool_calls") or []:
                if c.get("id") == cid:
                    return json.loads(c["function"]["arguments"])
            for b in m.get("content") if isinstance(m.get("content"), list) else []:
                if b.get("type") == "tool_use" and b["id"] == cid:
                    return dict(b["input"])
            if m.get("type") == "function_call" and m["call_id"] == cid:
                return json.loads(m["arguments"])
        for c in getattr(m, "tool_calls", None) or [] if not hasattr(m, "parts") else []:
            if c["id"] == cid:
                return dict(c["args"])
        for p in getattr(m, "parts", ()):
            if getattr(p, "tool_call_id", None) == cid and hasattr(p, "args_as_dict"):
                return p.args_as_dict()
    raise AssertionError(f"no call {cid}")


@pytest.mark.parametrize(
    ("convert", "framework"),
    [
        (to_anthropic, None),
        (to_responses, None),
        (to_langchain, "langchain_core"),
        (to_pydantic_ai, "pydantic_ai"),
    ],
    ids=["anthropic", "responses", "langchain", "pydantic-ai"],
)
def test_every_format_replaces_the_input_in_its_own_shape(
    tmp_path: Path, convert: Any, framework: str | None
) -> None:
    if framework is not None:  # the [frameworks] extra: skipped without it, failed under CI
        need(framework)
    with FileCache(tmp_path, store=":memory:") as cache:
        session, chat = cache.session("s"), Chat()
        rewrite(session, chat)
        messages = convert(chat.messages)
        before = copy.deepcopy(messages)
        result = prune_messages(messages, session=session, policy=policy(), count=words)
        assert messages == before
        assert set(result.plan.inputs) == {"w1"}
        new = _input_of(result.messages, "w1")
        assert new == json.loads(result.plan.inputs["w1"])
        assert new["path"] == "gen.py" and new["content"].startswith(INPUT_MARKER)
        assert _input_of(result.messages, "w2") == {"path": "gen.py", "content": SECOND}
        assert type(result.messages[0]) is type(messages[0])  # given back in its own kind


# -- properties over a scripted agent loop -------------------------------------------------

REWRITES = st.lists(
    st.one_of(
        st.tuples(
            st.just("write"), st.sampled_from(["app.py", "lib/util.py"]), st.integers(12, 60)
        ),
        st.tuples(
            st.just("read"),
            st.sampled_from(["app.py", "lib/util.py"]),
            st.none(),
            st.none(),
            st.booleans(),
        ),
        st.tuples(st.just("edit"), st.sampled_from(["app.py", "lib/util.py"]), st.integers(0, 99)),
        st.tuples(st.just("bash"), st.integers(50, 400)),
    ),  # fmt: skip
    min_size=6,
    max_size=30,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=REWRITES, forward=st.booleans(), window=st.integers(600, 3_000))
def test_cleared_inputs_never_hold_what_a_live_answer_needs(
    ops: list[tuple[Any, ...]], forward: bool, window: int
) -> None:
    """``run_loop`` checks, after every pass, that each live FileRef's or diff's every base is
    intact in the request as sent, a write's or edit's arguments included (never cleared), and
    that ``sync`` finds nothing left to forget."""
    run_loop(ops, policy(context_window=window, protect_recent=100), forward)


def test_a_loop_of_rewrites_clears_inputs_and_stays_consistent() -> None:
    """A fixed script in which inputs are cleared (hypothesis may not get there)."""
    script: list[tuple[Any, ...]] = []
    for n in range(6):
        script += [
            ("write", "app.py", 30 + n),
            ("bash", 200),
            ("read", "app.py", None, None, True),
            ("write", "app.py", 40 + n),
            ("bash", 200),
        ]
    for forward in (False, True):
        cleared: list[str] = []
        run_loop(script, policy(context_window=1_500, protect_recent=100), forward, cleared)
        assert len(set(cleared)) >= 5, forward


# -- replay: the model's view is rebuilt from the calls as sent ---------------------------


def _write_trace(tmp_path: Path) -> Path:
    """An agent that rewrites its script three times, runs it, and reads it at the end."""
    trace = tmp_path / "rewrites"
    (trace / "files").mkdir(parents=True)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "write gen.py"}]
    steps: list[tuple[str, dict[str, Any], str]] = []
    for n in range(3):
        body = "".join(f"print('version {n}, line {i}')\n" for i in range(60))
        steps += [
            ("write_file", {"path": "gen.py", "content": body}, "ok"),
            ("bash", {"command": "python gen.py"}, filler(600, f"out{n}")),
        ]
    steps.append(("read_file", {"path": "gen.py"}, "recorded"))
    for n, (name, args, output) in enumerate(steps, 1):
        call = {"id": f"c{n}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": output})
    messages.append({"role": "assistant", "content": "done"})
    doc = {"format": "filecache-trace/1", "source": "test", "messages": messages}
    (trace / "transcript.json").write_text(json.dumps(doc))
    return trace


def test_replay_clears_superseded_write_inputs_and_the_checker_reads_them_as_sent(
    tmp_path: Path,
) -> None:
    from filecache.replay.replay import replay_session

    trace = _write_trace(tmp_path)
    runs = {
        inputs: replay_session(
            trace, policy=PrunePolicy.preset("context", context_window=6_000, inputs=inputs)
        )
        for inputs in (True, False)
    }
    on, off = runs[True], runs[False]
    assert on.pruning.inputs == 2 and off.pruning.inputs == 0  # c1 and c3: rewritten later
    assert on.prompt_tokens.filecache < off.prompt_tokens.filecache
    assert (on.stale_views, on.dangling_refs, on.files_identical) == (0, 0, True)
    sent = {
        c["id"]: json.loads(c["function"]["arguments"])
        for m in on.filecache_messages
        for c in m.get("tool_calls") or []
    }
    assert sent["c5"]["content"].startswith("print(")  # what the history keeps is the original


def test_the_model_view_learns_nothing_from_a_cleared_input(tmp_path: Path) -> None:
    from filecache.replay.replay_check import FileCall, ModelView, disk_lines, tag_of

    data = FIRST.encode()
    after = (tag_of(data), disk_lines(data))
    write = FileCall(
        "w1", "write_file", "gen.py", {"path": "gen.py", "content": FIRST}, "written",
        "[gen.py: written]", None, after,
    )  # fmt: skip
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        session.write("gen.py", FIRST, call_id="w1")
        ref = session.read("gen.py", call_id="r1")
    read = FileCall(
        "r1", "read_file", "gen.py", {"path": "gen.py"}, ref.kind, ref.text, after, after
    )
    calls = {"w1": write, "r1": read}
    intact = ModelView(calls)
    intact.feed("w1", write.text)
    assert intact.feed("r1", read.text) is None
    cleared = ModelView(calls)
    cleared.feed("w1", write.text, input_intact=False)
    assert "cannot be rebuilt" in (cleared.feed("r1", read.text) or "")


# -- shell agents: heredoc writes are the model's own inputs too ---------------------------


def test_a_heredoc_rewritten_later_loses_its_body_and_keeps_its_shape(tmp_path: Path) -> None:
    body = "".join(f"print('check {i}')\n" for i in range(30))
    first = f"cat <<'EOF' > repro.py\n{body}EOF\npython repro.py"
    append = f"cat >> repro.py <<'EOF'\n{body}EOF"
    chat = Chat()
    chat.bash(first, filler(300, "out"), call_id="b1")
    chat.bash(append, "", call_id="b2")  # an append is not a rewrite: b1 still holds
    chat.bash("python repro.py", filler(300, "out"), call_id="b3")
    keep = prune_messages(chat.messages, policy=policy(), count=words, store=MemoryStore())
    assert "b1" not in keep.plan.inputs
    chat.bash(first.replace("check", "verify"), filler(300, "again"), call_id="b4")
    with FileCache(tmp_path, store=":memory:") as cache:
        result = prune_messages(
            chat.messages, policy=policy(), count=words, store=cache.engine.store
        )
    assert set(result.plan.inputs) == {"b1"}
    command = arguments(result.messages)["b1"]["command"]
    head, marker, rest = command.partition("\n")
    assert head == "cat <<'EOF' > repro.py" and rest.startswith(INPUT_MARKER)
    assert rest.endswith("]\nEOF\npython repro.py")  # the delimiter and what follows stay
    assert arguments(result.messages)["b2"]["command"] == append


def test_an_input_whose_file_was_deleted_is_kept(tmp_path: Path) -> None:
    """``rm`` after a write: the model's own input is its only copy of that work; a reference
    telling it to read a file that is gone would lose it (issue 31, 9)."""
    with FileCache(tmp_path) as cache:
        session, chat = cache.session("s"), Chat()
        chat.write("gen.py", FIRST, call_id="w1")
        session.write("gen.py", FIRST, call_id="w1")
        chat.bash("python gen.py", filler(200, "first"), call_id="b1")
        (tmp_path / "gen.py").unlink()
        chat.bash("rm gen.py", "", call_id="b2")
        session.rehash("b2")
        chat.bash("ls", filler(200, "listing"), call_id="b3")
        result = prune_messages(chat.messages, session=session, policy=policy(), count=words)
        assert "w1" not in result.plan.inputs
        assert arguments(result.messages)["w1"]["content"] == FIRST


def test_a_heredoc_after_cd_is_that_folders_file(tmp_path: Path) -> None:
    """``cd sub`` then a heredoc write of ``f.py``: it wrote ``sub/f.py``, so a later write
    of the root's ``f.py`` does not supersede it (issue 31, 9)."""
    body = "".join(f"print('check {i}')\n" for i in range(30))
    chat = Chat()
    chat.bash(f"cd sub\ncat > f.py <<'EOF'\n{body}EOF\npython f.py", filler(300, "a"), "b1")
    chat.bash(f"cat > f.py <<'EOF'\n{body.replace('check', 'root')}EOF", "", call_id="b2")
    chat.bash("python f.py", filler(300, "out"), call_id="b3")
    with FileCache(tmp_path, store=":memory:") as cache:
        result = prune_messages(
            chat.messages, policy=policy(), count=words, store=cache.engine.store
        )
    assert "b1" not in result.plan.inputs
    chat.bash(f"cat > sub/f.py <<'EOF'\n{body.replace('check', 'again')}EOF", "", "b4")
    chat.bash("python sub/f.py", filler(300, "out"), call_id="b5")
    with FileCache(tmp_path, store=":memory:") as cache:
        later = prune_messages(
            chat.messages, policy=policy(), count=words, store=cache.engine.store
        )
    assert "b1" in later.plan.inputs  # sub/f.py written again: now it is superseded
