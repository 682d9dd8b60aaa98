"""Every output path the CLI writes (``--html``, ``-o``/``--output``): one that cannot be written
is refused in one line (``filecache: PATH: ...``, exit 2) before the work starts, never with a
traceback after it; a new file is not left behind when the run fails for another reason."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from filecache import FileCache
from filecache.cli import main
from filecache.errors import PathError

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "fixtures" / "sessions" / "scripted__polyglot-peek"
CLAUDE_LOG = REPO / "fixtures" / "imports" / "claude-code" / "project-session.jsonl"


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_refused(result: Result, path: Path, why: str) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == PathError.exit_code, result.output
    assert result.stderr == f"filecache: {path}: {why}\n"


@pytest.fixture
def afile(tmp_path: Path) -> Path:
    """A regular file, where a folder would be needed."""
    path = tmp_path / "afile"
    path.write_text("not a folder\n", encoding="utf-8")
    return path


@pytest.fixture
def store(root: Path, tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    with FileCache(root, store=path) as cache:
        cache.session("s").read("notes.txt")
    return path


@pytest.fixture
def nofiles(tmp_path: Path) -> Path:
    """A trace replay refuses (no files/ folder)."""
    trace = tmp_path / "nofiles"
    trace.mkdir()
    shutil.copy(SESSION / "transcript.json", trace)
    return trace


def test_stats_html_in_a_missing_folder(tmp_path: Path, store: Path) -> None:
    page = tmp_path / "missing" / "x.html"
    result = invoke("stats", "--store", store, "--html", page)
    assert_refused(
        result, page, f"cannot write the output (the folder {page.parent} does not exist)"
    )


def test_stats_html_under_a_regular_file(afile: Path, store: Path) -> None:
    page = afile / "x.html"
    assert_refused(invoke("stats", "--store", store, "--html", page), page,
                   "cannot write the output (Not a directory)")  # fmt: skip


def test_stats_html_is_checked_before_the_store_is_opened(tmp_path: Path) -> None:
    page = tmp_path / "missing" / "x.html"
    result = invoke("stats", "--store", tmp_path / "no-store.db", "--html", page)
    assert result.exit_code == PathError.exit_code and str(page) in result.stderr


@pytest.mark.parametrize("extra", [(), ("--compare", "--window", "32000"), ("--policy", "none")])
def test_replay_html_is_checked_before_any_session_is_replayed(
    tmp_path: Path, afile: Path, nofiles: Path, extra: tuple[str, ...]
) -> None:
    page = afile / "x.html"
    # The trace would fail its replay: the output's error comes first, so nothing ran.
    result = invoke("replay", nofiles, *extra, "--html", page)
    assert_refused(result, page, "cannot write the output (Not a directory)")
    assert result.stdout == ""


def test_a_new_html_file_is_not_left_behind_by_a_failed_replay(
    tmp_path: Path, nofiles: Path
) -> None:
    page = tmp_path / "new.html"
    result = invoke("replay", nofiles, "--html", page)
    assert result.exit_code == 2 and "no files/ folder" in result.stderr
    assert not page.exists()


def test_replay_html_replaces_an_existing_file(tmp_path: Path) -> None:
    page = tmp_path / "old.html"
    page.write_text("old page\n", encoding="utf-8")
    result = invoke("replay", SESSION, "--html", page, "--json")
    assert result.exit_code == 0, result.output
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_prune_output_is_checked_before_its_source_is_read(tmp_path: Path, afile: Path) -> None:
    source = tmp_path / "broken.json"
    source.write_text("{not json", encoding="utf-8")
    out = afile / "x.json"
    result = invoke("prune", source, "-o", out, "--store", ":memory:")
    assert_refused(result, out, "cannot write the output (Not a directory)")


def test_prune_output_is_written(tmp_path: Path) -> None:
    source = tmp_path / "chat.json"
    source.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    out = tmp_path / "out.json"
    result = invoke("prune", source, "-o", out, "--store", ":memory:")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text(encoding="utf-8")) == [{"role": "user", "content": "hi"}]


def test_import_output_under_a_regular_file(afile: Path) -> None:
    out = afile / "sub"
    result = invoke("import", "claude-code", CLAUDE_LOG, "-o", out)
    assert_refused(result, out, "cannot make the output directory (Not a directory)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_import_output_in_a_folder_that_takes_no_new_folders() -> None:
    out = Path("/proc/filecache-import-test")
    result = invoke("import", "claude-code", CLAUDE_LOG, "-o", out)
    assert_refused(result, out, "cannot make the output directory (No such file or directory)")


def test_import_makes_a_missing_output_folder(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    result = invoke("import", "claude-code", CLAUDE_LOG, "-o", out)
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.iterdir()] and all((p / "files").is_dir() for p in out.iterdir())
