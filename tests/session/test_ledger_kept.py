"""``Session.ledger`` folds the events the session object keeps (``SessionState.events``), not
the store's rows read back: it must equal the ledger of the store's events whatever the other
objects of the session did in between (committed, deleted the session, began it again)."""

from __future__ import annotations

from pathlib import Path

from filecache import FileCache, Session
from filecache.ledger import Ledger, build_ledger

LINES = "".join(f"line {i} of a file with some words in it\n" for i in range(40))


def _stored(session: Session) -> Ledger:
    return build_ledger(session.id, session.engine.store.events(session.id))


def _same(session: Session) -> None:
    kept, stored = session.ledger(), _stored(session)
    assert dict(kept.calls) == dict(stored.calls)
    assert dict(kept.writes) == dict(stored.writes)


def test_the_kept_ledger_is_the_stores_after_every_other_objects_work(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text(LINES)
    (root / "b.txt").write_text(LINES)
    store = str(tmp_path / "s.db")
    with FileCache(root, store=store) as one, FileCache(root, store=store) as two:
        first, second = one.session("s"), two.session("s")
        first.read("a.txt", call_id="r1")
        _same(first)
        earlier = first.ledger()  # a snapshot: later folds never change it
        second.read("a.txt", call_id="r2")  # the other object moved the session on
        second.edit("a.txt", "line 3 ", "line three ", call_id="e1")
        _same(first)
        first.read("a.txt", call_id="r3")
        first.forget(["r1"])
        _same(first)
        _same(second)
        assert [c.call_id for c in first.ledger().calls.values()][:4] == ["r1", "r2", "e1", "r3"]
        assert list(earlier.calls) == ["r1"] and not earlier.writes

        # Deleted and begun again elsewhere, further than this object knew it: a new life
        known = one.engine.store.head("s")
        two.engine.store.delete_session("s")
        fresh = FileCache(root, store=store)
        again = fresh.session("s")
        for n in range(6):
            again.read("b.txt", call_id=f"n{n}", fresh=True)
        assert one.engine.store.head("s") > known  # a head past ours, and none of our events
        _same(first)
        assert "r1" not in first.ledger().calls and "n5" in first.ledger().calls

        # Deleted again, and shorter than this object knew it
        fresh.engine.store.delete_session("s")
        again.engine.store.touch_session("s")
        _same(first)
        assert not first.ledger().calls
        fresh.close()
