"""Token counts on the read path: fast estimates by default, exact with ``exact_counts``; the
memory bound of held versions; the cold start (what a command imports, the store's open)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from filecache import FileCache
from filecache.core.text import render_lines, split_lines
from filecache.core.tokens import (
    ESTIMATE_MARGIN,
    TokenCounter,
    TokenMemo,
    fast_estimate,
    fast_estimate_text,
)
from filecache.errors import StoreError
from filecache.sources import _shape_of
from filecache.store.migrations import MIGRATIONS
from filecache.store.sqlite_store import SqliteStore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "outline"
SOURCES = sorted(p for p in FIXTURES.iterdir() if p.is_file())
BODY = "".join(f"def handler_{i}(event):  # line {i}: return the event\n" for i in range(400))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
@pytest.mark.parametrize("numbered", [True, False])
@pytest.mark.parametrize("encoding", ["o200k", "cl100k"])
def test_fast_estimate_is_near_the_exact_count(path: Path, numbered: bool, encoding: str) -> None:
    lines = split_lines(path.read_text(encoding="utf-8"))
    shape = _shape_of(lines)
    exact = TokenCounter(encoding).count(render_lines("x", lines, 1, len(lines), numbered=numbered))
    estimate = fast_estimate(shape.chars, shape.extra, len(lines), numbered=numbered,
                             encoding=encoding)  # fmt: skip
    assert 0.75 <= exact / estimate <= 1.5, (exact, estimate)


def test_fast_estimate_text_counts_non_ascii_bytes() -> None:
    ascii_text, cjk = "abcd" * 30, "漢字" * 60
    assert fast_estimate_text("") == 0
    assert fast_estimate_text(cjk) > 2 * fast_estimate_text(ascii_text)  # same length in chars
    exact = TokenCounter().count(cjk)  # about one token a glyph: the estimate says ~2.2
    assert exact <= fast_estimate_text(cjk) <= 2.5 * exact  # documented in filecache.core.tokens


def test_shape_counts_memory_as_getsizeof(tmp_path: Path) -> None:
    lines = ["plain ascii", "héllo", "日本語の行", "emoji 😀", ""]
    shape = _shape_of(lines)
    assert shape.chars == sum(map(len, lines))
    assert shape.extra == sum(len(s.encode()) for s in lines) - shape.chars
    assert shape.memory == sum(map(sys.getsizeof, lines)) + 8 * len(lines) + 56


def test_default_answers_use_estimates_and_keep_the_margin(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(BODY)
    with FileCache(tmp_path, store=":memory:", diff_max_ratio=0.6) as cache:
        session = cache.session()
        first = session.read("a.py", mode="full", call_id="r1")
        assert first.kind == "full"
        assert first.tokens == first.tokens_full > 0
        again = session.read("a.py", mode="full", call_id="r2")
        assert again.kind == "unchanged"
        assert again.tokens == fast_estimate_text(again.text)
        assert again.tokens < ESTIMATE_MARGIN * again.tokens_full
        (tmp_path / "a.py").write_text(BODY.replace("line 200:", "LINE 200:"))
        diff = session.read("a.py", mode="full", call_id="r3")
        assert diff.kind == "diff"
        assert diff.tokens <= 0.6 * ESTIMATE_MARGIN * diff.tokens_full
        assert not cache.engine.counts.tokens.loaded  # no vocabulary was needed on the read path


def test_exact_counts_count_every_answer_exactly(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(BODY)
    counter = TokenCounter()
    with FileCache(tmp_path, store=tmp_path / "s.db", exact_counts=True) as cache:
        session = cache.session()
        first = session.read("a.py", mode="full")
        again = session.read("a.py", mode="full")
        (tmp_path / "a.py").write_text(BODY.replace("line 7:", "LINE 7:"))
        diff = session.read("a.py", mode="full")
    assert (first.kind, again.kind, diff.kind) == ("full", "unchanged", "diff")
    for result in (first, again, diff):
        assert result.tokens == counter.count(result.text)
    assert cache.engine.counts.tokens.loaded
    assert first.tokens_full == again.tokens_full == first.tokens


def test_small_file_gets_content_when_a_fileref_would_not_be_clearly_smaller(
    tmp_path: Path,
) -> None:
    (tmp_path / "tiny.txt").write_text("x\n")
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        session.read("tiny.txt")
        assert session.read("tiny.txt").kind == "full"  # a FileRef costs more than "x"


def test_held_versions_stay_within_memory_mb_and_evicted_held_ones_reach_the_store(
    tmp_path: Path,
) -> None:
    first = BODY.replace("line 5:", "line 5 v0:")
    (tmp_path / "a.py").write_text(first)
    versions = []
    with FileCache(tmp_path, store=tmp_path / "s.db", memory_mb=0.25) as cache:
        holder = cache.session("holder")
        versions.append(holder.read("a.py", mode="full").version)
        churn = cache.session("churn")
        for i in range(1, 30):  # ~30 KB of text each, ~60 KB as lines: far over 256 KiB
            (tmp_path / "a.py").write_text(BODY.replace("line 5:", f"line 5 v{i}:"))
            versions.append(churn.read("a.py", mode="full", fresh=True).version)
            assert cache.engine.versions.memory_used <= 0.25 * 2**20
        assert cache.engine.versions.held_lines(versions[0]) is None  # it left memory long ago
        (tmp_path / "a.py").write_text(first.replace("line 9:", "line 9!"))
        diff = holder.read("a.py", mode="full")  # from the evicted version: queued or stored
        assert diff.kind == "diff" and "line 9!" in diff.text
        cache.engine.versions.flush()
        assert cache.engine.store.has_blob(versions[0])  # held by "holder" when it left memory
        assert all(cache.engine.store.has_blob(v) for v in versions[-3:])  # in memory at the flush
        # churn's view holds its newest versions_per_path versions: older ones that left
        # memory were needed by no live session, so they were dropped unwritten
        assert not cache.engine.store.has_blob(versions[1])


def test_memory_mb_must_be_positive(tmp_path: Path) -> None:
    from filecache import ConfigError

    with pytest.raises(ConfigError, match="memory_mb"):
        FileCache(tmp_path, store=":memory:", memory_mb=0)


# -- cold start ---------------------------------------------------------------------------


_PROBE = """
import json, sys
from filecache.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""

NOT_FOR_FILE_TOOLS = {
    "toktok",  # the BPE vocabulary: only exact counts (pruning, outlines, exact_counts)
    "tree_sitter",
    "filecache.outline.outline",
    "filecache.prune.pruner",
    "filecache.prune.pruning",
    "filecache.prune.transcript",
    "filecache.replay.replay",
    "filecache.stats",
    "tomllib",  # no [tool.filecache] in the root's pyproject.toml
    "asyncio",  # 19 ms: only the async face (Session.aread, ...) and the MCP server use it
    "logging",  # only a damaged stored view or the watcher logs
}


def test_file_commands_import_only_what_they_use(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(BODY[:2000])  # under outline_threshold: an outline loads more
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    steps = [
        (["read", "a.py"], "[a.py: "),
        (["read", "a.py"], "unchanged"),
        (["edit", "a.py", "--old", "line 3:", "--new", "LINE 3:"], "edited"),
        (["write", "b.py", "--content", "x = 1\n"], "wrote"),
    ]
    # what the interpreter loads before filecache (a .pth file may import anything)
    floor = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    before = set(json.loads(floor.stdout))
    for args, shown in steps:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, *args, "--root", str(tmp_path), "--session", "s"],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        )
        assert shown in proc.stdout.lower() or shown in proc.stdout, proc.stdout
        loaded = set(json.loads(proc.stderr.strip().splitlines()[-1]))
        assert (loaded - before) & NOT_FOR_FILE_TOOLS == set(), args


def test_a_current_store_opens_without_migration_work(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    conn.execute("DROP TABLE _migrations")  # gone: an open that migrated would recreate it
    conn.commit()
    conn.close()
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert "_migrations" not in tables
    conn.execute("PRAGMA user_version = 0")  # an older store: the migrations are checked again
    conn.close()
    with pytest.raises(StoreError, match="not a filecache store"):
        SqliteStore(path)  # tables but no record of any migration: proof the check ran


@pytest.mark.parametrize("counter", ["function", "counter"])
def test_token_memo_counts_each_text_once_and_stays_bounded(counter: str) -> None:
    """One memo for the pruner (a ``TokenCounter``) and the gateway's transform (a function):
    the same counts as the counter's, each distinct text counted once, at most ``limit`` held."""
    calls: list[str] = []
    exact = TokenCounter("estimate")

    def count(text: str) -> int:
        calls.append(text)
        return exact.count(text)

    class Counting(TokenCounter):
        def count(self, text: str) -> int:
            calls.append(text)
            return super().count(text)

    memo = TokenMemo(count if counter == "function" else Counting("estimate"), limit=3)
    texts = ["a b c", "def f(): pass", "x = 1", "a b c", "def f(): pass"]
    assert [memo(t) for t in texts] == [exact.count(t) for t in texts]
    assert calls == texts[:3]
    memo("fourth text")  # the limit reached: the memo starts again empty
    assert memo("a b c") == exact.count("a b c") and calls[-2:] == ["fourth text", "a b c"]
