"""Where a file's lines came from after shell edits a replay can redo (``shell_edit``).

The rebuild of ``files/`` learns a file's lines before the session from what reads show. After
a ``sed -i`` that only moves, deletes, inserts or rewrites addressed lines, or after a heredoc
write, a read still shows lines of the file before the session — at other line numbers. A
``LineMap`` follows one file through such edits: for each current line, its line number before
the session, or None for text the session wrote. ``through`` returns False when an edit
cannot be followed (its effect depends on text the rebuild does not hold, or sed is not
there); the rebuild then stops learning that file, as it does after any other change.

Pure but for ``shell_edit.move_lines`` (GNU sed on a file of tokens).
"""

from __future__ import annotations

import re

from filecache.shell.shell_edit import EditStep, move_lines

__all__ = ["LineMap"]

_MAX_TOKENS = 200_000
_NUMBER = re.compile(r"\d+")


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


class LineMap:
    """Current line number -> line number before the session (None: written by the session).

    Lines past ``prefix`` keep their place relative to the end of it (``offset``). ``end``
    is the current line count when it is known.
    """

    def __init__(self) -> None:
        self.prefix: list[int | None] = []
        self.offset = 0
        self.end: int | None = None
        self.whole_new = False  # every line was written by the session

    def original(self, n: int) -> int | None:
        if n <= len(self.prefix):
            return self.prefix[n - 1]
        if self.whole_new or (self.end is not None and n > self.end):
            return None
        return n + self.offset

    def changed(self) -> bool:
        return bool(self.prefix) or self.offset != 0 or self.whole_new

    def through(self, step: EditStep, sources: dict[str, str], total: int | None) -> bool:
        """Follow one step (``sources``: files whose whole text the session wrote; ``total``:
        the file's line count before the session, when known)."""
        if self.end is None and total is not None and not self.whole_new:
            self.end = total - self.offset if total - self.offset >= len(self.prefix) else None
        if step.op == "restore":  # back to the file before the session
            self.prefix, self.offset, self.end, self.whole_new = [], 0, total, False
            return True
        if step.op in ("write", "copy"):
            text = step.text if step.op == "write" else sources.get(step.source)
            if text is None:
                return False
            self.prefix, self.offset, self.whole_new = [None] * _line_count(text), 0, True
            self.end = len(self.prefix)
            return True
        if step.op in ("append", "append-copy"):
            text = step.text if step.op == "append" else sources.get(step.source)
            if text is None or self.end is None:
                return False
            self.prefix = [self.original(n) for n in range(1, self.end + 1)]
            self.prefix += [None] * _line_count(text)
            self.end = len(self.prefix)
            return True
        if step.op == "read-into":
            text = sources.get(step.source)
            if text is None:
                return False
            count = self._count(step.line)
            if step.line > count:
                return False
            moved: list[int | None] = list(range(1, step.line + 1))
            moved += [None] * _line_count(text) + list(range(step.line + 1, count + 1))
            return self._apply(moved, count)
        if step.needs_text:
            return False
        top = max((int(x) for s in step.scripts for x in _NUMBER.findall(s)), default=0)
        count = self._count(top)
        if count > _MAX_TOKENS:
            return False
        found = move_lines(step, count)
        return found is not None and self._apply(found, count)

    def _count(self, top: int) -> int:
        """How many lines to follow: the whole file when its length is known, else past the
        highest line an edit names (lines past a file's real end only move among themselves)."""
        return self.end if self.end is not None else max(len(self.prefix), top) + 1

    def _apply(self, moved: list[int | None], count: int) -> bool:
        """``moved``: for each new line up to old line ``count``, its old line (or None)."""
        prefix = [None if k is None else self.original(k) for k in moved]
        if self.end is not None:
            self.end = len(prefix)
        else:
            self.offset = count - len(moved) + self.offset
        self.prefix = prefix
        return True
