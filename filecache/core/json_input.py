"""JSON from outside (a transcript file, a call's arguments): decoded strictly, depth-bounded.

Invariants:
- ``load_json`` turns every way a file can fail to be JSON text into one ``FileCacheError``
  with a one-line message: not UTF-8 (``EncodingError``, exit 3), not JSON or nested deeper
  than ``MAX_JSON_DEPTH`` (``TranscriptError``, exit 2). Python's parser recurses, so depth is
  a crash (``RecursionError``) unless bounded here.
- ``check_json`` walks with an explicit stack: linear time, no recursion, and a cycle (a
  Python list holding itself) ends at the depth limit instead of looping. It also refuses a
  string with a lone surrogate, which has no UTF-8 form (a ``TranscriptError``, not a crash
  later when the text is hashed or printed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from filecache.errors import EncodingError, TranscriptError

__all__ = ["MAX_JSON_DEPTH", "check_json", "json_strings", "load_json"]

MAX_JSON_DEPTH = 128
"""Arrays and objects nested deeper than this are refused; real transcripts stay under 20."""


def load_json(data: bytes, source: str) -> Any:
    """Parse ``data`` (UTF-8, a BOM allowed) as JSON, depth-bounded.

    Raises:
        EncodingError: not valid UTF-8.
        TranscriptError: not JSON, or nested over ``MAX_JSON_DEPTH``.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EncodingError(
            f"{source}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start:,}); "
            "a message list must be UTF-8 JSON"
        ) from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep(source) from None
    except json.JSONDecodeError as exc:
        raise TranscriptError(f"{source}: not JSON ({exc})") from None
    check_json(value, source)
    return value


def check_json(value: object, source: str) -> None:
    """Refuse ``value`` if it nests deeper than ``MAX_JSON_DEPTH`` or holds a string with a
    lone surrogate (JSON allows ``"\\ud800"``; it has no UTF-8 form, so hashing, counting
    or printing it would crash): ``TranscriptError``."""
    if isinstance(value, str):
        _check_text(value, source)
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
            for key in node:
                if isinstance(key, str) and not key.isascii():
                    _check_text(key, source)
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise _too_deep(source)
        for child in children:
            if isinstance(child, str):
                if not child.isascii():  # ASCII (most text) holds no surrogate: no encode
                    _check_text(child, source)
            elif isinstance(child, (dict, list, tuple)):
                stack.append((child, depth + 1))


def _check_text(text: str, source: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TranscriptError(
            f"{source}: a string holds a lone surrogate (U+{ord(text[exc.start]):04X}), which "
            "is not valid Unicode; fix the producer or replace it"
        ) from None


def _too_deep(source: str) -> TranscriptError:
    return TranscriptError(
        f"{source}: JSON nested more than {MAX_JSON_DEPTH} levels deep; not a message list"
    )


def json_strings(value: object) -> Iterator[str]:
    """Every string inside decoded JSON (a call's arguments), in document order; an explicit
    stack, like ``check_json``: no recursion."""
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
