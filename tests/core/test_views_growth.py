"""A view's size and cost stay bounded along long edit chains, and its JSON round-trips.

Each edit adds its call id to the lines it carries, so before the bound a session with many
edits of one file wrote megabytes of view JSON per call and each edit got slower (66 ms per
edit after 300 edits of a 400-line file, against 3 ms for the first).
"""

from __future__ import annotations

import json
import os
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filecache import FileCache
from filecache.core.views import (
    MAX_ALTERNATIVES,
    MAX_DEPS,
    Facts,
    PathView,
    Piece,
    Span,
    map_through_edit,
)

_IDS = st.sampled_from([f"c{n}" for n in range(12)])
_DEPS = st.frozensets(_IDS, min_size=1, max_size=6)


@settings(max_examples=int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")), deadline=None)
@given(st.lists(st.tuples(st.integers(1, 30), st.integers(0, 8), _DEPS), max_size=12), st.data())
def test_json_round_trip_keeps_every_fact(
    adds: list[tuple[int, int, frozenset[str]]], data: st.DataObject
) -> None:
    view = PathView(max_versions=3)
    for n, (start, size, deps) in enumerate(adds):
        facts = view.facts_for(f"v{n % 4}", 40, n)
        facts.add(start, start + size, deps)
    if data.draw(st.booleans()):
        view.outlines["v1#auto"] = "c3"
    again = PathView.from_json(view.to_json(), 3)
    assert list(again.versions) == list(view.versions)
    for version, facts in view.versions.items():
        other = again.versions[version]
        assert (other.line_count, other.stamp, other.origin) == (
            facts.line_count, facts.stamp, facts.origin,
        )  # fmt: skip
        assert other.spans == facts.spans
    assert again.outlines == view.outlines
    assert again.to_json() == view.to_json()  # stable: the same view writes the same bytes


def test_older_json_forms_still_read() -> None:
    spelled_out = json.dumps([["v1", 3, 7, [[1, 3, [["a", "b"], ["c"]]]], "e1"]])
    view = PathView.from_json(spelled_out)
    assert view.versions["v1"].spans == [(1, 3, (frozenset({"a", "b"}), frozenset({"c"})))]
    assert view.versions["v1"].origin == "e1"
    oldest = json.dumps({"v": [["v2", 2, 1, [[1, 2, ["a", "b"]]]]], "o": {"v2#auto": "o1"}})
    view = PathView.from_json(oldest)
    assert view.versions["v2"].spans == [(1, 2, (frozenset({"a", "b"}),))]
    assert view.outlines == {"v2#auto": "o1"}


def test_an_edit_carries_the_smallest_backing_and_drops_a_chain_over_the_bound() -> None:
    lines = ["a", "b", "c"]
    facts = Facts("v1", 3)
    chain = frozenset({"r0", *(f"e{n}" for n in range(MAX_DEPS))})
    facts.add(1, 3, chain)
    facts.add(2, 2, frozenset({"r1"}))  # a later ranged read of line 2
    spans = map_through_edit(lines, facts, lines, [Piece(len("a\nb\nc\n"), 0)], "e-new")
    # lines 1 and 3 are only backed by a chain at the bound: no longer facts (the next read
    # shows them again); line 2 is carried on its smallest backing, the ranged read
    assert spans == [(2, 2, (frozenset({"r1", "e-new"}),))]
    carried = facts.map_blocks([(0, 0, 3)], frozenset({"d1"}))
    assert carried == [(2, 2, (frozenset({"r1", "d1"}),))]


def test_a_long_edit_chain_keeps_the_view_small(tmp_path: Path) -> None:
    n_lines = 200
    (tmp_path / "a.py").write_text("".join(f"x{i} = {i}\n" for i in range(n_lines)))
    cache = FileCache(tmp_path)
    session = cache.session("s")
    session.read("a.py", mode="full", call_id="r0")
    for k in range(2 * MAX_DEPS):
        i = (k * 37) % n_lines
        session.edit("a.py", f"x{i} = {i}\n", f"x{i} = {i}\nm{k} = {k}\n", call_id=f"e{k}")
    state = session._state.views["a.py"].to_json()
    # every inserted line has its own chain of later edits; spelled out, the ids alone would be
    # about 2 * MAX_DEPS lines x MAX_DEPS ids x 5 characters = 90 kB per held version
    assert len(state) < 40_000, len(state)
    for facts in session._state.views["a.py"].versions.values():
        assert all(len(d) <= MAX_DEPS for _, _, alts in facts.spans for d in alts)
    # lines carried through more than MAX_DEPS edits since the read are no longer facts: a
    # re-read shows the content again (never a FileRef that relies on the bound chain)
    disk = (tmp_path / "a.py").read_text()
    again = session.read("a.py", mode="full", call_id="r1")
    assert again.kind == "full", again.kind  # lines older than MAX_DEPS edits are no facts
    fresh = session.read("a.py", mode="full", fresh=True, call_id="r2")
    shown = [line.split("\t", 1)[1] for line in fresh.text.splitlines()[1:]]
    assert fresh.kind == "full" and shown == disk.splitlines()
    cache.close()


def well_formed(view: PathView) -> None:
    """Every version's runs are sorted, disjoint and non-empty, each with 1..MAX_ALTERNATIVES
    distinct alternatives of at most MAX_DEPS call ids."""
    for facts in view.versions.values():
        for s, e, alts in facts.spans:
            assert 1 <= s <= e, facts.spans
            assert 1 <= len(alts) == len(set(alts)) <= MAX_ALTERNATIVES, alts
            assert all(len(d) <= MAX_DEPS for d in alts)
        pairs = pairwise(facts.spans)
        assert all(a[1] < b[0] for a, b in pairs), facts.spans


def test_a_diff_keeps_the_runs_disjoint() -> None:
    # a diff keeps its requested range and its hunks (context lines are in both): a run kept
    # once per range it falls in was stored twice, and doubled again at every later diff
    carried = Facts("", 20, [(1, 20, (frozenset({"r0", "d1"}),))])
    carried.restrict([(1, 20), (8, 14)])
    assert carried.spans == [(1, 20, (frozenset({"r0", "d1"}),))]
    facts = Facts("v2", 20)
    facts.add_spans([(1, 10, (frozenset({"a"}),)), (8, 14, (frozenset({"a"}),))])
    assert facts.spans == [(1, 14, (frozenset({"a"}),))]


def test_a_chain_of_diffs_keeps_the_view_small(tmp_path: Path) -> None:
    lines = [f"line {i}: some text that makes the line long enough to matter\n" for i in range(120)]
    path = tmp_path / "a.py"
    path.write_text("".join(lines))
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session("s")
        session.read("a.py", call_id="r0")
        for k in range(1, 13):
            lines[50] = f"changed {k}\n"
            path.write_text("".join(lines))
            assert session.read("a.py", call_id=f"r{k}").kind == "diff"
            view = session._state.views["a.py"]
            well_formed(view)
        # 5 runs per version (before, around and after the changed line); it was 8195 after
        # 12 diffs, and 4.9 MB of JSON
        assert max(len(f.spans) for f in view.versions.values()) <= 5
        assert len(view.to_json()) < 4_000, len(view.to_json())


def previous_release_from_json(text: str) -> tuple[dict[str, str], dict[str, list[Span]]]:
    """``PathView.from_json`` of the release before the compact form (commit dd9d0cc),
    verbatim but for the return: what a process of that release does with a stored view."""
    outlines: dict[str, str] = {}
    versions: dict[str, list[Span]] = {}
    data = json.loads(text)
    if isinstance(data, dict):
        outlines = {str(k): str(v) for k, v in data.get("o", {}).items()}
        data = data.get("v", [])
    for row in data:
        version, line_count, stamp, spans = row[:4]
        runs: list[Span] = []
        for s, e, deps in spans:
            if deps and all(isinstance(d, list) for d in deps):
                alts = tuple(frozenset(d) for d in deps)
            else:  # the older form: one set of call ids
                alts = (frozenset(deps),)
            runs.append((s, e, alts))
        versions[version] = runs
    return outlines, versions


def test_a_process_of_the_previous_release_reads_no_lines_from_the_compact_form() -> None:
    # a fleet sharing a store upgrades one process at a time: an older one must not take the
    # numbers of the compact form for call ids (it named result 0 in a FileRef, then crashed
    # recording it) or crash on a range; seeing no lines is safe (it sends content)
    view = PathView()
    facts = view.facts_for("v1", 9, 1)
    facts.add(1, 9, frozenset({"toolu_01"}))
    facts.add(2, 3, frozenset({"toolu_02", "toolu_03", "toolu_04"}))
    view.outlines["v1#auto"] = "toolu_05"
    outlines, versions = previous_release_from_json(view.to_json())
    assert versions == {} and outlines == view.outlines
    # and the compact form as main wrote it for a while (under "v") still reads
    written = view.to_json().replace('"f":', '"v":')
    assert PathView.from_json(written).versions["v1"].spans == facts.spans


def test_a_damaged_stored_view_means_the_model_holds_nothing_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    (tmp_path / "a.py").write_text("".join(f"x{i} = {i}\n" for i in range(50)))
    store = tmp_path / "s.db"
    with FileCache(tmp_path, store=str(store)) as cache:
        assert cache.session("s").read("a.py", call_id="r0").kind == "full"
    for damaged in ('{"i":["r0"],"f":[["v",50,1,[[1,50,[[7]]]],""]]}', "not json", "[[1]]"):
        with sqlite3.connect(store) as db:
            db.execute("UPDATE views SET state = ? WHERE session_id = 's'", (damaged,))
        with FileCache(tmp_path, store=str(store)) as cache, caplog.at_level("WARNING"):
            session = cache.session("s")
            # nothing to refer to: content again (never a FileRef into the damaged row)
            assert session.read("a.py", call_id="r1").kind == "full"
            assert "unreadable" in caplog.text
            # the row was replaced by the read's commit: the next read is a FileRef to it
            again = session.read("a.py", call_id="r2")
            assert again.kind == "unchanged" and again.base_call_id == "r1"
        caplog.clear()


def _line_by_line(
    old_lines: list[str], old: Facts | None, new_lines: list[str], pieces: list[Piece], cid: str
) -> list[Span]:
    """``map_through_edit`` by its definition, one new line at a time: the line is a fact when
    each piece it copies from is carried (``Facts.carried_cover`` of the old lines it spans)."""

    def starts(lines: list[str]) -> list[int]:
        out = [0]
        for line in lines:
            out.append(out[-1] + len(line) + (0 if line.endswith("\x00") else 1))
        return out

    old_starts, new_starts = starts(old_lines), starts(new_lines)
    at = [sum(p.length for p in pieces[:n]) for n in range(len(pieces))]
    out: list[Span] = []
    for idx in range(len(new_lines)):
        ls, le = new_starts[idx], new_starts[idx + 1]
        deps: frozenset[str] | None = frozenset([cid])
        for p, ps in zip(pieces, at, strict=True):
            if p.src is None or not p.length or ps + p.length <= ls or ps >= le:
                continue
            lo, hi = max(ls, ps) - ps + p.src, min(le, ps + p.length) - ps + p.src
            first = sum(1 for s in old_starts if s <= lo) - 1
            last = sum(1 for s in old_starts if s <= hi - 1) - 1
            have = old.carried_cover(first + 1, last + 1) if old is not None else None
            if have is None or len(have) >= MAX_DEPS or deps is None:
                deps = None
                break
            deps = deps | have
        if deps is not None and len(deps) <= MAX_DEPS:
            if out and out[-1][1] == idx and out[-1][2] == (deps,):
                out[-1] = (out[-1][0], idx + 1, (deps,))
            else:
                out.append((idx + 1, idx + 1, (deps,)))
    return out


_WORDS = st.sampled_from(["a", "b", "ab", "x = 1", "", "def f():", "  return"])
_BIG = frozenset(f"e{n}" for n in range(MAX_DEPS))  # an alternative at the bound


@settings(max_examples=int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")), deadline=None)
@given(
    st.lists(_WORDS, min_size=0, max_size=14),
    st.booleans(),
    st.lists(
        st.tuples(st.integers(1, 15), st.integers(0, 6), st.one_of(_DEPS, st.just(_BIG))),
        max_size=6,
    ),
    st.data(),
)
def test_an_edit_maps_facts_a_run_at_a_time_as_line_by_line(
    words: list[str],
    final_newline: bool,
    adds: list[tuple[int, int, frozenset[str]]],
    data: st.DataObject,
) -> None:
    from filecache.core.edits import apply_edit
    from filecache.core.text import split_lines
    from filecache.errors import EditError

    text = "\n".join(words) + ("\n" if final_newline and words else "")
    old_lines = split_lines(text)
    facts = None
    if adds:
        facts = Facts("v", len(old_lines))
        for start, size, deps in adds:
            facts.add(start, min(start + size, len(old_lines)), deps)
    if not text:
        return
    a = data.draw(st.integers(0, len(text) - 1))
    b = data.draw(st.integers(a + 1, min(len(text), a + 12)))
    new = data.draw(st.sampled_from(["", "z", "\n", "q\nr\n", text[a:b] + "\n"]))
    try:
        edited, pieces, _ = apply_edit("f.py", text, text[a:b], new, True)
    except EditError:
        return
    new_lines = split_lines(edited)
    got = map_through_edit(old_lines, facts, new_lines, pieces, "e-new")
    assert got == _line_by_line(old_lines, facts, new_lines, pieces, "e-new")


@settings(max_examples=int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")), deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 12), st.integers(0, 4), _DEPS), max_size=8),
    st.frozensets(_IDS, max_size=3),
    st.data(),
)
def test_forgets_says_exactly_whether_forget_changes_a_view(
    adds: list[tuple[int, int, frozenset[str]]], ids: frozenset[str], data: st.DataObject
) -> None:
    view = PathView(max_versions=3)
    for n, (start, size, deps) in enumerate(adds):
        view.facts_for(f"v{n % 4}", 20, n).add(start, start + size, deps)
    if data.draw(st.booleans()):
        view.facts_for("empty", 20, 99)  # a version without facts: forget drops it
    if data.draw(st.booleans()):  # adjacent runs left unmerged (a stored view): forget merges
        alts = (data.draw(_DEPS),)
        view.facts_for("split", 20, 100).spans = [(1, 3, alts), (4, 6, alts)]
    if data.draw(st.booleans()):
        view.outlines["v1#auto"] = data.draw(_IDS)
    before = (view.to_json(), [f.spans for f in view.versions.values()])
    after = view.copy()
    after.forget(ids)
    changed = (after.to_json(), [f.spans for f in after.versions.values()]) != before
    assert view.forgets(ids) == changed
