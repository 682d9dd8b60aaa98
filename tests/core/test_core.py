"""Unit tests of the pure pieces: text, diffing, views, settings, exports and tokens."""

from __future__ import annotations

import difflib
import inspect
import re
import socket
import sys
import threading
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest
import toktok
import unidiff
from hypothesis import given
from hypothesis import strategies as st

import filecache
import filecache.core.text as text_mod
from filecache import errors
from filecache.core.diffing import diff_lines, render_hunks, unified_hunks
from filecache.core.hashing import short_version, version_of
from filecache.core.text import EOF_MARK, NO_NEWLINE, join_lines, render_lines, split_lines
from filecache.core.tokens import TokenCounter, estimate_tokens
from filecache.core.views import Facts, PathView
from filecache.errors import ConfigError
from filecache.settings import Settings, load_settings

Patch = Callable[[str | bytes, str], bytes]

# -- text ------------------------------------------------------------------------------------

TEXT = st.text(st.characters(blacklist_characters="\x00"), max_size=200)


@given(TEXT)
def test_split_join_round_trip(text: str) -> None:
    lines = split_lines(text)
    assert join_lines(lines) == text
    assert all("\n" not in line for line in lines)
    assert all(not line[:-1].count(EOF_MARK) for line in lines)


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("a", ["a" + EOF_MARK]),
        ("a\n", ["a"]),
        ("a\r\nb", ["a\r", "b" + EOF_MARK]),
        ("\n\n", ["", ""]),
    ],
)
def test_split_lines_table(text: str, lines: list[str]) -> None:
    assert split_lines(text) == lines


HEADER = r"(, xxh3 [0-9a-f]{8})?\]"


def test_render_lines_whole_file() -> None:
    lines = split_lines("alpha\n\tbeta\ngamma\n")
    out = render_lines("pkg/p.py", lines, 1, 3).split("\n")
    assert re.fullmatch(r"\[pkg/p\.py: 3 lines" + HEADER, out[0])
    assert out[1:] == ["1\talpha", "2\t\tbeta", "3\tgamma", ""]


def test_render_lines_partial_and_version() -> None:
    lines = split_lines("".join(f"l{i}\n" for i in range(1, 1201)))
    version = version_of(b"whatever")
    out = render_lines("p.py", lines, 998, 1001, version=version).split("\n")
    assert re.fullmatch(r"\[p\.py: lines 998-1001 of 1200" + HEADER, out[0])
    assert short_version(version) in out[0]
    assert out[1:] == [" 998\tl998", " 999\tl999", "1000\tl1000", "1001\tl1001", ""]


@given(st.integers(1, 200_000), st.integers(0, 5_000))
def test_line_numbers_are_right_aligned_to_the_last_number_shown(start: int, more: int) -> None:
    end = start + more
    lines = [f"l{n}" for n in range(1, end + 1)]
    body = render_lines("p", lines, start, end).split("\n")[1:-1]
    width = len(str(end))
    assert body == [f"{n:>{width}}\tl{n}" for n in range(start, end + 1)]


def test_line_number_prefixes_stay_right_while_threads_grow_the_shared_cache() -> None:
    """The prefixes are cached per width and grown on demand: threads that render ranges of
    every width at once never see a cache another thread is extending (a duplicated or
    missing prefix would number lines wrongly). A tiny switch interval makes the threads
    interleave inside the growth; 20 rounds, each from an empty cache."""
    ends = [9, 99, 5_000, 9_999, 12_345, 99_999, 130_000, 42, 7_777, 1_025]
    lines = [f"l{n}" for n in range(1, max(ends) + 1)]
    errors: list[str] = []

    def render(k: int, barrier: threading.Barrier) -> None:
        barrier.wait()
        for end in ends[k % 3 :] + ends[: k % 3]:
            start = max(1, end - 40)
            body = render_lines("p", lines, start, end).split("\n")[1:-1]
            width = len(str(end))
            if body != [f"{n:>{width}}\tl{n}" for n in range(start, end + 1)]:
                errors.append(f"{start}-{end}")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(20):
            text_mod.__dict__["_PREFIXES"].clear()
            barrier = threading.Barrier(8)
            threads = [threading.Thread(target=render, args=(k, barrier)) for k in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_render_lines_no_final_newline_and_empty() -> None:
    lines = split_lines("one\ntwo")
    assert render_lines("t", lines, 1, 2).endswith(f"]\n1\tone\n2\ttwo\n{NO_NEWLINE}\n")
    assert render_lines("t", lines, 1, 1).endswith("]\n1\tone\n")
    assert re.fullmatch(r"\[e: empty file" + HEADER + "\n", render_lines("e", [], 1, 0))


@given(TEXT, st.data())
def test_render_lines_raw_is_byte_exact(text: str, data: st.DataObject) -> None:
    lines = split_lines(text)
    assert render_lines("x", lines, 1, len(lines), numbered=False) == text
    if lines:
        start = data.draw(st.integers(1, len(lines)))
        end = data.draw(st.integers(start, len(lines)))
        part = "".join(_keepends(text)[start - 1 : end])
        assert render_lines("x", lines, start, end, numbered=False) == part


def _keepends(text: str) -> list[str]:
    """Lines with their ``\\n`` (split on ``\\n`` only)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


# -- diffing ---------------------------------------------------------------------------------

LINES = st.lists(st.sampled_from(["a", "b", "c", "", "a\r", "def f():", "  x = 1"]), max_size=30)


def apply_unidiff(old_text: str, diff: str) -> str:
    """Apply a unified diff parsed by ``unidiff`` (an independent parser) to ``old_text``."""
    old = _keepends(old_text)
    [patched] = unidiff.PatchSet(diff)
    out: list[str] = []
    pos = 0
    for hunk in patched:
        start = hunk.source_start - 1 if hunk.source_length else hunk.source_start
        assert start >= pos
        out.extend(old[pos:start])
        pos = start
        items: list[tuple[str, str]] = []
        for line in hunk:
            if line.line_type == "\\":
                kind, value = items[-1]
                items[-1] = (kind, value.removesuffix("\n"))
            else:
                items.append((line.line_type, line.value))
        for kind, value in items:
            if kind in " -":
                assert old[pos] == value, (pos, old[pos], value)
                pos += 1
            if kind in " +":
                out.append(value)
    return "".join(out + old[pos:])


@given(LINES, st.booleans(), LINES, st.booleans())
def test_diff_applied_with_unidiff_gives_new_text(
    a_lines: list[str], a_nl: bool, b_lines: list[str], b_nl: bool
) -> None:
    a_text = "\n".join(a_lines) + ("\n" if a_nl and a_lines else "")
    b_text = "\n".join(b_lines) + ("\n" if b_nl and b_lines else "")
    a, b = split_lines(a_text), split_lines(b_text)
    ops = diff_lines(a, b)
    rebuilt: list[str] = []
    for tag, a0, a1, b0, b1 in ops:
        assert (a1 - a0 == b1 - b0) if tag == "equal" else tag in ("replace", "delete", "insert")
        rebuilt.extend(a[a0:a1] if tag == "equal" else b[b0:b1])
        if tag == "equal":
            assert a[a0:a1] == b[b0:b1]
    assert rebuilt == b
    hunks = unified_hunks(a, b, ops)
    if a == b:
        assert hunks == []
        return
    assert apply_unidiff(a_text, render_hunks("a/f", "b/f", hunks)) == b_text


def _numbered(n: int) -> list[str]:
    return [f"line {i}" for i in range(1, n + 1)]


DIFF_CASES = {
    "one-change": (_numbered(20), [*_numbered(9), "changed", *_numbered(20)[10:]]),
    "two-hunks": (_numbered(30), ["new 1", *_numbered(30)[1:29], "new 30"]),
    "merged-hunk": (
        _numbered(20),
        [*_numbered(5), "x", *_numbered(11)[6:], "y", *_numbered(20)[12:]],
    ),
    "insert-at-start": (_numbered(5), ["first", *_numbered(5)]),
    "delete-at-end": (_numbered(8), _numbered(6)),
    "from-empty": ([], _numbered(3)),
    "to-empty": (_numbered(3), []),
    "identical": (_numbered(4), _numbered(4)),
}


@pytest.mark.parametrize(("a", "b"), DIFF_CASES.values(), ids=DIFF_CASES.keys())
def test_hunks_equal_difflib(a: list[str], b: list[str]) -> None:
    ours = render_hunks("a/f", "b/f", unified_hunks(a, b, diff_lines(a, b))).split("\n")
    theirs = list(difflib.unified_diff(a, b, "a/f", "b/f", lineterm=""))
    assert ours[2:-1] == theirs[2:]


@pytest.mark.parametrize(("a", "b"), DIFF_CASES.values(), ids=DIFF_CASES.keys())
@pytest.mark.parametrize("final_newline", [(True, False), (False, True), (False, False)])
def test_hunks_apply_with_gnu_patch(
    gnu_patch: Patch, a: list[str], b: list[str], final_newline: tuple[bool, bool]
) -> None:
    a_text = "\n".join(a) + ("\n" if final_newline[0] and a else "")
    b_text = "\n".join(b) + ("\n" if final_newline[1] and b else "")
    if a_text == b_text:
        return
    a_lines, b_lines = split_lines(a_text), split_lines(b_text)
    hunks = unified_hunks(a_lines, b_lines, diff_lines(a_lines, b_lines))
    assert gnu_patch(a_text, render_hunks("a/f", "b/f", hunks)) == b_text.encode()


# -- views -----------------------------------------------------------------------------------

A, B, C = frozenset({"c1"}), frozenset({"c2"}), frozenset({"c3"})


def test_facts_add_covering_forget() -> None:
    facts = Facts("v", 10)
    assert facts.covering(1, 1) is None
    facts.add(1, 5, A)
    assert facts.covering(1, 5) == A and facts.covering(2, 3) == A
    assert facts.covering(1, 6) is None and facts.covering(6, 6) is None
    facts.add(6, 10, B)
    assert facts.covering(1, 10) == A | B and facts.covering(5, 6) == A | B
    facts.add(4, 7, C)  # lines 4-7 are now backed by C as well: both alternatives are kept
    assert facts.spans == [(1, 3, (A,)), (4, 5, (A, C)), (6, 7, (B, C)), (8, 10, (B,))]
    assert facts.covering(4, 5) == A  # the oldest alternative
    assert facts.forget({"c3"}) is True
    assert facts.spans == [(1, 5, (A,)), (6, 10, (B,))]
    assert facts.forget({"c1"}) is True
    assert facts.covering(4, 4) is None and facts.covering(6, 10) == B
    assert facts.forget({"other"}) is False
    assert facts.lines_held() == 5


def test_forgetting_one_backing_result_keeps_the_lines_another_backs() -> None:
    facts = Facts("v", 120)
    facts.add(1, 120, A)  # a full read
    facts.add(1, 3, B)  # a fresh ranged read of three lines
    assert facts.forget({"c2"}) is True
    assert facts.covering(1, 120) == A


def test_facts_merge_and_empty_range() -> None:
    facts = Facts("v", 4)
    assert facts.covering(1, 0) is None  # an empty file nobody has read
    facts.add(1, 2, A)
    facts.add(3, 4, A)
    assert facts.spans == [(1, 4, (A,))]
    facts.add(3, 2, B)  # an empty range adds nothing
    assert facts.spans == [(1, 4, (A,))]
    assert facts.covering(1, 0) == A


SPAN = st.tuples(st.integers(1, 12), st.integers(0, 5), st.sampled_from(["c1", "c2", "c3"]))


@given(st.lists(SPAN, max_size=12), st.sets(st.sampled_from(["c1", "c2", "c3"])), st.data())
def test_facts_match_a_per_line_model(
    adds: list[tuple[int, int, str]], forgotten: set[str], data: st.DataObject
) -> None:
    """Per line, the set of results that back it; a range is covered when every line keeps one
    that was not forgotten, and ``covering`` names only results that back a line there."""
    facts = Facts("v", 20)
    model: dict[int, list[str]] = {}
    for start, size, cid in adds:
        facts.add(start, start + size - 1, frozenset({cid}))
        for line in range(start, start + size):
            model.setdefault(line, [])
            if cid not in model[line]:
                model[line].append(cid)
    facts.forget(forgotten)
    model = {line: [c for c in cs if c not in forgotten] for line, cs in model.items()}
    start = data.draw(st.integers(1, 18))
    end = data.draw(st.integers(start, 18))
    wanted = [model.get(line) or None for line in range(start, end + 1)]
    got = facts.covering(start, end)
    if None in wanted:
        assert got is None
    else:
        assert got == frozenset(cs[0] for cs in wanted if cs)  # the oldest backer of each line
    assert all(s <= e for s, e, _ in facts.spans)
    assert all(e1 < s2 for (_, e1, _), (s2, _, _) in pairwise(facts.spans))


def test_path_view_json_round_trip_and_bound() -> None:
    view = PathView(max_versions=2)
    for n in range(3):
        view.facts_for(f"v{n}", 5, n).add(1, 5, frozenset({f"c{n}"}))
    assert list(view.versions) == ["v1", "v2"]
    again = PathView.from_json(view.to_json(), 2)
    assert [(f.version, f.spans) for f in again.recent()] == [
        (f.version, f.spans) for f in view.recent()
    ]
    assert again.forget({"c1", "c2"}) and again.empty()


# -- settings --------------------------------------------------------------------------------


def test_settings_precedence(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.filecache]\nmax-file-bytes = 2000\ntokenizer = 'cl100k'\n"
        "versions_per_path = 2\ndeny = ['*.secret']\n",
        encoding="utf-8",
    )
    env = {"FILECACHE_TOKENIZER": "estimate", "FILECACHE_VERSIONS_PER_PATH": "3"}
    got = load_settings(tmp_path, {"versions_per_path": 5}, env=env)
    assert got.max_file_bytes == 2000  # pyproject over the default
    assert got.tokenizer == "estimate"  # environment over pyproject
    assert got.versions_per_path == 5  # arguments over everything
    assert got.deny == ("*.secret",)
    assert got.retention_days == Settings().retention_days
    assert load_settings(tmp_path, env={}).tokenizer == "cl100k"
    assert load_settings(tmp_path / "nowhere", env={}) == Settings()


def test_settings_env_deny_is_comma_separated(tmp_path: Path) -> None:
    got = load_settings(tmp_path, env={"FILECACHE_DENY": "*.a, secrets/*,"})
    assert got.deny == ("*.a", "secrets/*")


def test_unknown_or_bad_settings_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown setting 'colour'.*known:.*tokenizer"):
        load_settings(tmp_path, {"colour": "blue"}, env={})
    with pytest.raises(ConfigError, match="environment: bad value for max_file_bytes"):
        load_settings(tmp_path, env={"FILECACHE_MAX_FILE_BYTES": "lots"})
    with pytest.raises(ConfigError, match="max_file_bytes must be positive"):
        load_settings(tmp_path, {"max_file_bytes": 0}, env={})
    (tmp_path / "pyproject.toml").write_text("[tool.filecache]\nspeed = 9\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pyproject\.toml.*unknown setting 'speed'"):
        load_settings(tmp_path, env={})
    with pytest.raises(ConfigError):
        filecache.FileCache(tmp_path, store=":memory:", speed=1)


# -- exported members ------------------------------------------------------------------------


def test_all_is_sorted_and_importable() -> None:
    assert filecache.__all__ == sorted(filecache.__all__)
    namespace: dict[str, object] = {}
    exec("from filecache import *", namespace)  # noqa: S102 - the star import under test
    assert set(filecache.__all__) <= set(namespace)


def test_every_public_member_is_exported() -> None:
    public = {
        name
        for name in dir(filecache)  # names load on first use (PEP 562): dir() lists them all
        if not name.startswith("_") and not inspect.ismodule(getattr(filecache, name))
    }
    assert public == set(filecache.__all__)


def test_every_error_class_is_exported_and_in_the_tree() -> None:
    classes = {
        name: cls
        for name, cls in vars(errors).items()
        if isinstance(cls, type)
        and issubclass(cls, Exception)
        and cls.__module__ == errors.__name__
    }
    assert set(classes) <= set(filecache.__all__)
    parents: list[tuple[int, str]] = []
    drawn = set()
    for line in (errors.__doc__ or "").splitlines():
        found = re.search(r"(\w+Error)\s*(?:exit (\d))?", line)
        if not found:
            continue
        depth = found.start(1)
        while parents and parents[-1][0] >= depth:
            parents.pop()
        cls = classes[found.group(1)]
        if parents:
            assert cls.__bases__ == (classes[parents[-1][1]],), found.group(1)
        if found.group(2):
            assert cls.exit_code == int(found.group(2)), found.group(1)
        parents.append((depth, found.group(1)))
        drawn.add(found.group(1))
    assert drawn == set(classes)


# -- tokens ----------------------------------------------------------------------------------

SAMPLES = [
    "hello world",
    "def main():\n    return {'a': [1, 2, 3]}\n",
    "     1\tline one\r\n     2\tline two\n",
    "漢字とかなと한국어 and emoji 🎉🎉",
    "x" * 5000,
]


@pytest.mark.parametrize("encoding", ["o200k", "cl100k"])
def test_token_counts_are_exact_and_offline(monkeypatch: pytest.MonkeyPatch, encoding: str) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("token counting tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    counter = TokenCounter(encoding)
    assert counter.exact
    name = {"o200k": "o200k_base", "cl100k": "cl100k_base"}[encoding]
    expected = toktok.batch_count(SAMPLES, name)
    assert [counter.count(text) for text in SAMPLES] == expected
    assert counter.count_many(SAMPLES) == expected
    assert counter.count("") == 0


def test_o200k_known_count() -> None:
    assert TokenCounter("o200k").count("hello world") == 2


def test_estimate_of_cjk_is_about_the_glyph_count() -> None:
    text = "日本語の文章を数えます。漢字かなカタカナ한국어문장" * 20
    glyphs = len(text)
    assert abs(estimate_tokens(text) - glyphs) <= glyphs * 0.1
    assert estimate_tokens("") == 0
    assert not TokenCounter("estimate").exact
    assert TokenCounter("estimate").count(text) == estimate_tokens(text)


def test_unknown_tokenizer_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown tokenizer 'gpt2'"):
        TokenCounter("gpt2")


def test_plan_adopt_places_a_host_change_on_the_version_the_model_holds() -> None:
    from filecache.core.edits import plan_adopt

    held = split_lines("a = 1\nb = 2\nc = 3\n")
    facts = Facts("v1", 3)
    facts.add(1, 3, frozenset({"r1"}))
    kind, plan = plan_adopt("f.py", held, facts, content=None, edits=[("b = 2", "b = 20")],
                            replace_all=False, call_id="h1")  # fmt: skip
    assert (kind, plan.text, plan.detail) == ("edited", "a = 1\nb = 20\nc = 3\n", "")
    assert plan.spans == [(1, 3, (frozenset({"r1", "h1"}),))]  # carried through the edit
    kind, plan = plan_adopt("f.py", None, None, content="x\ny\n", edits=None, replace_all=False,
                            call_id="h2")  # fmt: skip
    assert (kind, plan.text, plan.spans) == ("written", "x\ny\n", [(1, 2, (frozenset({"h2"}),))])
    # nothing held to apply edits to, or edits that do not apply: None (a plain change)
    assert plan_adopt("f.py", None, None, content=None, edits=[("a", "b")], replace_all=False,
                      call_id="h3") is None  # fmt: skip
    assert plan_adopt("f.py", held, facts, content=None, edits=[("zzz", "y")], replace_all=False,
                      call_id="h4") is None  # fmt: skip
