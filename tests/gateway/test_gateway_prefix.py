"""The gateway's shortcuts against the work they skip: the parse of a request that reuses the
previous request's parse of its unchanged prefix (``gateway.prefix``) equals the parse from
scratch, and orjson's bytes (``gateway.wire``) equal the standard library's."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from filecache.core.kinds import Format
from filecache.gateway import rewrite_request, wire
from filecache.gateway.prefix import denied_calls, parse_messages
from filecache.gateway.request_shape import has_thinking, untouched_blocks
from filecache.prune.codecs.base import codec_for
from filecache.prune.transcript import parse_transcript as _register_codecs  # noqa: F401

PATHS = ("a.py", "b.py", ".env")


def _turn(n: int, path: str, text: str, thinking: bool = False) -> list[dict[str, Any]]:
    cid = f"toolu_{n:03d}"
    call: list[dict[str, Any]] = [
        {"type": "tool_use", "id": cid, "name": "Read", "input": {"file_path": f"/p/{path}"}}
    ]
    if thinking:
        call.insert(0, {"type": "thinking", "thinking": "hm", "signature": "c2ln"})
    return [
        {"role": "assistant", "content": call},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": text}]},
    ]


@st.composite
def histories(draw: Any) -> list[list[dict[str, Any]]]:
    """The message lists of successive requests of one conversation: mostly one turn more than
    the one before, sometimes a rewind or compaction (a shorter list, or an earlier message
    changed: the prefix the shortcut reuses is then wrong)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "work"}]
    out = []
    n = 0
    for _ in range(draw(st.integers(1, 10))):
        action = draw(st.sampled_from(["grow", "grow", "grow", "rewind", "edit", "same"]))
        if action == "rewind" and len(messages) > 3:
            messages = messages[: 1 + 2 * draw(st.integers(0, (len(messages) - 1) // 2 - 1))]
        elif action == "edit" and len(messages) > 1:
            k = draw(st.integers(1, len(messages) - 1))
            messages = [json.loads(json.dumps(m)) for m in messages]  # a fresh copy, as JSON
            if messages[k]["role"] == "user":
                messages[k]["content"][0]["content"] = draw(st.text(max_size=30))
            else:
                messages[k]["content"][-1]["input"] = {"file_path": "/p/.env.local"}
        elif action != "same":
            n += 1
            path = draw(st.sampled_from(PATHS))
            messages = messages + _turn(n, path, draw(st.text(max_size=30)), draw(st.booleans()))
        out.append(json.loads(json.dumps(messages)))  # each request parsed anew, as a server does
    return out


@settings(max_examples=150)
@given(histories(), st.sampled_from(["conv-a", "conv-b"]))
def test_a_reused_prefix_parses_as_the_whole_request_does(
    requests: list[list[dict[str, Any]]], key: str
) -> None:
    for messages in requests:
        parsed = parse_messages(Format.ANTHROPIC, key, messages)
        fresh = codec_for(Format.ANTHROPIC).parse(messages)
        assert parsed.transcript.messages == fresh.messages
        assert parsed.transcript.raw is messages  # rendering works on this request's objects
        assert parsed.untouched == untouched_blocks({}, messages)
        assert parsed.thinking == has_thinking(messages)
        assert parsed.denied == frozenset().union(*(denied_calls(m) for m in fresh.messages))


def test_the_prefix_is_reused_only_up_to_the_first_changed_message() -> None:
    first = [{"role": "user", "content": "work"}, *_turn(1, "a.py", "one"), *_turn(2, "b.py", "x")]
    assert parse_messages(Format.ANTHROPIC, "reuse", first).reused == 0
    grown = json.loads(json.dumps([*first, *_turn(3, "a.py", "two")]))
    assert parse_messages(Format.ANTHROPIC, "reuse", grown).reused == 5
    changed = json.loads(json.dumps(grown))
    changed[2]["content"][0]["content"] = "one, changed"
    again = parse_messages(Format.ANTHROPIC, "reuse", changed)
    assert again.reused == 2
    assert again.transcript.results()[0].text == "one, changed"


def test_an_integer_beyond_64_bits_reaches_the_upstream_as_it_came() -> None:
    text = "\n".join(f"{n:>6}→line {n} of the file, long enough to matter" for n in range(1, 41))
    messages = [{"role": "user", "content": "work"}, *_turn(1, "a.py", text)]
    messages += _turn(2, "a.py", text)
    big = -(2**64) - 12345
    body = json.dumps({"model": "m", "n": big, "f": 1e-07, "messages": messages}).encode()
    rewrite = rewrite_request("anthropic-messages", body)
    assert rewrite.changed and rewrite.counts.file_refs == 1
    assert b'"n":-18446744073709563961,"f":1e-07,' in rewrite.body
    assert json.loads(rewrite.body)["n"] == big


def test_a_request_whose_prefix_changed_is_rewritten_from_its_own_text() -> None:
    text = "\n".join(f"{n:>6}→line {n} of the file, long enough to matter" for n in range(1, 41))
    messages = [{"role": "user", "content": "work"}, *_turn(1, "a.py", text)]
    messages += _turn(2, "a.py", text)
    body = {"model": "m", "metadata": {"user_id": "user_x_account_y_session_prefix01"}}
    first = rewrite_request("anthropic-messages", json.dumps({**body, "messages": messages}))
    assert first.changed and first.counts.file_refs == 1
    other = "\n".join(f"{n:>6}→another text, line {n}, long enough to matter" for n in range(1, 41))
    messages[2]["content"][0]["content"] = other  # the host rewound and read another version
    second = rewrite_request("anthropic-messages", json.dumps({**body, "messages": messages}))
    assert not second.changed  # the re-read no longer equals the first read: content


FLOATS = st.floats(allow_nan=False, allow_infinity=False)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | FLOATS | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400)
@given(VALUES)
def test_wire_bytes_equal_the_standard_librarys(value: Any) -> None:
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    try:
        got = wire.dumps(value)
    except ValueError:  # a lone surrogate: the standard library's encode refuses it too
        got = None
    if got is not None:
        assert got == expected
    parsed, fast = wire.loads(expected)
    if fast and wire.lost_integers(wire.dumps(parsed, fast), expected):
        parsed, fast = wire.loads(expected, exact=True)
    assert parsed == json.loads(expected)
    assert wire.dumps(parsed, fast) == wire.dumps(json.loads(expected), False)


def test_nan_and_big_integers_are_read_and_written_as_the_standard_library_does() -> None:
    body = b'{"a":NaN,"b":123456789012345678901234567890,"c":1e-07,"d":"\\ud800"}'
    value, fast = wire.loads(body)
    assert not fast and math.isnan(value["a"]) and value["b"] == 123456789012345678901234567890
    del value["d"]
    assert wire.dumps(value, fast) == json.dumps(value, separators=(",", ":")).encode()
    assert wire.dumps({"c": 1e-07}) == b'{"c":1e-07}'


def test_a_callers_payload_is_parsed_afresh_and_not_kept() -> None:
    """LiteLLM hands its own dict and may change it in place after the hook: its parse is
    neither reused nor kept for the next request."""
    first = [{"role": "user", "content": "work"}, *_turn(1, "a.py", "one")]
    assert parse_messages(Format.ANTHROPIC, "caller", first, reuse=False).reused == 0
    first[2]["content"][0]["content"] = "changed in place afterwards"
    grown = json.loads(json.dumps([*first, *_turn(2, "b.py", "two")]))
    again = parse_messages(Format.ANTHROPIC, "caller", grown)
    assert again.reused == 0
    assert again.transcript.results()[0].text == "changed in place afterwards"
