"""The read planner: a pure decision of what a read answers — content, a FileRef, a diff, an
outline or a reference to an outline — and the view the model holds after it.

Pure: records and functions in, a frozen ``ReadDecision`` out. No file system, no store, no
locks; the input view is never changed (the decision carries a new one). ``Session`` is the
shell around it: it reads the bytes, takes the locks, calls the planner, records the decision
and returns it (the shape of ``plan_prune`` beside ``pruner.py``).

``plan_read`` takes every decision of one read: which lines (an offset and limit, a symbol's
definition, a streamed window, a tool's output), whether an ``auto`` whole-file read is an
outline, and then content, ``unchanged`` or a diff (``plan_lines``) or an outline
(``plan_outline``), sealed when the read is raw and the answer is not content. What it needs
of the version's content (token counts, the outline, a symbol's lines, the lines of diff bases)
it asks through ``ReadLookups``: functions of the version only (and the root's seal), which the
shell answers from its caches, and which the planner calls only when the decision needs them
(an outline is rendered only when one is sent).

The rules (docs/design.md, "Read rules"):
- ``unchanged`` only when the file is at the version the model last learned of (``latest``)
  and every requested line is a fact of it; the FileRef names the fewest results that together
  show those lines, the oldest still held among equals (its bytes are stable), never a narrower
  later read.
- When the file is not at that version: a diff from a held version (the latest first), when every
  requested line the diff does not show is a fact of that version and the diff is clearly
  smaller than the content; else content. If the model's own edit made the version it
  believes in and the file is back at an older one, the answer first says that edit is gone.
- A whole-file read that would be outlined, of a version whose outline the model still holds,
  is a one-line reference to that outline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from filecache.core.diffing import diff_lines, equal_blocks, hunks_touching, unified_hunks
from filecache.core.records import record
from filecache.core.render import (
    render_diff,
    render_file_ref,
    render_outline_answer,
    render_outline_ref,
    render_sealed,
    render_undone_edit,
)
from filecache.core.results import Kind, Source
from filecache.core.text import content_text
from filecache.core.views import Deps, Facts, PathView, Span
from filecache.errors import RangeError, RequestError

__all__ = [
    "DIFF_CANDIDATES",
    "MODES",
    "ReadAsk",
    "ReadDecision",
    "ReadLookups",
    "ReadRequest",
    "ReadRules",
    "base_lines",
    "check_read",
    "choose_cover",
    "complete_definitions",
    "diff_bases",
    "line_range",
    "outline_key",
    "plan_lines",
    "plan_outline",
    "plan_read",
    "streams_window",
    "wants_outline",
]

DIFF_CANDIDATES = 2  # held versions tried as a diff base, the latest first
SHORT_DEFINITION = 7  # lines: SWE-agent's viewer shows a definition this short whole
MODES = ("auto", "full", "outline")


def check_read(mode: str, symbol: str | None, ranged: bool) -> None:
    """Refuse a read's arguments that ask for two things at once, or an unknown mode.

    Raises:
        RequestError: saying what to pass instead.
    """
    if mode not in MODES:
        raise RequestError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if symbol is not None and (ranged or mode == "outline"):
        raise RequestError("pass symbol alone, without offset/limit or mode='outline'")


def streams_window(mode: str, ranged: bool) -> bool:
    """Whether a read of a file over ``max_file_bytes`` is answered by a streamed window of its
    lines (a range that is not an outline: always content, never stored); otherwise the read
    fails with ``FileTooLargeError``."""
    return ranged and mode != "outline"


@record(kw_only=True)
class ReadAsk:
    """One read as the caller asked it, with the source as read and the call's identity.

    ``lines`` is a range the shell fixed (a streamed window of a large file, a decorated tool's
    lines); otherwise ``offset``/``limit`` or ``symbol`` select them. ``partial``: a streamed
    range of a file too large to hold (never "full"). ``auto_outline``: whether an ``auto``
    read of a whole file may be answered with an outline (the caller's opt-in). ``seq`` is the
    sequence number the answer's event will get.
    """

    src: Source
    call_id: str
    seq: int
    offset: int | None = None
    limit: int | None = None
    mode: str = "auto"
    symbol: str | None = None
    fresh: bool = False
    lines: tuple[int, int] | None = None
    partial: bool = False
    auto_outline: bool = True


@record(kw_only=True)
class ReadRules:
    """The settings a read decision depends on (``Settings``; ``margin``: see ``plan_lines``)."""

    outline_threshold: int
    diff_max_ratio: float
    max_versions: int
    margin: float = 1.0


@record
class ReadLookups:
    """What the planner may ask of the version being read; each a function of the version's
    content only (the shell caches them), called only when the decision needs it.

    ``plain(start, end)``: the tokens of the plain content answer of those lines;
    ``outline(budget)``: the rendered outline (``None``: ``render_outline``'s own rule);
    ``symbol(name)``: the (first, last, qualified name) of a definition; ``lines(version)``: the
    lines of a version the model holds, None when they are no longer stored (asked for the
    versions a diff may start from: ``diff_bases``); ``seal()``: the root's seal
    (``Secrets.ref_seal``; of the root, not the version), asked only for a raw answer that is
    not content.
    """

    count: Callable[[str], int]
    plain: Callable[[int, int], int]
    outline: Callable[[int | None], str]
    symbol: Callable[[str], tuple[int, int, str]]
    lines: Callable[[str], Sequence[str] | None]
    seal: Callable[[], str]
    definitions: Callable[[], Sequence[tuple[int, int]]] = lambda: ()
    """The (first, last) lines of every definition of the version (``complete_definitions``)."""


@record(kw_only=True)
class ReadRequest:
    """One read to answer: the source as read, the lines asked for, and the call's identity.

    ``seq`` is the sequence number the answer's event will get (it stamps new facts);
    ``label`` a symbol read's qualified name; ``plain`` the tokens of the plain content answer.
    """

    src: Source
    start: int
    end: int
    call_id: str
    seq: int
    plain: int
    fresh: bool = False
    label: str | None = None
    partial: bool = False  # a streamed range of a file too large to hold: never "full"


@record(kw_only=True)
class ReadDecision:
    """What to answer and what the model holds afterwards.

    ``base_call_id`` is the first result an ``unchanged``/``diff``/outline reference names,
    ``relied`` every call id the answer relies on, ``view`` the path's view after the answer;
    ``request`` the read it answers (the lines it covers, the plain content's tokens).
    """

    kind: Kind
    text: str
    tokens: int
    base_call_id: str | None
    base_version: str | None
    relied: frozenset[str]
    view: PathView
    request: ReadRequest


Counter = Callable[[str], int]


def line_range(rel: str, total: int, offset: int | None, limit: int | None) -> tuple[int, int]:
    """The lines ``offset`` and ``limit`` ask of a file of ``total`` lines (1-based, inclusive);
    the one wording of range errors (reads and ``fsio.read_window``)."""
    start = 1 if offset is None else offset
    if start < 1:
        raise RangeError(f"{rel}: offset must be 1 or more (the first line is 1), got {offset}")
    if limit is not None and limit < 1:
        raise RangeError(f"{rel}: limit must be 1 or more, got {limit}")
    if start > max(total, 1):
        raise RangeError(
            f"{rel}: offset {start} is past the end; the file has {total} line"
            f"{'s' if total != 1 else ''}"
        )
    end = total if limit is None else min(total, start + limit - 1)
    return start, end


def diff_bases(view: PathView | None, version: str) -> list[str]:
    """The held versions a diff to ``version`` may start from, in the order they are tried."""
    if view is None:
        return []
    return [f.version for f in view.recent() if f.version != version][:DIFF_CANDIDATES]


def base_lines(
    view: PathView | None, version: str, lines: Callable[[str], Sequence[str] | None]
) -> dict[str, Sequence[str]]:
    """The lines of the held versions a diff to ``version`` may start from (``diff_bases``),
    those ``lines`` still gives (a version's lines, None when no longer stored)."""
    out = {}
    for held in diff_bases(view, version):
        found = lines(held)
        if found is not None:
            out[held] = found
    return out


def wants_outline(
    request: ReadRequest, view: PathView | None, threshold: int, *, may_outline: bool
) -> bool:
    """Whether an ``auto`` whole-file read gets an outline: over the threshold, not ``fresh``
    (the recovery path every reference names), and no version's lines that a FileRef or a diff
    could use are held."""
    if not may_outline or request.fresh or request.plain <= threshold:
        return False
    return view is None or not any(f.covering(request.start, request.end) for f in view.recent())


def complete_definitions(start: int, end: int, definitions: Sequence[tuple[int, int]]) -> int:
    """The last line of a ranged read of a version the model was shown only as an auto outline.

    The agent's own abbreviated view (SWE-agent's) shows a short definition whole, so a model
    that read one there edits all of it; filecache's outline shows its signature only. A range
    that starts a short definition (under ``SHORT_DEFINITION`` lines) and stops inside it runs
    on to its end, so the model does not edit the rest of it from lines it was never shown.
    """
    ends = [
        last
        for first, last in definitions
        if start <= first <= end < last and last - first < SHORT_DEFINITION
    ]
    return max([end, *ends])


def outline_key(version: str, *, large: bool) -> str:
    """How a view records an outline answer: by version and by rendering (an auto outline of a
    large file is budgeted; an explicit one of the same version is not the same text)."""
    return f"{version}#{'auto' if large else 'explicit'}"


def plan_outline(
    request: ReadRequest,
    view: PathView | None,
    outline_text: str | None,
    count: Counter,
    *,
    large: bool,
    max_versions: int,
) -> ReadDecision:
    """An outline answer, or a reference to the outline of this version the model still holds.

    ``outline_text`` may be None only when the model holds this version's outline (the shell
    need not render it then).
    """
    src = request.src
    work = view.copy() if view is not None else PathView(max_versions)
    key = outline_key(src.version, large=large)
    held = None if request.fresh else work.outlines.get(key)
    if held is not None:
        text = render_outline_ref(src.path, src.version, len(src.lines), held)
        return ReadDecision(
            kind=Kind.OUTLINE, text=text, tokens=count(text), base_call_id=held,
            base_version=src.version, relied=frozenset([held]), view=work, request=request,
        )  # fmt: skip
    if outline_text is None:
        raise ValueError("plan_outline needs the outline text unless the outline is held")
    text = render_outline_answer(outline_text, large=large, tokens_full=request.plain)
    work.outlines[key] = request.call_id
    return ReadDecision(
        kind=Kind.OUTLINE, text=text, tokens=count(text), base_call_id=None,
        base_version=None, relied=frozenset(), view=work, request=request,
    )  # fmt: skip


def plan_read(
    ask: ReadAsk,
    view: PathView | None,
    *,
    lookups: ReadLookups,
    rules: ReadRules,
    call_seq: Mapping[str, int],
) -> ReadDecision:
    """Decide one read: its lines, outline or not, and then what it answers.

    Args:
        ask: the read as asked (already checked by ``check_read``).
        view: what the model holds of this path (None: nothing); not changed.
        lookups: the version's token counts, outline, symbols and diff bases.
        rules: the settings the decision depends on.
        call_seq: the sequence number of each call id (to prefer the oldest result).

    A raw read (``src.numbered`` false: a decorated tool's output, a shell read) shows the
    file byte for byte, so filecache's own lines in a FileRef, a diff or an outline carry the
    root's seal, which a file cannot know (``render.render_sealed``); content is never touched.

    Raises:
        RangeError: an offset or limit outside the file.
        RequestError: a symbol that names no definition, or several.
    """
    decision = _plan(ask, view, lookups, rules, call_seq)
    if ask.src.numbered or decision.kind not in (Kind.UNCHANGED, Kind.DIFF, Kind.OUTLINE):
        return decision
    text = render_sealed(decision.text, lookups.seal())
    tokens = decision.tokens + lookups.count(text) - lookups.count(decision.text)
    return replace(decision, text=text, tokens=tokens)


def _plan(
    ask: ReadAsk,
    view: PathView | None,
    lookups: ReadLookups,
    rules: ReadRules,
    call_seq: Mapping[str, int],
) -> ReadDecision:
    """``plan_read``'s decision, before a raw answer is sealed."""
    src = ask.src
    if ask.mode == "outline":
        return _outline(ask, view, lookups, rules, large=False)
    label = None
    if ask.lines is not None:
        start, end = ask.lines
    elif ask.symbol is not None:
        start, end, label = lookups.symbol(ask.symbol)
    else:
        start, end = line_range(src.path, len(src.lines), ask.offset, ask.limit)
        outlined = view is not None and outline_key(src.version, large=True) in view.outlines
        if outlined and ask.mode == "auto" and src.numbered:
            end = complete_definitions(start, end, lookups.definitions())
    request = ReadRequest(
        src=src, start=start, end=end, call_id=ask.call_id, seq=ask.seq,
        plain=lookups.plain(start, end), fresh=ask.fresh, label=label, partial=ask.partial,
    )  # fmt: skip
    whole_asked = ask.lines is None and ask.offset is None and ask.limit is None
    may_outline = (
        ask.mode == "auto" and ask.auto_outline and whole_asked and ask.symbol is None
        and src.numbered
    )  # fmt: skip
    if wants_outline(request, view, rules.outline_threshold, may_outline=may_outline):
        return _outline(ask, view, lookups, rules, large=True)
    return plan_lines(
        request, view, bases=base_lines(view, src.version, lookups.lines), call_seq=call_seq,
        count=lookups.count,
        diff_max_ratio=rules.diff_max_ratio, max_versions=rules.max_versions,
        margin=rules.margin,
    )  # fmt: skip


def _outline(
    ask: ReadAsk, view: PathView | None, lookups: ReadLookups, rules: ReadRules, *, large: bool
) -> ReadDecision:
    """An outline answer of the whole file (``large``: an auto outline instead of content,
    budgeted at a fifth of the content; else an explicit ``mode="outline"``)."""
    src = ask.src
    total = len(src.lines)
    plain = lookups.plain(1, total)
    request = ReadRequest(src=src, start=1, end=total, call_id=ask.call_id, seq=ask.seq,
                          plain=plain, fresh=ask.fresh)  # fmt: skip
    held = view is not None and not ask.fresh and outline_key(src.version, large=large) in (
        view.outlines)  # fmt: skip
    text = None if held else lookups.outline(plain // 5 if large else None)
    return plan_outline(
        request, view, text, lookups.count, large=large, max_versions=rules.max_versions
    )


def plan_lines(
    request: ReadRequest,
    view: PathView | None,
    *,
    bases: Mapping[str, Sequence[str]],
    call_seq: Mapping[str, int],
    count: Counter,
    diff_max_ratio: float,
    max_versions: int,
    margin: float = 1.0,
) -> ReadDecision:
    """Decide a read of lines ``request.start..end`` of ``request.src``.

    Args:
        request: the read.
        view: what the model holds of this path (None: nothing); not changed.
        bases: the lines of the held versions a diff may start from (``diff_bases``); a
            version missing here (no longer stored) is not tried.
        call_seq: the sequence number of each call id (to prefer the oldest result).
        count: tokens of a text.
        diff_max_ratio: a diff is sent only when at most this fraction of the content's tokens.
        max_versions: versions kept per path in a new view.
        margin: how much smaller than the content a FileRef or a diff must be (below 1 when
            ``request.plain`` is an estimate: ``tokens.ESTIMATE_MARGIN``).
    """
    src = request.src
    work = view.copy() if view is not None else PathView(max_versions)
    if not request.fresh and view is not None:
        decided = _reference(request, work, call_seq, count, margin)
        if decided is None:
            decided = _diff(request, work, bases, call_seq, count, diff_max_ratio * margin)
        if decided is not None:
            return decided
    return _content(request, work, src, count)


def _reference(
    request: ReadRequest,
    work: PathView,
    call_seq: Mapping[str, int],
    count: Counter,
    margin: float,
) -> ReadDecision | None:
    src, total = request.src, len(request.src.lines)
    latest = work.latest()
    if latest is None or latest.version != src.version:
        return None  # the model believes in another version: never "unchanged" of this one
    runs = latest.runs(request.start, request.end)
    if not runs:
        return None
    units = choose_cover(runs, call_seq, latest.spans)
    names = list(dict.fromkeys(_shown_by(unit, call_seq) for unit in units))
    text = render_file_ref(src.path, src.version, request.start, request.end, total, names)
    tokens = count(text)
    if tokens >= margin * request.plain:
        return None  # a reference no smaller than the content: send the content
    work.facts_for(src.version, total, request.seq)
    return ReadDecision(
        kind=Kind.UNCHANGED, text=text, tokens=tokens, base_call_id=names[0],
        base_version=src.version, relied=frozenset().union(*units), view=work,
        request=request,
    )  # fmt: skip


def _diff(
    request: ReadRequest,
    work: PathView,
    bases: Mapping[str, Sequence[str]],
    call_seq: Mapping[str, int],
    count: Counter,
    diff_max_ratio: float,
) -> ReadDecision | None:
    src, start, end = request.src, request.start, request.end
    total = len(src.lines)
    latest = work.latest()
    for version in diff_bases(work, src.version):
        held = work.get(version)
        old_lines = bases.get(version)
        if held is None or old_lines is None:
            continue
        ops = diff_lines(old_lines, src.lines)
        blocks = equal_blocks(ops)
        needed: list[Span] = []  # the held runs the requested unchanged lines come from
        for a0, b0, size in blocks:
            lo, hi = max(b0 + 1, start), min(b0 + size, end)
            if lo > hi:
                continue
            have = held.runs(lo - b0 + a0, hi - b0 + a0)
            if have is None:
                break
            needed.extend(have)
        else:
            if not needed:
                continue
            need = set().union(*choose_cover(needed, call_seq, held.spans))
            whole = start == 1 and end == total
            hunks = unified_hunks(old_lines, src.lines, ops)
            if not whole:
                hunks = hunks_touching(hunks, start, end)
            base = _newest(need, call_seq)
            if whole:
                mapped = None
            else:
                from filecache.core.edits import old_span  # edits: not on a read's start

                mapped = old_span(ops, start, end)
            text = render_diff(
                src.path, base, held.version, src.version, hunks, (start, end, total), mapped
            )
            if held is latest and latest.origin and work.get(src.version) is not None:
                text = render_undone_edit(src.path, latest.origin, src.version) + text
            tokens = count(text)
            if tokens > diff_max_ratio * request.plain:
                continue
            own = frozenset([request.call_id])
            facts = work.facts_for(src.version, total, request.seq)
            keep = [(start, end)] + [(h.b_start, h.b_start + h.b_len - 1) for h in hunks]
            carried = Facts("", total, held.map_blocks(blocks, own))
            carried.restrict(sorted(keep))
            facts.add_spans(carried.spans)
            for h in hunks:
                facts.add(h.b_start, h.b_start + h.b_len - 1, own)
            return ReadDecision(
                kind=Kind.DIFF, text=text, tokens=tokens, base_call_id=base,
                base_version=held.version, relied=frozenset(need), view=work,
                request=request,
            )  # fmt: skip
    return None


def _content(request: ReadRequest, work: PathView, src: Source, count: Counter) -> ReadDecision:
    total = len(src.lines)
    start, end, label = request.start, request.end, request.label
    text = content_text(src, start, end, label)
    whole = start == 1 and end == total and not request.partial
    kind = Kind.SYMBOL if label else Kind.FULL if whole else Kind.PARTIAL
    latest = work.latest()
    held_before = work.get(src.version) is not None
    if (
        latest is not None
        and latest.origin
        and latest.version != src.version
        and held_before
        and src.output is None
    ):  # the model's edit is gone and the file is back at a version it saw before
        prefix = render_undone_edit(src.path, latest.origin, src.version)
        text, tokens = prefix + text, count(prefix) + (count(text) if label else request.plain)
    else:
        tokens = count(text) if label else request.plain
    work.facts_for(src.version, total, request.seq).add(start, end, frozenset([request.call_id]))
    return ReadDecision(
        kind=kind, text=text, tokens=tokens, base_call_id=None, base_version=None,
        relied=frozenset(), view=work, request=request,
    )  # fmt: skip


def choose_cover(
    runs: Sequence[Span], call_seq: Mapping[str, int], held: Sequence[Span] = ()
) -> list[Deps]:
    """The fewest alternatives (sets of call ids) that together back every run, in the order
    they are first needed. Among equals: the one backing the most lines of the version in
    ``held`` (a wider read outlives a narrower one it supersedes when pruning), then the one
    whose result is oldest (its bytes are stable)."""
    width: dict[Deps, int] = {}
    for s, e, alts in held:
        for unit in alts:
            width[unit] = width.get(unit, 0) + e - s + 1

    def age(unit: Deps) -> int:
        return call_seq.get(_shown_by(unit, call_seq), 1 << 62)

    def rank(unit: Deps) -> tuple[int, int, list[str]]:
        return (-width.get(unit, 0), age(unit), sorted(unit))

    everywhere = set(runs[0][2]).intersection(*(alts for _, _, alts in runs[1:]))
    if everywhere:
        return [min(everywhere, key=rank)]
    chosen: list[Deps] = []
    k = 0
    while k < len(runs):
        alts = runs[k][2]
        reuse = [u for u in chosen if u in alts]
        if reuse:
            k += 1
            continue

        def reach(unit: Deps, k: int = k) -> int:
            j = k
            while j < len(runs) and unit in runs[j][2]:
                j += 1
            return j

        best = min(alts, key=lambda u: (-reach(u), *rank(u)))
        chosen.append(best)
        k = reach(best)
    return chosen


def _shown_by(unit: Deps, call_seq: Mapping[str, int]) -> str:
    """The result that shows a unit's lines as they are now: its newest call (a diff or an edit
    carried the older ones' lines to this version)."""
    return _newest(unit, call_seq)


def _newest(deps: Deps | set[str], call_seq: Mapping[str, int]) -> str:
    return max(deps, key=lambda c: (call_seq.get(c, -1), c))
