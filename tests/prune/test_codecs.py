"""The codec registries pruning dispatches through (``filecache.prune.codecs.base`` for message
formats, ``filecache.prune.sdk_messages`` for framework message objects), and the old import
paths of the codecs that moved out of ``filecache.adapters``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from filecache.errors import TranscriptError
from filecache.prune import sdk_messages
from filecache.prune.codecs import base, openai_chat
from filecache.prune.codecs.base import Transcript
from filecache.prune.transcript import (
    FORMATS,
    parse_transcript,
    register_format,
    registered_formats,
)

CHAT = [
    {"role": "user", "content": "look"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "the file"},
]


@pytest.fixture
def own_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test stay in it."""
    monkeypatch.setattr(base, "_CODECS", dict(base._CODECS))
    monkeypatch.setattr(sdk_messages, "_SDKS", dict(sdk_messages._SDKS))


def _parse_wrapped(messages: object) -> Transcript:
    """A format of our own: chat messages under {"m": ...} (to tell it from plain chat)."""
    if not isinstance(messages, list):
        raise TranscriptError("expected a list")
    inner = [m["m"] for m in messages]
    return base.link([openai_chat._message(i, m) for i, m in enumerate(inner)], "wrapped", messages)


def _render_wrapped(transcript: Transcript, replacements: Mapping[str, str]) -> list[Any]:
    chat = openai_chat.parse([m["m"] for m in transcript.raw])
    return [{"m": m} for m in openai_chat.render(chat, replacements)]


def test_the_built_in_formats_are_registered_by_importing_the_transcript() -> None:
    assert FORMATS == ("openai", "responses", "anthropic", "gemini")
    assert set(FORMATS) <= set(registered_formats())
    assert base.codec_for("openai") is openai_chat.CODEC


@pytest.mark.usefixtures("own_registries")
def test_an_adapter_adds_a_format_and_its_transcripts_render_through_it() -> None:
    register_format("wrapped", _parse_wrapped, _render_wrapped)
    wrapped = [{"m": m} for m in CHAT]
    transcript = parse_transcript(wrapped, "wrapped")
    assert transcript.format == "wrapped"
    assert [r.text for r in transcript.results()] == ["the file"]
    out = transcript.with_results_replaced({"c1": "[cleared]"})
    assert out[2] == {"m": {"role": "tool", "tool_call_id": "c1", "content": "[cleared]"}}
    assert wrapped[2]["m"]["content"] == "the file"  # the input is never mutated
    register_format("wrapped", _parse_wrapped, _render_wrapped)  # the same again: a no-op
    assert "wrapped" in registered_formats()


@pytest.mark.usefixtures("own_registries")
def test_a_taken_format_name_is_refused() -> None:
    with pytest.raises(ValueError, match="'openai' is already registered"):
        register_format("openai", _parse_wrapped, _render_wrapped)
    assert parse_transcript(CHAT, "openai").format == "openai"  # the built-in one stays


def test_an_unknown_format_names_the_registered_ones() -> None:
    with pytest.raises(TranscriptError, match="unknown format 'nope'; use one of ") as raised:
        parse_transcript(CHAT, "nope")
    assert all(name in str(raised.value) for name in FORMATS)


class Note:
    """A message object of a framework filecache does not know (module: this test file)."""

    def __init__(self, role: str, text: str, call: str | None = None) -> None:
        self.role, self.text, self.call = role, text, call


class NoteCodec:
    def to_chat(self, messages: list[Any], /) -> list[dict[str, Any]]:
        chat: list[dict[str, Any]] = []
        for note in messages:
            if note.role == "tool":
                chat.append({"role": "tool", "tool_call_id": note.call, "content": note.text})
            elif note.call is not None:
                function = {"name": "read", "arguments": "{}"}
                call = {"id": note.call, "type": "function", "function": function}
                chat.append({"role": "assistant", "content": None, "tool_calls": [call]})
            else:
                chat.append({"role": note.role, "content": note.text})
        return chat

    def replaced(self, messages: list[Any], texts: Mapping[str, str], /) -> list[Any]:
        return [
            Note(n.role, texts[n.call], n.call) if n.role == "tool" and n.call in texts else n
            for n in messages
        ]


@pytest.mark.usefixtures("own_registries")
def test_an_adapter_adds_a_framework_and_its_objects_come_back_as_objects() -> None:
    notes = [Note("user", "look"), Note("assistant", "", "c1"), Note("tool", "the file", "c1")]
    with pytest.raises(TranscriptError, match="a Note object, not a message"):
        sdk_messages.convert(notes)
    loads: list[int] = []

    def load() -> sdk_messages.SdkCodec:
        loads.append(1)
        return NoteCodec()

    sdk_messages.register_sdk(Note.__module__.split(".")[0], load)
    assert loads == []  # registering loads nothing
    converted = sdk_messages.convert(notes)
    assert converted is not None and converted.back is not None
    assert converted.format == "openai"
    assert converted.messages == NoteCodec().to_chat(notes)
    back = converted.back({"c1": "[cleared]"}, converted.messages)
    assert [n.text for n in back] == ["look", "", "[cleared]"]
    assert back[0] is notes[0] and notes[2].text == "the file"
    sdk_messages.register_sdk(Note.__module__.split(".")[0], load)  # the same again: a no-op
    with pytest.raises(ValueError, match="already have a codec"):
        sdk_messages.register_sdk(Note.__module__.split(".")[0], NoteCodec)
