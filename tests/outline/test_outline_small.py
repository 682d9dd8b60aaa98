"""Explicit outlines of small files keep every detail; budgets apply where docs/design.md sizes.

An explicit ``mode="outline"`` follows ``render_outline``'s rule (every detail up to
``SMALL_FILE_LINES`` lines); an auto-mode outline sent instead of a large file's content and the
pruner's middle tier are budgeted to a fifth of the content. The rendered text is cached under
everything it depends on, so one budget's text is never served for another.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from filecache import FileCache
from filecache.outline.outline import build_outline, language_for_path
from filecache.outline.outline_render import SMALL_FILE_LINES, render_definition, render_header
from filecache.prune.pruner import outline_callback
from filecache.prune.pruning import ResultInfo

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "outline"

# 14 files of at most 200 lines in 13 languages, each with nested definitions.
SMALL = [
    "cart.py",
    "broken.py",
    "event_bus.js",
    "shapes.ts",
    "DataTable.tsx",
    "stack.go",
    "ring_buffer.rs",
    "LibraryCatalog.java",
    "matrix.cpp",
    "OrderService.cs",
    "inventory.rb",
    "UserRepository.php",
    "Scheduler.kt",
    "ShoppingCart.swift",
]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in [*SMALL, "task_queue.py"]:
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path


def test_the_small_files_span_13_languages() -> None:
    assert len(SMALL) == 14
    assert len({language_for_path(name) for name in SMALL}) == 13


@pytest.mark.parametrize("name", SMALL)
def test_explicit_outline_of_a_small_file_keeps_every_detail(tree: Path, name: str) -> None:
    source = (tree / name).read_bytes()
    outline = build_outline(source, language_for_path(name))
    assert outline.line_count <= SMALL_FILE_LINES
    nested = [d for d in outline.definitions if d.depth > 0]
    assert nested, f"{name} has no nested definitions to show"
    with FileCache(tree, store=":memory:") as cache:
        answer = cache.session().read(name, mode="outline")
    assert answer.kind == "outline"
    lines = answer.text.splitlines()
    assert lines[0] == "[filecache] " + render_header(outline, name)  # nothing left out
    for definition in outline.definitions:  # signature and doc, at every depth
        assert render_definition(definition) in lines, definition


def test_auto_outline_of_a_large_file_fits_a_fifth_of_its_content(tree: Path) -> None:
    with FileCache(tree, store=":memory:", outline_threshold=1000) as cache:
        answer = cache.session().read("task_queue.py")
        assert answer.kind == "outline"
        outline = answer.text.split("\n", 1)[1].rsplit("\n(", 1)[0]  # without marker and hint
        assert cache.engine.counts.count("task_queue.py " + outline) <= answer.tokens_full // 5


def test_one_version_outlined_under_two_budgets_gets_two_texts(tree: Path) -> None:
    # cart.py is 19 lines but over a zero threshold: auto mode budgets it, mode="outline" not.
    with FileCache(tree, store=str(tree / "store.db"), outline_threshold=0) as cache:
        session = cache.session()
        auto = session.read("cart.py")
        explicit = session.read("cart.py", mode="outline")
        assert auto.kind == explicit.kind == "outline"
        assert auto.version == explicit.version
        assert "names only" in auto.text.splitlines()[0]
        assert "def add(sku: str, qty: int = 1) -> None — Add qty of sku." in explicit.text
        assert auto.tokens < explicit.tokens
    with FileCache(tree, store=str(tree / "store.db"), outline_threshold=0) as cache:
        session = cache.session()  # a new process: both texts come from the store's cache
        assert session.read("cart.py", mode="outline").text == explicit.text
        assert session.read("cart.py").text == auto.text


def test_the_same_bytes_under_another_path_are_outlined_for_that_path(tree: Path) -> None:
    shutil.copy(tree / "cart.py", tree / "cart.txt")
    with FileCache(tree, store=":memory:") as cache:
        session = cache.session()
        python = session.read("cart.py", mode="outline")
        text = session.read("cart.txt", mode="outline")
    assert python.version == text.version
    assert "(python, 19 lines)" in python.text and "class Cart" in python.text
    assert "(text, 19 lines)" in text.text and "first lines:" in text.text


def _info(path: str, version: str | None, tokens: int, text: str) -> ResultInfo:
    return ResultInfo(
        call_id="c1",
        message_index=2,
        tool="read_file",
        kind="read",
        path=path,
        start=1,
        end=None,
        version=version,
        answer="full",
        base_call_id=None,
        tokens=tokens,
        text=text,
        tier="keep",
    )


def test_the_pruners_middle_tier_is_budgeted_with_or_without_the_session(tree: Path) -> None:
    with FileCache(tree, store=":memory:") as cache:
        session = cache.session()
        read = session.read("ring_buffer.rs", mode="full")
        budget = max(read.tokens // 5, 50)
        from_store = outline_callback(session)(_info(read.path, read.version, read.tokens, ""))
        from_text = outline_callback(None)(_info(read.path, None, read.tokens, read.text))
        explicit = session.read("ring_buffer.rs", mode="outline")
        assert from_store is not None and from_text is not None
        assert from_store == from_text  # the same outline either way
        assert cache.engine.counts.count(from_store) <= budget
        assert (
            cache.engine.counts.count(from_store) < explicit.tokens
        )  # the explicit one keeps every detail
