"""Regressions found in review: each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from filecache import FileCache, FileCacheError
from filecache.cli import main

BODY = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 61))


def test_a_failed_write_does_not_consume_a_pending_outside_notice(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(BODY)
    (tmp_path / "f.txt").write_text("a file, not a folder\n")
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        session.read("a.txt", call_id="c1")
        (tmp_path / "a.txt").write_text(BODY.replace("line 30:", "LINE 30:"))
        session.note_external_change("a.txt")
        with pytest.raises(FileCacheError):
            session.write("f.txt/sub.txt", "y\n", call_id="cw")
        after = session.read("a.txt", call_id="c3")
    assert after.kind != "unchanged" or after.base_call_id != "cw"
    assert "LINE 30:" in after.text  # the change reaches the model, as a notice or content


def test_edit_confirmations_place_every_replacement(tmp_path: Path) -> None:
    text = "".join(f"row {i} foo\n" if i in (3, 9, 15, 40) else f"row {i}\n" for i in range(60))
    (tmp_path / "a.txt").write_text(text)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        done = session.edit("a.txt", "foo", "bar", replace_all=True, call_id="e1")
    assert "changed: line 4, line 10, line 16, line 41." in done.text


def test_an_edit_in_repetitive_text_is_placed_where_it_landed(tmp_path: Path) -> None:
    """Never read: the model knows only its new lines, at the place the confirmation gives."""
    (tmp_path / "a.txt").write_text("p\nA\nY\nq\n")
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        done = session.edit("a.txt", "A\n", "A\nY\n", call_id="e1")
        assert "changed: lines 2-3." in done.text
        assert session.ledger().calls["e1"].tool == "edit"
        view = session._state.views["a.txt"]
        facts = view.get(done.version)
        assert facts is not None and facts.covering(2, 3) and not facts.covering(4, 4)


def test_too_many_replacements_to_list_hold_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x foo\n" * 30)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        session.read("a.txt", call_id="r1")
        done = session.edit("a.txt", "foo", "bar", replace_all=True, call_id="e1")
        assert "changed:" not in done.text
        assert session.read("a.txt", call_id="r2").kind in ("diff", "full")


def test_cli_prune_with_a_session_forgets_what_it_cleared(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("".join(f"row {i}: " + "word " * 20 + "\n" for i in range(400)))
    runner = CliRunner()
    store = str(tmp_path / "s.db")
    base = ["--root", str(tmp_path), "--store", store, "--session", "S"]
    first = runner.invoke(main, ["read", "a.txt", "--call-id", "c1", "--mode", "full", *base])
    assert first.exit_code == 0, first.output
    call = {"id": "c1", "type": "function", "function": {"name": "read_file",
            "arguments": json.dumps({"path": "a.txt"})}}  # fmt: skip
    messages = [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": first.output},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "filler " * 3000},
        {"role": "assistant", "content": None, "tool_calls": [dict(call, id="c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "newest result, always kept"},
    ]
    (tmp_path / "m.json").write_text(json.dumps(messages))
    pruned = runner.invoke(
        main, ["prune", str(tmp_path / "m.json"), "--window", "20000", "--no-cache-aware", *base]
    )
    assert pruned.exit_code == 0, pruned.output
    bodies = {m.get("tool_call_id"): m["content"] for m in json.loads(pruned.stdout)}
    assert bodies["c1"] != first.output  # pruned
    again = runner.invoke(main, ["read", "a.txt", "--mode", "full", *base])
    assert not again.output.startswith("[filecache] a.txt unchanged since your result c1")


@pytest.mark.parametrize("name", ["fc.db", "fc.db-wal"])
def test_a_store_inside_the_root_is_neither_read_nor_written(tmp_path: Path, name: str) -> None:
    from filecache import OutsideRootError

    (tmp_path / "a.txt").write_text(BODY)
    with FileCache(tmp_path, store=str(tmp_path / "fc.db")) as cache:
        session = cache.session()
        session.read("a.txt")
        before = (tmp_path / "fc.db").read_bytes()
        with pytest.raises(OutsideRootError, match="own store"):
            session.write(name, "oops\n")
        with pytest.raises(OutsideRootError):
            session.read("fc.db")
        assert (tmp_path / "fc.db").read_bytes()[:16] == before[:16]


def _swap_for_link(folder: Path, target: Path) -> None:
    folder.rename(folder.with_name(folder.name + ".old"))
    folder.symlink_to(target, target_is_directory=True)


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to see the swap")
def test_a_folder_swapped_for_a_link_after_locate_is_refused_on_read(tmp_path: Path) -> None:
    from filecache import OutsideRootError
    from filecache.fsio import locate, read_bytes

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "a.txt").write_text("inside\n")
    (outside / "a.txt").write_text("secret\n")
    loc = locate(root, "sub/a.txt")
    _swap_for_link(root / "sub", outside)
    with pytest.raises(OutsideRootError, match="moved while being opened"):
        read_bytes(loc)


def test_a_folder_swapped_for_a_link_after_locate_is_refused_on_write(tmp_path: Path) -> None:
    from filecache import OutsideRootError
    from filecache.fsio import locate, write_bytes

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    loc = locate(root, "sub/new.txt")
    _swap_for_link(root / "sub", outside)
    with pytest.raises(OutsideRootError):
        write_bytes(loc, b"data\n")
    assert list(outside.iterdir()) == []


def test_writes_leave_no_temporary_files_and_keep_the_mode(tmp_path: Path) -> None:
    from filecache.fsio import locate, write_bytes

    (tmp_path / "a.sh").write_text("echo hi\n")
    (tmp_path / "a.sh").chmod(0o755)
    write_bytes(locate(tmp_path, "a.sh"), b"echo there\n")
    write_bytes(locate(tmp_path, "deep/er/b.txt"), b"new\n")
    assert (tmp_path / "a.sh").read_text() == "echo there\n"
    assert (tmp_path / "a.sh").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "deep" / "er" / "b.txt").read_text() == "new\n"
    assert not [p for p in tmp_path.rglob(".fc-*")]
