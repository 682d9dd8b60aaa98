"""JSON from outside (a transcript file, a call's arguments): decoded strictly, depth-bounded.

Invariants:
- ``load_json`` turns every way a file can fail to be JSON text into one ``FileCacheError``
  with a one-line message: not UTF-8 (``EncodingError``, exit 3), not JSON or nested deeper
  than ``MAX_JSON_DEPTH`` (``TranscriptError``, exit 2). Python's parser recurses, so depth is
  a crash (``RecursionError``) unless bounded here.
- ``check_depth`` walks with an explicit stack: linear time, no recursion, and a cycle (a
  Python list holding itself) ends at the depth limit instead of looping.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import EncodingError, TranscriptError

__all__ = ["MAX_JSON_DEPTH", "check_depth", "load_json", "nested_too_deep"]

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
    check_depth(value, source)
    return value


def nested_too_deep(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether lists/dicts (tuples too) in ``value`` nest deeper than ``limit``."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list, tuple)))
    return False


def check_depth(value: object, source: str) -> None:
    """Refuse ``value`` if it nests deeper than ``MAX_JSON_DEPTH`` (``TranscriptError``)."""
    if nested_too_deep(value):
        raise _too_deep(source)


def _too_deep(source: str) -> TranscriptError:
    return TranscriptError(
        f"{source}: JSON nested more than {MAX_JSON_DEPTH} levels deep; not a message list"
    )
