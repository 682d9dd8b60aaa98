"""Attacks on the SQLite store's recent changes: migration m007 on a store of the previous
release (and that release opening it again), and the last-use slack across store objects and
retention."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from test_store import event

from filecache.store import migrations
from filecache.store.migrations import MIGRATIONS
from filecache.store.sqlite_store import SqliteStore


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _indexes(path: Path) -> set[str]:
    return {str(n) for (n,) in _rows(path, "SELECT name FROM sqlite_master WHERE type='index'")}


def test_a_store_of_the_previous_release_migrates_and_that_release_still_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "cache.db"
    older = [m for m in MIGRATIONS if m.__name__ != "m007_drop_event_call_index"]
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", older)
        store = SqliteStore(db)
        store.commit("s", 0, [event(1, "s", version="xxh3:a")], {})
        store.close()
    assert "events_session_call" in _indexes(db)
    assert _rows(db, "PRAGMA user_version") == [(len(older),)]
    store = SqliteStore(db)  # this release: m007 runs
    assert "events_session_call" not in _indexes(db)
    assert _rows(db, "PRAGMA user_version") == [(len(MIGRATIONS),)]
    store.commit("s", 1, [event(2, "s", version="xxh3:b")], {})
    store.close()
    with monkeypatch.context() as patch:  # the previous release opens it again, and writes
        patch.setattr(migrations, "MIGRATIONS", older)
        store = SqliteStore(db)
        store.commit("s", 2, [event(3, "s", version="xxh3:c")], {})
        store.close()
    store = SqliteStore(db)
    assert [e.call_id for e in store.events("s")] == ["c1", "c2", "c3"]
    assert "events_session_call" not in _indexes(db)
    store.close()


def test_a_session_used_through_another_store_object_is_not_expired_by_gc(tmp_path: Path) -> None:
    db = tmp_path / "cache.db"
    one, two = SqliteStore(db), SqliteStore(db)
    try:
        now = time.time()
        one.commit("s", 0, [event(1, "s", created=now - 0.2)], {})
        two.touch_session("old", now - 86400 * 30)
        # the other object's commit, within the slack of what it last wrote
        one.commit("s", 1, [event(2, "s", created=now)], {})
        report = two.gc(older_than=now - 86400)
        assert report.sessions_deleted == 1
        assert [s.session_id for s in one.sessions()] == ["s"]
        last = one.sessions()[0].last_used
        assert now - last < 1.0
    finally:
        one.close()
        two.close()
