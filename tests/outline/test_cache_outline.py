"""Outlines and symbol reads through ``Session.read`` (the read cache side of outlines)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import filecache.outline.outline as outline_module
from filecache import FileCache, RequestError
from filecache.cli import main

FIXTURES = Path(__file__).parents[2] / "fixtures" / "outline"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ("task_queue.py", "queue.go"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path


def test_mode_outline_lists_definitions_with_line_ranges(tree: Path) -> None:
    with FileCache(tree, store=":memory:") as cache:
        result = cache.session().read("queue.go", mode="outline")
    assert result.kind == "outline"
    assert result.text.startswith("[filecache] queue.go outline (go, 248 lines")
    assert "98-110" in result.text  # Queue.Pop's range, so the model can read it next
    assert "symbol=NAME" in result.text.splitlines()[-1]
    assert result.tokens < result.tokens_full / 5


def test_auto_outlines_a_large_file_unless_full_or_held(tree: Path) -> None:
    with FileCache(tree, store=":memory:", outline_threshold=1000) as cache:
        session = cache.session()
        first = session.read("task_queue.py")
        assert first.kind == "outline"
        assert "instead of" in first.text and "mode='full'" in first.text
        full = session.read("task_queue.py", mode="full")
        assert full.kind == "full"
        again = session.read("task_queue.py")  # held now: a FileRef beats an outline
        assert again.kind == "unchanged"
        fresh = session.read("task_queue.py", fresh=True)  # the recovery path FileRefs name
        assert fresh.kind == "full"
        ranged = session.read("task_queue.py", offset=1, limit=400)
        assert ranged.kind in ("partial", "full", "unchanged")


def test_small_files_are_never_outlined_in_auto_mode(tree: Path) -> None:
    with FileCache(tree, store=":memory:") as cache:
        assert cache.session().read("task_queue.py").kind == "full"


def test_symbol_read_then_unchanged_then_diff(tree: Path) -> None:
    # diff_max_ratio=50: a 13-line function's one-line diff is not smaller than its content,
    # so the default would (rightly) resend the content; this checks the mechanism.
    with FileCache(tree, store=":memory:", diff_max_ratio=50) as cache:
        session = cache.session()
        first = session.read("queue.go", symbol="Queue.Pop")
        assert first.kind == "symbol"
        assert first.text.startswith("[queue.go: Queue.Pop, lines 98-110 of 248, xxh3 ")
        assert "func (q *Queue) Pop" in first.text
        assert (first.start, first.end) == (98, 110)
        assert session.read("queue.go", symbol="Queue.Pop").kind == "unchanged"
        path = tree / "queue.go"
        lines = path.read_text().split("\n")
        lines[104] = lines[104] + " // changed outside"
        path.write_text("\n".join(lines))
        changed = session.read("queue.go", symbol="Queue.Pop")
        assert changed.kind == "diff"
        assert "+" + lines[104] in changed.text


def test_symbol_errors_list_candidates(tree: Path) -> None:
    with FileCache(tree, store=":memory:") as cache:
        session = cache.session()
        with pytest.raises(RequestError) as ambiguous:
            session.read("queue.go", symbol="Pop")
        assert "Queue.Pop" in str(ambiguous.value) and "Stack.Pop" in str(ambiguous.value)
        with pytest.raises(RequestError, match="mode='outline'"):
            session.read("queue.go", symbol="NoSuchThing")
        with pytest.raises(RequestError, match="symbol alone"):
            session.read("queue.go", symbol="Queue.Pop", offset=3)
        with pytest.raises(RequestError, match="unknown mode"):
            session.read("queue.go", mode="summary")


def test_a_second_outline_of_the_same_version_costs_no_parse(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = outline_module.build_outline

    def counting(source: bytes, language: str | None):  # type: ignore[no-untyped-def]
        calls.append(language)
        return real(source, language)

    monkeypatch.setattr(outline_module, "build_outline", counting)
    (tree / "fresh.py").write_text("def only_here():\n    return 42\n\n\ndef other():\n    pass\n")
    with FileCache(tree, store=":memory:") as cache:
        session = cache.session()
        session.read("fresh.py", mode="outline")
        session.read("fresh.py", mode="outline")
        cache.session().read("fresh.py", symbol="only_here")
    assert len(calls) == 1


def test_outline_text_is_available_to_the_pruner_for_a_stored_version(tree: Path) -> None:
    db = tree / "store.db"
    with FileCache(tree, store=str(db)) as cache:
        version = cache.session().read("task_queue.py").version
    with FileCache(tree, store=str(db)) as cache:  # a new process: the blob is in the store
        text = cache.engine.outlines.outline_text(version, "task_queue.py")
    assert text.startswith("task_queue.py outline (python")


def test_cli_outline_and_symbol(tree: Path) -> None:
    from click.testing import CliRunner

    runner = CliRunner()
    plain = runner.invoke(main, ["outline", "--root", str(tree), "queue.go"])
    assert plain.exit_code == 0, plain.output
    assert "Queue" in plain.output
    as_json = runner.invoke(main, ["outline", "--root", str(tree), "queue.go", "--json"])
    payload = json.loads(as_json.output)
    assert payload["language"] == "go"
    assert any(d["qualified_name"] == "Queue.Pop" for d in payload["definitions"])
    symbol = runner.invoke(
        main, ["outline", "--root", str(tree), "queue.go", "--symbol", "Stack.Pop"]
    )
    assert symbol.exit_code == 0 and "Stack" in symbol.output
    bad = runner.invoke(main, ["outline", "--root", str(tree), "queue.go", "--symbol", "Pop"])
    assert bad.exit_code == 2 and "ambiguous" in bad.output


SHORT_DEFS = "".join(
    f"def function_{n}(argument):\n    total = argument + {n}\n    return total * {n}\n\n"
    for n in range(1, 900)
)


@pytest.mark.parametrize(("mode", "outline_first", "last"), [
    ("auto", True, 403),  # after an auto outline: runs on to the end of function_101
    ("auto", False, 402),  # nothing outlined: the lines asked
    ("full", True, 402),  # mode="full": the lines asked
])  # fmt: skip
def test_a_range_after_an_outline_completes_the_short_definition_it_cuts(
    tmp_path: Path, mode: str, outline_first: bool, last: int
) -> None:
    """The agent's own abbreviated view shows a short definition whole; filecache's outline its
    signature only. A range that starts one and stops inside it is answered to its end, so the
    model does not edit the rest of it unseen (issue 34: an edit lost to an outline)."""
    (tmp_path / "short.py").write_text(SHORT_DEFS, encoding="utf-8")
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        if outline_first:
            assert session.read("short.py").kind == "outline"
        part = session.read("short.py", offset=401, limit=2, mode=mode)
    assert part.kind == "partial"
    assert part.text.splitlines()[0].startswith(f"[short.py: lines 401-{last} of ")
    assert part.text.splitlines()[-1] == (
        f"{last}\t    return total * 101" if last == 403 else "402\t    total = argument + 101"
    )
