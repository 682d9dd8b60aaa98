"""The Gemini ``contents`` codec: what Gemini CLI 0.61 sends (two recorded requests in
``fixtures/gateway/``), ids or their position, renders that touch only a result's text, and
its round trip (hypothesis)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filecache.core.kinds import Format
from filecache.errors import TranscriptError
from filecache.prune.codecs.base import render_inputs
from filecache.prune.codecs.gemini_contents import parse, render
from filecache.prune.transcript import detect_format, parse_transcript

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "gateway"


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return body


def test_a_recorded_gemini_cli_request_parses_to_its_calls_and_results() -> None:
    body = recorded("gemini-cli-0.61-reads.json")
    transcript = parse_transcript(body["contents"])  # detected
    assert transcript.format == Format.GEMINI
    calls = transcript.calls_by_id()
    assert list(calls) == ["r1", "r2", "b1", "m1", "c001", "c002", "r9"]
    assert calls["r2"].arguments == {
        "file_path": calls["r2"].arguments["file_path"], "start_line": 10, "end_line": 14,
    }  # fmt: skip
    results = transcript.results_by_id()
    assert results["r1"].text.startswith("a line 0: ") and not results["r1"].is_error
    assert results["m1"].is_error and "read_many_files" in results["m1"].text
    assert results["b1"].text.startswith("<untrusted_context>\nOutput: b line 0:")
    assert {m.role for m in transcript.messages} == {"user", "assistant"}
    assert not transcript.pending_calls()


def test_ids_gemini_cli_made_up_are_the_ids() -> None:
    body = recorded("gemini-cli-0.61-no-api-ids.json")
    transcript = parse(body["contents"])
    ids = [call.id for call in transcript.calls()]
    assert ids[0].startswith("read_file_") and ids[1].startswith("read_file_")
    assert [r.call_id for r in transcript.results()] == ids


def content(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "parts": list(parts)}


def fcall(name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        fn["id"] = call_id
    return {"functionCall": fn}


def fresponse(name: str, output: Any, call_id: str | None = None) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name, "response": output}
    if call_id is not None:
        fn["id"] = call_id
    return {"functionResponse": fn}


def test_calls_without_ids_are_named_by_their_position() -> None:
    contents = [
        content("user", {"text": "go"}),
        content("model", {"text": "reading"}, fcall("read_file", {"file_path": "a"}),
                fcall("read_file", {"file_path": "b"})),
        content("user", fresponse("read_file", {"output": "A"}),
                fresponse("read_file", {"output": "B"})),
    ]  # fmt: skip
    transcript = parse(contents)
    assert [c.id for c in transcript.calls()] == ["#1.1", "#1.2"]
    assert transcript.results_by_id()["#1.2"].text == "B"
    out = render(transcript, {"#1.1": "[cleared]"})
    assert out[2]["parts"][0]["functionResponse"] == {
        "name": "read_file",
        "response": {"output": "[cleared]"},
    }
    assert out[2]["parts"][1] is not contents[2]["parts"][1]  # a copy of the content
    assert out[2]["parts"][1] == contents[2]["parts"][1] and out[1] is contents[1]
    assert contents[2]["parts"][0]["functionResponse"]["response"] == {"output": "A"}


def test_render_changes_the_result_text_only() -> None:
    signed = {**fcall("run_shell_command", {"command": "ls"}, "x1"), "thoughtSignature": "c2ln"}
    contents = [
        content("user", {"text": "go"}),
        content("model", {"text": "plan", "thought": True, "thoughtSignature": "dGg="}, signed),
        content("user", {**fresponse("run_shell_command", {"error": "boom", "extra": 1}, "x1"),
                         "other": True}),
    ]  # fmt: skip
    before = copy.deepcopy(contents)
    transcript = parse(contents)
    result = transcript.results_by_id()["x1"]
    assert result.is_error and result.text == "boom"
    assert transcript.messages[1].text == ""  # a thought is not the message's text
    out = render(transcript, {"x1": "short"})
    assert out[2]["parts"][0]["functionResponse"]["response"] == {"error": "short", "extra": 1}
    assert out[2]["parts"][0]["other"] is True and out[1] is contents[1]
    assert contents == before
    moved = render_inputs(transcript, out, {"x1": '{"command": "pwd"}'})
    assert moved[1]["parts"][1] == {**fcall("run_shell_command", {"command": "pwd"}, "x1"),
                                    "thoughtSignature": "c2ln"}  # fmt: skip


def test_a_structured_or_multimodal_response_is_not_text() -> None:
    contents = [
        content("user", {"text": "go"}),
        content("model", fcall("f", {}, "a"), fcall("g", {}, "b")),
        content("user", fresponse("f", {"rows": [1, 2]}, "a"),
                {"functionResponse": {"name": "g", "id": "b", "response": {"output": "x"},
                                      "parts": [{"inlineData": {"mimeType": "image/png",
                                                                "data": "AA=="}}]}}),
    ]  # fmt: skip
    transcript = parse(contents)
    found = transcript.results_by_id()
    assert found["a"].non_text_blocks == 1 and found["b"].non_text_blocks == 1
    with pytest.raises(TranscriptError, match="not text"):
        render(transcript, {"a": "x"})


@pytest.mark.parametrize(
    ("contents", "match"),
    [
        ([content("user", fcall("f", {}, "a"))], "model content"),
        ([content("model", fcall("f", {}, "a")), content("model", fresponse("f", {}, "a"))],
         "user content"),
        ([content("model", fcall("f", {}, "a")), content("user", fresponse("f", {}, "zz"))],
         "no earlier assistant message calls it"),
        ([content("model", fcall("f", {})), content("user", {"text": "hi"}),
          content("user", fresponse("f", {}))], "no earlier"),
        ([content("model", fcall("f", [], "a"))], "args must be an object"),
        ([{"role": "user", "parts": "text"}], "parts must be a list"),
        ([content("model", fcall("f", {}, "a"), fcall("g", {}, "a"))], "used twice"),
    ],
)  # fmt: skip
def test_malformed_contents_are_refused_by_index(contents: list[Any], match: str) -> None:
    with pytest.raises(TranscriptError, match=match):
        parse(contents)


def test_detection_tells_gemini_contents_apart() -> None:
    assert detect_format([content("user", {"text": "hi"})]) == Format.GEMINI
    assert detect_format([{"role": "user", "content": "hi"}]) == Format.OPENAI


# -- the round trip ---------------------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
NAMES = st.sampled_from(["read_file", "run_shell_command", "replace", "write_file", "glob"])


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    """Gemini contents: a prompt, then turns of model calls (ids or none, signatures, thoughts)
    and their responses (output, error, structured)."""
    out = [content("user", {"text": draw(TEXT)})]
    with_ids = draw(st.booleans())
    n = 0
    for _ in range(draw(st.integers(0, 5))):
        parts: list[dict[str, Any]] = []
        if draw(st.booleans()):
            parts.append({"text": draw(TEXT), "thought": True, "thoughtSignature": "c2ln"})
        if draw(st.booleans()):
            parts.append({"text": draw(TEXT)})
        names = draw(st.lists(NAMES, min_size=1, max_size=3))
        for k, name in enumerate(names):
            n += 1
            part = fcall(name, {"file_path": draw(TEXT)}, f"id{n}" if with_ids else None)
            if k == 0 and draw(st.booleans()):
                part["thoughtSignature"] = "skip_thought_signature_validator"
            parts.append(part)
        out.append(content("model", *parts))
        answers = []
        for k, name in enumerate(names):
            kind = draw(st.sampled_from(["output", "error", "rows"]))
            value = [1, 2] if kind == "rows" else draw(TEXT)
            call_id = f"id{n - len(names) + k + 1}" if with_ids else None
            answers.append(fresponse(name, {kind: value}, call_id))
        out.append(content("user", *answers))
        if draw(st.booleans()):
            out.append(content("model", {"text": draw(TEXT)}))
            out.append(content("user", {"text": draw(TEXT)}))
    return out


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_parse_then_render_without_replacements_is_the_input(contents: list[Any]) -> None:
    before = json.dumps(contents, ensure_ascii=False)
    transcript = parse(contents)
    out = render(transcript, {})
    assert json.dumps(out, ensure_ascii=False) == before
    assert all(a is b for a, b in zip(out, contents, strict=True))
    assert len(transcript.results()) == len(transcript.calls())


@settings(max_examples=150, deadline=None)
@given(conversations(), st.data())
def test_a_replacement_changes_that_text_and_nothing_else(contents: list[Any], data: Any) -> None:
    transcript = parse(contents)
    texts = [r for r in transcript.results() if not r.non_text_blocks]
    if not texts:
        return
    chosen = data.draw(st.sampled_from(texts))
    before = json.dumps(contents, ensure_ascii=False)
    out = render(transcript, {chosen.call_id: "NEW"})
    assert json.dumps(contents, ensure_ascii=False) == before  # the input is never changed
    again = parse(out)
    for result in again.results():
        want = "NEW" if result.call_id == chosen.call_id else None
        old = transcript.results_by_id()[result.call_id]
        assert result.text == (want or old.text) and result.is_error == old.is_error
    for k, (a, b) in enumerate(zip(out, contents, strict=True)):
        assert (a is b) == (k != chosen.message_index)
