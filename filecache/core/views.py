"""What the model holds: per path and version, line facts and the call ids they rely on.

A *fact* says "the model can reconstruct line N of version V from results still in its
context". Each fact carries the set of call ids it needs (all of them: the result that showed
the line, plus every diff or edit it was carried through). Facts are stored as sorted, disjoint
runs ``(start, end, deps)`` (1-based, inclusive).

Invariants:
- A fact is only created from something the model was shown or wrote itself; mapping through a
  diff or an edit keeps a line only where its content provably carries over.
- A line may be backed by several results (a full read and a later ranged read of it): each
  run keeps every alternative set of call ids (any one suffices), so ``forget(ids)`` drops only
  the alternatives that meet ``ids`` and a line stays a fact while one is left. Nothing else
  removes facts except the bounds on versions per path and alternatives per run (dropping facts
  is always safe: the next read sends content).
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain, pairwise

from filecache.core.records import record
from filecache.core.text import EOF_MARK

__all__ = ["Facts", "PathView", "Piece", "map_through_edit"]

Deps = frozenset[str]
Alts = tuple[Deps, ...]
"""Every alternative set of call ids that backs a run of lines, oldest first; any one suffices."""
Span = tuple[int, int, Alts]

MAX_ALTERNATIVES = 6  # per run of lines; dropping one is safe (the next read may send content)
MAX_DEPS = 96
"""Call ids one alternative may need: a line carried through more edits or diffs than this since
the model last saw it is no longer a fact (the next read shows it again), so a long edit chain
does not make every later call slower (each edit adds its id to the lines it carries)."""


def _with(alts: Alts, deps: Deps) -> Alts:
    """``alts`` plus ``deps`` (kept in order, no duplicates, at most ``MAX_ALTERNATIVES``)."""
    if deps in alts:
        return alts
    return (alts + (deps,))[:MAX_ALTERNATIVES]


class Facts:
    """The facts of one version of one path.

    ``origin`` is the call id of the model's own write or edit that made this version, if one
    did ("" otherwise): a read that finds the file back at an older version then says so.
    """

    __slots__ = ("line_count", "origin", "spans", "stamp", "version")

    def __init__(
        self,
        version: str,
        line_count: int,
        spans: list[Span] | None = None,
        stamp: int = 0,
        origin: str = "",
    ) -> None:
        self.version = version
        self.line_count = line_count
        self.spans: list[Span] = spans or []
        self.stamp = stamp
        self.origin = origin

    def copy(self) -> Facts:
        return Facts(self.version, self.line_count, list(self.spans), self.stamp, self.origin)

    def runs(self, start: int, end: int) -> list[Span] | None:
        """The runs that make ``start..end`` facts, clipped to it; None if a line is missing.

        An empty range (``end < start``, as for an empty file) is covered when the version is
        held at all: its runs are then every run.
        """
        if end < start:
            return list(self.spans) if self.spans else None
        spans = self.spans
        k = bisect_right(spans, start, key=lambda s: s[0]) - 1
        if k < 0:
            return None
        out: list[Span] = []
        line = start
        while k < len(spans):
            s, e, alts = spans[k]
            if s > line:
                return None
            if e >= line:
                out.append((line, min(e, end), alts))
                line = e + 1
                if line > end:
                    return out
            k += 1
        return None

    def covering(self, start: int, end: int) -> Deps | None:
        """A set of call ids that together back every line of ``start..end`` (each run's
        oldest alternative), or None if a line is not a fact."""
        runs = self.runs(start, end)
        if runs is None:
            return None
        return frozenset().union(*(alts[0] for _, _, alts in runs))

    def carried_cover(self, start: int, end: int) -> Deps | None:
        """What an edit carries ``start..end`` on: like ``covering`` (each run's oldest
        alternative, the widest read a FileRef names), except that an alternative at the
        ``MAX_DEPS`` bound gives way to the run's smallest (a later read of a line resets its
        chain). Carrying the smallest always would make the lines rely on a narrower later
        read: pruning that read would lose lines the older, wider read still backs."""
        runs = self.runs(start, end)
        if runs is None:
            return None
        oldest = [next((d for d in alts if len(d) < MAX_DEPS), alts[0]) for _, _, alts in runs]
        have = oldest[0] if len(oldest) == 1 else frozenset().union(*oldest)
        if len(have) < MAX_DEPS:
            return have
        return frozenset().union(*(min(alts, key=len) for _, _, alts in runs))

    def carried_runs(self, start: int, end: int) -> list[tuple[int, int, Deps]]:
        """``carried_cover`` of each line of ``start..end``, a run at a time: ``(s, e, deps)``
        for the lines that are facts and carry (their run has an alternative under
        ``MAX_DEPS``: its oldest such); a line left out is not carried."""
        out: list[tuple[int, int, Deps]] = []
        spans = self.spans
        k = max(bisect_right(spans, start, key=lambda s: s[0]) - 1, 0)
        while k < len(spans):
            s, e, alts = spans[k]
            if s > end:
                break
            lo, hi = max(s, start), min(e, end)
            if lo <= hi:
                have = next((d for d in alts if len(d) < MAX_DEPS), None)
                if have is not None:
                    out.append((lo, hi, have))
            k += 1
        return out

    def lines_held(self) -> int:
        return sum(e - s + 1 for s, e, _ in self.spans)

    def add(self, start: int, end: int, deps: Deps) -> None:
        """Make ``start..end`` facts backed (also) by ``deps``: lines that were facts keep
        their other alternatives."""
        self.add_alternatives(start, end, (deps,))

    def add_alternatives(self, start: int, end: int, alts: Alts) -> None:
        """Back ``start..end`` (also) by each of ``alts``."""
        if end < start or not alts:
            return
        out: list[Span] = []
        line = start
        for s, e, have in self.spans:
            if e < start or s > end:
                out.append((s, e, have))
                continue
            if s < start:
                out.append((s, start - 1, have))
            if s > line:  # a gap inside the range: only the new alternatives
                out.append((line, s - 1, alts))
            merged = have
            for deps in alts:
                merged = _with(merged, deps)
            out.append((max(s, start), min(e, end), merged))
            if e > end:
                out.append((end + 1, e, have))
            line = min(e, end) + 1
        if line <= end:
            out.append((line, end, alts))
        out.sort(key=lambda span: span[0])
        self.spans = _merge(out)

    def add_spans(self, spans: Sequence[Span]) -> None:
        """``add_alternatives`` for each of ``spans``: in one pass when this version holds
        nothing yet (a version an edit or a diff just made) and ``spans`` are sorted and
        disjoint (runs that overlap would be kept twice, and double at every later diff)."""
        if self.spans or not _disjoint(spans):
            for s, e, alts in spans:
                self.add_alternatives(s, e, alts)
        else:
            self.spans = _merge([span for span in spans if span[0] <= span[1] and span[2]])

    def restrict(self, keep: Sequence[tuple[int, int]]) -> None:
        """Keep only facts inside the given ranges (sorted by start; they may overlap, as a
        diff's requested range and its hunks do: the runs stay disjoint)."""
        ranges: list[tuple[int, int]] = []
        for ks, ke in keep:
            if ranges and ks <= ranges[-1][1] + 1:
                ranges[-1] = (ranges[-1][0], max(ranges[-1][1], ke))
            elif ks <= ke:
                ranges.append((ks, ke))
        out: list[Span] = []
        for s, e, d in self.spans:
            for ks, ke in ranges:
                lo, hi = max(s, ks), min(e, ke)
                if lo <= hi:
                    out.append((lo, hi, d))
        self.spans = out

    def forget(self, ids: set[str] | frozenset[str]) -> bool:
        """Drop the alternatives relying on any of ``ids`` (a line with none left is no longer
        a fact); True if something was dropped."""
        changed = False
        kept: list[Span] = []
        for s, e, alts in self.spans:
            left = tuple(d for d in alts if not d & ids)
            if len(left) != len(alts):
                changed = True
            if left:
                kept.append((s, e, left))
        self.spans = _merge(kept)
        return changed

    def call_ids(self) -> set[str]:
        """Every call id some alternative relies on."""
        return {cid for _, _, alts in self.spans for deps in alts for cid in deps}

    def map_blocks(self, blocks: Iterable[tuple[int, int, int]], extra: Deps) -> list[Span]:
        """Facts carried through equal blocks ``(a0, b0, size)`` (0-based): every alternative
        plus ``extra``."""
        out: list[Span] = []
        carried: dict[Alts, Alts] = {}  # runs share their alternatives' objects
        for a0, b0, size in blocks:
            lo_a, hi_a = a0 + 1, a0 + size
            for s, e, alts in self.spans:
                lo, hi = max(s, lo_a), min(e, hi_a)
                if lo <= hi:
                    new = carried.get(alts)
                    if new is None:
                        new = carried[alts] = _extended(alts, extra)
                    if new:
                        shift = b0 - a0
                        out.append((lo + shift, hi + shift, new))
        out.sort(key=lambda span: span[0])
        return out


def _extended(alts: Alts, extra: Deps) -> Alts:
    """Each alternative plus ``extra``, without those that would need over ``MAX_DEPS`` ids."""
    return tuple(d | extra for d in alts if len(d) < MAX_DEPS)


def _disjoint(spans: Sequence[Span]) -> bool:
    """Whether ``spans`` are sorted and do not overlap."""
    return all(a[1] < b[0] for a, b in pairwise(spans))


def _merge(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for s, e, d in spans:
        if out and out[-1][1] + 1 == s and out[-1][2] == d:
            out[-1] = (out[-1][0], e, d)
        else:
            out.append((s, e, d))
    return out


class PathView:
    """The versions of one path the model holds, most recently touched last.

    ``outlines`` maps a version and rendering (``planner.outline_key``) to the call id of an
    outline answer the model still has (a re-read of that version can refer to it).
    """

    def __init__(self, max_versions: int = 4) -> None:
        self.max_versions = max_versions
        self.versions: dict[str, Facts] = {}
        self.outlines: dict[str, str] = {}

    def get(self, version: str) -> Facts | None:
        return self.versions.get(version)

    def copy(self) -> PathView:
        """An independent copy (a call works on copies; the session keeps them on commit)."""
        view = PathView(self.max_versions)
        view.versions = {v: f.copy() for v, f in self.versions.items()}
        view.outlines = dict(self.outlines)
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

    def latest(self) -> Facts | None:
        """The version the model last learned of (read, diffed, wrote): what it believes is on
        disk. None when it holds nothing."""
        held = self.recent()
        return held[0] if held else None

    def forget(self, ids: set[str] | frozenset[str]) -> bool:
        changed = False
        for facts in self.versions.values():
            changed |= facts.forget(ids)
        for version in [v for v, f in self.versions.items() if not f.spans]:
            del self.versions[version]
        for version in [v for v, cid in self.outlines.items() if cid in ids]:
            del self.outlines[version]
            changed = True
        return changed

    def forgets(self, ids: set[str] | frozenset[str]) -> bool:
        """Whether ``forget(ids)`` would change this view: an outline or an alternative relies
        on one of ``ids``, or ``forget`` would tidy it (a version without facts, adjacent runs
        with the same alternatives). A view it would leave as is need not be copied to ask."""
        if any(cid in ids for cid in self.outlines.values()):
            return True
        for facts in self.versions.values():
            if not facts.spans:
                return True
            end, before = -1, None
            for s, e, alts in facts.spans:
                if (end + 1 == s and alts == before) or any(not d.isdisjoint(ids) for d in alts):
                    return True
                end, before = e, alts
        return False

    def call_ids(self) -> set[str]:
        held = set(self.outlines.values())
        for facts in self.versions.values():
            held |= facts.call_ids()
        return held

    def empty(self) -> bool:
        return not self.outlines and not any(f.spans for f in self.versions.values())

    def to_json(self) -> str:
        """The view as compact JSON: ``{"i": ids, "f": versions, "o": outlines}``.

        Call ids are numbered once (``i``, the ids most sets share first); a set of call ids is
        the ranges of those numbers it holds (``[lo, hi]``, or ``n`` alone), so the ids of an
        edit chain, which every line it carries shares, cost a few numbers per run, not one
        string per id. The versions are under ``f``, not the older forms' ``v``: a process of
        an older release sharing the store reads this as a view with no lines (it sends
        content, which is safe) instead of taking the numbers for call ids (it crashed).
        """
        # each distinct set once (a frozenset keeps its hash)
        seen = {
            deps for facts in self.versions.values() for _, _, alts in facts.spans for deps in alts
        }
        counts = Counter(chain.from_iterable(seen))
        ids = sorted(counts, key=lambda cid: (-counts[cid], cid))
        number = {cid: k for k, cid in enumerate(ids)}
        encoded: dict[Deps, list[object]] = {}

        def encode(deps: Deps) -> list[object]:
            out = encoded.get(deps)
            if out is None:
                out = encoded[deps] = _ranges(sorted(map(number.__getitem__, deps)))
            return out

        versions = [
            [
                f.version,
                f.line_count,
                f.stamp,
                [[s, e, [encode(d) for d in alts]] for s, e, alts in f.spans],
                f.origin,
            ]
            for f in self.versions.values()
        ]
        data: dict[str, object] = {"i": ids, "f": versions}
        if self.outlines:
            data["o"] = self.outlines
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, max_versions: int = 4) -> PathView:
        """Read ``to_json``'s form (and the older ones: the same under ``v``; call ids spelled
        out in every set; before that one deps list per run, no origin)."""
        view = cls(max_versions)
        data = json.loads(text)
        ids: list[str] | None = None
        if isinstance(data, dict):
            view.outlines = {str(k): str(v) for k, v in data.get("o", {}).items()}
            if "i" in data:
                ids = [str(cid) for cid in data["i"]]
            data = data.get("f", data.get("v", []))
        decoded: dict[str, Deps] = {}

        def decode(deps: list[object]) -> Deps:
            if ids is None:
                return frozenset(str(cid) for cid in deps)
            key = str(deps)  # runs share their sets: decode each once, share the object
            out = decoded.get(key)
            if out is None:
                out = decoded[key] = _decoded(deps, ids)
            return out

        for row in data:
            version, line_count, stamp, spans = row[:4]
            origin = row[4] if len(row) > 4 else ""
            runs: list[Span] = []
            for s, e, deps in spans:
                if ids is not None or (deps and all(isinstance(d, list) for d in deps)):
                    alts = tuple(decode(d) for d in deps)
                else:  # the oldest form: one set of call ids
                    alts = (frozenset(deps),)
                runs.append((s, e, alts))
            view.versions[version] = Facts(version, line_count, runs, stamp, origin)
        return view


def _ranges(numbers: list[int]) -> list[object]:
    """Sorted numbers as ``[lo, hi]`` ranges, a lone number as itself."""
    if not numbers:
        return []
    lo, hi = numbers[0], numbers[-1]
    if hi - lo == len(numbers) - 1:  # one range: the ids of an edit chain
        return [lo] if lo == hi else [[lo, hi]]
    cuts = [k for k, (a, b) in enumerate(pairwise(numbers), 1) if b != a + 1]
    out: list[object] = []
    for first, end in zip([0, *cuts], [*cuts, len(numbers)], strict=True):
        out.append(numbers[first] if end - first == 1 else [numbers[first], numbers[end - 1]])
    return out


def _decoded(ranges: list[object], ids: list[str]) -> Deps:
    """The call ids ``ranges`` (as ``_ranges`` writes them) number in ``ids``."""
    try:  # no ranges: one pass in C
        # ints here; a [lo, hi] list among them raises the TypeError handled below
        return frozenset(map(ids.__getitem__, ranges))  # type: ignore[arg-type]
    except TypeError:  # a [lo, hi] range among them
        pass
    out: list[str] = []
    for item in ranges:
        if isinstance(item, list):
            out.extend(ids[int(item[0]) : int(item[1]) + 1])
        else:
            out.append(ids[int(item)])  # type: ignore[call-overload]
    return frozenset(out)


@record
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
    unions: dict[Deps, Deps] = {own: own}  # lines share their sets' objects
    out: list[Span] = []
    pos = 0
    k = 0
    piece_starts = []
    for p in pieces:
        piece_starts.append(pos)
        pos += p.length
    idx = 0
    while idx < len(new_lines):
        ls, le = new_starts[idx], new_starts[idx + 1]
        deps = own
        known = True
        while k < len(pieces) and piece_starts[k] + pieces[k].length <= ls:
            k += 1
        src = pieces[k].src if k < len(pieces) else None
        if src is not None:
            piece_end = piece_starts[k] + pieces[k].length
            if le <= piece_end:
                # Lines wholly inside one copied piece: old lines one for one, carried a run
                # of facts at a time (``carried_runs``), as ``carried_cover`` carries each.
                last = bisect_right(new_starts, piece_end) - 2  # the last line ending inside
                first_old = bisect_right(old_starts, ls - piece_starts[k] + src) - 1
                shift = idx - first_old
                runs = old_spans.carried_runs(first_old + 1, last - shift + 1) if old_spans else []
                for s, e, have in runs:
                    joined = unions.get(have)
                    if joined is None:
                        joined = unions[have] = have | own
                    if len(joined) <= MAX_DEPS:
                        out.append((s + shift, e + shift, (joined,)))
                idx = last + 1
                continue
        j = k
        while j < len(pieces) and piece_starts[j] < le:
            piece = pieces[j]
            if piece.src is not None and piece.length:
                lo = max(ls, piece_starts[j]) - piece_starts[j] + piece.src
                hi = min(le, piece_starts[j] + piece.length) - piece_starts[j] + piece.src
                first = bisect_right(old_starts, lo) - 1
                last_old = bisect_right(old_starts, hi - 1) - 1
                cover = old_spans.carried_cover(first + 1, last_old + 1) if old_spans else None
                if cover is None or len(cover) >= MAX_DEPS:
                    known = False
                    break
                if deps is own:
                    joined = unions.get(cover)
                    if joined is None:
                        joined = unions[cover] = cover | own
                    deps = joined
                elif not cover <= deps:
                    deps = deps | cover
            j += 1
        if known and len(deps) <= MAX_DEPS:
            out.append((idx + 1, idx + 1, (deps,)))
        idx += 1
    return _merge(out)


def _starts(lines: Sequence[str]) -> list[int]:
    """Character offset of each line's start, plus the total length at the end."""
    starts = [0]
    pos = 0
    for line in lines:
        pos += len(line) + (0 if line.endswith(EOF_MARK) else 1)
        starts.append(pos)
    return starts
