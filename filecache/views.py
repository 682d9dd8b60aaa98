"""What the model holds: per path and version, line facts and the call ids they rely on.

A *fact* says "the model can reconstruct line N of version V from results still in its
context". Each fact carries the set of call ids it needs (all of them: the result that showed
the line, plus every diff or edit it was carried through). Facts are stored as sorted, disjoint
runs ``(start, end, deps)`` (1-based, inclusive).

Invariants:
- A fact is only created from something the model was shown or wrote itself; mapping through a
  diff or an edit keeps a line only where its content provably carries over.
- ``forget(ids)`` drops every fact whose deps meet ``ids``; nothing else removes facts except
  the bound on versions kept per path (dropping facts is always safe: the next read sends
  content).
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .text import EOF_MARK

__all__ = ["Facts", "PathView", "Piece", "map_through_edit"]

Deps = frozenset[str]
Span = tuple[int, int, Deps]


class Facts:
    """The facts of one version of one path."""

    __slots__ = ("line_count", "spans", "stamp", "version")

    def __init__(
        self, version: str, line_count: int, spans: list[Span] | None = None, stamp: int = 0
    ) -> None:
        self.version = version
        self.line_count = line_count
        self.spans: list[Span] = spans or []
        self.stamp = stamp

    def covering(self, start: int, end: int) -> Deps | None:
        """The union of deps if every line of ``start..end`` is a fact, else None.

        An empty range (``end < start``, as for an empty file) is covered when the version is
        held at all, with the deps of whatever established it.
        """
        if end < start:
            return frozenset().union(*(d for _, _, d in self.spans)) if self.spans else None
        spans = self.spans
        k = bisect_right(spans, start, key=lambda s: s[0]) - 1
        if k < 0:
            return None
        deps: set[str] = set()
        line = start
        while k < len(spans):
            s, e, d = spans[k]
            if s > line:
                return None
            if e >= line:
                deps |= d
                line = e + 1
                if line > end:
                    return frozenset(deps)
            k += 1
        return None

    def copy(self) -> Facts:
        return Facts(self.version, self.line_count, list(self.spans), self.stamp)

    def lines_held(self) -> int:
        return sum(e - s + 1 for s, e, _ in self.spans)

    def add(self, start: int, end: int, deps: Deps) -> None:
        """Make ``start..end`` facts relying on ``deps`` (replacing what was there)."""
        if end < start:
            return
        out: list[Span] = []
        for s, e, d in self.spans:
            if e < start or s > end:
                out.append((s, e, d))
                continue
            if s < start:
                out.append((s, start - 1, d))
            if e > end:
                out.append((end + 1, e, d))
        out.append((start, end, deps))
        out.sort(key=lambda span: span[0])
        self.spans = _merge(out)

    def restrict(self, keep: Sequence[tuple[int, int]]) -> None:
        """Keep only facts inside the given (sorted, disjoint) ranges."""
        out: list[Span] = []
        for s, e, d in self.spans:
            for ks, ke in keep:
                lo, hi = max(s, ks), min(e, ke)
                if lo <= hi:
                    out.append((lo, hi, d))
        self.spans = out

    def forget(self, ids: set[str] | frozenset[str]) -> bool:
        """Drop facts relying on any of ``ids``; True if something was dropped."""
        kept = [span for span in self.spans if not (span[2] & ids)]
        changed = len(kept) != len(self.spans)
        self.spans = kept
        return changed

    def map_blocks(self, blocks: Iterable[tuple[int, int, int]], extra: Deps) -> list[Span]:
        """Facts carried through equal blocks ``(a0, b0, size)`` (0-based), deps plus ``extra``."""
        out: list[Span] = []
        for a0, b0, size in blocks:
            lo_a, hi_a = a0 + 1, a0 + size
            for s, e, d in self.spans:
                lo, hi = max(s, lo_a), min(e, hi_a)
                if lo <= hi:
                    shift = b0 - a0
                    out.append((lo + shift, hi + shift, d | extra))
        out.sort(key=lambda span: span[0])
        return out


def _merge(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for s, e, d in spans:
        if out and out[-1][1] + 1 == s and out[-1][2] == d:
            out[-1] = (out[-1][0], e, d)
        else:
            out.append((s, e, d))
    return out


class PathView:
    """The versions of one path the model holds, most recently touched last."""

    def __init__(self, max_versions: int = 4) -> None:
        self.max_versions = max_versions
        self.versions: dict[str, Facts] = {}

    def get(self, version: str) -> Facts | None:
        return self.versions.get(version)

    def copy(self) -> PathView:
        """An independent copy (a call works on copies; the session keeps them on commit)."""
        view = PathView(self.max_versions)
        view.versions = {v: f.copy() for v, f in self.versions.items()}
        return view

    def facts_for(self, version: str, line_count: int, stamp: int) -> Facts:
        """The facts of ``version``, created empty if new; marks it most recent."""
        facts = self.versions.pop(version, None) or Facts(version, line_count)
        facts.stamp = stamp
        self.versions[version] = facts
        while len(self.versions) > self.max_versions:
            del self.versions[next(iter(self.versions))]
        return facts

    def recent(self) -> list[Facts]:
        """Held versions, newest first, skipping ones with no facts."""
        return [f for f in reversed(self.versions.values()) if f.spans]

    def forget(self, ids: set[str] | frozenset[str]) -> bool:
        changed = False
        for facts in self.versions.values():
            changed |= facts.forget(ids)
        for version in [v for v, f in self.versions.items() if not f.spans]:
            del self.versions[version]
        return changed

    def empty(self) -> bool:
        return not any(f.spans for f in self.versions.values())

    def to_json(self) -> str:
        return json.dumps(
            [
                [f.version, f.line_count, f.stamp, [[s, e, sorted(d)] for s, e, d in f.spans]]
                for f in self.versions.values()
            ],
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str, max_versions: int = 4) -> PathView:
        view = cls(max_versions)
        for version, line_count, stamp, spans in json.loads(text):
            view.versions[version] = Facts(
                version, line_count, [(s, e, frozenset(d)) for s, e, d in spans], stamp
            )
        return view


@dataclass(frozen=True)
class Piece:
    """A run of the edited text: copied from the old text (``src`` = old offset) or new."""

    length: int
    src: int | None


def map_through_edit(
    old_lines: Sequence[str],
    old_spans: Facts | None,
    new_lines: Sequence[str],
    pieces: Sequence[Piece],
    call_id: str,
) -> list[Span]:
    """Facts of the edited text, by provenance of each new line's characters.

    A new line is a fact when every character of it is either new text the model wrote or a
    character copied from an old line that was a fact; its deps are those old lines' deps plus
    the edit's call id. Lines are in ``split_lines`` form (``\\n`` not included: each line
    stands for ``len(line) + 1`` characters, the unterminated last one for ``len(line)``).
    """
    old_starts = _starts(old_lines)
    new_starts = _starts(new_lines)
    own: Deps = frozenset([call_id])
    out: list[Span] = []
    pos = 0
    k = 0
    piece_starts = []
    for p in pieces:
        piece_starts.append(pos)
        pos += p.length
    for idx in range(len(new_lines)):
        ls, le = new_starts[idx], new_starts[idx + 1]
        deps: set[str] = set(own)
        known = True
        while k < len(pieces) and piece_starts[k] + pieces[k].length <= ls:
            k += 1
        j = k
        while j < len(pieces) and piece_starts[j] < le:
            piece = pieces[j]
            if piece.src is not None and piece.length:
                lo = max(ls, piece_starts[j]) - piece_starts[j] + piece.src
                hi = min(le, piece_starts[j] + piece.length) - piece_starts[j] + piece.src
                first = bisect_right(old_starts, lo) - 1
                last = bisect_right(old_starts, hi - 1) - 1
                have = old_spans.covering(first + 1, last + 1) if old_spans else None
                if have is None:
                    known = False
                    break
                deps |= have
            j += 1
        if known:
            out.append((idx + 1, idx + 1, frozenset(deps)))
    return _merge(out)


def _starts(lines: Sequence[str]) -> list[int]:
    """Character offset of each line's start, plus the total length at the end."""
    starts = [0]
    pos = 0
    for line in lines:
        pos += len(line) + (0 if line.endswith(EOF_MARK) else 1)
        starts.append(pos)
    return starts
