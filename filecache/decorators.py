"""Decorators for an agent's own file tools: ``read_tool``, ``edit_tool``, ``write_tool``.

``@session.read_tool`` (one conversation) or ``@cache.read_tool`` (the conversation bound with
``with cache.conversation(run_id):`` where the tool runs; see ``filecache.conversations``).
Both call the functions here with a *resolver*: a function of the tool's name that gives the
session a call answers from (the ``Session`` itself, or the one bound to the ``FileCache``
where the tool runs), asked once per call.
Sync and ``async def`` functions both work; an async tool's filecache work runs in a thread
(``asyncio.to_thread``), never on the event loop.

A decorated read tool is still called every time (its output is the content: no second read of
the file). filecache hashes the output, and when the model still holds that output for the same
arguments it answers with a FileRef, or with a diff against the previous output it holds.
``read_tool(offset="offset", limit="limit")`` says how arguments map to lines of the output
(``first_line=0`` for a 0-based offset): a ranged call then also runs the tool with offset and
limit at their defaults, and when its own output is exactly those lines of that whole output,
the call is answered as that range of the whole output, so a range inside a held whole read is
a FileRef. Read tools gain a visible ``fresh: bool = False`` parameter (in ``__signature__``
and the docstring's ``Args:``, which frameworks build their schemas from).

The call id: the ``call_id=`` keyword, else one the framework passes in (an argument with a
``tool_call_id`` attribute, or LangChain's ``InjectedToolCallId``; see ``tool_shape``), else a
generated ``fc-…`` id, and then the content answer starts with one tag line naming it, so that
a later FileRef's "your result fc-…" can be found.

Write and edit tools refuse content that carries filecache's own markers (a FileRef, a diff
header, a cleared-result placeholder): ``MarkerError``, raised before the tool runs, whose
message tells the model to read the file with ``fresh=true``. ``allow_markers=True`` turns this
off for a tool that legitimately writes such text.

Invariants:
- The wrapped function's output reaches the model unchanged (after the tag line, when there is
  one) unless an ``unchanged`` or ``diff`` answer is provably reconstructible from results the
  model still has; a range is answered from the whole output only when the tool's own output
  for the range equals those lines of it, byte for byte.
- A call that raises records nothing.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, overload

from filecache.core.edits import check_markers
from filecache.core.kinds import Tool
from filecache.core.render import render_result_tag
from filecache.core.text import render_lines, split_lines
from filecache.errors import FileCacheError
from filecache.fsio import read_bytes
from filecache.tool_shape import CallPlan, ToolShape, add_fresh_doc, fresh_parameter

if TYPE_CHECKING:
    from filecache.core.results import ReadResult
    from filecache.engine import Engine

__all__ = ["Resolver", "ToolSession", "edit_tool", "read_tool", "write_tool"]

F = TypeVar("F", bound=Callable[..., Any])
_CONTENT_KINDS = ("full", "partial", "symbol")


class ToolSession(Protocol):
    """What a decorated tool uses of the ``Session`` it answers from (``Session`` is above this
    module: it imports the decorators)."""

    @property
    def engine(self) -> Engine: ...
    def answer_output(
        self,
        key: str,
        path: str,
        output: str,
        *,
        fresh: bool = False,
        call_id: str | None = None,
        lines: tuple[int, int] | None = None,
    ) -> ReadResult: ...
    def record_write(self, path: str, tool: str, call_id: str | None = None) -> str: ...


Resolver = Callable[[str], ToolSession]
"""The session a call of the tool named by the argument answers from (module docstring)."""


def _checked(resolve: object) -> Resolver:
    if not callable(resolve):
        raise TypeError(
            "decorate with a filecache Session or FileCache (@session.read_tool, "
            f"@cache.read_tool), got {type(resolve).__name__}"
        )
    return cast(Resolver, resolve)


@overload
def read_tool(resolve: Resolver, fn: F, /) -> F: ...
@overload
def read_tool(
    resolve: Resolver,
    fn: None = None,
    /,
    *,
    path: str | None = None,
    offset: str | None = None,
    limit: str | None = None,
    first_line: int = 1,
) -> Callable[[F], F]: ...
def read_tool(
    resolve: Resolver,
    fn: Any = None,
    /,
    *,
    path: str | None = None,
    offset: str | None = None,
    limit: str | None = None,
    first_line: int = 1,
) -> Any:
    """Wrap a read tool ``fn(path, ...) -> str`` (sync or async).

    Args:
        resolve: the session a call answers from, by the tool's name (module docstring).
        fn: the tool (omit it to get a decorator with these options).
        path: the parameter naming the file (default: ``path``, ``file_path``, …, else the first).
        offset, limit: the parameters that select lines of the output (both need defaults).
        first_line: what ``offset`` counts from (1, or 0 for a 0-based offset).

    Raises:
        TypeError, ConfigError: at decoration, for something that cannot be wrapped.
    """
    if fn is None:
        return lambda f: read_tool(
            resolve, f, path=path, offset=offset, limit=limit, first_line=first_line
        )
    resolve = _checked(resolve)
    shape = ToolShape.of(
        fn, role="read", path=path, offset=offset, limit=limit, first_line=first_line
    )

    def plan_of(args: tuple[Any, ...], kwargs: dict[str, Any], cid: str | None) -> CallPlan | None:
        fresh = False if shape.own_fresh else bool(kwargs.pop("fresh", False))
        return shape.plan(args, kwargs, cid, fresh)

    if shape.is_async:

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, call_id: str | None = None, **kwargs: Any) -> Any:
            session = resolve(shape.name)
            plan = plan_of(args, kwargs, call_id)
            output = await fn(*args, **kwargs)
            if plan is None:
                return output
            whole = await _whole(fn, plan, output)
            return await asyncio.to_thread(_answer, shape, session, plan, output, whole)

        wrapper: Callable[..., Any] = async_wrapper
    else:

        @functools.wraps(fn)
        def sync_wrapper(*args: Any, call_id: str | None = None, **kwargs: Any) -> Any:
            session = resolve(shape.name)
            plan = plan_of(args, kwargs, call_id)
            output = _not_awaitable(shape, fn(*args, **kwargs))
            if plan is None:
                return output
            whole = _whole_sync(shape, plan, output)
            return _answer(shape, session, plan, output, whole)

        wrapper = sync_wrapper
    if not shape.own_fresh:
        wrapper.__signature__ = fresh_parameter(shape.signature)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {**getattr(fn, "__annotations__", {}), "fresh": bool}
        wrapper.__doc__ = add_fresh_doc(fn.__doc__)
    return wrapper


def _not_awaitable(shape: ToolShape, output: Any) -> Any:
    if inspect.isawaitable(output):
        if inspect.iscoroutine(output):
            output.close()
        raise TypeError(
            f"{shape.name} returned an awaitable but is not `async def`; define it with "
            "`async def` so the decorator awaits it"
        )
    return output


def _wants_whole(plan: CallPlan, output: Any) -> bool:
    return plan.whole_call is not None and isinstance(output, str) and "\x00" not in output


async def _whole(fn: Callable[..., Any], plan: CallPlan, output: Any) -> Any:
    if not _wants_whole(plan, output):
        return None
    assert plan.whole_call is not None
    args, kwargs = plan.whole_call
    return await fn(*args, **kwargs)


def _whole_sync(shape: ToolShape, plan: CallPlan, output: Any) -> Any:
    if not _wants_whole(plan, output):
        return None
    assert plan.whole_call is not None
    args, kwargs = plan.whole_call
    return _not_awaitable(shape, shape.fn(*args, **kwargs))


def _answer(shape: ToolShape, session: ToolSession, plan: CallPlan, output: Any, whole: Any) -> Any:
    if not isinstance(output, str) or "\x00" in output:
        return output  # not text that lines can carry (a NUL is the no-final-newline mark)
    answer = None
    if isinstance(whole, str) and "\x00" not in whole and plan.whole_key is not None:
        lines = split_lines(whole)
        span = shape.line_range(plan, len(lines))
        # Only when the tool's own output for the range is exactly those lines of the whole
        # output may the range be answered from (and referred to) the whole output.
        if span is not None and render_lines("", lines, *span, numbered=False) == output:
            answer = session.answer_output(
                plan.whole_key, plan.path, whole, fresh=plan.fresh, call_id=plan.call_id,
                lines=span,
            )  # fmt: skip
    if answer is None:
        answer = session.answer_output(
            plan.key, plan.path, output, fresh=plan.fresh, call_id=plan.call_id
        )
    if plan.call_id is None and answer.kind in _CONTENT_KINDS:
        return render_result_tag(answer.call_id, answer.path, answer.version) + answer.text
    return answer.text


# -- writes and edits ---------------------------------------------------------------------------


@overload
def write_tool(resolve: Resolver, fn: F, /) -> F: ...
@overload
def write_tool(
    resolve: Resolver,
    fn: None = None,
    /,
    *,
    path: str | None = None,
    allow_markers: bool = False,
) -> Callable[[F], F]: ...
def write_tool(
    resolve: Resolver,
    fn: Any = None,
    /,
    *,
    path: str | None = None,
    allow_markers: bool = False,
) -> Any:
    """Wrap a write tool ``fn(path, content, ...)``: recorded as a write; markers refused."""
    return _wrap_change(resolve, fn, "write", path, allow_markers)


@overload
def edit_tool(resolve: Resolver, fn: F, /) -> F: ...
@overload
def edit_tool(
    resolve: Resolver,
    fn: None = None,
    /,
    *,
    path: str | None = None,
    allow_markers: bool = False,
) -> Callable[[F], F]: ...
def edit_tool(
    resolve: Resolver,
    fn: Any = None,
    /,
    *,
    path: str | None = None,
    allow_markers: bool = False,
) -> Any:
    """Wrap an edit tool ``fn(path, old_string, new_string, ...)``: recorded; markers refused.

    Arguments whose names start with ``old`` are the text being replaced: a marker already in
    them may stay; any other string argument is new text."""
    return _wrap_change(resolve, fn, "edit", path, allow_markers)


def _wrap_change(
    resolve: Resolver, fn: Any, role: str, path: str | None, allow_markers: bool
) -> Any:
    if fn is None:
        return lambda f: _wrap_change(resolve, f, role, path, allow_markers)
    resolve = _checked(resolve)
    shape = ToolShape.of(fn, role=role, path=path)

    def guard(session: ToolSession, plan: CallPlan | None) -> None:
        if plan is not None and not allow_markers:
            _guard_markers(session, shape, plan, role)

    if shape.is_async:

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, call_id: str | None = None, **kwargs: Any) -> Any:
            session = resolve(shape.name)
            plan = shape.plan(args, kwargs, call_id, False)
            await asyncio.to_thread(guard, session, plan)
            output = await fn(*args, **kwargs)
            if plan is not None:
                await asyncio.to_thread(session.record_write, plan.path, role, plan.call_id)
            return output

        return async_wrapper

    @functools.wraps(fn)
    def sync_wrapper(*args: Any, call_id: str | None = None, **kwargs: Any) -> Any:
        session = resolve(shape.name)
        plan = shape.plan(args, kwargs, call_id, False)
        guard(session, plan)
        output = _not_awaitable(shape, fn(*args, **kwargs))
        if plan is not None:
            session.record_write(plan.path, role, plan.call_id)
        return output

    return sync_wrapper


def _strings(value: Any) -> list[tuple[str | None, str]]:
    """(argument name or None, text) for every string in ``value`` (lists, pairs, dicts)."""
    if isinstance(value, str):
        return [(None, value)]
    if isinstance(value, dict):
        return [(str(k) if n is None else n, s) for k, v in value.items() for n, s in _strings(v)]
    if isinstance(value, list | tuple):
        if len(value) == 2 and all(isinstance(v, str) for v in value):
            return [("old", value[0]), ("new", value[1])]  # an (old, new) pair
        return [pair for v in value for pair in _strings(v)]
    return []


def _guard_markers(session: ToolSession, shape: ToolShape, plan: CallPlan, role: str) -> None:
    old: list[str] = []
    new: list[str] = []
    for name, value in (plan.arguments or {}).items():
        if name == shape.path_name or name in shape.context_names:
            continue
        for inner, text in _strings(value):
            is_old = (inner or name).lower().startswith("old") and role == Tool.EDIT
            (old if is_old else new).append(text)
    if role == Tool.WRITE:
        old.append(_current_text(session, plan.path))
    check_markers(plan.path or "the file", "\n".join(old), "\n".join(new))


def _current_text(session: ToolSession, path: str) -> str:
    """The file's text now, if it is a readable text file in the root (for the marker count)."""
    try:  # fsio's read: no link followed, no FIFO opened, the size checked on the open file
        loc = session.engine.paths.locate(path)
        text = read_bytes(loc, session.engine.settings.max_file_bytes).decode("utf-8")
        return text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text read it
    except (FileCacheError, OSError, UnicodeDecodeError, ValueError):
        return ""
