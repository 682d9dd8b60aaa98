"""The watcher: debounced external changes, and notices in a watching FileCache's answers.

No sleeps: every wait is on the watcher's delivered batches (``Watcher.wait``), with generous
timeouts. Files are created before a watcher starts, so the only events are the test's own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from filecache import FileCache
from filecache.cli import main
from filecache.settings import load_settings
from filecache.watch import Change, Watcher

TIMEOUT = 20.0


def _in_thread(fn: Callable[[], object]) -> None:
    thread = threading.Thread(target=fn)
    thread.start()
    thread.join()


@pytest.fixture
def seen() -> list[Sequence[Change]]:
    return []


def test_a_burst_of_writes_is_one_change(root: Path, seen: list[Sequence[Change]]) -> None:
    with Watcher(root, seen.append, debounce=0.3) as watcher:

        def burst() -> None:
            for i in range(5):
                (root / "notes.txt").write_text(f"version {i}\n", encoding="utf-8")

        _in_thread(burst)
        assert watcher.wait(1, TIMEOUT)
    assert seen == [[Change("notes.txt", "modified")]]


def test_store_and_vcs_folders_are_ignored(root: Path, seen: list[Sequence[Change]]) -> None:
    for folder in (".filecache", ".git/objects", "elsewhere"):
        (root / folder).mkdir(parents=True)
    with Watcher(root, seen.append, ignore=[root / "elsewhere"]) as watcher:

        def changes() -> None:
            (root / ".filecache" / "cache.db").write_bytes(b"x")
            (root / ".git" / "objects" / "ab").write_bytes(b"x")
            (root / "elsewhere" / "x.txt").write_text("x")
            (root / "src" / "new.py").write_text("x = 1\n")  # the sentinel, last
            (root / "empty.txt").unlink()

        _in_thread(changes)
        assert watcher.wait(1, TIMEOUT)
    changes = [c for batch in seen for c in batch]
    assert changes == [Change("empty.txt", "deleted"), Change("src/new.py", "created")]


def test_a_temporary_file_that_comes_and_goes_is_left_out(
    root: Path, seen: list[Sequence[Change]]
) -> None:
    with Watcher(root, seen.append, debounce=0.3) as watcher:

        def save() -> None:
            (root / ".notes.txt.swp").write_text("draft")
            (root / ".notes.txt.swp").unlink()
            (root / "notes.txt").write_text("saved\n")

        _in_thread(save)
        assert watcher.wait(1, TIMEOUT)
    assert [c for batch in seen for c in batch] == [Change("notes.txt", "modified")]


def _modify(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    _in_thread(lambda: path.write_text(text.replace(old, new), encoding="utf-8"))


def test_an_outside_change_is_noticed_once_with_the_diff(root: Path) -> None:
    app = "".join(f"def handler_{i}(event):\n    return event  # {i}\n" for i in range(6))
    (root / "src" / "app.py").write_text(app, encoding="utf-8")  # a FileRef is shorter
    with FileCache(root, store=":memory:", watch=True) as cache:
        assert cache._watcher is not None
        session = cache.session()
        session.read("notes.txt", call_id="call_1")
        session.read("src/app.py", call_id="call_2")
        _modify(root / "notes.txt", "line 30:", "LINE 30:")
        assert cache.watch().wait(1, TIMEOUT)
        answer = session.read("src/app.py", call_id="call_3")
        first, _, rest = answer.text.partition("\n")
        assert first.startswith(
            "[filecache] notes.txt changed outside the agent since your result call_1 (xxh3 "
        )
        assert "-line 30: the quick" in rest and "+LINE 30: the quick" in rest
        assert answer.text.count("changed outside the agent") == 1
        assert answer.kind == "unchanged"  # app.py itself: a one-line FileRef after the notice
        last = rest.rstrip("\n").rsplit("\n", 1)[1]
        ref = "[filecache] src/app.py unchanged since your result call_2 (12 lines"
        assert last.startswith(ref)
        # Once per change: the next answers carry no notice, and the model's view moved on.
        assert "outside" not in session.read("src/app.py", call_id="call_4").text
        assert session.read("notes.txt", call_id="call_5").kind == "unchanged"
        writes = session.ledger().writes["notes.txt"]
        assert [(w.tool, w.call_id) for w in writes] == [("change", "call_3")]


def test_changes_to_the_store_folder_give_no_notice(root: Path) -> None:
    with FileCache(root, watch=True) as cache:  # the default store: root/.filecache/cache.db
        assert cache._watcher is not None
        session = cache.session()
        session.read("notes.txt", call_id="call_1")
        cache.engine.versions.flush()

        def churn() -> None:
            (root / ".filecache" / "junk").write_text("x")
            session.read("notes.txt", call_id="call_2")  # the store writes its own rows
            (root / "other.txt").write_text("sentinel\n")

        _in_thread(churn)
        assert cache.watch().wait(1, TIMEOUT)
        answer = session.read("notes.txt", call_id="call_3")
        assert "outside" not in answer.text and answer.kind == "unchanged"


def test_the_sessions_own_write_and_a_file_it_never_read_give_no_notice(root: Path) -> None:
    with FileCache(root, store=":memory:", watch=True) as cache:
        assert cache._watcher is not None
        session = cache.session()
        session.read("notes.txt", call_id="call_1")
        session.edit("notes.txt", "line 7:", "LINE 7:", call_id="call_2")
        _in_thread(lambda: (root / "src" / "app.py").write_text("def main():\n    return 2\n"))
        assert cache.watch().wait(1, TIMEOUT)
        cache.watch().wait(2, 1.0)  # the edit's own event may come as a second batch
        answer = session.read("notes.txt", call_id="call_3")
        assert "outside" not in answer.text and answer.kind == "unchanged"


def test_a_deleted_file_and_the_file_being_read(root: Path) -> None:
    with FileCache(root, store=":memory:", watch=True) as cache:
        assert cache._watcher is not None
        session = cache.session()
        session.read("notes.txt", call_id="call_1")
        session.read("src/app.py", call_id="call_2")

        def change() -> None:
            (root / "src" / "app.py").unlink()
            text = (root / "notes.txt").read_text()
            (root / "notes.txt").write_text(text.replace("line 9:", "LINE 9:"))

        _in_thread(change)
        assert cache.watch().wait(1, TIMEOUT)
        answer = session.read("notes.txt", call_id="call_3")
        # The file being read is answered by the read itself (a diff); the other one noticed.
        assert answer.text.startswith("[filecache] src/app.py was deleted outside the agent.\n")
        assert answer.kind == "diff" and answer.text.count("changed since your result") == 1


def test_watch_setting_and_cli(root: Path, runner: CliRunner) -> None:
    assert load_settings(root, env={"FILECACHE_WATCH": "yes"}).watch is True
    assert load_settings(root, env={"FILECACHE_WATCH": "0"}).watch is False
    stop = threading.Event()

    def keep_changing() -> None:
        n = 0
        while not stop.wait(0.05):
            n += 1
            (root / "notes.txt").write_text(f"change {n}\n")

    writer = threading.Thread(target=keep_changing)
    writer.start()
    try:
        result = runner.invoke(
            main, ["watch", str(root), "--count", "1", "--duration", str(TIMEOUT), "--json"]
        )
    finally:
        stop.set()
        writer.join()
    assert result.exit_code == 0, result.output
    assert result.stdout == '{"path": "notes.txt", "kind": "modified"}\n'


def test_serve_watch_option_starts_a_watcher_per_root(root: Path) -> None:
    pytest.importorskip("mcp")
    from filecache.adapters.mcp_server import FileCacheServer, ServeOptions

    server = FileCacheServer(ServeOptions(roots=(root,), store=":memory:", watch=True))
    server.open()
    try:
        [cache] = server.caches
        assert cache._watcher is not None and cache.engine.settings.watch
    finally:
        server.close()
    assert not FileCacheServer(ServeOptions(roots=(root,), store=":memory:")).options.watch


def test_a_store_given_as_a_path_inside_the_root_is_not_watched(root: Path) -> None:
    """Every answer writes the store: its file and journals must not wake the watcher."""
    with FileCache(root, store=str(root / "fc.db"), watch=True) as cache:
        assert cache._watcher is not None
        assert cache.watch().ignored("fc.db") and cache.watch().ignored("fc.db-wal")
        assert not cache.watch().ignored("notes.txt")
