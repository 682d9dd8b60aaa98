"""Remembered path resolutions (``fsio.locate``'s ``remember``, ``fsio.Paths``): a link that
appears on a remembered path, or a path through a link that changes, gives the answer an
unremembered call gives."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from filecache import FileCache
from filecache.errors import OutsideRootError
from filecache.fsio import MAX_REMEMBERED


def _tree(root: Path) -> None:
    for folder, text in (("a", "in a\n"), ("b", "in b\n"), ("c/d", "in c/d\n"), ("e/f", "e/f\n")):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "x.py").write_text(text)
    (root / "c" / "x.py").write_text("in c\n")
    (root / "e" / "x.py").write_text("in e\n")


def test_a_folder_swapped_for_a_link_is_read_through_the_link(cache: FileCache, root: Path) -> None:
    _tree(root)
    session = cache.session("s")
    assert "in a" in session.read("a/x.py").text  # remembered: no link on the way
    shutil.rmtree(root / "a")
    (root / "a").symlink_to(root / "b")
    got = session.read("a/x.py")
    assert (got.path, got.kind) == ("b/x.py", "full")
    assert "in b" in got.text


def test_a_file_swapped_for_a_link_outside_is_refused_every_time(
    cache: FileCache, root: Path, outside: Path
) -> None:
    _tree(root)
    session = cache.session("s")
    session.read("a/x.py")
    (root / "a" / "x.py").unlink()
    (root / "a" / "x.py").symlink_to(outside / "secret.txt")
    for _ in range(2):
        with pytest.raises(OutsideRootError, match="outside the root"):
            session.read("a/x.py")
        with pytest.raises(OutsideRootError, match="outside the root"):
            session.write("a/x.py", "new\n")
    assert (outside / "secret.txt").read_text() == "outside the root\n"


def test_a_path_through_a_link_follows_the_link_as_it_is_now(cache: FileCache, root: Path) -> None:
    _tree(root)
    (root / "link").symlink_to(root / "a")
    session = cache.session("s")
    assert "in a" in session.read("link/x.py").text
    (root / "link").unlink()
    (root / "link").symlink_to(root / "b")
    assert "in b" in session.read("link/x.py").text
    session.edit("link/x.py", "in b", "edited b")
    assert (root / "b" / "x.py").read_text() == "edited b\n"
    assert (root / "a" / "x.py").read_text() == "in a\n"


def test_dot_dot_after_a_link_is_resolved_afresh(cache: FileCache, root: Path) -> None:
    _tree(root)
    (root / "hop").symlink_to(root / "c" / "d")
    session = cache.session("s")
    assert "in c\n" in session.read("hop/../x.py").text  # c/d/.. is c
    (root / "hop").unlink()
    (root / "hop").symlink_to(root / "e" / "f")
    assert "in e\n" in session.read("hop/../x.py").text
    (root / "z").mkdir()  # a link one level down: lexically and really the same path, for now
    (root / "c" / "b").mkdir()
    (root / "c" / "b" / "x.py").write_text("in c/b\n")
    (root / "jump").symlink_to(root / "z")
    assert "in b\n" in session.read("jump/../b/x.py").text
    (root / "jump").unlink()
    (root / "jump").symlink_to(root / "c" / "d")
    assert "in c/b\n" in session.read("jump/../b/x.py").text


def test_only_link_free_paths_are_remembered_and_the_memory_is_bounded(
    cache: FileCache, root: Path
) -> None:
    _tree(root)
    (root / "link").symlink_to(root / "a")
    places = cache.engine.paths
    for path in ("a/x.py", "a/x.py", "./a//x.py", "./a//x.py", "link/x.py", "link/x.py"):
        places.remembered(path)
    assert list(places.known) == ["a/x.py", "./a//x.py"]  # lexically the real path
    first = places.known["a/x.py"]
    assert places.remembered("a/x.py") is first  # answered from memory
    assert places.locate("a/x.py") is not first  # ``locate`` always resolves afresh
    for i in range(MAX_REMEMBERED + 1):
        places.remembered(f"new-{i}.py")
    assert len(places.known) <= MAX_REMEMBERED
    assert os.path.exists(root / "a" / "x.py")
