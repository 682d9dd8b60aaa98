"""What a decorated tool's signature says: its path, its line arguments, its framework context.

Read once, at decoration time (``ToolShape.of``), so that a tool filecache cannot handle fails
there with a clear error rather than at the model's first call. Per call, ``ToolShape.plan``
binds the arguments and says what the call is: its cache key, the path, the call id the
framework supplied, ``fresh``, and for a tool that maps ``offset``/``limit`` to lines, the range.

Framework context arguments never enter a cache key (they differ on every call): a parameter
annotated with pydantic-ai's ``RunContext``, openai-agents' ``RunContextWrapper``/``ToolContext``,
LangChain's ``ToolRuntime`` or an ``Injected…`` marker, and any argument whose value has a
``tool_call_id`` attribute. Such a value's ``tool_call_id`` (or the value of a parameter
annotated with LangChain's ``InjectedToolCallId``) is the call id filecache records and names.

Pure: no I/O, no session.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from filecache.core.kinds import Tool
from filecache.errors import ConfigError

__all__ = ["CallPlan", "ToolShape", "add_fresh_doc", "fresh_parameter"]

PATH_NAMES = ("path", "file_path", "filepath", "filename", "file", "target_file")
_CONTEXT = re.compile(
    r"\b(RunContext|RunContextWrapper|ToolContext|ToolRuntime|Injected[A-Z]\w*)\b"
)
_CALL_ID = re.compile(r"\bInjectedToolCallId\b")
FRESH_DOC = (
    "Send the full output again even if you already have it (use when the result a "
    "FileRef or diff names is no longer in your context)."
)


@dataclass(frozen=True)
class CallPlan:
    """One call, bound: what the wrapper needs to answer it."""

    key: str  # the cache key of the output the call returns
    whole_key: str | None  # a ranged call: the key of the whole-output call
    whole_call: tuple[tuple[Any, ...], dict[str, Any]] | None  # its (args, kwargs)
    path: str
    call_id: str | None  # supplied by the caller or the framework; None: generated
    fresh: bool
    offset: Any = None
    limit: Any = None
    arguments: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ToolShape:
    """A decorated function's signature, read once."""

    fn: Callable[..., Any]
    name: str
    signature: inspect.Signature
    is_async: bool
    path_name: str
    context_names: frozenset[str]
    id_names: frozenset[str]
    own_fresh: bool
    offset_name: str | None = None
    limit_name: str | None = None
    first_line: int = 1

    @classmethod
    def of(
        cls,
        fn: Any,
        *,
        role: str,
        path: str | None = None,
        offset: str | None = None,
        limit: str | None = None,
        first_line: int = 1,
    ) -> ToolShape:
        """Read ``fn``'s shape; ``TypeError``/``ConfigError`` when filecache cannot wrap it."""
        what = f"@{role}_tool"
        if inspect.isclass(fn) or not callable(fn):
            raise TypeError(f"{what} decorates a function, got {type(fn).__name__}: {fn!r}")
        if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
            raise TypeError(
                f"{what}: {_name(fn)} is a generator; filecache caches a tool's whole output, "
                "so the tool must return it (a str)"
            )
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{what}: cannot read the signature of {_name(fn)} ({exc})") from exc
        params = signature.parameters
        context, ids = _contexts(fn, signature)
        plain = [n for n, p in params.items() if n not in context and p.kind not in _VAR]
        if path is None:
            path = next((n for n in PATH_NAMES if n in plain), plain[0] if plain else None)
            if path is None:
                raise TypeError(f"{what}: {_name(fn)} takes no argument that could name the file")
        elif path not in plain:
            raise ConfigError(f"{what}: {_name(fn)} has no parameter {path!r} (path=)")
        for option, value in (("offset", offset), ("limit", limit)):
            if value is None:
                continue
            if role != Tool.READ:
                raise ConfigError(f"{what}: {option}= applies to read tools only")
            if value not in plain:
                raise ConfigError(f"{what}: {_name(fn)} has no parameter {value!r} ({option}=)")
            if params[value].default is inspect.Parameter.empty:
                raise ConfigError(
                    f"{what}: {_name(fn)}'s {value!r} needs a default (the whole output is the "
                    "call with offset and limit left at their defaults)"
                )
        if first_line not in (0, 1):
            raise ConfigError(f"{what}: first_line must be 0 or 1, got {first_line!r}")
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
        )
        return cls(
            fn, _name(fn), signature, is_async, path, context, ids, "fresh" in params,
            offset, limit, first_line,
        )  # fmt: skip

    def plan(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], call_id: str | None, fresh: bool
    ) -> CallPlan | None:
        """Bind one call; None when the arguments do not bind (the function then raises)."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        if self.own_fresh:
            fresh = bool(arguments.get("fresh", False))
        call_id = call_id or self._framework_id(arguments)
        keyed = {
            k: v
            for k, v in arguments.items()
            if k not in self.context_names and k != "fresh" and not hasattr(v, "tool_call_id")
        }
        key = f"{self.name}{_canonical(keyed)}"
        path = str(arguments.get(self.path_name, ""))
        whole_key = whole_call = None
        offset = arguments.get(self.offset_name) if self.offset_name else None
        limit = arguments.get(self.limit_name) if self.limit_name else None
        names = [n for n in (self.offset_name, self.limit_name) if n]
        if names:
            defaults = {n: self.signature.parameters[n].default for n in names}
            ranged = any(arguments[n] != defaults[n] for n in names)
            unranged = {k: v for k, v in keyed.items() if k not in names}
            whole_key = f"{self.name}{_canonical(unranged)}"
            if ranged:
                whole = self.signature.bind(*args, **kwargs)
                whole.arguments.update(defaults)
                whole_call = (whole.args, whole.kwargs)
            else:
                key = whole_key
        return CallPlan(key, whole_key, whole_call, path, call_id, fresh, offset, limit, arguments)

    def line_range(self, plan: CallPlan, total: int) -> tuple[int, int] | None:
        """Lines ``(start, end)`` of the whole output that a ranged call asks for, or None."""
        offset, limit = plan.offset, plan.limit
        if offset is None:
            start = 1
        elif isinstance(offset, int) and not isinstance(offset, bool):
            start = offset - self.first_line + 1
        else:
            return None
        if limit is None:
            end = total
        elif isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1:
            end = min(total, start + limit - 1)
        else:
            return None
        if start < 1 or start > total or end < start:
            return None
        return start, end

    def _framework_id(self, arguments: Mapping[str, Any]) -> str | None:
        for name in self.id_names:
            value = arguments.get(name)
            if isinstance(value, str) and value:
                return value
        for value in arguments.values():
            found = getattr(value, "tool_call_id", None)
            if isinstance(found, str) and found:
                return found
        return None


_VAR = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def _contexts(fn: Any, signature: inspect.Signature) -> tuple[frozenset[str], frozenset[str]]:
    """(parameters that are framework context, parameters that carry the tool call id)."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to the annotation text
        hints = {}
    context, ids = set(), set()
    for name, param in signature.parameters.items():
        annotation = hints.get(name, param.annotation)
        if annotation is inspect.Parameter.empty:
            continue
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if _CALL_ID.search(text):
            ids.add(name)
            context.add(name)
        elif _CONTEXT.search(text):
            context.add(name)
    return frozenset(context), frozenset(ids)


def _canonical(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, default=str)


def fresh_parameter(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` with a keyword ``fresh: bool = False`` (before any ``**kwargs``)."""
    params = list(signature.parameters.values())
    fresh = inspect.Parameter(
        "fresh", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool
    )
    at = len(params) - (1 if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD else 0)
    return signature.replace(parameters=params[:at] + [fresh] + params[at:])


_ARGS_HEADER = re.compile(r"^([ \t]*)(Args|Arguments|Parameters):[ \t]*$")


def add_fresh_doc(doc: str | None) -> str:
    """A Google-style docstring with ``fresh`` documented in its ``Args:`` section (added)."""
    lines = (doc or "").expandtabs().split("\n")
    for i, line in enumerate(lines):
        found = _ARGS_HEADER.match(line)
        if not found:
            continue
        indent = len(found.group(1))
        last, item = i, None
        for j in range(i + 1, len(lines)):
            row = lines[j]
            if not row.strip():
                continue
            depth = len(row) - len(row.lstrip())
            if depth <= indent:
                break
            item = depth if item is None else min(item, depth)
            last = j
        pad = " " * (item if item is not None else indent + 4)
        return "\n".join(lines[: last + 1] + [f"{pad}fresh: {FRESH_DOC}"] + lines[last + 1 :])
    rest = [row for row in lines[1:] if row.strip()]
    pad = " " * min((len(r) - len(r.lstrip()) for r in rest), default=0)
    body = (doc or "").rstrip()
    head = f"{body}\n\n" if body else ""
    return f"{head}{pad}Args:\n{pad}    fresh: {FRESH_DOC}\n"
