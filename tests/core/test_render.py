"""Model-facing wording (filecache.core.render): FileRefs are one short line, and read back.

Token counts are o200k (``filecache.core.tokens``, exact offline BPE). A FileRef carries the path,
the line count or range, the short hash its result's header shows and the call id; how to
recover when that result is gone is said once, in ``instructions()``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from filecache import FileCache
from filecache.core.hashing import short_version, version_of
from filecache.core.render import (
    MARKER,
    answer_of,
    instructions,
    mcp_instructions,
    render_diff,
    render_file_ref,
    render_outline_ref,
    render_undone_edit,
)
from filecache.core.text import content_header
from filecache.core.tokens import TokenCounter
from filecache.replay.replay_check import _BASE

O200K = TokenCounter("o200k")
VERSION = version_of(b"def handler(event):\n    return 7\n")
NEW_VERSION = version_of(b"def handler(event):\n    return 70\n")
# Paths and call ids as agents pass them: generated (fc-), OpenAI-, Anthropic-style short ones.
PATHS = ["src/app.py", "click/core.py", "_pytest/debugging.py", "filecache/session.py"]
IDS = ["call_1", "fc-298593866182", "c4"]


def test_the_tokenizer_is_exact() -> None:
    assert O200K.exact  # the bounds below are o200k counts, not estimates


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("call_id", IDS)
@pytest.mark.parametrize(
    ("start", "end", "total"), [(1, 120, 120), (1, 3535, 3535), (10, 20, 120), (1, 1, 1)]
)
def test_a_file_ref_is_one_line_of_at_most_32_tokens(
    path: str, call_id: str, start: int, end: int, total: int
) -> None:
    text = render_file_ref(path, VERSION, start, end, total, call_id)
    assert text.startswith(f"{MARKER} {path} unchanged since your result {call_id} (")
    assert text.count("\n") == 1 and text.endswith(")\n")
    assert short_version(VERSION) in text
    assert O200K.count(text) <= 32, text
    if start == 1 and end == total and O200K.count(path) <= 5:
        assert O200K.count(text) <= 30, text  # a whole file under a short path


def test_a_file_ref_words_its_lines_as_the_content_header_does() -> None:
    tag = short_version(VERSION)
    assert render_file_ref("a.py", VERSION, 1, 120, 120, "c1") == (
        f"[filecache] a.py unchanged since your result c1 (120 lines, {tag})\n"
    )
    assert "(lines 10-20, " in render_file_ref("a.py", VERSION, 10, 20, 120, "c1")
    assert "(line 7, " in render_file_ref("a.py", VERSION, 7, 7, 120, "c1")
    assert "(1 line, " in render_file_ref("a.py", VERSION, 1, 1, 1, "c1")
    assert "(empty file, " in render_file_ref("a.py", VERSION, 1, 0, 0, "c1")
    # the header of the result it names shows the same span words and the same hash
    assert content_header("a.py", 1, 120, 120, VERSION) == f"[a.py: 120 lines, xxh3 {tag}]"
    assert content_header("a.py", 10, 20, 120, VERSION).startswith("[a.py: lines 10-20 of 120")


def test_the_recovery_hint_is_in_the_instructions_not_on_every_ref() -> None:
    text = render_file_ref("a.py", VERSION, 1, 120, 120, "c1")
    assert "fresh" not in text
    guide = instructions()
    assert "unchanged since your result ID (120 lines, 3c2e1be1)" in guide
    assert "If that result is no longer in your context, read again with fresh=true" in guide
    assert "8 hex digits after xxh3" in mcp_instructions()


def test_the_ref_is_read_back_by_every_parser() -> None:
    ref = render_file_ref("src/a b.py", VERSION, 3, 9, 40, "toolu_01Xy")
    assert answer_of(ref) == ("unchanged", "toolu_01Xy")
    found = _BASE.search(ref.partition("\n")[0])  # replay_check's dangling-reference check
    assert found is not None and found.group(1) == "toolu_01Xy"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("call_id", IDS)
def test_an_outline_ref_is_one_short_line_that_names_its_outline(path: str, call_id: str) -> None:
    text = render_outline_ref(path, VERSION, 3535, call_id)
    assert text.count("\n") == 1 and text.startswith(f"{MARKER} {path} ")
    tag = short_version(VERSION)
    assert text.endswith(f" outline unchanged since your result {call_id} (3535 lines, {tag})\n")
    assert O200K.count(text) <= 32, text
    assert answer_of(text) == ("unchanged", call_id)  # keeps its outline alive in pruning
    assert "(1 line, " in render_outline_ref(path, VERSION, 1, call_id)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("call_id", IDS)
def test_an_undone_edit_line_names_the_edit(path: str, call_id: str) -> None:
    text = render_undone_edit(path, call_id, NEW_VERSION)
    tag = short_version(NEW_VERSION)
    assert text == f"{MARKER} {path}: your edit {call_id} is no longer on disk (now {tag})\n"
    assert O200K.count(text) <= 32, text
    gone = render_undone_edit(path, call_id, None)
    assert gone.count("\n") == 1 and "deleted" in gone and call_id in gone


def test_an_undone_edit_line_before_a_diff_keeps_the_diffs_base_readable() -> None:
    # the model's edit r2 made NEW_VERSION; the file is back at VERSION
    diff = render_diff("a.py", "r2", NEW_VERSION, VERSION, [], (1, 2, 2), None)
    answer = render_undone_edit("a.py", "r2", VERSION) + diff
    assert answer_of(answer) == ("diff", "r2")
    assert answer_of(diff) == ("diff", "r2")


def test_answer_of_content_outline_and_tagged_content() -> None:
    assert answer_of("[a.py: 2 lines, xxh3 3c2e1be1]\n     1\tx\n") == ("", None)
    assert answer_of(f"{MARKER} result c1: a.py, xxh3 3c2e1be1\nraw\n") == ("", None)
    outline = f"{MARKER} a.py outline (python, 3 lines)\n1-3 def f()\n(Read exact ranges...)\n"
    assert answer_of(outline) == ("filecache", None)


def test_file_refs_in_a_session_are_at_most_32_tokens(tmp_path: Path) -> None:
    # generated call ids (fc- and 12 digits) and the repository's own paths
    names = [
        "filecache/session.py",
        "filecache/core/render.py",
        "tests/test_render.py",
        "README.md",
    ]
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("".join(f"line {i}\n" for i in range(400)))
    with FileCache(tmp_path, store=":memory:", exact_counts=True) as cache:
        session = cache.session()
        for name in names:
            session.read(name)
            ref = session.read(name)
            ranged = session.read(name, offset=100, limit=50)
            assert ref.kind == ranged.kind == "unchanged"
            assert ref.tokens <= 32 and ranged.tokens <= 32, (ref.text, ranged.text)
            assert ref.tokens == O200K.count(ref.text)
