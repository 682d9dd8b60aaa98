"""Message lists that hold SDK objects instead of plain dicts, for ``prune_messages``.

- LangChain messages (``langchain_core.messages`` objects, or their ``model_dump()`` dicts,
  recognised by their ``type`` of ``human``/``ai``/``tool``/``system`` with LangChain's own
  keys) and pydantic-ai ``ModelMessage`` lists are converted to OpenAI chat dicts by their
  adapters (``filecache.adapters.langchain`` / ``.pydantic_ai``), pruned, and given back as
  objects of the same kind with only the pruned results' contents replaced.
- Any other object with ``model_dump`` (OpenAI or Anthropic SDK messages and items) is dumped
  (``mode="json"``, ``exclude_none``) and pruned as the dicts it dumps to; the result is dicts.
- Anything else that is not a dict is refused with a ``TranscriptError`` naming its index:
  never guessed at.

Pure dispatch: the frameworks are imported only when their objects are present.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from filecache.errors import TranscriptError
from filecache.prune.message_blocks import type_name

__all__ = ["Converted", "convert", "is_langchain_dump"]

_LANGCHAIN_TYPES = frozenset({"human", "ai", "tool", "system", "chat", "function"})
_LANGCHAIN_KEYS = frozenset({"additional_kwargs", "response_metadata", "tool_call_id"})


@dataclass(frozen=True)
class Converted:
    """A list as dicts in ``format``, and how to put pruned result texts back in its kind."""

    messages: list[Any]
    format: str | None
    back: Callable[[Mapping[str, str], list[Any]], list[Any]] | None  # None: keep the dicts


def is_langchain_dump(item: object) -> bool:
    """A LangChain message's ``model_dump()``: its ``type`` and LangChain's own keys."""
    return (
        isinstance(item, dict)
        and item.get("type") in _LANGCHAIN_TYPES
        and "content" in item
        and bool(_LANGCHAIN_KEYS & item.keys())
    )


def _module(item: object) -> str:
    return type(item).__module__.split(".")[0]


def convert(messages: list[Any]) -> Converted | None:
    """None for a list of plain message dicts (the formats ``transcript`` knows)."""
    if all(isinstance(m, dict) for m in messages):
        if messages and any(is_langchain_dump(m) for m in messages):
            return _via("filecache.adapters.langchain", messages)
        return None
    modules = {_module(m) for m in messages if not isinstance(m, dict)}
    if modules == {"langchain_core"}:
        return _via("filecache.adapters.langchain", messages)
    if modules == {"pydantic_ai"}:
        return _via("filecache.adapters.pydantic_ai", messages)
    dumped: list[Any] = []
    for index, item in enumerate(messages):
        if isinstance(item, dict):
            dumped.append(item)
        elif callable(getattr(item, "model_dump", None)) and _module(item) not in (
            "langchain_core",
            "pydantic_ai",
        ):
            dumped.append(item.model_dump(mode="json", exclude_none=True))
        else:
            raise TranscriptError(
                f"message {index}: a {type_name(item)} object, not a message; pass plain "
                "message dicts, SDK objects with model_dump(), LangChain messages or one "
                "pydantic-ai ModelMessage list (not mixed)"
            )
    return Converted(dumped, None, None)


def _via(adapter: str, messages: list[Any]) -> Converted:
    module = importlib.import_module(adapter)
    chat: list[Any] = module.to_chat(messages)

    def back(replacements: Mapping[str, str], _: list[Any]) -> list[Any]:
        replaced: list[Any] = module.replaced(messages, replacements)
        return replaced

    return Converted(chat, "openai", back)
