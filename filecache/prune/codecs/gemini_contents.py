"""Gemini API ``contents`` ⇄ the neutral transcript. Each content is one ``Message``.

A content is ``{"role": "user" | "model", "parts": [...]}`` (``role`` may be absent; the old
``function`` role holds results). Calls are ``functionCall`` parts of model contents (``name``,
``args`` object, optional ``id``); results are ``functionResponse`` parts of user (or
``function``) contents (``name``, ``response`` object, optional ``id``). A result's text is its
``response.output`` string (what Gemini CLI sends), or its ``response.error`` string
(``is_error``, unless it is filecache's own answer: the Gemini CLI hook answers a re-read as
the call's ``error``, and a FileRef there relies on the result it names as any other does); a
response of any other shape, or one carrying ``parts`` (multimodal function responses), counts
as a non-text block and is never replaced. ``text`` parts with
``thought: true``, ``thoughtSignature`` keys, ``inlineData``, ``fileData``, ``executableCode`` and
``codeExecutionResult`` parts are kept as they are.

Ids: a call or result that carries an ``id`` is known by it (Gemini CLI sends one on every
call and result: the API's, or one it made up). One without is named by its position, which
identifies it uniquely in the request: ``#I.K`` is the K-th (1-based) ``functionCall`` part of
``contents[I]`` (0-based); an id-less ``functionResponse`` that is the K-th result of
``contents[I]`` answers ``#(I-1).K``, the K-th call of the content before it (the Gemini API
pairs calls and responses by order). Each content is parsed on its own (``_message``), so the
gateway's prefix reuse applies; linking checks the pairs.

Invariant (``filecache.prune.codecs.base``): ``render`` changes only the ``output`` (or
``error``) string of replaced ``functionResponse`` parts; every other content, and every other
part and key (``thoughtSignature`` included), keeps its exact JSON.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from filecache.core.kinds import Format
from filecache.core.render import MARKER
from filecache.errors import TranscriptError
from filecache.prune.codecs.base import (
    Message,
    ToolCall,
    ToolResult,
    Transcript,
    link,
    message_list,
    register_format,
    replacements_by_message,
)
from filecache.prune.message_blocks import expect_string, type_name

__all__ = ["CODEC", "FORMAT", "parse", "render", "result_body", "set_input"]

FORMAT = Format.GEMINI
_CALLER_ROLES = ("model",)
_RESULT_ROLES = ("user", "function", None)


def position_id(content: int, k: int) -> str:
    """The id of the K-th (1-based) call of ``contents[content]`` when it carries none."""
    return f"#{content}.{k}"


def result_body(response: object) -> tuple[str, str] | None:
    """(the key, the text) of a ``functionResponse.response`` the transcript can replace:
    its ``output`` string, else its ``error`` string; None for any other shape."""
    if not isinstance(response, dict):
        return None
    for key in ("output", "error"):
        value = response.get(key)
        if isinstance(value, str):
            return key, value
    return None


def _call(index: int, j: int, k: int, part: Mapping[str, Any], role: object) -> ToolCall:
    where = f"message {index}: part {j}"
    if role not in _CALLER_ROLES:
        raise TranscriptError(f"{where}: a functionCall belongs in a model content")
    fn = part["functionCall"]
    if not isinstance(fn, dict):
        raise TranscriptError(f"{where}: functionCall must be an object, got {type_name(fn)}")
    name = expect_string(fn.get("name"), where, "name")
    given = fn.get("id")
    call_id = position_id(index, k) if given is None else expect_string(given, where, "id")
    args = fn.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise TranscriptError(f"{where}: args must be an object, got {type_name(args)}")
    try:
        raw = json.dumps(args, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TranscriptError(f"{where}: args are not JSON ({exc})") from None
    return ToolCall(call_id, name, json.loads(raw), raw, True, index, j)


def _result(index: int, j: int, k: int, part: Mapping[str, Any], role: object) -> ToolResult:
    where = f"message {index}: part {j}"
    if role not in _RESULT_ROLES:
        raise TranscriptError(f"{where}: a functionResponse belongs in a user content")
    fn = part["functionResponse"]
    if not isinstance(fn, dict):
        raise TranscriptError(f"{where}: functionResponse must be an object, got {type_name(fn)}")
    expect_string(fn.get("name"), where, "name")
    given = fn.get("id")
    call_id = position_id(index - 1, k) if given is None else expect_string(given, where, "id")
    body = result_body(fn.get("response"))
    extra = fn.get("parts")
    non_text = len(extra) if isinstance(extra, list) else int(extra is not None)
    if body is None:
        return ToolResult(call_id, "", False, index, j, non_text + 1)
    key, text = body
    error = key == "error" and not text.startswith(MARKER + " ")
    return ToolResult(call_id, text, error, index, j, non_text)


def _message(index: int, raw: object) -> Message:
    """One content parsed on its own (the gateway's prefix reuse calls this per content)."""
    where = f"message {index}"
    if not isinstance(raw, dict):
        raise TranscriptError(f"{where}: must be an object, got {type_name(raw)}")
    role = raw.get("role")
    if role is not None and not isinstance(role, str):
        raise TranscriptError(f"{where}: role must be a string, got {type_name(role)}")
    parts = raw.get("parts", [])
    if not isinstance(parts, list):
        raise TranscriptError(f"{where}: parts must be a list, got {type_name(parts)}")
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict):
            raise TranscriptError(f"{where}: part {j} must be an object, got {type_name(part)}")
        if "functionCall" in part:
            calls.append(_call(index, j, len(calls) + 1, part, role))
        elif "functionResponse" in part:
            results.append(_result(index, j, len(results) + 1, part, role))
        elif isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
    neutral = "assistant" if role == "model" else "user"
    return Message(index, neutral, "\n".join(texts), tuple(calls), tuple(results))


def parse(messages: object) -> Transcript:
    """Parse a Gemini ``contents`` list.

    Raises:
        TranscriptError: naming the content index (wrong types, a result without an earlier
            call, a call id used twice, a second result for a call, a part in the wrong role).
    """
    items = message_list(messages, "contents")
    return link([_message(i, m) for i, m in enumerate(items)], FORMAT, items)


def render(transcript: Transcript, replacements: Mapping[str, str]) -> list[Any]:
    """``transcript.raw`` with the text of each replaced ``functionResponse`` replaced (its
    ``output``, or its ``error`` for an error result); nothing else changes."""
    if transcript.format != FORMAT:
        raise TranscriptError(f"a {transcript.format} transcript cannot be rendered as {FORMAT}")
    out = list(transcript.raw)
    for index, texts in replacements_by_message(transcript, replacements).items():
        content = copy.deepcopy(out[index])
        for result in transcript.messages[index].results:
            if result.call_id not in texts:
                continue
            if result.block_index is None or result.non_text_blocks:
                raise TranscriptError(
                    f"message {index}: the result for {result.call_id} is not text; "
                    "it cannot be replaced"
                )
            response = content["parts"][result.block_index]["functionResponse"]["response"]
            found = result_body(response)
            assert found is not None  # parsed as text above
            response[found[0]] = texts[result.call_id]
        out[index] = content
    return out


def set_input(message: Any, call: ToolCall, arguments: dict[str, Any]) -> None:
    """A ``functionCall`` part's new ``args`` (an object, as the API requires)."""
    message["parts"][call.block_index]["functionCall"]["args"] = arguments


CODEC = register_format(FORMAT, parse, render, set_input)
