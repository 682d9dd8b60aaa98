"""What the framework adapters share: the session a call answers from, filecache's file tools
as plain Python functions generated from ``TOOL_SPECS``, pruning a history through a message
codec, and guarded imports.

Each adapter (``pydantic_ai``, ``openai_agents``, ``langchain``, ``smolagents``,
``mini_swe_agent``) turns these into its framework's own tools and history hook. The tool
functions (``tool_functions``) have one parameter per ``TOOL_SPECS`` parameter (its type, its
default) and ``tool_docstring`` as their docstring, plus the parameter by which the framework
hands over its call id (``CallIdParam``), so FileRefs name the framework's own tool call ids.
Every call goes through ``filecache.tools.run_tool``, the one dispatcher.

Invariants:
- A call answers from the ``Session`` given, or from the conversation bound for the
  ``FileCache`` given (``filecache.conversations``); never from another conversation's.
- A tool call the model got wrong (a bad path, an edit that does not match, content carrying
  filecache's markers) returns the error's one-line text, prefixed ``Error: `` once (by
  ``run_tool``): the model can act on it, the agent loop goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from filecache.conversations import current_session
from filecache.core.render import render_result_tag
from filecache.tools import FILE_TOOL_SPECS, Param, ToolSpec, run_tool, tool_docstring

if TYPE_CHECKING:
    from filecache.cache import FileCache
    from filecache.prune.pruning import PrunePolicy
    from filecache.prune.sdk_messages import SdkCodec
    from filecache.session import Session

__all__ = [
    "CallIdParam",
    "prune_chat",
    "prune_with",
    "resolve",
    "run_file_tool",
    "run_file_tool_async",
    "tool_function",
    "tool_functions",
]

_HEADER = re.compile(r"\[[^\n]*, xxh3 ([0-9a-f]{8})\]\n")  # a content answer's header
_TYPES: dict[str, type] = {"string": str, "integer": int, "boolean": bool}


@dataclass(frozen=True)
class CallIdParam:
    """How a framework hands a tool its call id: a parameter of the tool function.

    Attributes:
        name: the parameter's name (``ctx``, ``tool_call_id``).
        annotation: its annotation, by which the framework recognises it (``RunContext[Any]``,
            ``Annotated[str, InjectedToolCallId]``).
        first: before the tool's own parameters (a context object) or after its required ones.
        call_id: the call id from the parameter's value (``ctx.tool_call_id``; the value).
    """

    name: str
    annotation: Any
    first: bool
    call_id: Callable[[Any], str | None]


def _parameter(param: Param) -> inspect.Parameter:
    kind = _TYPES[param.type]
    if param.required:
        return inspect.Parameter(param.name, _KEYWORD, annotation=kind)
    if param.default is None:
        return inspect.Parameter(param.name, _KEYWORD, annotation=kind | None, default=None)
    return inspect.Parameter(param.name, _KEYWORD, annotation=kind, default=param.default)


_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD


def tool_function(
    target: Session | FileCache,
    spec: ToolSpec,
    *,
    call_id: CallIdParam | None = None,
    is_async: bool = False,
) -> Callable[..., Any]:
    """One of filecache's file tools as a plain function a framework can wrap.

    Its signature, annotations, ``__name__`` and ``__doc__`` come from ``spec`` (plus
    ``call_id``'s parameter); a call runs ``run_tool`` (``is_async``: in a thread, off the event
    loop) and returns the tool's text.
    """
    params = [_parameter(p) for p in spec.params]
    if call_id is not None:
        extra = inspect.Parameter(call_id.name, _KEYWORD, annotation=call_id.annotation)
        at = 0 if call_id.first else sum(1 for p in params if p.default is inspect.Parameter.empty)
        params.insert(at, extra)
    signature = inspect.Signature(params, return_annotation=str)

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        if call_id is None:
            return values, None
        return values, call_id.call_id(values.pop(call_id.name))

    def call(*args: Any, **kwargs: Any) -> str:
        values, cid = arguments(args, kwargs)
        return run_file_tool(target, spec.name, values, cid)

    async def acall(*args: Any, **kwargs: Any) -> str:
        values, cid = arguments(args, kwargs)
        return await run_file_tool_async(target, spec.name, values, cid)

    fn: Any = acall if is_async else call
    fn.__name__ = fn.__qualname__ = spec.name
    fn.__doc__ = tool_docstring(spec)
    fn.__signature__ = signature
    fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": str}
    return cast("Callable[..., Any]", fn)


def tool_functions(
    target: Session | FileCache, *, call_id: CallIdParam | None = None, is_async: bool = False
) -> list[Callable[..., Any]]:
    """``read_file``, ``write_file``, ``edit_file`` (``FILE_TOOL_SPECS``) as ``tool_function``s."""
    return [
        tool_function(target, spec, call_id=call_id, is_async=is_async) for spec in FILE_TOOL_SPECS
    ]


def resolve(target: Session | FileCache, what: str = "this tool") -> Session:
    """The session to answer from: ``target`` itself, or the conversation bound for it."""
    from filecache.cache import FileCache
    from filecache.session import Session

    if isinstance(target, Session):
        return target
    if isinstance(target, FileCache):  # the session bound to it here
        return cast("Session", current_session(target, what))
    raise TypeError(f"expected a filecache Session or FileCache, got {type(target).__name__}")


def run_file_tool(
    target: Session | FileCache, name: str, arguments: Mapping[str, Any], call_id: str | None
) -> str:
    """Run filecache's ``read_file``/``write_file``/``edit_file``; errors come back as text."""
    args = {k: v for k, v in arguments.items() if v is not None}
    tag_id = None
    if call_id is None and name == "read_file":  # the framework gives none: name it ourselves
        call_id = tag_id = "fc-" + os.urandom(5).hex()
    output = run_tool(resolve(target, name), name, args, call_id)
    if output.is_error:
        return output.text  # "Error: ..." (run_tool's prefix; never a second one)
    header = _HEADER.match(output.text)
    if tag_id is not None and header is not None:  # content: say which id a FileRef will name
        tag = render_result_tag(tag_id, str(args.get("path", "")), "xxh3:" + header.group(1))
        return tag + output.text
    return output.text


async def run_file_tool_async(
    target: Session | FileCache, name: str, arguments: Mapping[str, Any], call_id: str | None
) -> str:
    """``run_file_tool`` off the event loop (the session is resolved here, in the task)."""
    session = resolve(target, name)
    return await asyncio.to_thread(run_file_tool, session, name, arguments, call_id)


def prune_chat(
    chat: list[dict[str, Any]], session: Session, policy: PrunePolicy | None
) -> Mapping[str, str]:
    """Prune a history converted to OpenAI chat dicts: ``{call id: new result text}``."""
    from filecache.prune.pruner import prune_messages

    return prune_messages(chat, session=session, policy=policy, format="openai").plan.replacements


def prune_with(
    codec: SdkCodec,
    messages: list[Any],
    target: Session | FileCache,
    policy: PrunePolicy | None = None,
) -> list[Any]:
    """A framework's history with the results a prune pass clears or degrades replaced:
    ``codec.to_chat``, ``prune_chat``, ``codec.replaced`` (the input list itself when nothing
    changes). What each adapter's ``prune_history`` runs."""
    session = resolve(target, "prune_history")
    texts = prune_chat(codec.to_chat(messages), session, policy)
    return codec.replaced(messages, texts) if texts else messages
