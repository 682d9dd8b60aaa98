"""Line diffs and unified-diff hunks, pure and fast for the common case of few scattered edits.

Invariants:
- ``diff_lines(a, b)`` returns opcodes that cover both sequences in order with no gaps:
  applying them to ``a`` gives exactly ``b``. They need not be minimal, only correct.
- ``unified_hunks`` emits GNU-compatible hunks (``@@ -l,s +l,s @@`` with difflib's rules for
  lengths 0 and 1, three lines of context, ``\\ No newline at end of file`` where due), so that
  GNU ``patch`` and ``unidiff`` accept them.

The matcher walks both sequences in step, skipping equal runs with doubling slice compares (C
speed), and resynchronises after a mismatch at the nearest point where a few lines agree again:
first by a small diagonal search, then through an index of the second sequence for large gaps.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from filecache.core.records import record
from filecache.core.text import EOF_MARK, NO_NEWLINE

__all__ = [
    "Hunk",
    "Opcode",
    "diff_lines",
    "equal_blocks",
    "hunks_touching",
    "render_hunks",
    "unified_hunks",
]

Opcode = tuple[str, int, int, int, int]
"""``(tag, a0, a1, b0, b1)``: 0-based half-open ranges; tag is equal/replace/delete/insert."""

_SYNC_RUN = 3  # lines that must agree for a resync point (fewer only at the very end)
_WINDOW = 24  # diagonal search radius before falling back to the index


@record
class Hunk:
    """One unified-diff hunk. Starts are 1-based as printed; ``lines`` carry ' ', '-', '+'."""

    a_start: int
    a_len: int
    b_start: int
    b_len: int
    lines: tuple[str, ...]

    @property
    def header(self) -> str:
        return f"@@ -{_range(self.a_start, self.a_len)} +{_range(self.b_start, self.b_len)} @@"


def _range(start: int, length: int) -> str:
    if length == 1:
        return str(start)
    return f"{start},{length}"


def _equal_run(a: Sequence[str], b: Sequence[str], i: int, j: int) -> tuple[int, int]:
    n, m = len(a), len(b)
    step = 8
    while step:
        if i + step <= n and j + step <= m and a[i : i + step] == b[j : j + step]:
            i += step
            j += step
            step *= 2
        else:
            step //= 2
    return i, j


def _agrees(a: Sequence[str], b: Sequence[str], i: int, j: int) -> bool:
    ta, tb = len(a) - i, len(b) - j
    if ta >= _SYNC_RUN and tb >= _SYNC_RUN:
        return a[i : i + _SYNC_RUN] == b[j : j + _SYNC_RUN]
    return ta == tb and a[i:] == b[j:]


def _ring(d: int) -> tuple[tuple[int, int], ...]:
    out = [(d, d)]
    for k in range(d - 1, -1, -1):
        out.append((k, d))
        out.append((d, k))
    return tuple(out)


_RINGS = [_ring(d) for d in range(_WINDOW + 1)]


class _Matcher:
    def __init__(self, a: Sequence[str], b: Sequence[str]) -> None:
        self.a, self.b = a, b
        self._index: dict[str, list[int]] | None = None

    def resync(self, i: int, j: int) -> tuple[int, int]:
        """The nearest (i2, j2) >= (i, j) where the sequences agree again, or their ends."""
        a, b = self.a, self.b
        n, m = len(a), len(b)
        # Candidates by the size of the change, max(di, dj): a k-line replacement ranks with
        # a k-line insertion, and the square (d, d) goes first, so repetitive text does not
        # turn a modified line into an insertion here and a deletion further down.
        for d in range(1, _WINDOW + 1):
            for di, dj in _RINGS[d]:
                i2, j2 = i + di, j + dj
                if i2 < n and j2 < m and a[i2] == b[j2] and _agrees(a, b, i2, j2):
                    return i2, j2
                if i2 == n and j2 == m:  # the change runs to both ends
                    return n, m
        return self._resync_indexed(i, j)

    def _resync_indexed(self, i: int, j: int) -> tuple[int, int]:
        a, b = self.a, self.b
        if self._index is None:
            index: dict[str, list[int]] = {}
            for pos, line in enumerate(b):
                index.setdefault(line, []).append(pos)
            self._index = index
        best_cost = (len(a) - i) + (len(b) - j)
        best = (len(a), len(b))
        for i2 in range(i, len(a)):
            di = i2 - i
            if di >= best_cost:
                break
            positions = self._index.get(a[i2])
            if not positions:
                continue
            k = bisect_left(positions, j)
            while k < len(positions):
                j2 = positions[k]
                cost = di + (j2 - j)
                if cost >= best_cost:
                    break
                if _agrees(a, b, i2, j2):
                    best_cost, best = cost, (i2, j2)
                    break
                k += 1
        return best


def diff_lines(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """Opcodes turning ``a`` into ``b`` (see the module invariants)."""
    n, m = len(a), len(b)
    ops: list[Opcode] = []
    matcher = _Matcher(a, b)
    i = j = 0
    while i < n and j < m:
        i2, j2 = _equal_run(a, b, i, j)
        if i2 > i:
            ops.append(("equal", i, i2, j, j2))
            i, j = i2, j2
        if i >= n or j >= m:
            break
        i2, j2 = matcher.resync(i, j)
        _append_change(ops, i, i2, j, j2)
        i, j = i2, j2
    _append_change(ops, i, n, j, m)
    return ops


def _append_change(ops: list[Opcode], a0: int, a1: int, b0: int, b1: int) -> None:
    if a0 == a1 and b0 == b1:
        return
    tag = "replace" if a0 < a1 and b0 < b1 else ("delete" if a0 < a1 else "insert")
    ops.append((tag, a0, a1, b0, b1))


def equal_blocks(ops: Sequence[Opcode]) -> list[tuple[int, int, int]]:
    """``(a0, b0, size)`` for every equal run, 0-based."""
    return [(a0, b0, a1 - a0) for tag, a0, a1, b0, _ in ops if tag == "equal"]


def unified_hunks(
    a: Sequence[str], b: Sequence[str], ops: Sequence[Opcode], context: int = 3
) -> list[Hunk]:
    """Group opcodes into hunks with ``context`` lines around each change."""
    changes = [op for op in ops if op[0] != "equal"]
    if not changes:
        return []
    groups: list[list[Opcode]] = [[changes[0]]]
    for op in changes[1:]:
        prev = groups[-1][-1]
        if op[1] - prev[2] <= 2 * context:
            groups[-1].append(op)
        else:
            groups.append([op])
    hunks = []
    for group in groups:
        first, last = group[0], group[-1]
        a0 = max(0, first[1] - context)
        b0 = first[3] - (first[1] - a0)
        a1 = min(len(a), last[2] + context)
        b1 = last[4] + (a1 - last[2])
        lines: list[str] = []
        ai = a0
        for _, x0, x1, y0, y1 in group:
            lines.extend(" " + line for line in a[ai:x0])
            lines.extend("-" + line for line in a[x0:x1])
            lines.extend("+" + line for line in b[y0:y1])
            ai = x1
        lines.extend(" " + line for line in a[ai:a1])
        a_len, b_len = a1 - a0, b1 - b0
        hunks.append(
            Hunk(
                a0 + 1 if a_len else a0,
                a_len,
                b0 + 1 if b_len else b0,
                b_len,
                tuple(lines),
            )
        )
    return hunks


def hunks_touching(hunks: Sequence[Hunk], start: int, end: int) -> list[Hunk]:
    """The hunks whose new-side span (context included) meets lines ``start..end`` (1-based)."""
    out = []
    for h in hunks:
        lo = h.b_start if h.b_len else h.b_start + 1
        hi = h.b_start + h.b_len - 1 if h.b_len else h.b_start
        if lo <= end and hi >= start:
            out.append(h)
    return out


def render_hunks(old_name: str, new_name: str, hunks: Sequence[Hunk]) -> str:
    """A unified diff with ``---``/``+++`` headers; a line lacking ``\\n`` gets the marker.

    Hunk lines come from ``split_lines`` (no ``\\n``; ``EOF_MARK`` on an unterminated end).
    """
    parts = [f"--- {old_name}", f"+++ {new_name}"]
    for h in hunks:
        parts.append(h.header)
        for line in h.lines:
            if line.endswith(EOF_MARK):
                parts.append(line[:-1])
                parts.append(NO_NEWLINE)
            else:
                parts.append(line)
    return "\n".join(parts) + "\n"
