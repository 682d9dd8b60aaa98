"""Message lists that hold SDK objects instead of plain dicts, for ``prune_messages``.

- LangChain messages (``langchain_core.messages`` objects, or their ``model_dump()`` dicts,
  recognised by their ``type`` of ``human``/``ai``/``tool``/``system`` with LangChain's own
  keys) and pydantic-ai ``ModelMessage`` lists are converted to OpenAI chat dicts by their
  codecs (``filecache.prune.codecs.langchain_messages`` / ``.pydantic_ai_messages``), pruned,
  and given back as objects of the same kind with only the pruned results' contents replaced.
  An adapter adds another framework with ``register_sdk`` (the top-level module its message
  objects come from, and a function that loads its codec).
- Any other object with ``model_dump`` (OpenAI or Anthropic SDK messages and items) is dumped
  (``mode="json"``, ``exclude_none``) and pruned as the dicts it dumps to; the result is dicts.
- Anything else that is not a dict is refused with a ``TranscriptError`` naming its index:
  never guessed at.

Pure dispatch: a framework (and its codec) is imported only when its objects are present. The
registry is filled at import time and only read afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from filecache.errors import TranscriptError
from filecache.prune.message_blocks import type_name
from filecache.prune.transcript import needs_convert

__all__ = ["Converted", "SdkCodec", "convert", "register_sdk"]


@dataclass(frozen=True)
class Converted:
    """A list as dicts in ``format``, and how to put pruned result texts back in its kind."""

    messages: list[Any]
    format: str | None
    back: Callable[[Mapping[str, str], list[Any]], list[Any]] | None  # None: keep the dicts
    # a superseded call's new arguments (call id -> JSON object text) put back in its kind;
    # None (with ``back``): the codec cannot, so no input of the list is replaced
    back_inputs: Callable[[Mapping[str, str], list[Any]], list[Any]] | None = None


class SdkCodec(Protocol):
    """A framework's messages as OpenAI chat dicts, and pruned texts put back in its kind.

    A codec may also have ``replaced_inputs(messages, inputs)``: the messages with the arguments
    of each call in ``inputs`` (call id -> a JSON object's text) replaced; without it, pruning
    never replaces a superseded call's input in that framework's lists."""

    def to_chat(self, messages: list[Any], /) -> list[dict[str, Any]]: ...

    def replaced(self, messages: list[Any], texts: Mapping[str, str], /) -> list[Any]: ...


def _langchain() -> SdkCodec:
    from filecache.prune.codecs import langchain_messages

    return langchain_messages


def _pydantic_ai() -> SdkCodec:
    from filecache.prune.codecs import pydantic_ai_messages

    return pydantic_ai_messages


_SDKS: dict[str, Callable[[], SdkCodec]] = {
    "langchain_core": _langchain,
    "pydantic_ai": _pydantic_ai,
}


def register_sdk(module: str, load: Callable[[], SdkCodec]) -> None:
    """Convert lists of objects from top-level package ``module`` with the codec ``load`` gives.

    ``load`` runs when such a list is pruned (so registering imports nothing). Registering the
    same ``load`` again is a no-op; another one for a taken ``module`` is refused
    (``ValueError``).
    """
    if _SDKS.setdefault(module, load) is not load:
        raise ValueError(f"message objects from {module!r} already have a codec")


def _module(item: object) -> str:
    return type(item).__module__.split(".")[0]


def convert(messages: list[Any]) -> Converted | None:
    """None for a list of plain message dicts (the formats ``transcript`` knows:
    ``transcript.needs_convert`` is False)."""
    if not needs_convert(messages):
        return None
    if all(isinstance(m, dict) for m in messages):  # LangChain's dumps among them
        return _via(_langchain(), messages)
    modules = {_module(m) for m in messages if not isinstance(m, dict)}
    if len(modules) == 1 and (only := next(iter(modules))) in _SDKS:
        return _via(_SDKS[only](), messages)
    dumped: list[Any] = []
    for index, item in enumerate(messages):
        if isinstance(item, dict):
            dumped.append(item)
        elif callable(getattr(item, "model_dump", None)) and _module(item) not in _SDKS:
            dumped.append(item.model_dump(mode="json", exclude_none=True))
        else:
            raise TranscriptError(
                f"message {index}: a {type_name(item)} object, not a message; pass plain "
                "message dicts, SDK objects with model_dump(), LangChain messages or one "
                "pydantic-ai ModelMessage list (not mixed)"
            )
    return Converted(dumped, None, None)


def _via(codec: SdkCodec, messages: list[Any]) -> Converted:
    chat: list[Any] = codec.to_chat(messages)

    def back(replacements: Mapping[str, str], _: list[Any]) -> list[Any]:
        return codec.replaced(messages, replacements)

    put_inputs: Callable[[list[Any], Mapping[str, str]], list[Any]] | None = getattr(
        codec, "replaced_inputs", None
    )
    if put_inputs is None:
        return Converted(chat, "openai", back)

    def back_inputs(inputs: Mapping[str, str], out: list[Any]) -> list[Any]:
        assert put_inputs is not None
        return put_inputs(out, inputs)

    return Converted(chat, "openai", back, back_inputs)
