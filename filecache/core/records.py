"""``record``: a frozen dataclass built without compiling code, for the classes on a read's start.

``dataclasses.dataclass(frozen=True)`` writes ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` as source and compiles each one when the class
is made (on Python 3.11, about 4.6 million instructions a class, ten times what the rest of it
costs; a CLI read builds 21 such classes before it does anything). ``record`` lets
``dataclasses`` collect the fields (``fields``, ``asdict``, ``replace`` and ``is_dataclass`` work
as on any dataclass) and adds the same six methods as closures over the fields, compiled once
with this module.

Invariants (``tests/core/test_records.py`` compares each with ``dataclass(frozen=True)``):
- Instances keep their fields in ``__dict__`` (in field order; no ``__slots__``).
- ``__init__`` takes the fields in order (positionally unless ``kw_only``, always by keyword),
  fills defaults and default factories, then calls ``__post_init__`` if the class has one; a
  missing, repeated or unknown argument is a ``TypeError``.
- ``__repr__`` is ``Name(field=value, ...)`` (the class's ``__qualname__``); ``__eq__`` compares
  the fields' tuples of two instances of the same class; ``__hash__`` hashes that tuple (with
  ``eq=False`` neither is added: identity, as ``dataclass(eq=False)``).
- Assigning or deleting a field (or any attribute of an instance of the class itself) raises
  ``dataclasses.FrozenInstanceError``.
- Fields with ``init=False``, ``InitVar`` and per-field ``compare``/``hash``/``repr`` settings
  are refused when the class is made: this decorator supports what its classes use.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["record"]

_C = TypeVar("_C", bound=type)
_MISSING: Any = dataclasses.MISSING


@overload
def record(cls: _C, /) -> _C: ...
@overload
def record(*, kw_only: bool = False, eq: bool = True) -> Callable[[_C], _C]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: Any = None, /, *, kw_only: bool = False, eq: bool = True) -> Any:
    """Make ``cls`` a frozen dataclass (``@record`` or ``@record(kw_only=True, eq=False)``)."""

    def wrap(cls: _C) -> _C:
        return _build(cls, kw_only=kw_only, eq=eq)

    return wrap if cls is None else wrap(cls)


def _build(cls: _C, *, kw_only: bool, eq: bool) -> _C:
    dataclasses.dataclass(init=False, repr=False, eq=False, kw_only=kw_only)(cls)  # in place
    fields = dataclasses.fields(cls)
    for f in fields:
        if not (f.init and f.repr and f.compare and f.hash is None):
            raise TypeError(f"{cls.__qualname__}.{f.name}: record fields take defaults only")
    names = tuple(f.name for f in fields)
    positional = tuple(f.name for f in fields if not f.kw_only)
    defaults = {f.name: f.default for f in fields if f.default is not _MISSING}
    factories: dict[str, Callable[[], Any]] = {}
    for f in fields:
        factory: Any = f.default_factory
        if factory is not _MISSING:
            factories[f.name] = factory
    post_init = getattr(cls, "__post_init__", None) is not None
    qualname = cls.__qualname__
    setter = object.__setattr__
    frozen_error = dataclasses.FrozenInstanceError

    name_set = frozenset(names)
    required = frozenset(n for n in names if n not in defaults and n not in factories)
    factory_items = tuple(factories.items())

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            if len(args) > len(positional):
                raise TypeError(
                    f"{qualname}.__init__() takes {len(positional) + 1} positional arguments "
                    f"but {len(args) + 1} were given"
                )
            for name, value in zip(positional, args, strict=False):
                if name in kwargs:
                    raise TypeError(
                        f"{qualname}.__init__() got multiple values for argument {name!r}"
                    )
                kwargs[name] = value
        if not name_set.issuperset(kwargs):
            unknown = next(k for k in kwargs if k not in name_set)
            raise TypeError(f"{qualname}.__init__() got an unexpected keyword argument {unknown!r}")
        if not required.issubset(kwargs):
            missing = next(n for n in names if n in required and n not in kwargs)
            raise TypeError(f"{qualname}.__init__() missing required argument: {missing!r}")
        for name, factory in factory_items:
            if name not in kwargs:
                kwargs[name] = factory()
        given = {**defaults, **kwargs}
        self.__dict__.update({n: given[n] for n in names})  # in field order, as dataclasses
        if post_init:
            self.__post_init__()

    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    values: Callable[[Any], Any] = (  # the fields' tuple, built in C
        operator.attrgetter(*names)
        if len(names) > 1
        else lambda obj: tuple(getattr(obj, n) for n in names)
    )

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(values(self) == values(other))

    def __hash__(self: Any) -> int:
        return hash(values(self))

    def __setattr__(self: Any, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise frozen_error(f"cannot assign to field {name!r}")
        setter(self, name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise frozen_error(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    methods: dict[str, Callable[..., Any]] = {
        "__init__": __init__,
        "__repr__": __repr__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
    }
    if eq:
        methods.update(__eq__=__eq__, __hash__=__hash__)
    for name, method in methods.items():
        if name in cls.__dict__:
            raise TypeError(f"{qualname} defines {name}; a record writes its own")
        method.__qualname__ = f"{qualname}.{name}"
        setattr(cls, name, method)
    return cls
