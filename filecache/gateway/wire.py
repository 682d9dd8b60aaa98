"""A request body's JSON: parsed, and serialized again (pure).

orjson (the ``gateway`` extra) when it is installed, else the standard library; the bytes are
the same either way, so the body the upstream sees does not depend on which one ran (its
prompt cache keys on those bytes, across every request of a conversation):
``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` encoded as UTF-8, with the
input's key order.

Invariants:
- ``dumps(value, fast)`` equals the standard library's bytes. orjson writes strings, ints and
  most floats as the standard library does; it differs for floats of magnitude below 1e-4
  (``0.00001`` for ``1e-05``, ``1e-7`` for ``1e-07``), so an output where such a number may
  stand (``_may_differ``) is serialized again by the standard library. NaN and infinities:
  orjson cannot read them, so such a body is parsed by the standard library, and ``fast`` is
  False (orjson would write them as ``null``).
- ``loads`` accepts what ``json.loads`` accepts and gives equal values, but one: orjson
  refuses NaN and lone surrogates (the standard library reads those bodies), and reads an
  integer beyond 64 bits as a float; ``lost_integers`` tells when that may have happened, and
  the caller parses the body again with ``exact``.
"""

from __future__ import annotations

import json
import re
from types import ModuleType
from typing import Any

__all__ = ["FAST", "dumps", "loads", "lost_integers"]

_orjson: ModuleType | None
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - the gateway extra installs it
    _orjson = None

FAST = _orjson is not None
"""Whether orjson is installed (the bytes are the same either way; only the time differs)."""

_E_MINUS = re.compile(rb"e-[0-9]")  # a literal first: the regex engine scans for it fast
_DIGITS = frozenset(b"0123456789")


def _may_differ(out: bytes) -> bool:
    """Whether orjson may have written a float otherwise than the standard library: a float
    below 1e-4 in magnitude, which orjson writes ``0.0000…`` or ``…Ne-N``. Text holding those
    characters also answers True; it only costs the standard library's time."""
    if b"0.0000" in out:
        return True
    return any(m.start() and out[m.start() - 1] in _DIGITS for m in _E_MINUS.finditer(out))


_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_RUN = b"0" * 19


def _long_digits(body: bytes | str) -> bool:
    """Whether ``body`` holds 19 digits in a row: a number there may lie outside 64 bits, which
    orjson reads as a float (the standard library as the integer). Text holding such a run
    also answers True; it only costs the standard library's time."""
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    return _RUN in data.translate(_ZEROS)


def lost_integers(out: bytes, body: bytes | str) -> bool:
    """Whether orjson may have read an integer of ``body`` beyond 64 bits as a float, which
    ``out`` (``dumps`` of what came of it) then shows as ``…e+NN``: parse ``body`` again with
    ``loads(body, exact=True)``. Cheap when ``out`` holds no ``e+`` after a digit (the usual
    case: the slower check of ``body`` runs only then)."""
    at = out.find(b"e+")
    while at > 0:
        if out[at - 1] in _DIGITS:
            return _long_digits(body)
        at = out.find(b"e+", at + 2)
    return False


def loads(body: bytes | str, exact: bool = False) -> tuple[Any, bool]:
    """The parsed body and whether ``dumps`` may use orjson for it; ``exact``: the standard
    library's parse (``lost_integers``).

    Raises:
        ValueError, TypeError, RecursionError: as ``json.loads`` does for a body that is not
            JSON.
    """
    if _orjson is not None and not exact:
        try:
            return _orjson.loads(body), True
        except (_orjson.JSONDecodeError, TypeError):
            pass  # NaN, a big integer, a lone surrogate, or not JSON: the library decides
    return json.loads(body), False


def dumps(value: Any, fast: bool = True) -> bytes:
    """``value`` as compact JSON in UTF-8 without ASCII escapes (module invariants).

    Raises:
        ValueError, TypeError, RecursionError: a value JSON cannot hold (a lone surrogate in a
            string among them).
    """
    if fast and _orjson is not None:
        try:
            out: bytes = _orjson.dumps(value)
        except TypeError:  # an integer beyond 64 bits, a lone surrogate, too deep
            pass
        else:
            if not _may_differ(out):
                return out
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
