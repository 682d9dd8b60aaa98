"""Attacks on remembered path resolutions (``filecache.locations``) and the per-name deny memo:
whatever a session remembers, nothing outside the root is read or written and no denied
content is answered."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_secrets import store_bytes

from filecache import FileCache
from filecache.errors import FileCacheError, OutsideRootError


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


def test_a_remembered_path_turned_into_a_link_to_a_denied_file_stores_nothing_of_it(
    root: Path, tmp_path: Path
) -> None:
    db = tmp_path / "store" / "cache.db"
    (root / ".env").write_text("".join(f"K{i}=SECRET-DOTENV-{i}\n" for i in range(30)))
    (root / "keys").mkdir()
    (root / "keys" / "a.txt").write_text("SECRET-DIR-1\nSECRET-DIR-2\n")
    (root / "pub").mkdir()
    (root / "pub" / "a.txt").write_text("public a\n")
    (root / "public.txt").write_text("public\n")
    with FileCache(root, store=db, deny=(".env*", "keys/*")) as cache:
        session = cache.session("s")
        session.read("public.txt")  # remembered, and matched (not denied) in the memo
        session.read("pub/a.txt")
        (root / "public.txt").unlink()
        (root / "public.txt").symlink_to(".env")
        os.rename(root / "pub", root / "pub.old")
        (root / "pub").symlink_to("keys")
        for n in range(2):
            got = session.read("public.txt", mode="full", fresh=True)
            assert got.path == ".env" and cache.engine.secrets.denied(
                cache.engine.paths.locate("public.txt")
            )
            got = session.read("pub/a.txt", fresh=True)
            assert got.path == "keys/a.txt"
            session.edit("public.txt", f"SECRET-DOTENV-{n}\n", f"SECRET-DOTENV-EDITED-{n}\n")
            session.write("pub/a.txt", f"SECRET-DIR-WRITTEN-{n}\n")
        cache.engine.versions.flush()
    held = store_bytes(db)
    assert b"SECRET-" not in held
    assert b"public a" in held  # the scan finds what is stored
    assert (root / "keys" / "a.txt").read_text() == "SECRET-DIR-WRITTEN-1\n"


def test_threads_racing_a_folder_swap_never_read_or_write_outside(
    root: Path, outside: Path, tmp_path: Path
) -> None:
    (outside / "x.txt").write_text("OUTSIDE-CONTENT\n")
    (root / "a").mkdir()
    (root / "a" / "x.txt").write_text("inside\n")
    done, swaps = threading.Event(), [0]

    def put(link: bool) -> None:
        """``a`` as the link to outside or the real folder; a writer may have made a fresh
        folder ``a`` in the gap (writes make missing folders): it goes."""
        while True:
            try:
                if link:
                    (root / "a").symlink_to(outside)
                else:
                    os.rename(root / "a.real", root / "a")
                return
            except OSError:
                shutil.rmtree(root / "a", ignore_errors=True)

    def swap() -> None:
        while not done.is_set():
            os.rename(root / "a", root / "a.real")
            put(link=True)
            time.sleep(0.0005)
            (root / "a").unlink()
            put(link=False)
            swaps[0] += 1

    with FileCache(root, store=str(tmp_path / "store.db")) as cache:
        race_reads_and_writes(cache, swap, done, swaps, 200)
    assert (outside / "x.txt").read_text() == "OUTSIDE-CONTENT\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "x.txt"]


def race_reads_and_writes(
    cache: FileCache, swap: Callable[[], None], done: threading.Event, swaps: list[int], least: int
) -> None:
    """Four sessions' threads read and write ``a/x.txt`` while ``swap`` runs until they are
    done: each makes 300 calls and goes on until ``least`` swaps were made (counts, not a time:
    a loaded machine makes the race no shorter). A refusal or a missing file is fine; no answer
    may hold the outside file's ``OUTSIDE`` bytes, and nothing else may be raised."""
    answers: list[str] = []
    errors: list[BaseException] = []

    def work(n: int) -> None:
        session = cache.session(f"s{n}")
        calls = 0
        while calls < 300 or (swaps[0] < least and swapper.is_alive()):
            calls += 1
            try:
                if n % 2:
                    session.write("a/x.txt", f"written by {n}\n")
                else:
                    answers.append(session.read("a/x.txt", fresh=True).text)
            except FileCacheError:
                pass  # refused (outside) or missing mid-swap: fine
            except BaseException as exc:  # pragma: no cover - the failure shown
                errors.append(exc)
                raise

    swapper = threading.Thread(target=swap)
    workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in [swapper, *workers]:
        t.start()
    for t in workers:
        t.join()
    done.set()
    swapper.join()
    assert not errors
    assert swaps[0] >= least
    assert answers and not [a for a in answers if "OUTSIDE" in a]


def test_a_refusal_of_a_remembered_location_is_retried_though_another_thread_remembered_anew(
    cache: FileCache, root: Path
) -> None:
    from filecache.fsio import Located, read_bytes

    (root / "a").mkdir()
    (root / "a" / "x.txt").write_text("in a\n")
    (root / "b").mkdir()
    (root / "b" / "x.txt").write_text("in b\n")
    session, places = cache.session("s"), cache.engine.paths
    first = places.remembered("a/x.txt")  # remembered
    seen: list[bytes] = []

    def read(loc: Located) -> bytes:
        if loc is not first or seen:
            return read_bytes(loc)
        os.rename(root / "a", root / "a.real")  # another thread swaps the folder for a link
        (root / "a").symlink_to("b")
        seen.append(session._at("a/x.txt", read_bytes))  # a second thread: through the link
        try:
            read_bytes(loc)  # this thread's walk meets the link
        finally:
            (root / "a").unlink()  # the swap undone; a third thread remembers the path anew
            os.rename(root / "a.real", root / "a")
            places.remembered("a/x.txt")
        raise AssertionError("the walk followed the link")  # pragma: no cover

    assert session._at("a/x.txt", read) == b"in a\n"  # what an unremembered call gives now
    assert seen == [b"in b\n"]
