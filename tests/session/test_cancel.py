"""Only what the model received is a fact: cancelled and abandoned calls, and retried ones.

A call whose answer never reached its caller (an ``asyncio`` task cancelled by ``wait_for``, a
thread's caller that gave up and said so with ``Session.abandon``) leaves no fact: the next read
never answers ``unchanged`` naming it. A retried call with the same call id (another process
after a kill between the replace and the commit) gets the recorded answer and never applies an
edit twice.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from filecache import FileCache
from filecache.store.store import Event


def one_worker_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose ``to_thread`` calls run one after another, in order (so a test can
    say which call's thread ran first, without waiting on the clock)."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
    return loop


def hold_session_lock(
    cache: FileCache, session_id: str
) -> tuple[threading.Event, threading.Thread]:
    """A thread holding the session's lock until the returned event is set (a slow call)."""
    release, held = threading.Event(), threading.Event()

    def hold() -> None:
        with cache.session(session_id).lock:
            held.set()
            release.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait()
    return release, thread


def test_a_read_cancelled_by_wait_for_leaves_no_fact(root: Path) -> None:
    with FileCache(root, store=root.parent / "cache.db") as cache:
        session = cache.session("s")
        release, holder = hold_session_lock(cache, "s")

        async def scenario() -> tuple[str, str | None]:
            with pytest.raises(TimeoutError):  # the read waits for the lock: cancelled
                await asyncio.wait_for(session.aread("notes.txt", call_id="c1"), 0.05)
            release.set()
            # the cancelled read's thread runs first (one worker) and finishes its turn
            answer = await session.aread("notes.txt", call_id="c2")
            return answer.kind, answer.base_call_id

        loop = one_worker_loop()
        try:
            kind, base = loop.run_until_complete(scenario())
        finally:
            loop.close()
            holder.join()
        # on 114493c: ("unchanged", "c1"), a result the caller never received
        assert (kind, base) == ("full", None)
        assert "c1" not in session.ledger().calls  # rolled back, not recorded


def test_an_edit_cancelled_before_it_replaced_the_file_changes_nothing(root: Path) -> None:
    before = (root / "notes.txt").read_text()
    with FileCache(root, store=root.parent / "cache.db") as cache:
        session = cache.session("s")
        session.read("notes.txt", call_id="r1")
        release, holder = hold_session_lock(cache, "s")

        async def scenario() -> None:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(
                    session.aedit("notes.txt", "line 5:", "LINE 5:", call_id="e1"), 0.05
                )
            release.set()
            await session.aread("notes.txt", call_id="r2")

        loop = one_worker_loop()
        try:
            loop.run_until_complete(scenario())
        finally:
            loop.close()
            holder.join()
        assert (root / "notes.txt").read_text() == before  # on 114493c: edited anyway
        assert "e1" not in session.ledger().calls


def test_a_read_abandoned_after_its_commit_is_forgotten_by_the_next_call(root: Path) -> None:
    """A thread's caller gave up (a timeout on its future) after the call had committed."""
    with FileCache(root, store=root.parent / "cache.db") as cache:
        session = cache.session("s")
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(session.read, "notes.txt", call_id="c1").result()  # result thrown away
        session.abandon("c1")
        again = session.read("notes.txt", call_id="c2")
        assert again.kind == "full" and again.base_call_id is None
        # the forgetting is in the store: another object of the session agrees
        with FileCache(root, store=root.parent / "cache.db") as other:
            third = other.session("s").read("notes.txt", call_id="c3")
            assert third.base_call_id != "c1"


def test_an_applied_edit_abandoned_at_its_commit_is_recorded_without_facts(root: Path) -> None:
    """Cancelled between the replace and the commit: the change is on disk, recorded as this
    call's edit, and the model (which never saw the confirmation) holds none of it."""
    from filecache import session as session_module

    with FileCache(root, store=root.parent / "cache.db") as cache:
        session = cache.session("s")
        session.read("notes.txt", call_id="r1")
        real = session_module.write_bytes

        def write_then_cancel(loc: object, data: bytes) -> None:
            real(loc, data)  # type: ignore[arg-type]
            session.abandon("e1")  # the caller gives up right after the replace

        session_module.write_bytes = write_then_cancel  # type: ignore[assignment]
        try:
            session.edit("notes.txt", "line 5:", "LINE 5:", call_id="e1")
        finally:
            session_module.write_bytes = real
        assert "LINE 5:" in (root / "notes.txt").read_text()
        assert session.ledger().calls["e1"].kind == "edited"  # truthful: the edit happened
        answer = session.read("notes.txt", offset=5, limit=1, call_id="r2")
        assert answer.kind in ("diff", "partial") and "LINE 5:" in answer.text
        assert answer.base_call_id != "e1"


KILLED_EDITOR = r"""
import os, sys
from filecache import FileCache
from filecache import session as session_module

root, store = sys.argv[1], sys.argv[2]
cache = FileCache(root, store=store)
s = cache.session("s")
s.read("a.txt", call_id="r1")
real = session_module.write_bytes

def write_then_die(loc, data):
    real(loc, data)
    os._exit(9)  # killed between the replace and the commit

session_module.write_bytes = write_then_die
s.edit("a.txt", "alpha", "alpha\nbeta", call_id="e1")  # old_string survives the edit
"""


@pytest.mark.parametrize("recovered_first", [False, True])
def test_an_edit_retried_after_a_kill_is_answered_and_never_applied_twice(
    tmp_path: Path, recovered_first: bool
) -> None:
    """The docs' advice for a replica killed mid-call: retry elsewhere, with the same call id."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("alpha\nomega\n")
    store = tmp_path / "cache.db"
    with FileCache(root, store=store) as retrier:  # already open: its recovery ran before
        proc = subprocess.run(
            [sys.executable, "-c", KILLED_EDITOR, str(root), str(store)], capture_output=True
        )
        assert proc.returncode == 9, proc.stderr
        assert (root / "a.txt").read_text() == "alpha\nbeta\nomega\n"
        if recovered_first:
            assert retrier.recover() == 1  # the intent became a `change`
        session = retrier.session("s")
        result = session.edit("a.txt", "alpha", "alpha\nbeta", call_id="e1")
        # on 114493c: applied a second time, "alpha\nbeta\nbeta\nomega\n"
        assert (root / "a.txt").read_text() == "alpha\nbeta\nomega\n"
        assert result.kind == "edited" and "not applied again" in result.text
        assert retrier.engine.store.intents() == []
        again = session.edit("a.txt", "alpha", "alpha\nbeta", call_id="e1")  # and again
        assert (root / "a.txt").read_text() == "alpha\nbeta\nomega\n"
        assert again.version == result.version
        read = session.read("a.txt", call_id="r2")
        assert "beta" in read.text and read.kind in ("diff", "full")


def test_an_edit_retried_after_its_answer_was_lost_is_answered_from_the_ledger(
    root: Path,
) -> None:
    with FileCache(root, store=root.parent / "cache.db") as cache:
        first = cache.session("s").edit("notes.txt", "line 5:", "line 5: line 5:", call_id="e1")
    with FileCache(root, store=root.parent / "cache.db") as other:  # another process, later
        again = other.session("s").edit("notes.txt", "line 5:", "line 5: line 5:", call_id="e1")
    assert (root / "notes.txt").read_text().count("line 5: line 5:") == 1
    assert again.version == first.version and again.kind == "edited"


def test_a_read_retried_with_its_call_id_is_answered_again_not_from_itself(root: Path) -> None:
    with FileCache(root, store=":memory:") as cache:
        session = cache.session("s")
        session.read("notes.txt", call_id="c1")  # its answer was lost on the way
        retry = session.read("notes.txt", call_id="c1")
        assert retry.kind == "full"  # on 114493c: "unchanged" naming c1, i.e. itself
        later = session.read("notes.txt", call_id="c2")
        assert later.kind == "unchanged" and later.base_call_id == "c1"


def test_a_turn_whose_outcome_is_unknown_is_forgotten_if_it_landed(root: Path) -> None:
    """The commit raised, and asking the store whether it landed failed too: the caller saw an
    error, so if the turn did land, the next turn forgets it."""
    from filecache.errors import StoreError
    from filecache.store.memory_store import MemoryStore

    class Unsure(MemoryStore):
        lose = False

        def commit(self, *args: object, **kwargs: object) -> int:
            head = super().commit(*args, **kwargs)  # type: ignore[arg-type]
            if self.lose:
                raise StoreError("connection lost")  # landed, but the reply is lost
            return head

        def settled_events(self, session_id: str, after: int) -> list[Event]:
            if self.lose:
                raise StoreError("still down")
            return super().settled_events(session_id, after)

    store = Unsure()
    with FileCache(root, store=store) as cache:
        session = cache.session("s")
        store.lose = True
        with pytest.raises(StoreError):
            session.read("notes.txt", call_id="c1")
        store.lose = False
        answer = session.read("notes.txt", call_id="c2")
        assert answer.kind == "full" and answer.base_call_id is None
