"""Attacks on path resolutions remembered per root (``fsio.Paths.remembered``, shared by every
session of a cache): a remembered path whose folder or file became a link, a store file reached
through a swapped folder, another root's cache, a rename: nothing outside the root (nor the
store's own files) is read or written, and a vanished file says so."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest
from test_locations_attack import race_reads_and_writes

from filecache import FileCache
from filecache.errors import FileCacheError, MissingFileError, OutsideRootError, PathError


def test_a_folder_remembered_by_one_session_and_swapped_for_a_link_out_refuses_every_session(
    root: Path, outside: Path, tmp_path: Path
) -> None:
    (outside / "app.py").write_text("OUTSIDE app\n")
    absolute = str(root / "src" / "app.py")
    with FileCache(root, store=str(tmp_path / "store.db")) as cache:
        first = cache.session("first")
        first.read("src/app.py")  # remembered for the root: no link on the way
        first.read(absolute)
        assert {"src/app.py", absolute} <= set(cache.engine.paths.known)
        os.rename(root / "src", tmp_path / "src.old")
        (root / "src").symlink_to(outside)  # the folder now leads outside
        for sid in ("first", "second", "third"):  # a new session finds the memory too
            session = cache.session(sid)
            for path in ("src/app.py", absolute):
                with pytest.raises(OutsideRootError, match="outside the root"):
                    session.read(path, fresh=True)
                with pytest.raises(OutsideRootError, match="outside the root"):
                    session.write(path, "written outside?\n")
                with pytest.raises(OutsideRootError, match="outside the root"):
                    session.edit(path, "OUTSIDE", "edited outside")
    assert (outside / "app.py").read_text() == "OUTSIDE app\n"
    assert sorted(p.name for p in outside.iterdir()) == ["app.py", "secret.txt"]


def test_a_parent_swapped_for_a_link_to_etc_is_refused(root: Path, tmp_path: Path) -> None:
    etc = Path("/etc")
    if not (etc / "passwd").is_file():
        pytest.skip("no /etc/passwd")
    (root / "conf").mkdir()
    (root / "conf" / "passwd").write_text("inside\n")
    with FileCache(root, store=str(tmp_path / "store.db")) as cache:
        session = cache.session("s")
        assert "inside" in session.read("conf/passwd").text
        os.rename(root / "conf", tmp_path / "conf.old")
        (root / "conf").symlink_to(etc)
        with pytest.raises(OutsideRootError, match="outside the root"):
            session.read("conf/passwd", fresh=True)
        with pytest.raises(OutsideRootError, match="outside the root"):
            cache.session("other").read("conf/passwd")


def test_a_path_remembered_by_one_roots_cache_is_not_used_by_another_roots(
    tmp_path: Path,
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root, text in ((one, "in one\n"), (two, "in two\n")):
        (root / "src").mkdir(parents=True)
        (root / "src" / "a.py").write_text(text)
    with (
        FileCache(one, store=str(tmp_path / "one.db")) as first,
        FileCache(two, store=str(tmp_path / "two.db")) as second,
    ):
        s1, s2 = first.session("s"), second.session("s")
        assert "in one" in s1.read("src/a.py").text  # remembered under root one
        assert "in one" in s1.read(str(one / "src" / "a.py")).text
        got = s2.read("src/a.py")
        assert (got.path, "in two" in got.text) == ("src/a.py", True)
        with pytest.raises(OutsideRootError, match="outside the root"):
            s2.read(str(one / "src" / "a.py"))  # root one's file, remembered there
        with pytest.raises(OutsideRootError, match="outside the root"):
            s2.write(str(one / "src" / "a.py"), "written from two\n")
        s2.edit("src/a.py", "in two", "edited in two")
        assert "in one" in s1.read("src/a.py", fresh=True).text
    assert (one / "src" / "a.py").read_text() == "in one\n"
    assert (two / "src" / "a.py").read_text() == "edited in two\n"


def test_a_remembered_folder_swapped_for_a_link_to_the_store_never_reaches_the_store(
    root: Path,
) -> None:
    (root / "data").mkdir()
    (root / "other").mkdir()
    (root / "other" / "cache.db").write_text("a plain file\n")
    (root / "other" / "cache.db-wal").write_text("a plain wal\n")
    db = root / "data" / "cache.db"  # the store kept inside the root
    with FileCache(root, store=str(db)) as cache:
        session = cache.session("s")
        session.read("notes.txt")
        cache.engine.versions.flush()
        assert "a plain file" in session.read("other/cache.db").text  # remembered
        assert "a plain wal" in session.read("other/cache.db-wal").text
        os.rename(root / "other", root / "other.old")
        (root / "other").symlink_to("data")  # the same names now are the store's files
        for name in ("other/cache.db", "other/cache.db-wal"):
            with pytest.raises(OutsideRootError, match="own store"):
                session.read(name, fresh=True)
            with pytest.raises(OutsideRootError, match="own store"):
                session.write(name, "the store overwritten\n")
            with pytest.raises(OutsideRootError, match="own store"):
                cache.session("other").edit(name, "a plain", "edited")
        cache.engine.versions.flush()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


def test_a_remembered_file_renamed_or_its_folder_moved_gives_a_clear_error(
    root: Path, tmp_path: Path
) -> None:
    with FileCache(root, store=str(tmp_path / "store.db")) as cache:
        session = cache.session("s")
        session.read("src/app.py")
        os.rename(root / "src" / "app.py", root / "src" / "moved.py")
        with pytest.raises(MissingFileError, match="no such file"):
            session.read("src/app.py")
        with pytest.raises(FileCacheError, match="no such file"):
            session.edit("src/app.py", "return 1", "return 2")
        assert (root / "src" / "moved.py").read_text() == "def main():\n    return 1\n"
        (root / "src" / "app.py").write_text("another file\n")  # a new file at the name
        assert "another file" in session.read("src/app.py").text
        os.rename(root / "src", root / "lib")
        with pytest.raises(MissingFileError, match="no such file"):
            session.read("src/app.py")
        (root / "src").write_text("a file where the folder was\n")
        with pytest.raises(PathError, match="is a file, not a folder"):
            session.read("src/app.py")
        with pytest.raises(PathError, match="is a file, not a folder"):
            session.write("src/app.py", "x\n")
    assert (root / "src").read_text() == "a file where the folder was\n"


def test_threads_of_several_sessions_racing_a_file_swapped_for_a_link_out(
    root: Path, outside: Path, tmp_path: Path
) -> None:
    """The remembered file itself (not a folder) swaps atomically between a regular file and a
    link outside; readers and writers in other sessions never get or change the outside bytes."""
    (outside / "x.txt").write_text("OUTSIDE-CONTENT\n")
    (root / "a").mkdir()
    (root / "a" / "x.txt").write_text("inside\n")
    done, swaps = threading.Event(), [0]

    def swap() -> None:
        while not done.is_set():
            link = root / "a" / ".swap-link"
            link.symlink_to(outside / "x.txt")
            os.replace(link, root / "a" / "x.txt")  # the file is a link out, atomically
            real = root / "a" / ".swap-real"
            real.write_text("inside again\n")
            os.replace(real, root / "a" / "x.txt")  # and a regular file again
            swaps[0] += 1

    with FileCache(root, store=str(tmp_path / "store.db")) as cache:
        cache.session("warm").read("a/x.txt")  # remembered before the race
        race_reads_and_writes(cache, swap, done, swaps, 300)
    assert (outside / "x.txt").read_text() == "OUTSIDE-CONTENT\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "x.txt"]
