"""Tests for ``filecache.prune.transcript``, ``filecache.prune.file_tools`` and the three
message codecs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from filecache.errors import TranscriptError
from filecache.prune.codecs import anthropic_messages, openai_chat, openai_responses
from filecache.prune.transcript import (
    detect_format,
    parse_transcript,
    unwrap,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "transcripts"
IMAGE = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- samples ----------------------------------------------------------------------------------

OPENAI = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the off-by-one in src/app.py."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "src/app.py"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "pytest -q"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_2", "content": "1 failed, 3 passed"},
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [
            {"type": "text", "text": "     1\tdef main():\n"},
            {"type": "text", "text": "     2\t    return 1\n"},
        ],
    },
    {
        "role": "assistant",
        "content": "The loop bound is wrong.",
        "tool_calls": [
            {
                "id": "call_3",
                "type": "function",
                "function": {
                    "name": "edit_file",
                    "arguments": '{"path": "src/app.py", "old_string": "1", "new_string": "2"}',
                },
            }
        ],
        "refusal": None,
    },
    {"role": "tool", "tool_call_id": "call_3", "content": "edited src/app.py"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_4",
                "type": "custom",
                "custom": {"name": "apply_patch", "input": "*** Begin Patch"},
            },
            {
                "id": "call_5",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "pytest'},
            },
        ],
    },
]

RESPONSES = [
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "Be brief."}],
    },
    {"role": "user", "content": "Why does test_app fail?"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Read src/app.py first."}],
        "encrypted_content": "gAAAAB...",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_a",
        "name": "read_file",
        "arguments": '{"path": "src/app.py", "offset": 10, "limit": 5}',
        "status": "completed",
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_b",
        "name": "shell",
        "arguments": '{"command": ["ls"]}',
    },
    {"type": "function_call_output", "call_id": "call_b", "output": "src\ntests\n"},
    {
        "type": "function_call_output",
        "call_id": "call_a",
        "output": [
            {"type": "input_text", "text": "    10\tx = 1\n"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
        ],
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "x starts at 1.", "annotations": []}],
    },
    {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "call_c",
        "name": "apply_patch",
        "input": "*** Begin Patch\n*** Update File: src/app.py\n",
    },
    {"type": "custom_tool_call_output", "call_id": "call_c", "output": "Done!"},
    {"type": "function_call", "call_id": "call_d", "name": "shell", "arguments": "{}"},
]

ANTHROPIC = [
    {"role": "user", "content": "Look at the screenshot and the config."},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Two reads at once.", "signature": "EqQB..."},
            {"type": "text", "text": "Reading both."},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "Read",
                "input": {"file_path": "/repo/shot.png"},
            },
            {
                "type": "tool_use",
                "id": "toolu_02",
                "name": "Read",
                "input": {"file_path": "/repo/config.toml", "offset": 3, "limit": 2},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_02",
                "content": "     3\tdebug = true\n     4\tport = 80\n",
                "cache_control": {"type": "ephemeral"},
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "is_error": False,
                "content": [
                    {"type": "text", "text": "Image: shot.png "},
                    {"type": "image", "source": IMAGE},
                    {"type": "text", "text": "(800x600)", "cache_control": {"type": "ephemeral"}},
                ],
            },
            {"type": "text", "text": "<system-reminder>Be careful.</system-reminder>"},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_03", "name": "Bash", "input": {"command": "make"}}
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_03",
                "is_error": True,
                "content": "Exit code 2\nmake: *** No rule to make target.",
            }
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_04", "name": "Write", "input": {}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_04"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Now the fix."},
            {
                "type": "tool_use",
                "id": "toolu_05",
                "name": "Edit",
                "input": {
                    "file_path": "/repo/config.toml",
                    "old_string": "80",
                    "new_string": "8080",
                },
            },
        ],
    },
]

SAMPLES = {"openai": OPENAI, "responses": RESPONSES, "anthropic": ANTHROPIC}
ADAPTERS = {"openai": openai_chat, "responses": openai_responses, "anthropic": anthropic_messages}

# (call id, name, message index, block index, arguments valid)
CALLS = {
    "openai": [
        ("call_1", "read_file", 2, 0, True),
        ("call_2", "bash", 2, 1, True),
        ("call_3", "edit_file", 5, 0, True),
        ("call_4", "apply_patch", 7, 0, False),
        ("call_5", "bash", 7, 1, False),
    ],
    "responses": [
        ("call_a", "read_file", 3, None, True),
        ("call_b", "shell", 4, None, True),
        ("call_c", "apply_patch", 9, None, False),
        ("call_d", "shell", 11, None, True),
    ],
    "anthropic": [
        ("toolu_01", "Read", 1, 2, True),
        ("toolu_02", "Read", 1, 3, True),
        ("toolu_03", "Bash", 3, 0, True),
        ("toolu_04", "Write", 5, 0, True),
        ("toolu_05", "Edit", 7, 1, True),
    ],
}

# (call id, text, is_error, message index, block index, non-text blocks), in transcript order
RESULTS = {
    "openai": [
        ("call_2", "1 failed, 3 passed", False, 3, None, 0),
        ("call_1", "     1\tdef main():\n     2\t    return 1\n", False, 4, None, 0),
        ("call_3", "edited src/app.py", False, 6, None, 0),
    ],
    "responses": [
        ("call_b", "src\ntests\n", False, 5, None, 0),
        ("call_a", "    10\tx = 1\n", False, 6, None, 1),
        ("call_c", "Done!", False, 10, None, 0),
    ],
    "anthropic": [
        ("toolu_02", "     3\tdebug = true\n     4\tport = 80\n", False, 2, 0, 0),
        ("toolu_01", "Image: shot.png (800x600)", False, 2, 1, 1),
        ("toolu_03", "Exit code 2\nmake: *** No rule to make target.", True, 4, 0, 0),
        ("toolu_04", "", False, 6, 0, 0),
    ],
}
PENDING = {"openai": ["call_4", "call_5"], "responses": ["call_d"], "anthropic": ["toolu_05"]}
TEXTS = {
    "openai": [(5, "The loop bound is wrong.")],
    "responses": [(2, "Read src/app.py first."), (8, "x starts at 1.")],
    "anthropic": [(1, "Reading both."), (2, "<system-reminder>Be careful.</system-reminder>")],
}


@pytest.mark.parametrize("fmt", list(SAMPLES))
def test_parse_sample(fmt: str) -> None:
    transcript = ADAPTERS[fmt].parse(SAMPLES[fmt])
    assert transcript.format == fmt
    assert transcript.raw is SAMPLES[fmt]
    assert [m.index for m in transcript.messages] == list(range(len(SAMPLES[fmt])))
    calls = [
        (c.id, c.name, c.message_index, c.block_index, c.arguments_valid)
        for c in transcript.calls()
    ]
    assert calls == CALLS[fmt]
    results = [
        (r.call_id, r.text, r.is_error, r.message_index, r.block_index, r.non_text_blocks)
        for r in transcript.results()
    ]
    assert results == RESULTS[fmt]
    assert [c.id for c in transcript.pending_calls()] == PENDING[fmt]
    assert transcript.tool_result_order() == [r[0] for r in RESULTS[fmt]]
    assert set(transcript.calls_by_id()) == {c[0] for c in CALLS[fmt]}
    assert set(transcript.results_by_id()) == {r[0] for r in RESULTS[fmt]}
    for index, text in TEXTS[fmt]:
        assert transcript.messages[index].text == text


def test_arguments_are_parsed_and_raw_kept() -> None:
    calls = openai_chat.parse(OPENAI).calls_by_id()
    assert calls["call_3"].arguments == {"path": "src/app.py", "old_string": "1", "new_string": "2"}
    assert calls["call_5"].arguments == {}
    assert calls["call_5"].raw_arguments == '{"command": "pytest'
    assert calls["call_4"].raw_arguments == "*** Begin Patch"
    anthropic = anthropic_messages.parse(ANTHROPIC).calls_by_id()["toolu_02"]
    assert json.loads(anthropic.raw_arguments) == anthropic.arguments
    assert anthropic.arguments is not ANTHROPIC[1]["content"][3]["input"]


def test_roles_of_responses_items() -> None:
    roles = [m.role for m in openai_responses.parse(RESPONSES).messages]
    assert roles[:7] == ["developer", "user", "assistant", "assistant", "assistant", "tool", "tool"]
    assert roles[7] == "assistant"  # web_search_call: kept, not a result


@pytest.mark.parametrize("fmt", list(SAMPLES))
def test_render_without_replacements_is_the_input(fmt: str) -> None:
    before = copy.deepcopy(SAMPLES[fmt])
    out = ADAPTERS[fmt].parse(SAMPLES[fmt]).with_results_replaced({})
    assert dumps(out) == dumps(SAMPLES[fmt])
    assert out is not SAMPLES[fmt]
    assert all(a is b for a, b in zip(out, SAMPLES[fmt], strict=True))
    assert SAMPLES[fmt] == before


def test_anthropic_replacement_of_a_block_list() -> None:
    before = copy.deepcopy(ANTHROPIC)
    transcript = anthropic_messages.parse(ANTHROPIC)
    out = transcript.with_results_replaced({"toolu_01": "[cleared]", "toolu_03": "[gone]"})
    assert ANTHROPIC == before
    assert out[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "is_error": False,
        "content": [{"type": "text", "text": "[cleared]"}],
    }
    assert out[2]["content"][0] == ANTHROPIC[2]["content"][0]
    assert out[2]["content"][2] == ANTHROPIC[2]["content"][2]
    assert out[4]["content"][0] == {**ANTHROPIC[4]["content"][0], "content": "[gone]"}
    assert [i for i, (a, b) in enumerate(zip(out, ANTHROPIC, strict=True)) if a is not b] == [2, 4]
    again = anthropic_messages.parse(out)
    assert again.results_by_id()["toolu_01"].non_text_blocks == 0
    assert again.results_by_id()["toolu_03"].is_error


def test_replacement_keeps_the_first_text_block_and_its_keys() -> None:
    blocks = [
        {"type": "image", "source": IMAGE},
        {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "b"},
    ]
    messages: list[Any] = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": blocks}],
        },
    ]
    out = anthropic_messages.parse(messages).with_results_replaced({"t": "T"})
    assert out[1]["content"][0]["content"] == [
        {"type": "text", "text": "T", "cache_control": {"type": "ephemeral"}}
    ]
    assert blocks[1]["text"] == "a"
    empty = anthropic_messages.parse(messages).with_results_replaced({"t": ""})
    assert empty[1]["content"][0]["content"] == []


def test_replacement_of_an_image_only_body_and_of_a_missing_body() -> None:
    out = openai_responses.parse(RESPONSES).with_results_replaced({"call_a": "[cleared]"})
    assert out[6] == {
        "type": "function_call_output",
        "call_id": "call_a",
        "output": [{"type": "input_text", "text": "[cleared]"}],
    }
    messages: list[Any] = [
        {"type": "function_call", "call_id": "c", "name": "x", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image"}]},
    ]
    out = openai_responses.parse(messages).with_results_replaced({"c": "T"})
    assert out[1]["output"] == [{"type": "input_text", "text": "T"}]
    out = anthropic_messages.parse(ANTHROPIC).with_results_replaced({"toolu_04": "T"})
    assert out[6]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_04",
        "content": "T",
    }


def test_openai_replacements() -> None:
    out = openai_chat.parse(OPENAI).with_results_replaced({"call_1": "[c1]", "call_2": "[c2]"})
    assert out[3] == {"role": "tool", "tool_call_id": "call_2", "content": "[c2]"}
    assert out[4] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [{"type": "text", "text": "[c1]"}],
    }
    assert [i for i, (a, b) in enumerate(zip(out, OPENAI, strict=True)) if a is not b] == [3, 4]


@pytest.mark.parametrize(
    ("fmt", "replacements", "message"),
    [
        ("openai", {"call_4": "x"}, "cannot replace the result for call_4: there is none"),
        ("anthropic", {"nope": "x"}, "cannot replace the result for nope: there is none"),
        ("responses", {"call_a": 3}, "the replacement for call_a must be a string, got int"),
    ],
)
def test_bad_replacements_are_refused(fmt: str, replacements: Any, message: str) -> None:
    with pytest.raises(TranscriptError, match=message):
        ADAPTERS[fmt].parse(SAMPLES[fmt]).with_results_replaced(replacements)


def test_render_refuses_another_format() -> None:
    transcript = openai_chat.parse(OPENAI)
    with pytest.raises(TranscriptError, match="cannot be rendered as anthropic"):
        anthropic_messages.render(transcript, {})


# -- format detection and wrappers ------------------------------------------------------------


@pytest.mark.parametrize("fmt", list(SAMPLES))
def test_detect_format(fmt: str) -> None:
    assert detect_format(SAMPLES[fmt]) == fmt
    assert detect_format({"messages": SAMPLES[fmt], "model": "m"}) == fmt
    transcript = parse_transcript(SAMPLES[fmt])
    assert transcript.format == fmt


@pytest.mark.parametrize(
    ("obj", "fmt"),
    [
        ([], "openai"),
        ([{"role": "user", "content": "go"}, {"role": "assistant", "content": "hi"}], "openai"),
        ({"input": [{"role": "user", "content": "go"}]}, "responses"),
        ({"messages": [{"role": "user", "content": "go"}], "system": "s"}, "openai"),
        ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "openai"),
        ([{"role": "user", "content": [{"type": "image", "source": IMAGE}]}], "anthropic"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "openai"),
        (
            [{"role": "assistant", "type": "message", "content": ANTHROPIC[3]["content"]}],
            "anthropic",
        ),
    ],
)
def test_detect_format_edge_cases(obj: Any, fmt: str) -> None:
    assert detect_format(obj) == fmt


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            [OPENAI[2], RESPONSES[5]],
            "message 1: looks like responses but message 0 looks like openai",
        ),
        ("text", "expected a list of messages, got str"),
        ({"model": "m"}, 'one "messages" or "input" list; got an object with keys model'),
        ({"messages": [], "input": []}, "keys messages, input"),
        ({"input": "hello"}, '"input" must be a list, got str'),
    ],
)
def test_detect_format_refuses(obj: Any, message: str) -> None:
    with pytest.raises(TranscriptError, match=message):
        detect_format(obj)


def test_unknown_format_is_refused() -> None:
    with pytest.raises(TranscriptError, match="unknown format 'bedrock'"):
        parse_transcript([], "bedrock")


def test_envelope_writes_the_same_shape_back() -> None:
    obj = {"model": "m", "messages": OPENAI, "temperature": 0}
    envelope = unwrap(obj)
    assert envelope.key == "messages" and envelope.messages is OPENAI
    out = envelope.wrap(parse_transcript(envelope.messages).with_results_replaced({"call_1": "x"}))
    assert list(out) == ["model", "messages", "temperature"]
    assert out["messages"][4]["content"] == [{"type": "text", "text": "x"}]
    assert obj["messages"] is OPENAI
    bare = unwrap(RESPONSES)
    assert bare.key is None and bare.wrap(RESPONSES) is RESPONSES
    assert unwrap({"input": RESPONSES}).wrap([]) == {"input": []}


def test_file_accesses_of_a_transcript() -> None:
    accesses = parse_transcript(ANTHROPIC).file_accesses()
    assert [(a.call_id, a.kind, a.path, a.start, a.end) for a in accesses] == [
        ("toolu_01", "read", "/repo/shot.png", 1, None),
        ("toolu_02", "read", "/repo/config.toml", 3, 4),
        ("toolu_05", "edit", "/repo/config.toml", 1, None),
    ]


# -- real transcripts (copies in fixtures/transcripts) ----------------------------------------


def _claude_code_messages() -> list[Any]:
    lines = (FIXTURES / "claude-code-exoplanet.jsonl").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    return [e["message"] for e in events if e["type"] in ("user", "assistant")]


def test_claude_code_transcript_round_trip() -> None:
    messages = _claude_code_messages()
    before = copy.deepcopy(messages)
    transcript = parse_transcript(messages)
    assert transcript.format == "anthropic"
    assert dumps(transcript.with_results_replaced({})) == dumps(messages)
    assert [c.name for c in transcript.pending_calls()] == ["Bash"]
    errors = [r for r in transcript.results() if r.is_error]
    assert len(errors) == 1 and "exceeds maximum allowed size" in errors[0].text
    reads = [a for a in transcript.file_accesses() if a.kind == "read"]
    assert [(a.start, a.end) for a in reads] == [(1, None), (1, 50)]
    replaced = {r.call_id: f"[cleared {r.call_id}]" for r in transcript.results()}
    out = transcript.with_results_replaced(replaced)
    assert messages == before
    again = parse_transcript(out)
    assert {r.call_id: r.text for r in again.results()} == replaced
    assert [r.is_error for r in again.results()] == [r.is_error for r in transcript.results()]
    for a, b in zip(out, messages, strict=True):
        if a is not b:
            assert {k: v for k, v in a.items() if k != "content"} == {
                k: v for k, v in b.items() if k != "content"
            }


def test_swe_agent_trace_round_trip() -> None:
    text = (FIXTURES / "swe-agent-astropy-13033.json").read_text(encoding="utf-8")
    obj = json.loads(text)
    envelope = unwrap(obj)
    assert detect_format(obj) == "openai"
    transcript = parse_transcript(envelope.messages)
    assert json.dumps(envelope.wrap(transcript.with_results_replaced({}))) == json.dumps(obj)
    assert not transcript.pending_calls()
    assert len(transcript.calls()) == len(transcript.results()) == 15
    kinds = [a.kind for a in transcript.file_accesses()]
    assert kinds.count("read") == 3 and kinds.count("write") == 3 and kinds.count("edit") == 2
    first_read = transcript.file_accesses()[0].call_id
    out = envelope.wrap(transcript.with_results_replaced({first_read: "[cleared]"}))
    changed = [
        i for i, (a, b) in enumerate(zip(out["messages"], obj["messages"], strict=True)) if a != b
    ]
    assert changed == [transcript.results_by_id()[first_read].message_index]
    assert json.loads(text) == obj
