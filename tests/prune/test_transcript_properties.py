"""Property tests of the adapters over generated transcripts in all three formats.

Rendering without replacements gives the input back; with replacements, every call keeps its one
result in the same place, only the replaced bodies change, and the input is never mutated.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filecache.prune.codecs import anthropic_messages, openai_chat, openai_responses
from filecache.prune.codecs.base import Transcript
from filecache.prune.transcript import detect_format

ADAPTERS = {"openai": openai_chat, "responses": openai_responses, "anthropic": anthropic_messages}
IMAGE = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


TEXT = st.text(max_size=12)
NAMES = st.sampled_from(["read_file", "bash", "Read", "Edit", "write_file", "grep"])
ARGS = st.dictionaries(st.sampled_from(["path", "offset", "command"]), st.integers() | TEXT)
EXTRA = st.dictionaries(st.sampled_from(["cache_control", "name", "status"]), TEXT, max_size=1)


@st.composite
def turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Abstract turns: assistant text, calls, and which of them are answered, in which order."""
    count = draw(st.integers(0, 5))
    out: list[dict[str, Any]] = []
    serial = 0
    for number in range(count):
        calls = []
        for _ in range(draw(st.integers(0, 3))):
            serial += 1
            calls.append(
                {
                    "id": f"call_{serial}_{draw(st.text('ab', max_size=2))}",
                    "name": draw(NAMES),
                    "args": draw(ARGS),
                }
            )
        answered = draw(st.permutations(calls))
        if number == count - 1:
            answered = answered[: draw(st.integers(0, len(answered)))]
        results = []
        for call in answered:
            parts = draw(st.lists(st.tuples(st.booleans(), TEXT), max_size=3))
            body: Any = draw(TEXT) if draw(st.booleans()) else parts
            results.append({"id": call["id"], "body": body, "error": draw(st.booleans())})
        out.append(
            {
                "text": draw(st.none() | TEXT),
                "calls": calls,
                "results": results,
                "user": draw(st.none() | TEXT),
                "split": draw(st.booleans()),
                "extra": draw(EXTRA),
            }
        )
    return out


def _blocks(body: Any, text_type: str, image: Callable[[], dict[str, Any]]) -> Any:
    if isinstance(body, str):
        return body
    return [{"type": text_type, "text": t} if is_text else image() for is_text, t in body]


def _image() -> dict[str, Any]:
    return {"type": "image", "source": dict(IMAGE)}


def _input_image() -> dict[str, Any]:
    return {"type": "input_image", "image_url": "data:image/png;base64,AA=="}


def to_openai(turns: list[dict[str, Any]]) -> list[Any]:
    messages: list[Any] = [{"role": "system", "content": "sys"}]
    for turn in turns:
        message: dict[str, Any] = {"role": "assistant", "content": turn["text"], **turn["extra"]}
        if turn["calls"]:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
                }
                for c in turn["calls"]
            ]
        messages.append(message)
        for r in turn["results"]:
            body = r["body"] if isinstance(r["body"], str) else [(True, t) for _, t in r["body"]]
            messages.append(
                {"role": "tool", "tool_call_id": r["id"], "content": _blocks(body, "text", dict)}
            )
        if turn["user"] is not None:
            messages.append({"role": "user", "content": turn["user"]})
    return messages


def to_responses(turns: list[dict[str, Any]]) -> list[Any]:
    items: list[Any] = [{"role": "user", "content": "task"}]
    for turn in turns:
        if turn["text"] is not None:
            items.append({"type": "reasoning", "id": "rs", "summary": [], **turn["extra"]})
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": turn["text"], "annotations": []}],
                }
            )
        for c in turn["calls"]:
            items.append(
                {
                    "type": "function_call",
                    "call_id": c["id"],
                    "name": c["name"],
                    "arguments": json.dumps(c["args"]),
                }
            )
        for r in turn["results"]:
            output = _blocks(r["body"], "input_text", _input_image)
            items.append({"type": "function_call_output", "call_id": r["id"], "output": output})
        if turn["user"] is not None:
            items.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": turn["user"]}],
                }
            )
    return items


def to_anthropic(turns: list[dict[str, Any]]) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "task"}]
    for turn in turns:
        content: list[Any] = []
        if turn["text"] is not None:
            content.append({"type": "text", "text": turn["text"]})
        content += [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
            for c in turn["calls"]
        ]
        messages.append({"role": "assistant", "content": content})
        blocks: list[Any] = []
        for r in turn["results"]:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": r["id"]}
            if r["body"] != "":
                block["content"] = _blocks(r["body"], "text", _image)
            if r["error"]:
                block["is_error"] = True
            blocks.append({**block, **turn["extra"]})
        if turn["user"] is not None:
            blocks.append({"type": "text", "text": turn["user"]})
        if turn["split"]:
            messages += [{"role": "user", "content": [b]} for b in blocks]
        elif blocks:
            messages.append({"role": "user", "content": blocks})
    return messages


BUILDERS = {"openai": to_openai, "responses": to_responses, "anthropic": to_anthropic}


def strip_bodies(messages: list[Any], fmt: str, ids: set[str]) -> list[Any]:
    """A copy with the bodies of the results for ``ids`` set to null."""
    out = copy.deepcopy(messages)
    for message in out:
        if fmt == "openai" and message.get("tool_call_id") in ids:
            message["content"] = None
        elif fmt == "responses" and message.get("call_id") in ids and "output" in message:
            message["output"] = None
        elif fmt == "anthropic" and isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("tool_use_id") in ids:
                    block["content"] = None
    return out


def positions(transcript: Transcript) -> list[tuple[Any, ...]]:
    calls = [
        (c.id, c.name, c.raw_arguments, c.message_index, c.block_index) for c in transcript.calls()
    ]
    results = [
        (r.call_id, r.is_error, r.message_index, r.block_index) for r in transcript.results()
    ]
    return [*calls, None, *results]


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(fmt=st.sampled_from(list(BUILDERS)), conversation=turns())
def test_round_trip_without_replacements(fmt: str, conversation: list[dict[str, Any]]) -> None:
    messages = BUILDERS[fmt](conversation)
    assert detect_format(messages) == fmt or not any(t["calls"] for t in conversation)
    transcript = ADAPTERS[fmt].parse(messages)
    out = transcript.with_results_replaced({})
    assert dumps(out) == dumps(messages)
    assert all(a is b for a, b in zip(out, messages, strict=True))
    calls = [c for t in conversation for c in t["calls"]]
    assert [c.id for c in transcript.calls()] == [c["id"] for c in calls]
    assert [dict(c.arguments) for c in transcript.calls()] == [c["args"] for c in calls]
    answered = {r["id"] for t in conversation for r in t["results"]}
    assert {c.id for c in transcript.pending_calls()} == {c["id"] for c in calls} - answered


@PROPERTY
@given(fmt=st.sampled_from(list(BUILDERS)), conversation=turns(), data=st.data())
def test_replacements_change_only_the_replaced_bodies(
    fmt: str, conversation: list[dict[str, Any]], data: st.DataObject
) -> None:
    messages = BUILDERS[fmt](conversation)
    before = copy.deepcopy(messages)
    transcript = ADAPTERS[fmt].parse(messages)
    ids = [r.call_id for r in transcript.results()]
    chosen = data.draw(st.lists(st.sampled_from(ids), unique=True) if ids else st.just([]))
    replacements = {cid: data.draw(TEXT) for cid in chosen}
    out = transcript.with_results_replaced(replacements)

    assert messages == before, "the input was mutated"
    again = ADAPTERS[fmt].parse(out)
    assert positions(again) == positions(transcript)
    for old, new in zip(transcript.results(), again.results(), strict=True):
        assert new.text == replacements.get(old.call_id, old.text)
    assert dumps(strip_bodies(out, fmt, set(chosen))) == dumps(
        strip_bodies(messages, fmt, set(chosen))
    )
    touched = {transcript.results_by_id()[cid].message_index for cid in chosen}
    assert all(
        (a is b) == (i not in touched) for i, (a, b) in enumerate(zip(out, messages, strict=True))
    )
    assert dumps(again.with_results_replaced(replacements)) == dumps(out)
    assert [m.text for m in again.messages] == [m.text for m in transcript.messages]


@PROPERTY
@given(conversation=turns())
def test_list_body_text_is_the_concatenation_of_its_text_blocks(
    conversation: list[dict[str, Any]],
) -> None:
    transcript = anthropic_messages.parse(to_anthropic(conversation))
    expected = {
        r["id"]: (
            r["body"]
            if isinstance(r["body"], str)
            else "".join(t for is_text, t in r["body"] if is_text),
            0 if isinstance(r["body"], str) else sum(not is_text for is_text, _ in r["body"]),
            r["error"],
        )
        for t in conversation
        for r in t["results"]
    }
    got = {r.call_id: (r.text, r.non_text_blocks, r.is_error) for r in transcript.results()}
    assert got == expected
