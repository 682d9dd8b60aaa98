"""Edit echoes (``gateway.edit_echo``): which edit results name their own new text, exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from filecache.gateway import open_memory, rewrite_request
from filecache.gateway.edit_echo import echo_of, is_echo
from filecache.prune.codecs.base import ToolCall

NEW = [f"    value_{k} = compute_something_long(argument_{k}, other_{k})" for k in range(6)]
HEAD = (
    "The file /p/a.py has been updated. Here's the result of running `cat -n` on a snippet of "
    "the edited file:"
)


def call(**args: Any) -> ToolCall:
    return ToolCall("t1", "Edit", args, json.dumps(args), True, 1, 0)


def snippet(rows: list[str], first: int = 40, tab: bool = False) -> str:
    sep = "\t" if tab else "→"
    return HEAD + "\n" + "\n".join(f"{n:>6}{sep}{t}" for n, t in enumerate(rows, first))


def test_the_rows_of_the_new_text_are_named_and_the_rest_stays() -> None:
    text = snippet(["a", "b", *NEW, "c"]) + "\n\n<system-reminder>\nnote\n</system-reminder>\n"
    echo = echo_of(call(file_path="/p/a.py", old_string="x", new_string="\n".join(NEW)), text)
    assert echo is not None and (echo.first, echo.last) == (42, 47)
    assert echo.text == (
        HEAD + "\n    40→a\n    41→b\n[filecache] lines 42-47: this edit's new text, as in your "
        "call (not repeated here)\n    48→c\n\n<system-reminder>\nnote\n</system-reminder>\n"
    )
    assert is_echo(echo.text) and not is_echo(text)


def test_swe_agents_editor_and_a_final_newline() -> None:
    text = snippet([*NEW, "z"], 1, tab=True) + "\nReview the changes and make sure they are as "
    text += "expected. Edit the file again if necessary."
    echo = echo_of(call(path="a.py", old_string="x", new_string="\n".join(NEW) + "\n"), text)
    assert echo is not None and (echo.first, echo.last) == (1, 6)
    assert echo.text.endswith("\n     7\tz\nReview the changes and make sure they are as expected. "
                              "Edit the file again if necessary.")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "rows"),
    [
        ({"replace_all": True}, ["a", *NEW]),  # the text may stand in several places
        ({"edits": []}, ["a", *NEW]),  # a multi-edit
        ({}, ["a", NEW[0][:-3], *NEW[1:]]),  # a row differs
        ({}, ["a", *NEW[:3], "... (line truncated to 2000 chars)", *NEW[3:]]),  # cut
        ({}, ["a", *NEW[:3]]),  # not all of it shown
    ],
)
def test_anything_not_placed_exactly_stays_as_it_is(args: dict[str, Any], rows: list[str]) -> None:
    edit = call(file_path="/p/a.py", old_string="x", new_string="\n".join(NEW), **args)
    assert echo_of(edit, snippet(rows)) is None


def test_a_short_new_text_or_a_partial_line_stays() -> None:
    assert echo_of(call(new_string="short\nnew", old_string="x"), snippet(["short", "new"])) is None
    partial = "\n".join(NEW)[4:]  # starts inside the first row
    assert echo_of(call(new_string=partial, old_string="x"), snippet(NEW)) is None


def test_the_transform_keeps_the_calls_input_and_repeats_the_bytes() -> None:
    new = "\n".join(NEW)
    text = snippet(["a", *NEW, "c"])
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "edit it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Edit",
         "input": {"file_path": "/p/a.py", "old_string": "x", "new_string": new}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
         "content": text}]},
    ]  # fmt: skip
    memory = open_memory(":memory:")
    sent = []
    try:
        for _ in range(3):
            body = json.dumps({"model": "m", "messages": messages}).encode()
            rewrite = rewrite_request("anthropic-messages", body, memory=memory)
            assert rewrite.changed
            sent.append(json.loads(rewrite.body)["messages"])
            messages = [*messages, {"role": "assistant", "content": "ok"},
                        {"role": "user", "content": "next"}]  # fmt: skip
    finally:
        memory.close()
    assert sent[0][1] == messages[1]  # the call's input as written
    assert all(s[2] == sent[0][2] for s in sent)
    assert is_echo(sent[0][2]["content"][0]["content"])
