"""A request's message list parsed, reusing what the conversation's previous request parsed.

A host resends its whole history every turn: request n+1 is request n plus a turn or two. The
codec's parse of a message (its ``_message``), the blocks it leaves untouched, whether it
holds thinking, and the calls of denied files it makes are functions of that message alone, so
for every message equal to the one at the same index in the conversation's previous request
they are taken from there, and only the new messages are parsed.

Invariants:
- ``parse_messages`` returns what parsing the whole list from scratch returns. A message is
  reused only when it compares equal (``==``, the whole JSON value) to the message at the same
  index of the previous request, and only up to the first one that does not: a prefix that
  changed (the host compacted, rewound, edited a message) is parsed again from where it
  changed. ``==`` is Python's: ``1``, ``1.0`` and ``true`` compare equal, so a message that
  differs from the previous one only there reuses its parse (the same text and ids).
- Linking (results after their calls, ids used once) is checked on the whole list every time.
- Only ``rewrite_request``'s own parse of a body is kept (nobody else holds it, so nothing
  changes it afterwards); a payload handed in by a caller (``rewrite_payload``: LiteLLM's
  dict, which it may change in place after the hook) is parsed from scratch.
- This is a cache in this process only (a few conversations, ``_KEEP``), shared by the threads
  of a server under one lock; its entries are never changed after they are made.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from filecache.core.json_input import json_strings
from filecache.core.kinds import Format
from filecache.gateway.request_shape import message_thinking, message_untouched
from filecache.prune.codecs.anthropic_messages import _message as _anthropic_message
from filecache.prune.codecs.base import Message, Transcript, link
from filecache.prune.codecs.gemini_contents import _message as _gemini_content
from filecache.prune.codecs.openai_chat import _message as _openai_message
from filecache.prune.codecs.openai_responses import _message as _responses_item
from filecache.secrecy import holds_private_key
from filecache.settings import DEFAULT_DENY, deny_pattern

__all__ = ["Parsed", "denied_calls", "message_parser", "parse_messages"]

_KEEP = 16  # conversations whose last parse is kept (each holds its request's parsed JSON)
_PARSE: dict[str, Callable[[int, object], Message]] = {  # each codec's parse of one message
    Format.ANTHROPIC: _anthropic_message,
    Format.OPENAI: _openai_message,
    Format.RESPONSES: _responses_item,
    Format.GEMINI: _gemini_content,
}
_DENY = deny_pattern(DEFAULT_DENY)


@dataclass(frozen=True)
class Parsed:
    """A parsed message list: the transcript, the untouched blocks inside the messages, the
    calls of denied files (``denied_calls``), whether any message holds thinking or reasoning;
    ``reused`` messages came from the previous request."""

    transcript: Transcript
    untouched: int
    denied: frozenset[str]
    thinking: bool
    reused: int = 0


@dataclass(frozen=True)
class _Entry:
    raw: Sequence[Any]
    messages: tuple[Message, ...]
    untouched: tuple[int, ...]
    denied: tuple[frozenset[str], ...]
    thinking: tuple[bool, ...]


_lock = threading.Lock()
_last: OrderedDict[tuple[str, str], _Entry] = OrderedDict()


def message_parser(fmt: str) -> Callable[[int, object], Message]:
    """The codec's parse of one message (index, message) for ``fmt``."""
    return _PARSE[fmt]


def denied_calls(message: Message) -> frozenset[str]:
    """The calls of ``message`` that name a denied file (``settings.DEFAULT_DENY``) by a path
    argument or a word of a command, and those whose result holds a private key whatever the
    file's name (``secrecy.holds_private_key``, as the store denies by content): never
    referred to, diffed, or stored in any form."""
    out = {result.call_id for result in message.results if holds_private_key(result.text)}
    for call in message.tool_calls:
        for text in json_strings(call.arguments):
            for word in text.replace("\t", " ").split(" "):
                word = word.strip("'\"`;|&<>()")
                if word and _DENY.match(word.lower()):
                    out.add(call.id)
    return frozenset(out)


def parse_messages(
    fmt: str, conversation: str, messages: list[Any], *, reuse: bool = True
) -> Parsed:
    """``messages`` parsed (module docstring); ``reuse`` False: from scratch, and not kept
    (a caller that may change ``messages`` in place after the call).

    Raises:
        TranscriptError: as the codec's ``parse`` does.
    """
    parse = _PARSE[fmt]
    key = (fmt, conversation)
    before = None
    if reuse:
        with _lock:
            before = _last.get(key)
    same = 0
    if before is not None:
        limit = min(len(before.raw), len(messages))
        while same < limit and messages[same] == before.raw[same]:
            same += 1
    parsed = list(before.messages[:same]) if before is not None else []
    untouched = list(before.untouched[:same]) if before is not None else []
    denied = list(before.denied[:same]) if before is not None else []
    thinking = list(before.thinking[:same]) if before is not None else []
    for index in range(same, len(messages)):
        message = parse(index, messages[index])
        parsed.append(message)
        untouched.append(message_untouched(messages[index]))
        denied.append(denied_calls(message))
        thinking.append(message_thinking(messages[index]))
    transcript = link(parsed, fmt, messages)
    if not reuse:
        return Parsed(transcript, sum(untouched), frozenset().union(*denied), any(thinking), 0)
    entry = _Entry(messages, tuple(parsed), tuple(untouched), tuple(denied), tuple(thinking))
    with _lock:
        _last[key] = entry
        _last.move_to_end(key)
        while len(_last) > _KEEP:
            _last.popitem(last=False)
    return Parsed(transcript, sum(untouched), frozenset().union(*denied), any(thinking), same)
