"""The read planner: the answer rules of issue 11 as regressions, and the never-stale property
run against ``plan_lines`` (the line reads of ``plan_read``) directly (no file system, no
store), with mutants it must catch."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filecache import FileCache
from filecache.core import planner as planner_module
from filecache.core.edits import MAX_LANDINGS, plan_edit, plan_write
from filecache.core.hashing import version_of
from filecache.core.planner import (
    ReadAsk,
    ReadLookups,
    ReadRequest,
    ReadRules,
    check_read,
    plan_lines,
    plan_read,
    streams_window,
)
from filecache.core.results import Kind, Source
from filecache.core.text import content_text, join_lines, split_lines
from filecache.core.tokens import TokenCounter
from filecache.core.views import Facts, PathView
from filecache.errors import EditError, RequestError

TEXT = "".join(
    f"line {i}: some text that makes the line long enough to matter\n" for i in range(120)
)


@pytest.fixture
def cache(tmp_path: Path) -> FileCache:
    (tmp_path / "a.py").write_text(TEXT)
    return FileCache(tmp_path, store=":memory:")


def test_a_fileref_never_names_a_narrower_later_read(cache: FileCache) -> None:
    s = cache.session()
    s.read("a.py", call_id="cA")
    assert s.read("a.py", offset=1, limit=3, call_id="cB").base_call_id == "cA"
    again = s.read("a.py", call_id="cC")
    assert again.kind == "unchanged" and again.base_call_id == "cA"
    assert "cB" not in again.text


def test_a_symbol_read_is_not_named_for_the_whole_file(tmp_path: Path) -> None:
    body = "".join(f"def f{i}(x):\n    return x + {i}  # some words to make it longer\n\n"
                   for i in range(40))  # fmt: skip
    (tmp_path / "m.py").write_text(body)
    with FileCache(tmp_path, store=":memory:") as cache:
        s = cache.session()
        s.read("m.py", mode="full", call_id="cA")
        s.read("m.py", symbol="f3", fresh=True, call_id="cD")
        again = s.read("m.py", mode="full", call_id="cE")
        assert again.kind == "unchanged" and again.base_call_id == "cA"


def test_forgetting_a_narrow_read_keeps_the_full_one(cache: FileCache) -> None:
    s = cache.session()
    s.read("a.py", call_id="a1")
    s.read("a.py", offset=1, limit=3, fresh=True, call_id="a2")
    s.forget(["a2"])
    again = s.read("a.py", call_id="a3")
    assert again.kind == "unchanged" and again.base_call_id == "a1"


def test_an_edit_carries_the_wide_read_not_a_narrower_later_one(cache: FileCache) -> None:
    # the lines a ranged re-read shows again are backed twice; an edit must carry them on the
    # full read (with the edits since), or forgetting the narrow read loses lines that the
    # full read and the edits still back
    s = cache.session()
    s.read("a.py", call_id="r0")
    s.edit("a.py", "line 30:", "LINE 30:", call_id="e1")
    s.read("a.py", offset=5, limit=6, fresh=True, call_id="r2")
    s.edit("a.py", "line 40:", "LINE 40:", call_id="e3")
    s.forget(["r2"])
    again = s.read("a.py", call_id="r4")
    assert again.kind == "unchanged" and again.base_call_id == "e3"


def test_an_outline_is_not_sent_twice(tmp_path: Path) -> None:
    body = "".join(f"def function_{i}(argument):\n    return argument * {i} + 1\n\n"
                   for i in range(400))  # fmt: skip
    (tmp_path / "big.py").write_text(body)
    with FileCache(tmp_path, store=":memory:", outline_threshold=500) as cache:
        s = cache.session()
        first = s.read("big.py", call_id="o1")
        assert first.kind == "outline"
        second = s.read("big.py", call_id="o2")
        assert second.kind == "outline" and second.base_call_id == "o1"
        assert second.tokens <= 32 < first.tokens
        s.forget(["o1"])
        assert s.read("big.py", call_id="o3").tokens == first.tokens  # sent again
        assert s.read("big.py", fresh=True, call_id="o4").kind == "full"


def test_an_undone_edit_is_not_unchanged(cache: FileCache, tmp_path: Path) -> None:
    s = cache.session()
    s.read("a.py", call_id="r1")
    s.edit("a.py", "line 7: some", "line 7: SOME", call_id="r2")
    (tmp_path / "a.py").write_text(TEXT)  # someone restores the file
    again = s.read("a.py", call_id="r3")
    assert again.kind != "unchanged"
    assert "your edit r2 is no longer on disk" in again.text
    assert "-line 7: SOME" in again.text  # a diff from what the model believes


def test_a_file_changed_back_is_a_diff_from_the_version_the_model_believes(
    cache: FileCache, tmp_path: Path
) -> None:
    s = cache.session()
    s.read("a.py", call_id="r1")
    (tmp_path / "a.py").write_text(TEXT.replace("line 9:", "line nine:"))
    assert s.read("a.py", call_id="r2").kind == "diff"
    (tmp_path / "a.py").write_text(TEXT)
    back = s.read("a.py", call_id="r3")
    assert back.kind == "diff" and back.base_call_id == "r2"
    assert "no longer on disk" not in back.text  # not the model's own change


# -- the property, against the planner alone ---------------------------------------------------

COUNTER = TokenCounter("o200k")
LINES = [f"value_{i} = compute({i}, 'some words so the line is not tiny')" for i in range(12)]


@dataclass
class World:
    """A file's versions and what a simulated model was shown, per call id."""

    text: str
    view: PathView | None = None
    seq: int = 0
    shown: dict[str, dict[tuple[str, int], str]] | None = None  # call -> (version, line) -> text
    versions: dict[str, list[str]] | None = None
    forgotten: set[str] | None = None


def _src(text: str) -> Source:
    lines = split_lines(text)
    return Source(
        key="f.py", path="f.py", version=version_of(text.encode()), lines=lines, numbered=True
    )


def _answer(world: World, start: int | None, count: int | None, fresh: bool, cid: str) -> None:
    """Ask the planner, then check its answer against what the model can rebuild."""
    assert world.shown is not None and world.versions is not None and world.forgotten is not None
    src = _src(world.text)
    total = len(src.lines)
    if total == 0:
        return
    first = min(start or 1, total)
    last = total if count is None else min(total, first + count - 1)
    world.seq += 1
    world.versions[src.version] = list(src.lines)
    bases = {v: world.versions[v] for v in world.versions}
    call_seq = {c: n for n, c in enumerate(world.shown)}
    request = ReadRequest(
        src=src,
        start=first,
        end=last,
        call_id=cid,
        seq=world.seq,
        plain=COUNTER.count(content_text(src, first, last)),
        fresh=fresh,
    )
    before = None if world.view is None else world.view.to_json()
    decision = plan_lines(request, world.view, bases=bases, call_seq=call_seq,
                         count=COUNTER.count, diff_max_ratio=0.9, max_versions=3)  # fmt: skip
    assert (None if world.view is None else world.view.to_json()) == before, "input changed"
    shown: dict[tuple[str, int], str] = {}
    if decision.kind in (Kind.FULL, Kind.PARTIAL):
        for n in range(first, last + 1):
            shown[(src.version, n)] = src.lines[n - 1]
    elif decision.kind == Kind.UNCHANGED:
        names = re.search(r"since your results? (\S+?(?: and \S+?)*) \(", decision.text)
        assert names is not None
        named = names.group(1).split(" and ")
        assert decision.base_call_id == named[0]
        for n in range(first, last + 1):
            got = [world.shown[c].get((src.version, n)) for c in named if c not in world.forgotten]
            assert src.lines[n - 1] in got, f"line {n}: no named result shows it as it is"
    elif decision.kind == Kind.DIFF:
        assert decision.base_version is not None and decision.base_call_id not in world.forgotten
        old = world.versions[decision.base_version]
        for n, line in enumerate(old, 1):  # the model's copy of the base: what it was shown
            held = [v.get((decision.base_version, n)) for c, v in world.shown.items()
                    if c not in world.forgotten]  # fmt: skip
            if line in held:
                shown[(decision.base_version, n)] = line
        # the diff itself (checked by unidiff elsewhere) gives the requested lines and every
        # line of its hunks' new side
        hunk_lines = set(range(first, last + 1))
        for c, d in re.findall(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", decision.text, re.M):
            hunk_lines |= set(range(int(c), int(c) + int(d or 1)))
        for n in sorted(hunk_lines):
            if 1 <= n <= total:
                shown[(src.version, n)] = src.lines[n - 1]
    world.shown[cid] = shown
    for relied in decision.relied:
        assert relied in world.shown and relied not in world.forgotten, f"relies on {relied}"
    # every fact of the new view must be a line some held result showed for that version
    for facts in decision.view.versions.values():
        for s, e, alts in facts.spans:
            for deps in alts:
                assert not deps & world.forgotten
                assert deps <= set(world.shown), f"a fact relies on unknown {deps}"
            for n in range(s, e + 1):
                text = world.versions.get(facts.version, [None] * (n))[n - 1]
                assert any(
                    world.shown[c].get((facts.version, n)) == text for deps in alts for c in deps
                ), f"fact {n} of {facts.version[:12]}"
    world.view = decision.view


OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("read"),
            st.one_of(st.none(), st.integers(1, 12)),
            st.one_of(st.none(), st.integers(1, 6)),
            st.booleans(),
        ),  # fmt: skip
        st.tuples(st.just("change"), st.integers(0, 11), st.sampled_from(LINES)),
        st.tuples(st.just("forget"), st.integers(0, 50)),
    ),
    max_size=30,
)


def run_world(ops: list[tuple[object, ...]]) -> None:
    world = World(text=join_lines(LINES), shown={}, versions={}, forgotten=set())
    for k, op in enumerate(ops):
        if op[0] == "read":
            _, start, count, fresh = op
            _answer(world, start, count, bool(fresh), f"c{k}")  # type: ignore[arg-type]
        elif op[0] == "change":
            lines = split_lines(world.text)
            lines[int(op[1]) % len(lines)] = str(op[2])  # type: ignore[call-overload]
            world.text = join_lines(lines)
        elif op[0] == "forget" and world.shown:
            assert world.forgotten is not None
            gone = list(world.shown)[int(op[1]) % len(world.shown)]  # type: ignore[call-overload]
            world.forgotten.add(gone)
            if world.view is not None:
                world.view = world.view.copy()
                world.view.forget({gone})


EXAMPLES = int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_planner_never_answers_from_what_the_model_lacks(ops: list[tuple[object, ...]]) -> None:
    run_world(ops)


CAUGHT = [
    ("read", None, None, False),
    ("read", 1, 3, True),
    ("read", None, None, False),
    ("change", 2, LINES[5]),
    ("read", None, None, False),
    ("read", None, None, False),
]


def _mutant_names_the_newest(runs, call_seq, held=()):  # type: ignore[no-untyped-def]
    """A FileRef that names the newest result covering any line (the old rule)."""
    units = {u for _, _, alts in runs for u in alts}
    return [max(units, key=lambda u: max(call_seq.get(c, -1) for c in u))]


@pytest.mark.parametrize(
    ("target", "mutant"),
    [
        ("choose_cover", _mutant_names_the_newest),
        ("_diff", lambda *args: None),  # harmless: content instead of a diff; must NOT fail
    ],
)
def test_the_property_catches_mutants(
    monkeypatch: pytest.MonkeyPatch, target: str, mutant: Callable[..., object]
) -> None:
    monkeypatch.setattr(planner_module, target, mutant)
    if target == "_diff":
        run_world(CAUGHT)  # sending content is never wrong
        return
    with pytest.raises(AssertionError):
        run_world(CAUGHT)


# -- plan_read's own decisions (lines, symbol, window, outline), pure -------------------------


def _lookups(
    src: Source, asked: list[tuple[object, ...]], symbol: tuple[int, int, str] = (3, 4, "f1")
) -> ReadLookups:
    """Lookups that record what the planner asked of the version."""

    def outline(budget: int | None) -> str:
        asked.append(("outline", budget))
        return f"outline of {src.path}\n"

    def lookup_symbol(name: str) -> tuple[int, int, str]:
        asked.append(("symbol", name))
        return symbol

    def lines(version: str) -> list[str] | None:
        asked.append(("lines", version))
        return None

    return ReadLookups(
        count=COUNTER.count,
        plain=lambda s, e: COUNTER.count(content_text(src, s, e)),
        outline=outline,
        symbol=lookup_symbol,
        lines=lines,
        seal=lambda: (asked.append(("seal",)), "5ea1ed")[1],
    )


RULES = ReadRules(outline_threshold=50, diff_max_ratio=0.9, max_versions=3)


def test_plan_read_outlines_a_large_whole_read_and_nothing_else() -> None:
    src = _src(TEXT)
    asked: list[tuple[object, ...]] = []
    plain = COUNTER.count(content_text(src, 1, len(src.lines)))
    lookups = _lookups(src, asked)
    auto = plan_read(ReadAsk(src=src, call_id="c1", seq=1), None, lookups=lookups, rules=RULES,
                     call_seq={})  # fmt: skip
    assert auto.kind == Kind.OUTLINE and asked == [("outline", plain // 5)]
    assert (auto.request.start, auto.request.end, auto.request.plain) == (1, 120, plain)
    for ask in (
        ReadAsk(src=src, call_id="c2", seq=2, fresh=True),  # the recovery path: content
        ReadAsk(src=src, call_id="c3", seq=3, offset=1),  # a range
        ReadAsk(src=src, call_id="c4", seq=4, mode="full"),
        ReadAsk(src=src, call_id="c5", seq=5, auto_outline=False),  # the caller did not opt in
    ):
        asked.clear()
        decision = plan_read(ask, None, lookups=lookups, rules=RULES, call_seq={})
        assert decision.kind in (Kind.FULL, Kind.PARTIAL), ask
        assert asked == []  # no version held: no diff base's lines asked for
    held = plan_read(ReadAsk(src=src, call_id="c6", seq=6), auto.view, lookups=lookups,
                     rules=RULES, call_seq={"c1": 1})  # fmt: skip
    assert held.kind == Kind.OUTLINE and held.base_call_id == "c1"  # a reference, not rendered


def test_plan_read_renders_an_explicit_outline_only_when_not_held() -> None:
    src = _src(TEXT)
    asked: list[tuple[object, ...]] = []
    lookups = _lookups(src, asked)
    first = plan_read(ReadAsk(src=src, call_id="o1", seq=1, mode="outline"), None,
                      lookups=lookups, rules=RULES, call_seq={})  # fmt: skip
    assert first.kind == Kind.OUTLINE and asked == [("outline", None)]
    asked.clear()
    again = plan_read(ReadAsk(src=src, call_id="o2", seq=2, mode="outline"), first.view,
                      lookups=lookups, rules=RULES, call_seq={"o1": 1})  # fmt: skip
    assert again.base_call_id == "o1" and asked == []


def test_plan_read_takes_a_symbol_and_a_fixed_window_from_its_inputs() -> None:
    src = _src(TEXT)
    asked: list[tuple[object, ...]] = []
    lookups = _lookups(src, asked, symbol=(3, 4, "Queue.Pop"))
    sym = plan_read(ReadAsk(src=src, call_id="s1", seq=1, symbol="Pop"), None, lookups=lookups,
                    rules=RULES, call_seq={})  # fmt: skip
    assert sym.kind == Kind.SYMBOL and (sym.request.start, sym.request.end) == (3, 4)
    assert "Queue.Pop" in sym.text and asked[0] == ("symbol", "Pop")
    streamed = ReadAsk(src=src, call_id="w1", seq=2, lines=(1, 120), partial=True, fresh=True)
    window = plan_read(streamed, None, lookups=lookups, rules=RULES, call_seq={})
    assert window.kind == Kind.PARTIAL  # a streamed window is never "full", even if whole


def test_check_read_refuses_two_asks_at_once() -> None:
    with pytest.raises(RequestError, match="unknown mode"):
        check_read("all", None, False)
    with pytest.raises(RequestError, match="symbol alone"):
        check_read("auto", "f", True)
    with pytest.raises(RequestError, match="symbol alone"):
        check_read("outline", "f", False)
    check_read("full", "f", False)
    assert streams_window("auto", True) and not streams_window("outline", True)
    assert not streams_window("auto", False)


# -- plan_edit / plan_write, pure ---------------------------------------------------------------


def test_plan_edit_maps_the_held_facts_and_leaves_them_alone() -> None:
    old = "a = 1\nb = 2\nc = 3\n"
    held = Facts("v0", 3, [(1, 3, (frozenset(["r1"]),))])
    before = list(held.spans)
    plan = plan_edit("m.py", old, held, [("b = 2", "b = 20")], False, "e1")
    assert plan.text == "a = 1\nb = 20\nc = 3\n" and held.spans == before
    assert plan.detail.startswith("1 replacement")
    lines = {n for s, e, _ in plan.spans for n in range(s, e + 1)}
    assert lines == {1, 2, 3}  # the edited line too: the model wrote it over a line it held
    nothing = plan_edit("m.py", old, None, [("b = 2", "b = 20")], False, "e1")
    assert nothing.spans == []  # "b = 20" keeps characters of a line the model did not hold
    new = plan_edit("m.py", old, None, [("b = 2\n", "B = 22\n")], False, "e1")
    assert new.spans == [(2, 2, (frozenset(["e1"]),))]  # a line all its own is held


def test_plan_edit_past_max_landings_holds_nothing_and_refuses_non_text() -> None:
    old = "x\n" * (MAX_LANDINGS + 1)
    plan = plan_edit("m.py", old, None, [("x", "y")], True, "e1")
    assert plan.text == "y\n" * (MAX_LANDINGS + 1) and plan.spans == []
    with pytest.raises(EditError, match="not a text file"):
        plan_edit("m.bin", None, None, [("x", "y")], False, "e1")
    with pytest.raises(EditError):
        plan_edit("m.py", old, None, [("x", "y")], False, "e1")  # not unique


def test_plan_write_holds_every_line_it_wrote() -> None:
    plan = plan_write("n.py", None, "a\nb\n", "w1")
    assert plan.spans == [(1, 2, (frozenset(["w1"]),))] and plan.text == "a\nb\n"
    assert plan_write("n.py", "old\n", "", "w2").spans == []


def test_plan_read_seals_a_raw_answer_that_is_not_content_and_counts_it() -> None:
    """A raw read's FileRef carries the root's seal on filecache's own line, its tokens counted
    on the sealed text; its content is never sealed, and a numbered read never asks the seal."""
    raw = dataclasses.replace(_src(TEXT), numbered=False)
    asked: list[tuple[object, ...]] = []
    lookups = _lookups(raw, asked)
    first = plan_read(ReadAsk(src=raw, call_id="r1", seq=1, mode="full"), None, lookups=lookups,
                      rules=RULES, call_seq={})  # fmt: skip
    assert first.kind == Kind.FULL and "5ea1ed" not in first.text and ("seal",) not in asked
    again = plan_read(ReadAsk(src=raw, call_id="r2", seq=2, mode="full"), first.view,
                      lookups=lookups, rules=RULES, call_seq={"r1": 1})  # fmt: skip
    assert again.kind == Kind.UNCHANGED and "; seal 5ea1ed)" in again.text
    assert again.tokens == COUNTER.count(again.text) and asked.count(("seal",)) == 1
    numbered = _src(TEXT)
    asked.clear()
    lookups = _lookups(numbered, asked)
    first = plan_read(ReadAsk(src=numbered, call_id="n1", seq=1, mode="full"), None,
                      lookups=lookups, rules=RULES, call_seq={})  # fmt: skip
    again = plan_read(ReadAsk(src=numbered, call_id="n2", seq=2, mode="full"), first.view,
                      lookups=lookups, rules=RULES, call_seq={"n1": 1})  # fmt: skip
    assert again.kind == Kind.UNCHANGED and "seal" not in again.text and ("seal",) not in asked


@pytest.mark.parametrize(("start", "end", "out"), [
    (10, 13, 15),  # starts the 6-line definition 10-15, stops inside it: to its end
    (10, 15, 15),  # already whole
    (11, 13, 13),  # starts inside it: as asked
    (20, 22, 22),  # a 10-line definition: not short, as asked
    (1, 2, 2),  # inside no definition
])  # fmt: skip
def test_complete_definitions(start: int, end: int, out: int) -> None:
    from filecache.core.planner import complete_definitions

    assert complete_definitions(start, end, [(10, 15), (20, 29)]) == out
