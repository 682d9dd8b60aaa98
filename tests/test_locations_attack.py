"""Attacks on remembered path resolutions (``filecache.locations``) and the per-name deny memo:
whatever a session remembers, nothing outside the root is read or written and no denied
content is answered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from filecache import FileCache
from filecache.errors import OutsideRootError


def test_the_root_swapped_for_a_link_between_calls_is_never_read_or_written_through(
    root: Path, outside: Path, tmp_path: Path
) -> None:
    (outside / "notes.txt").write_text("outside notes\n")
    (outside / "src").mkdir()
    (outside / "src" / "app.py").write_text("outside app\n")
    with FileCache(root, store=str(tmp_path / "store.db")) as cache:
        session = cache.session("s")
        session.read("notes.txt")  # remembered: no link on the way
        session.read("src/app.py")
        os.rename(root, tmp_path / "root.old")
        root.symlink_to(outside)  # the root itself now leads outside
        for _ in range(2):
            with pytest.raises(OutsideRootError):
                session.read("notes.txt")
            with pytest.raises(OutsideRootError):
                session.read("src/app.py")
            with pytest.raises(OutsideRootError):
                session.write("notes.txt", "written outside?\n")
            with pytest.raises(OutsideRootError):
                session.edit("src/app.py", "outside app", "edited outside")
    assert (outside / "notes.txt").read_text() == "outside notes\n"
    assert (outside / "src" / "app.py").read_text() == "outside app\n"


def test_a_root_removed_and_made_again_is_read_on_a_fresh_resolution(
    root: Path, tmp_path: Path
) -> None:
    with FileCache(root, store=str(tmp_path / "store.db")) as cache:
        session = cache.session("s")
        session.read("notes.txt")
        os.rename(root, tmp_path / "root.old")
        (root / "src").mkdir(parents=True)  # the same path, another folder: not a link
        (root / "notes.txt").write_text("made again\n")
        assert "made again" in session.read("notes.txt", fresh=True).text
        session.edit("notes.txt", "made again", "edited again")
    assert (root / "notes.txt").read_text() == "edited again\n"
