"""A ``forget`` must reach every object of the session (found by ``bench/bench_soak.py``).

Two ``FileCache`` objects on one store (two processes, or two MCP servers, or ``filecache
prune`` beside a server) serving one session id: after one of them forgets a result, no answer
of either may rely on it. Known broken: ``forget`` commits views but no event, so the store's
head does not move; the other object's catch-up (``SessionState.catch_up``: "head == self.seq")
keeps its old views, answers "unchanged since <forgotten result>", and commits those old views
back, so even the object that forgot answers from the forgotten result afterwards.
"""

from __future__ import annotations

from pathlib import Path

from filecache import FileCache

LINES = "".join(f"line {i} of a file with some words in it\n" for i in range(40))


def test_a_forget_in_one_object_is_seen_by_another_of_the_session(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text(LINES)
    store = str(tmp_path / "s.db")
    with FileCache(root, store=store) as one, FileCache(root, store=store) as two:
        first, second = one.session("s"), two.session("s")
        assert first.read("a.txt", call_id="r1").kind == "full"
        again = second.read("a.txt", call_id="r2")
        assert (again.kind, again.base_call_id) == ("unchanged", "r1")  # shared: as it should
        first.forget(["r1"])
        after = second.read("a.txt", call_id="r3")
        assert after.kind == "full", f"{after.kind} since {after.base_call_id}, forgotten"
        last = first.read("a.txt", call_id="r4")
        assert last.base_call_id != "r1"
