"""The CLI when the store fails under it, and session ids that would break a line.

A CLI call that exits non-zero changed nothing (no file replaced, no ledger row an agent's next
call could rely on), and one that changed something exits 0: tried with a real file-size limit
(``RLIMIT_FSIZE`` in the child) at many sizes, so that the store's writes fail at every step of
an edit and a read (the event's commit, the blobs written at the end).
"""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from filecache import FileCache
from filecache.cli import main
from filecache.errors import RequestError

REPO = Path(__file__).resolve().parents[2]


# File-size limits (bytes) that stop the store at different steps, on a 40 kB file: the edit's
# commit, the blob written at the end, or nothing (the last).
EDIT_LIMITS = (48 << 10, 96 << 10, 160 << 10, 256 << 10, 1 << 30)
READ_LIMITS = (32 << 10, 160 << 10, 240 << 10, 256 << 10, 1 << 30)


def run_limited(limit: int, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m filecache ARGS`` with every file it writes limited to ``limit`` bytes."""

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if not k.startswith("FILECACHE_")}
    return subprocess.run(
        [sys.executable, "-m", "filecache", *(str(a) for a in args)],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
        preexec_fn=limit_files,
    )  # fmt: skip


def incompressible(size: int, seed: int) -> str:
    """Text lines that zlib cannot shrink much (so a blob is about as large as the file)."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
    chars = "".join(rng.choice(alphabet) for _ in range(size))
    return "".join(chars[i : i + 76] + "\n" for i in range(0, size, 76))


def test_an_edit_under_a_file_size_limit_exits_non_zero_only_when_nothing_changed(
    tmp_path: Path,
) -> None:
    outcomes: dict[str, int] = {}
    for step, limit in enumerate(EDIT_LIMITS):
        root = tmp_path / f"r{step}"
        root.mkdir()
        before = "value = 0\n" + incompressible(40_000, step)
        (root / "big.txt").write_text(before, encoding="utf-8")
        store = root / "cache.db"
        common = ("--root", root, "--store", store, "--session", "s")
        with FileCache(root, store=store) as cache:  # the model read it first
            cache.session("s").read("big.txt", call_id="r1")
        done = run_limited(
            limit, "edit", "big.txt", "--old", "value = 0", "--new", "value = 1",
            *common, "--call-id", "e1",
        )  # fmt: skip
        text = (root / "big.txt").read_text(encoding="utf-8")
        assert "Traceback" not in done.stderr, done.stderr
        with FileCache(root, store=store) as cache:
            recorded = "e1" in cache.session("s").ledger().calls
        if done.returncode == 0:
            outcomes["ok"] = outcomes.get("ok", 0) + 1
            assert "edited big.txt" in done.stdout
            assert text == before.replace("value = 0", "value = 1") and recorded
        else:  # on 114493c: exit 4 after the file was replaced and the edit committed
            outcomes[f"exit {done.returncode}"] = outcomes.get(f"exit {done.returncode}", 0) + 1
            assert text == before, f"limit {limit}: exit {done.returncode} but the file changed"
            assert not recorded, f"limit {limit}: exit {done.returncode} but e1 is in the ledger"
            assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("filecache: ")
    assert outcomes.get("ok"), outcomes  # some limits let the edit through


def test_a_read_under_a_file_size_limit_that_exits_non_zero_is_never_relied_on(
    tmp_path: Path,
) -> None:
    for step, limit in enumerate(READ_LIMITS):
        root = tmp_path / f"r{step}"
        root.mkdir()
        (root / "big.txt").write_text(incompressible(40_000, 100 + step), encoding="utf-8")
        store = root / "cache.db"
        common = ("--root", root, "--store", store, "--session", "s")
        done = run_limited(limit, "read", "big.txt", *common, "--call-id", "r1")
        assert "Traceback" not in done.stderr, done.stderr
        with FileCache(root, store=store) as cache:
            session = cache.session("s")
            recorded = "r1" in session.ledger().calls
            # on 114493c: the content is printed, committed, then exit 4 (blobs in close())
            assert recorded == (done.returncode == 0), (limit, done.returncode, done.stderr)
            again = session.read("big.txt", call_id="r2")
            if done.returncode != 0:  # never a FileRef to the answer the caller saw fail
                assert again.kind != "unchanged" and again.base_call_id != "r1"


# Session ids ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["a\nb", "a\tb", "a\x1b[31mb", "a\u200bb", "a\u202eb", "a\x00b"])
def test_a_session_id_with_an_unprintable_character_is_refused(root: Path, bad: str) -> None:
    with FileCache(root, store=":memory:") as cache:
        with pytest.raises(RequestError, match="unprintable character"):
            cache.session(bad)
        assert cache.engine.store.sessions() == []  # refused before anything was stored


def test_the_cli_refuses_a_session_id_with_a_newline_in_one_line(root: Path) -> None:
    store = root.parent / "cache.db"
    result = CliRunner().invoke(
        main, ["read", "notes.txt", "--root", str(root), "--store", str(store),
               "--session", "a\nb"],
    )  # fmt: skip
    assert result.exit_code == RequestError.exit_code
    assert result.output.count("\n") == 1 and "unprintable character U+000A" in result.output
    listed = CliRunner().invoke(main, ["sessions", "list", "--store", str(store)])
    assert listed.exit_code == 0 and "a\nb" not in listed.output


def test_sessions_list_stays_one_row_per_session_for_an_old_store(root: Path) -> None:
    """A store written before ids were checked may hold one with a newline: its row is escaped."""
    store_path = root.parent / "old.db"
    with FileCache(root, store=store_path) as cache:
        cache.engine.store.touch_session("old\nid|x")
        cache.session("fine").read("notes.txt")
    listed = CliRunner().invoke(main, ["sessions", "list", "--store", str(store_path)])
    assert listed.exit_code == 0
    rows = [line for line in listed.output.splitlines() if line.startswith("| ")]
    assert len(rows) == 4  # header, rule, two sessions
    assert any(r.startswith("| old\\nid\\|x |") for r in rows), rows


def test_serve_refuses_a_fixed_session_id_with_a_newline(root: Path) -> None:
    pytest.importorskip("mcp", reason="the [mcp] extra is not installed")
    from filecache.adapters.mcp_server import FileCacheServer, ServeOptions

    with pytest.raises(RequestError, match="unprintable character U\\+000A"):
        FileCacheServer(ServeOptions(roots=(root,), session="a\nb"))  # on 114493c: accepted
    result = CliRunner().invoke(main, ["serve", "--root", str(root), "--session", "a\nb"])
    assert result.exit_code == RequestError.exit_code and result.output.count("\n") == 1
