"""Decorators for an agent's own file tools: ``@session.read_tool``, ``edit_tool``, ``write_tool``.

A decorated read tool is still called every time (its output is the content: no second read of
the file). filecache hashes the output, and when the model still holds that output for the same
arguments it answers with a FileRef, or with a diff against the previous output it holds.

Invariant: the wrapped function's output reaches the model unchanged unless an ``unchanged`` or
``diff`` answer is provably reconstructible from results the model still has.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from filecache.cache import Session

__all__ = ["wrap_read_tool", "wrap_write_tool"]

F = TypeVar("F", bound=Callable[..., Any])

_PATH_NAMES = ("path", "file_path", "filepath", "filename", "file")


def _bound(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)
    except (TypeError, ValueError):
        return {"args": list(args), **kwargs}


def _path_of(arguments: dict[str, Any]) -> str:
    for name in _PATH_NAMES:
        if name in arguments:
            return str(arguments[name])
    first = next(iter(arguments.values()), "")
    return str(first)


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def wrap_read_tool(session: Session, fn: F) -> F:
    """Wrap a read tool ``fn(path, ...) -> str``. Adds keywords ``call_id`` and ``fresh``
    (``fresh`` is passed through instead when ``fn`` takes it itself)."""
    own_fresh = _accepts(fn, "fresh")

    @functools.wraps(fn)
    def wrapper(*args: Any, call_id: str | None = None, **kwargs: Any) -> Any:
        popped = False if own_fresh else bool(kwargs.pop("fresh", False))
        output = fn(*args, **kwargs)
        if not isinstance(output, str) or "\x00" in output:
            return output  # not text that lines can carry (a NUL is the no-final-newline mark)
        arguments = _bound(fn, args, kwargs)
        own = arguments.pop("fresh", False)  # fn's own flag, by keyword or by position
        fresh = bool(own) if own_fresh else popped
        key = f"{fn.__qualname__}{json.dumps(arguments, sort_keys=True, default=str)}"
        path = _path_of(arguments)
        return session.answer_output(key, path, output, fresh=fresh, call_id=call_id).text

    return cast(F, wrapper)


def wrap_write_tool(session: Session, fn: F, tool: str) -> F:
    """Wrap a write or edit tool: its output is returned as is, and the call is recorded."""

    @functools.wraps(fn)
    def wrapper(*args: Any, call_id: str | None = None, **kwargs: Any) -> Any:
        output = fn(*args, **kwargs)
        session.record_write(_path_of(_bound(fn, args, kwargs)), tool, call_id)
        return output

    return cast(F, wrapper)
