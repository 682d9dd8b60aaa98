"""The one invariant, as a property: the model's reconstructed view always equals disk.

A simulated model keeps what it was shown, keyed by the short version hash that every answer
states, and rebuilds each answer from the results still in its context: content answers as
shown, ``unchanged`` from earlier results of the same version, ``diff`` by applying
``unidiff``-parsed hunks line by line (not filecache's diff code), and its own edits by
replaying them on a per-character mask of what it knew. Random sequences of reads, edits,
writes, outside changes (same size, mtime restored), deletions, re-creations and ``forget``
must never leave it with a line that differs from disk, or an answer that relies on a result
it no longer has.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from unidiff import PatchSet

from filecache import EditError, FileCache, MissingFileError, RangeError
from filecache.core import views
from filecache.core.text import NO_NEWLINE

PATHS = ("a.txt", "sub/b.txt")
# Long enough lines that FileRefs and diffs are cheaper than content (they are only sent then).
WORDS = ("alpha", "beta", "gamma", "x = compute(1)", "    return value")
LINE = st.sampled_from([(w + " ") * 6 for w in WORDS] + ["", "}", "delta carriage return \r"])


@st.composite
def contents(draw: st.DrawFn) -> str:
    lines = draw(st.lists(LINE, min_size=4, max_size=80))
    text = "\n".join(lines)
    if lines and draw(st.booleans()):
        text += "\n"
    return text


FULL_READ = st.tuples(st.just("read"), st.sampled_from(PATHS), st.none(), st.none(), st.booleans())
PART_READ = st.tuples(
    st.just("read"),
    st.sampled_from(PATHS),
    st.integers(1, 30),
    st.one_of(st.none(), st.integers(1, 20)),
    st.just(False),
)
EDIT = st.tuples(
    st.just("edit"),
    st.sampled_from(PATHS),
    st.integers(0, 2000),
    st.integers(1, 90),
    LINE,
    st.booleans(),
)
TWEAK = st.tuples(st.just("tweak"), st.sampled_from(PATHS), st.integers(0, 60), LINE, st.booleans())
WEIGHTED = [
    (34, FULL_READ),
    (14, PART_READ),
    (14, TWEAK),
    (12, EDIT),
    (4, st.tuples(st.just("write"), st.sampled_from(PATHS), contents())),
    (4, st.tuples(st.just("outside"), st.sampled_from(PATHS), contents())),
    (5, st.tuples(st.just("same_size"), st.sampled_from(PATHS), st.integers(0, 2000))),
    (3, st.tuples(st.just("delete"), st.sampled_from(PATHS))),
    (10, st.tuples(st.just("forget"), st.integers(0, 2**16))),
]


def _pick(r: int) -> st.SearchStrategy[tuple]:
    for weight, strategy in WEIGHTED:
        if r < weight:
            return strategy
        r -= weight
    return FULL_READ


OPS = st.integers(0, sum(w for w, _ in WEIGHTED) - 1).flatmap(_pick)


KINDS: dict[str, int] = {}


@dataclass
class Model:
    """What the simulated model holds: per path and short hash, per line, alternatives (text,
    deps). Per path: two files with the same bytes are two things the model read."""

    beliefs: dict[tuple[str, str], dict[int, list[tuple[str, frozenset[str]]]]] = field(
        default_factory=dict
    )
    forgotten: set[str] = field(default_factory=set)

    def add(self, path: str, h: str, line: int, text: str, deps: frozenset[str]) -> None:
        self.beliefs.setdefault((path, h), {}).setdefault(line, []).insert(0, (text, deps))

    def get(self, path: str, h: str, line: int) -> tuple[str, frozenset[str]] | None:
        held = self.every(path, h, line)
        return held[0] if held else None

    def every(self, path: str, h: str, line: int) -> list[tuple[str, frozenset[str]]]:
        """Every way the model can still rebuild the line (newest first)."""
        return [
            (text, deps)
            for text, deps in self.beliefs.get((path, h), {}).get(line, [])
            if not deps & self.forgotten
        ]


def disk_lines(path: Path) -> list[str]:
    """Lines as shown to the model: without '\\n'; an unterminated last line is marked."""
    text = path.read_bytes().decode()
    lines = text.split("\n")
    last = lines.pop()
    return lines + ([last + "<noeol>"] if last else [])


def short(version: str) -> str:
    return version.removeprefix("xxh3:")[:8]


UNDONE = re.compile(r"\[filecache\] \S+: your edit \S+ is no longer on disk .*\n")


def without_undone_note(text: str) -> str:
    """The answer after a leading note that the model's own change was undone outside."""
    found = UNDONE.match(text)
    return text[found.end() :] if found else text


def absorb_content(model: Model, result, disk: list[str]) -> None:
    head, _, body = without_undone_note(result.text).partition("\n")
    h = re.search(r"xxh3 ([0-9a-f]{8})\]$", head).group(1)
    assert h == short(result.version)
    rows = body.split("\n")
    assert rows.pop() == ""
    if rows and rows[-1] == NO_NEWLINE:
        rows.pop()
        rows[-1] += "<noeol>"
    shown = {}
    for row in rows:
        number, _, text = row.partition("\t")
        shown[int(number)] = text
    assert sorted(shown) == list(range(result.start, result.end + 1))
    for n, text in shown.items():
        assert text == disk[n - 1], f"content line {n} differs from disk"
        model.add(result.path, h, n, text, frozenset([result.call_id]))


def hunk_bounds(h) -> tuple[int, int, int, int]:
    """(source first, source end-excl, target first, target end-excl), 1-based."""
    s0 = h.source_start if h.source_length else h.source_start + 1
    t0 = h.target_start if h.target_length else h.target_start + 1
    return s0, s0 + h.source_length, t0, t0 + h.target_length


def absorb_diff(model: Model, result, disk: list[str]) -> None:
    head, _, rest = without_undone_note(result.text).partition("\n")
    old_h, new_h = re.search(r"xxh3 ([0-9a-f]{8}) -> ([0-9a-f]{8})", head).groups()
    assert new_h == short(result.version)
    assert result.base_call_id not in model.forgotten
    mapped = re.search(r"\(lines (\d+)-(\d+) of your version\)", head)
    diff_text = rest.rsplit("\n(", 1)[0] + "\n"
    hunks = list(PatchSet(diff_text)[0]) if diff_text.startswith("---") else []
    target: dict[int, str] = {}  # new-side lines the hunks show (context and added)
    for h in hunks:
        n = hunk_bounds(h)[2]
        last = None
        for line in h:
            if line.line_type == "\\":  # "\ No newline at end of file" for the line before
                if last is not None:
                    target[last] += "<noeol>"
                continue
            if line.is_removed:
                last = None
                continue
            target[n] = line.value[:-1] if line.value.endswith("\n") else line.value
            last = n
            n += 1
    for n in range(result.start, result.end + 1):
        if n in target:
            text, deps = target[n], frozenset([result.call_id])
        else:
            offset = None
            before = [h for h in hunks if hunk_bounds(h)[3] <= n]
            after = [h for h in hunks if hunk_bounds(h)[2] > n]
            if before:
                s0, s1, t0, t1 = hunk_bounds(before[-1])
                offset = t1 - s1
            elif after:
                s0, s1, t0, t1 = hunk_bounds(after[0])
                offset = t0 - s0
            else:
                assert mapped, "a diff with no hunks must say where the lines were"
                offset = result.start - int(mapped.group(1))
            ways = model.every(result.path, old_h, n - offset)
            assert ways, f"diff relies on line {n - offset} of {old_h}, not held"
            for text, deps in reversed(ways):  # the diff carries every way the model has it
                assert text == disk[n - 1], f"diff reconstructs line {n} wrong"
                model.add(result.path, new_h, n, text, deps | {result.call_id})
            continue
        assert text == disk[n - 1], f"diff reconstructs line {n} wrong"
        model.add(result.path, new_h, n, text, deps)
    for n, text in target.items():
        model.add(result.path, new_h, n, text, frozenset([result.call_id]))


def absorb_unchanged(model: Model, result, disk: list[str]) -> None:
    # the FileRef's hash (a raw or shell FileRef carries the seal after it)
    h = re.search(r", ([0-9a-f]{8})(?:; seal [0-9a-f]{6})?\)\n", result.text).group(1)
    assert h == short(result.version)
    assert result.base_call_id not in model.forgotten
    for n in range(result.start, result.end + 1):
        got = model.get(result.path, h, n)
        assert got is not None, f"FileRef relies on line {n} of {h}, which the model lacks"
        assert got[0] == disk[n - 1], f"FileRef: line {n} is stale"


def absorb_own_change(
    model: Model, path: str, before: str | None, after: str, cid: str, pieces
) -> None:
    """The model applies its own edit to what it knew, character by character.

    A line of the result keeps every way the model can rebuild it: each combination of a way
    of every old line it copies characters from (up to 16), plus the edit itself. Carrying only
    the newest way would lose the line once that result is forgotten, though an older one
    still rebuilds it (a fresh or ranged read of lines already held gives a second way)."""
    new_h = short_hash(after)
    if pieces is None:  # a write: the model knows every line it wrote
        for n, text in enumerate(disk_lines_of(after), 1):
            model.add(path, new_h, n, text, frozenset([cid]))
        return
    old_h = short_hash(before)
    # per character of `before`: its line number if the model holds that line, else None
    known: list[int | None] = []
    pieces_of_before = before.split("\n")
    for n, line in enumerate(pieces_of_before, 1):
        width = len(line) + (0 if n == len(pieces_of_before) else 1)
        known.extend([n if model.every(path, old_h, n) else None] * width)
    chars: list[int | None] = []  # 0: written by this edit
    pos = 0
    for start, end, new in pieces:
        chars.extend(known[pos:start])
        chars.extend([0] * len(new))
        pos = end
    chars.extend(known[pos:])
    assert len(chars) == len(after)
    shown = disk_lines_of(after)
    offset = 0
    for n, text in enumerate(shown, 1):
        width = len(text.removesuffix("<noeol>")) + (0 if text.endswith("<noeol>") else 1)
        span = chars[offset : offset + width]
        offset += width
        if any(c is None for c in span):
            continue
        sources = sorted({c for c in span if c})
        options = [[deps for _, deps in model.every(path, old_h, c)] for c in sources]
        ways = [
            frozenset().union(*combo) | {cid}
            for combo in itertools.islice(itertools.product(*options), 16)
        ]
        for deps in reversed(ways):  # model.add puts each first: the newest stays first
            model.add(path, new_h, n, text, deps)


def disk_lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    last = lines.pop()
    return lines + ([last + "<noeol>"] if last else [])


def short_hash(text: str) -> str:
    from filecache.core.hashing import version_of

    return short(version_of(text.encode()))


def edit_pieces(text: str, old: str, new: str) -> list[tuple[int, int, str]]:
    out, pos = [], 0
    while (at := text.find(old, pos)) >= 0:
        out.append((at, at + len(old), new))
        pos = at + len(old)
    return out


def check_confirmation(text: str, before: str, old: str, new: str) -> None:
    """The model places its edit by the confirmation: it must name every place, exactly.

    Computed here by counting newlines before each replacement in the edited text (the
    simulated model above uses the harness's own positions, so this keeps the confirmation
    honest)."""
    after = before.replace(old, new)
    expected, shift, pos = [], 0, 0
    while (at := before.find(old, pos)) >= 0:
        start = at + shift  # where this replacement's new text begins in ``after``
        line = after[:start].count("\n") + 1
        if new:
            last = after[: start + len(new) - 1].count("\n") + 1
            expected.append(f"line {line}" if last == line else f"lines {line}-{last}")
        else:
            expected.append(f"lines removed before line {line}")
        shift += len(new) - len(old)
        pos = at + len(old)
    if len(expected) > 20:
        assert "changed:" not in text
    else:
        assert f"; changed: {', '.join(expected)}." in text, (text, expected)


def run_ops(root: Path, ops, ratio: float, versions: int, store) -> None:
    model = Model()
    issued: list[str] = []
    with FileCache(root, store=store, diff_max_ratio=ratio, versions_per_path=versions) as cache:
        session = cache.session("prop")
        for op in ops:
            kind, rel = op[0], op[1] if len(op) > 1 else None
            path = root / rel if isinstance(rel, str) else None
            if kind == "read":
                _, _, offset, limit, fresh = op
                try:
                    # mode="full": outlines hold no lines (tested in test_cache_outline.py)
                    result = session.read(rel, offset=offset, limit=limit, fresh=fresh, mode="full")
                except (MissingFileError, RangeError):
                    continue
                issued.append(result.call_id)

                KINDS[result.kind] = KINDS.get(result.kind, 0) + 1
                disk = disk_lines(path)
                if result.kind in ("full", "partial"):
                    absorb_content(model, result, disk)
                elif result.kind == "unchanged":
                    absorb_unchanged(model, result, disk)
                elif result.kind == "diff":
                    absorb_diff(model, result, disk)
                else:
                    raise AssertionError(result.kind)
                if result.kind == "unchanged":
                    assert result.tokens < result.tokens_full
                elif result.kind == "diff":
                    assert result.tokens <= ratio * result.tokens_full
            elif kind == "edit":
                _, _, at, length, new, replace_all = op
                if not path.exists():
                    continue
                before = path.read_bytes().decode()
                old = before[at % (len(before) or 1) :][:length]
                if not old:
                    continue
                try:
                    result = session.edit(rel, old, new, replace_all=replace_all)
                except EditError:
                    assert path.read_bytes().decode() == before
                    continue
                issued.append(result.call_id)
                after = path.read_bytes().decode()
                assert after == before.replace(old, new)
                check_confirmation(result.text, before, old, new)
                absorb_own_change(
                    model, rel, before, after, result.call_id, edit_pieces(before, old, new)
                )
            elif kind == "write":
                result = session.write(rel, op[2])
                issued.append(result.call_id)
                absorb_own_change(model, rel, None, op[2], result.call_id, None)
            elif kind == "outside":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(op[2].encode())
            elif kind == "same_size":
                if not path.exists() or not path.stat().st_size:
                    continue
                st_before = path.stat()
                data = bytearray(path.read_bytes())
                i = op[2] % len(data)
                if chr(data[i]) in "\r\n":
                    continue
                data[i] = ord("Z") if data[i] != ord("Z") else ord("Y")
                path.write_bytes(bytes(data))
                os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
            elif kind == "tweak":  # an outside change of one line: replaced or inserted
                if not path.exists():
                    continue
                lines = path.read_bytes().decode().split("\n")
                i = op[2] % len(lines)
                lines[i : i + (0 if op[4] else 1)] = [op[3]]
                path.write_bytes("\n".join(lines).encode())
            elif kind == "delete":
                if path.exists():
                    path.unlink()
            elif kind == "forget":
                if issued:
                    chosen = {c for i, c in enumerate(issued) if (op[1] >> (i % 16)) & 1}
                    session.forget(chosen)
                    model.forgotten |= chosen
            for view in session._state.views.values():
                check_runs(view)


def check_runs(view: views.PathView) -> None:
    """The view's runs are sorted and disjoint, each alternative within the bound (a run kept
    twice is doubled at every later diff)."""
    for facts in view.versions.values():
        spans = facts.spans
        assert all(a[1] < b[0] for a, b in pairwise(spans)), spans
        assert all(s <= e and alts for s, e, alts in spans), spans
        assert all(len(d) <= views.MAX_DEPS for _, _, alts in spans for d in alts)


@settings(
    max_examples=int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    initial=st.tuples(contents(), contents()),
    ops=st.lists(OPS, min_size=8, max_size=40),
    ratio=st.sampled_from([0.6, 1.0, 50.0]),
    versions=st.sampled_from([1, 2, 4]),
    max_deps=st.sampled_from([2, 3, views.MAX_DEPS]),
)
def test_model_view_equals_disk(tmp_path_factory, initial, ops, ratio, versions, max_deps) -> None:
    root = tmp_path_factory.mktemp("root")
    for rel, text in zip(PATHS, initial, strict=True):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode())
    # a small bound on call ids per fact makes edit and diff chains cross it (dropping facts
    # must stay safe)
    default, views.MAX_DEPS = views.MAX_DEPS, max_deps
    try:
        run_ops(root, ops, ratio, versions, ":memory:")
    finally:
        views.MAX_DEPS = default


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_continued_session_keeps_the_invariant(tmp_path: Path, store: str) -> None:
    """A second FileCache on the same store continues the session (and stays correct)."""
    (tmp_path / "a.txt").write_text("".join(f"line {i} of a file\n" for i in range(60)))
    db = ":memory:" if store == "memory" else str(tmp_path / "s.db")
    with FileCache(tmp_path, store=db) as cache:
        first = cache.session("s").read("a.txt")
    assert first.kind == "full"
    with FileCache(tmp_path, store=db) as cache:
        again = cache.session("s").read("a.txt")
    assert again.kind == ("unchanged" if store == "sqlite" else "full")


def teardown_module() -> None:
    print("answer kinds over all examples:", KINDS)


PARTIAL_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("read"),
            st.just("a.txt"),
            st.integers(1, 60),
            st.integers(1, 30),
            st.just(False),
        ),
        st.tuples(st.just("read"), st.just("a.txt"), st.none(), st.none(), st.just(False)),
        st.tuples(st.just("tweak"), st.just("a.txt"), st.integers(0, 80), LINE, st.booleans()),
        st.tuples(st.just("forget"), st.integers(0, 2**16)),
    ),
    min_size=4,
    max_size=25,
)


@settings(
    max_examples=int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(lines=st.lists(LINE, min_size=30, max_size=80), ops=PARTIAL_OPS)
def test_partial_reads_and_diffs_stay_exact(tmp_path_factory, lines, ops) -> None:
    """Ranged reads of a long file that changes between them: partial diffs, moved lines."""
    root = tmp_path_factory.mktemp("root")
    (root / "a.txt").write_text("\n".join(lines) + "\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("")
    first = [("read", "a.txt", None, None, False)]
    run_ops(root, first + ops, 50.0, 4, ":memory:")
