"""Remembered path resolutions: ``FileCache.locate`` once per path a session asks for.

Resolving a path (``fsio.locate``: ``realpath``, one ``lstat`` per component from ``/``, and a
``readlink`` for aliases) is a fifth of an unchanged re-read. A resolution is remembered only
when no symbolic link was on the way: the path as asked, normalised lexically, *is* the resolved
path, and it has no ``..`` (which a link before it would change) and no aliases.

Invariants:
- A remembered ``Located`` is never followed through a link: every open, stat and rename of
  ``fsio`` walks ``rel`` from the root with ``O_NOFOLLOW``, so a component that has become a
  link since is refused (``OutsideRootError``), never followed, and the file read is the one
  at ``rel``. ``Locations.retry`` then forgets the path and runs the call once more on a fresh
  resolution: the answer is what an unremembered call would have given (the link followed,
  inside the root, with its aliases for the deny-list; or refused).
- Bounded: at most ``MAX_REMEMBERED`` paths (then it starts afresh). Thread-safe: a dict
  read or written whole under the GIL; two threads resolving one path store equal values.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from filecache.errors import OutsideRootError
from filecache.fsio import Located

__all__ = ["MAX_REMEMBERED", "Locations"]

MAX_REMEMBERED = 4096
_T = TypeVar("_T")


class Locations:
    """Resolutions of the paths asked through ``locate`` (the cache's ``locate``)."""

    def __init__(self, locate: Callable[[str | Path], Located]) -> None:
        self._locate = locate
        self._known: dict[str, Located] = {}

    def locate(self, path: str | Path) -> Located:
        """``path`` confined to the root: remembered, else resolved (and remembered when no
        link was on the way)."""
        if isinstance(path, str):
            known = self._known.get(path)
            if known is not None:
                return known
        loc = self._locate(path)
        if isinstance(path, str) and _link_free(loc, path):
            if len(self._known) >= MAX_REMEMBERED:
                self._known.clear()
            self._known[path] = loc
        return loc

    def retry(self, path: str | Path, call: Callable[[Located], _T]) -> _T:
        """``call(loc)``; if it refuses a remembered location (a link appeared on its way),
        forget it and call once more with a fresh resolution."""
        known = self._known.get(path) if isinstance(path, str) else None
        loc = known if known is not None else self.locate(path)
        try:
            return call(loc)
        except OutsideRootError:
            if known is None:
                raise  # resolved afresh already: the refusal stands
            # a remembered location refused: forget it (unless another thread remembered the
            # path anew meanwhile) and resolve afresh, whatever the memory holds now
            if self._known.get(str(path)) is known:
                self._known.pop(str(path), None)
        return call(self._locate(path))


def _link_free(loc: Located, asked: str) -> bool:
    """Whether ``asked`` resolved to itself: no ``..``, no alias, lexically the real path."""
    if loc.aliases or ".." in asked.split("/"):
        return False
    return str(loc.real) == os.path.normpath(os.path.join(loc.root, asked))
