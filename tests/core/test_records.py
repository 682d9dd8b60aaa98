"""``record`` behaves as ``dataclass(frozen=True)``: the same class body built both ways gives the
same construction, errors, repr, equality, hash, frozenness and ``dataclasses`` helpers."""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from filecache.core.records import record


def _pair(kw_only: bool) -> tuple[type[Any], type[Any]]:
    """The same body as a stdlib frozen dataclass and as a record."""

    def body() -> type[Any]:
        class Row:
            """A row."""

            a: int
            b: str
            c: str | None = None
            d: tuple[str, ...] = ()
            e: float = field(default_factory=time.time)
            f: list[int] = field(default_factory=list)

            def __str__(self) -> str:
                return f"row {self.a}"

        return Row

    return dataclass(frozen=True, kw_only=kw_only)(body()), record(kw_only=kw_only)(body())


CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {"a": 1, "b": "x"}),
    ((), {"a": 1, "b": "x", "c": "y", "d": ("p",), "e": 2.5, "f": [3]}),
    ((1, "x"), {}),
    ((1, "x", "y", ("q",), 1.0, [1], 9), {}),
    ((1,), {"a": 2, "b": "x"}),
    ((), {"a": 1}),
    ((), {"a": 1, "b": "x", "z": 0}),
    ((), {"b": "x"}),
]


def _outcome(make: Callable[[], Any]) -> tuple[str, Any]:
    try:
        obj = make()
    except TypeError:
        return ("TypeError", None)
    return ("ok", {k: v for k, v in dataclasses.asdict(obj).items() if k != "e"})


@pytest.mark.parametrize("kw_only", [False, True])
@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_construction_and_its_errors_match(
    kw_only: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    std, rec = _pair(kw_only)
    assert _outcome(lambda: rec(*args, **kwargs)) == _outcome(lambda: std(*args, **kwargs))


@pytest.mark.parametrize("kw_only", [False, True])
def test_repr_eq_hash_frozen_and_helpers_match(kw_only: bool) -> None:
    std, rec = _pair(kw_only)
    s = std(a=1, b="x", e=1.0)
    r = rec(a=1, b="x", e=1.0)
    assert repr(r) == repr(s).replace(std.__qualname__, rec.__qualname__)
    assert str(r) == str(s) == "row 1"
    assert r == rec(a=1, b="x", e=1.0) and r != rec(a=2, b="x", e=1.0) and r != s
    assert rec(a=1, b="x", e=1.0, f=[]) == r and r.f is not rec(a=1, b="x", e=1.0).f
    assert hash(rec(a=1, b="x", e=1.0, d=("p",), f=())) == hash((1, "x", None, ("p",), 1.0, ()))
    for obj in (s, r):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.a = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.new = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            del obj.b
    assert dataclasses.is_dataclass(r)
    assert [f.name for f in dataclasses.fields(r)] == [f.name for f in dataclasses.fields(s)]
    assert dataclasses.replace(r, b="y") == rec(a=1, b="y", e=1.0)
    copied = copy.deepcopy(rec(a=1, b="x", e=1.0, f=[1]))  # pickle's protocol (a local class)
    assert copied == rec(a=1, b="x", e=1.0, f=[1]) and copy.copy(r) == r
    assert rec.__match_args__ == std.__match_args__


def test_post_init_runs_and_eq_false_keeps_identity() -> None:
    seen: list[int] = []

    @record(eq=False)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            seen.append(self.n)
            if self.n < 0:
                raise ValueError("negative")

    one = Checked(3)
    assert one == one and {one: 1}[one] == 1 and Checked(3) != one
    assert seen[-1] == 3
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


def test_what_it_does_not_support_is_refused() -> None:
    with pytest.raises(TypeError, match="defaults only"):

        @record
        class Hidden:
            a: int = field(default=0, repr=False)

    with pytest.raises(TypeError, match="writes its own"):

        @record
        class Own:
            a: int

            def __eq__(self, other: object) -> bool:
                return True

            __hash__ = None  # type: ignore[assignment]
