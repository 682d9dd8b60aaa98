"""The neutral transcript every message codec parses to and renders from, and the codec registry.

A transcript is messages, the tool calls they make and the results linked to them by id. A
*codec* (``openai_chat``, ``openai_responses``, ``anthropic_messages`` in this package, or one an
adapter registers with ``register_format``) parses a provider's message list into a
``Transcript`` and renders it back with some tool-result bodies replaced. Pruning is expressed
only as "replace the body text of the result for call X with text T".

Invariants (every codec keeps them; ``tests/prune/test_transcript.py`` checks the built-in ones):
- Parsing never mutates the input list, and a ``Transcript`` keeps a reference to it (``raw``).
- Every ``ToolResult`` answers exactly one ``ToolCall`` made in an earlier message; a call id
  occurs once; a call has at most one result (a call without one is *pending*, see
  ``pending_calls``: the model's last turn may not be answered yet).
- Rendering returns a new list. A message that holds no replaced result is the input's own object
  (treat the output as read-only); a message that does is a deep copy of the input message with
  only the replaced bodies changed: the result keeps its id, position, ``is_error`` and its other
  fields. Without replacements the output ``json.dumps``-equals the input.
- Indices are 0-based positions in the input list; every ``TranscriptError`` names one.

A body given as a list of blocks has as its text the concatenation of its text blocks; other
blocks (images, documents) are counted in ``ToolResult.non_text_blocks``. Replacing such a body
leaves one text block (the first text block, so its other keys such as ``cache_control`` stay,
with the new text) and drops every other block, images included: the replacement *is* the new
body, so what it cost and what the model still sees are exactly what the planner decided (an
image kept next to a "cleared" placeholder would keep most of the tokens and contradict it). The
planner sees ``non_text_blocks`` and can say in its placeholder what was dropped; the archived
original keeps it. An empty replacement of a block list leaves no blocks (Anthropic rejects empty
text blocks).

The registry: a codec module registers itself when it is imported (``register_format(FORMAT,
parse, render)`` at its end), so every ``Transcript`` a codec builds finds its codec again to
render. ``filecache.prune.transcript`` imports the built-in codecs; nothing here imports a codec
or any module outside ``filecache.prune``/``filecache.core``/``filecache.errors``. The registry
is filled at import time and only read afterwards (a dict: registering from several threads at
once is not supported).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from filecache.errors import TranscriptError
from filecache.prune.file_tools import FileAccess, file_access
from filecache.prune.message_blocks import json_object, replaced_body, type_name

__all__ = [
    "Codec",
    "Message",
    "ToolCall",
    "ToolResult",
    "Transcript",
    "codec_for",
    "link",
    "message_list",
    "register_format",
    "registered_formats",
    "render_inputs",
    "render_replaced",
    "render_transcript",
    "renders_inputs",
    "replacements_by_message",
]


@dataclass(frozen=True)
class ToolCall:
    """One tool call. ``arguments`` is ``raw_arguments`` parsed (``{}`` unless a JSON object).

    Attributes:
        id: the call id results refer to (``tool_call_id`` / ``call_id`` / ``tool_use`` id).
        name: the tool's name.
        arguments: the parsed arguments (a fresh object: mutating it changes nothing; not
            part of the hash, so calls can be set members).
        raw_arguments: the arguments string as given (OpenAI), the compact JSON of ``input``
            (Anthropic), or a custom tool's free-form input.
        arguments_valid: whether ``raw_arguments`` is a JSON object.
        message_index: index of the message that makes the call.
        block_index: index in ``tool_calls`` (OpenAI chat) or ``content`` (Anthropic); ``None``
            for a Responses item, which is the call itself.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(hash=False)
    raw_arguments: str
    arguments_valid: bool
    message_index: int
    block_index: int | None


@dataclass(frozen=True)
class ToolResult:
    """One tool result: the body text the model sees for call ``call_id``.

    Attributes:
        call_id: the id of the call it answers.
        text: the body's text (the concatenation of its text blocks for a block list).
        is_error: Anthropic's ``is_error`` (always ``False`` for the OpenAI formats).
        message_index: index of the message holding it.
        block_index: index of the ``tool_result`` block in ``content`` (Anthropic); ``None``
            when the message (OpenAI ``tool``) or item (Responses) is the result itself.
        non_text_blocks: blocks of the body that are not text (images, documents, files).
    """

    call_id: str
    text: str
    is_error: bool
    message_index: int
    block_index: int | None
    non_text_blocks: int = 0


@dataclass(frozen=True)
class Message:
    """One message (or Responses item): its role, own text, calls and results.

    ``role`` is the message's role; for a Responses item without one it is ``assistant`` for
    what the model produced (calls, reasoning) and ``tool`` for outputs. ``text`` is the
    message's own text blocks joined with newlines (Responses reasoning: its summary), without
    tool-result bodies.
    """

    index: int
    role: str
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True)
class Transcript:
    """A parsed message list. ``raw`` is the input list itself (never mutated)."""

    messages: tuple[Message, ...]
    format: str
    raw: Sequence[Any] = field(repr=False, compare=False)

    def calls(self) -> list[ToolCall]:
        """Every tool call, in transcript order."""
        return [call for m in self.messages for call in m.tool_calls]

    def results(self) -> list[ToolResult]:
        """Every tool result, in transcript order."""
        return [result for m in self.messages for result in m.results]

    def calls_by_id(self) -> dict[str, ToolCall]:
        """Tool calls by id (build once per pass: each call walks the transcript)."""
        return {call.id: call for call in self.calls()}

    def results_by_id(self) -> dict[str, ToolResult]:
        """Tool results by the id of the call they answer."""
        return {result.call_id: result for result in self.results()}

    def tool_result_order(self) -> list[str]:
        """Call ids in the order their results appear (oldest first)."""
        return [result.call_id for result in self.results()]

    def pending_calls(self) -> list[ToolCall]:
        """Calls that have no result (yet), in transcript order."""
        answered = {result.call_id for result in self.results()}
        return [call for call in self.calls() if call.id not in answered]

    def file_accesses(self) -> list[FileAccess]:
        """The calls of known file tools (``FILE_TOOLS``), in transcript order."""
        found = (file_access(call) for call in self.calls())
        return [access for access in found if access is not None]

    def with_results_replaced(self, replacements: Mapping[str, str]) -> list[Any]:
        """The raw message list with the body of each result in ``replacements`` replaced.

        Args:
            replacements: call id → new body text. Every id must have a result here.

        Returns:
            A new list in this transcript's format (see the module docstring for what is
            shared with the input and what is copied).

        Raises:
            TranscriptError: an id has no result in this transcript, or a text is not a string.
        """
        return render_transcript(self, replacements)


Parse = Callable[[object], Transcript]
Render = Callable[[Transcript, Mapping[str, str]], list[Any]]
SetInput = Callable[[Any, ToolCall, dict[str, Any]], None]
"""Puts a call's new arguments into (a deep copy of) the message that makes it."""


@dataclass(frozen=True)
class Codec:
    """One message format: ``parse`` a list into a ``Transcript``, ``render`` one back, and
    (when the format supports it) ``set_input``: a call's new arguments into its message."""

    format: str
    parse: Parse
    render: Render
    set_input: SetInput | None = None


_CODECS: dict[str, Codec] = {}


def register_format(
    format: str, parse: Parse, render: Render, set_input: SetInput | None = None
) -> Codec:
    """Make ``format`` known to ``parse_transcript``/``render_transcript`` (adapters may add one).

    ``set_input`` (optional) lets pruning replace a superseded call's arguments
    (``render_inputs``); without it the calls of this format are never changed.
    Registering the same functions again is a no-op; other functions under a taken name are
    refused (``ValueError``): two codecs for one name would render each other's transcripts.
    """
    codec = Codec(format, parse, render, set_input)
    known = _CODECS.setdefault(format, codec)
    if known != codec:
        raise ValueError(f"message format {format!r} is already registered ({known.parse!r})")
    return known


def registered_formats() -> tuple[str, ...]:
    """Every registered format, in registration order."""
    return tuple(_CODECS)


def codec_for(format: str) -> Codec:
    """The codec registered for ``format``; ``TranscriptError`` naming the known ones."""
    found = _CODECS.get(format)
    if found is None:
        raise TranscriptError(
            f"unknown format {format!r}; use one of {', '.join(registered_formats())}"
        )
    return found


def render_transcript(transcript: Transcript, replacements: Mapping[str, str]) -> list[Any]:
    """``transcript.raw`` with result bodies replaced, in the transcript's own format."""
    return codec_for(transcript.format).render(transcript, replacements)


def renders_inputs(format: str) -> bool:
    """Whether calls of ``format`` can have their arguments replaced (``render_inputs``)."""
    found = _CODECS.get(format)
    return found is not None and found.set_input is not None


def render_inputs(
    transcript: Transcript, messages: Sequence[Any], inputs: Mapping[str, str]
) -> list[Any]:
    """``messages`` (``transcript.raw``, or what ``render_transcript`` made of it) with the
    arguments of each call in ``inputs`` (call id -> a JSON object's text) replaced.

    A message that makes no such call is the given object; one that does is a deep copy with
    only those calls' arguments changed (the call keeps its id, name and position).

    Raises:
        TranscriptError: a call id that is not a call here, arguments that are not a JSON
            object, or a format that cannot replace them.
    """
    codec = codec_for(transcript.format)
    if codec.set_input is None:
        raise TranscriptError(f"the {transcript.format} format cannot replace a call's arguments")
    calls = transcript.calls_by_id()
    out = list(messages)
    copied: set[int] = set()
    for call_id, text in inputs.items():
        call = calls.get(call_id)
        if call is None:
            raise TranscriptError(f"cannot replace the input of {call_id}: there is no such call")
        parsed = json_object(text) if isinstance(text, str) else None
        if parsed is None:
            raise TranscriptError(f"the new input of {call_id} must be a JSON object's text")
        if call.message_index not in copied:
            out[call.message_index] = copy.deepcopy(out[call.message_index])
            copied.add(call.message_index)
        codec.set_input(out[call.message_index], call, parsed)
    return out


# -- linking and rendering, for the codecs --------------------------------------------------


def message_list(messages: object, what: str = "messages") -> list[Any]:
    """What a codec's ``parse`` starts with: ``messages``, which must be a list. The codec then
    parses each entry itself and ``link``-s them (nothing here calls back into the codec)."""
    if not isinstance(messages, list):
        raise TranscriptError(f"expected a list of {what}, got {type_name(messages)}")
    return messages


def link(messages: Sequence[Message], format: str, raw: Sequence[Any]) -> Transcript:
    """Check that results and calls link up (module invariants) and build the transcript."""
    called_at: dict[str, int] = {}
    answered_at: dict[str, int] = {}
    for message in messages:
        for result in message.results:
            cid = result.call_id
            if cid not in called_at:
                raise TranscriptError(
                    f"message {message.index}: tool result for {cid}, "
                    "but no earlier assistant message calls it"
                )
            if cid in answered_at:
                raise TranscriptError(
                    f"message {message.index}: a second tool result for {cid} "
                    f"(first at message {answered_at[cid]})"
                )
            answered_at[cid] = message.index
        for call in message.tool_calls:
            if call.id in called_at:
                raise TranscriptError(
                    f"message {message.index}: tool call id {call.id} used twice "
                    f"(first at message {called_at[call.id]})"
                )
            called_at[call.id] = message.index
    return Transcript(tuple(messages), format, raw)


def replacements_by_message(
    transcript: Transcript, replacements: Mapping[str, str]
) -> dict[int, dict[str, str]]:
    """Group replacements by the index of the message holding each result; refuse unknown ids."""
    where = {r.call_id: r.message_index for r in transcript.results()}
    grouped: dict[int, dict[str, str]] = {}
    for call_id, text in replacements.items():
        if call_id not in where:
            raise TranscriptError(f"cannot replace the result for {call_id}: there is none")
        if not isinstance(text, str):
            raise TranscriptError(
                f"the replacement for {call_id} must be a string, got {type_name(text)}"
            )
        grouped.setdefault(where[call_id], {})[call_id] = text
    return grouped


def render_replaced(
    transcript: Transcript, format: str, replacements: Mapping[str, str], body: str, text_type: str
) -> list[Any]:
    """An adapter's ``render``: ``transcript.raw`` with each replaced result body replaced.

    A result with a ``block_index`` is that block of its message's ``content``; otherwise the
    message is the result. Its ``body`` key gets ``replaced_body`` (new blocks: ``text_type``).
    """
    if transcript.format != format:
        raise TranscriptError(f"a {transcript.format} transcript cannot be rendered as {format}")
    out = list(transcript.raw)
    for index, texts in replacements_by_message(transcript, replacements).items():
        message = copy.deepcopy(out[index])
        for result in transcript.messages[index].results:
            if result.call_id in texts:
                holder = message
                if result.block_index is not None:
                    holder = message["content"][result.block_index]
                holder[body] = replaced_body(holder.get(body), texts[result.call_id], text_type)
        out[index] = message
    return out
