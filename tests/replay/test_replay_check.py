"""The replay's model simulator: it rebuilds what filecache's answers claim, independently.

A real ``Session`` answers reads while files change outside it (so diffs happen, which the
recorded traces never cause); every answer is fed to ``ModelView`` as a model would see it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filecache import FileCache
from filecache.errors import FileCacheError
from filecache.replay.replay_check import FileCall, ModelView, dangling_refs, disk_lines, tag_of

LINES = [
    f"line {i}: some text that makes a line long enough to be worth a diff\n" for i in range(60)
]


class Recorder:
    """Runs calls through a session and keeps the ``FileCall`` records and results in order."""

    def __init__(self, root: Path, cache: FileCache) -> None:
        self.root = root
        self.session = cache.session("s")
        self.calls: dict[str, FileCall] = {}
        self.results: list[tuple[str, str]] = []
        self.n = 0

    def _snap(self, path: str) -> tuple[str, tuple[str, ...]] | None:
        p = self.root / path
        return (tag_of(p.read_bytes()), disk_lines(p.read_bytes())) if p.exists() else None

    def call(self, tool: str, **args: Any) -> FileCall:
        self.n += 1
        cid = f"c{self.n}"
        before = self._snap(args["path"])
        try:
            if tool == "read_file":
                r: Any = self.session.read(
                    args["path"], offset=args.get("offset"), limit=args.get("limit"),
                    mode="full", call_id=cid,
                )  # fmt: skip
            elif tool == "edit_file":
                r = self.session.edit(
                    args["path"], args["old_string"], args["new_string"], call_id=cid
                )
            else:
                r = self.session.write(args["path"], args["content"], call_id=cid)
            text, kind = r.text, r.kind
        except FileCacheError as exc:
            text, kind = str(exc), "error"
        call = FileCall(cid, tool, args["path"], args, kind, text, before, self._snap(args["path"]))
        self.calls[cid] = call
        self.results.append((cid, text))
        return call


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (root / "a.py").write_text("".join(LINES), encoding="utf-8")
    return root


def _change(root: Path, edits: dict[int, str | None], insert: dict[int, str] | None = None) -> None:
    lines = (root / "a.py").read_text(encoding="utf-8").splitlines(keepends=True)
    for at, text in (insert or {}).items():
        lines.insert(at, text)
    out = [edits.get(i, line) for i, line in enumerate(lines)]
    (root / "a.py").write_text("".join(x for x in out if x is not None), encoding="utf-8")


def test_diffs_refs_and_edits_rebuild_to_disk(tmp_path: Path) -> None:
    root = _root(tmp_path)
    with FileCache(root, store=":memory:", diff_max_ratio=10.0) as cache:
        rec = Recorder(root, cache)
        view = ModelView(rec.calls)
        kinds = []

        def read(**args: Any) -> None:
            call = rec.call("read_file", path="a.py", **args)
            kinds.append(call.kind)
            assert view.feed(call.call_id, call.text) is None, call.text

        read()
        _change(root, {29: "changed 29\n"})
        read()  # a whole-file diff
        _change(root, {4: "changed 4\n", 49: None}, insert={10: "inserted\n"})
        read(offset=40, limit=15)  # a diff restricted to the hunks touching 40-54
        read(offset=1, limit=12)
        edit = rec.call("edit_file", path="a.py", old_string="changed 4\n", new_string="E\nF\n")
        assert view.feed(edit.call_id, edit.text) is None
        read(offset=1, limit=12)  # unchanged: the model knows its edit
        read(offset=1, limit=20)  # lines 13-20 held at an older version only: a diff
        read()
    assert kinds == ["full", "diff", "diff", "diff", "unchanged", "diff", "diff"]
    assert view.held("a.py", tag_of((root / "a.py").read_bytes()), disk_lines(
        (root / "a.py").read_bytes()
    ))  # fmt: skip


def test_a_wrong_diff_line_is_caught(tmp_path: Path) -> None:
    root = _root(tmp_path)
    with FileCache(root, store=":memory:", diff_max_ratio=10.0) as cache:
        rec = Recorder(root, cache)
        first = rec.call("read_file", path="a.py")
        _change(root, {29: "changed 29\n"})
        diff = rec.call("read_file", path="a.py")
    assert diff.kind == "diff"
    bad = diff.text.replace("+changed 29", "+changed 92")
    wrong = FileCall(**{**diff.__dict__, "text": bad})
    view = ModelView({first.call_id: first, diff.call_id: wrong})
    assert view.feed(first.call_id, first.text) is None
    assert "line 30 (diff) differs from disk" in (view.feed(diff.call_id, bad) or "")
    context = diff.text.replace(" line 28:", " line 82:")
    wrong = FileCall(**{**diff.__dict__, "text": context})
    view = ModelView({first.call_id: first, diff.call_id: wrong})
    view.feed(first.call_id, first.text)
    assert "diff context at line 29 differs" in (view.feed(diff.call_id, context) or "")


def test_a_ref_to_a_pruned_result_cannot_be_rebuilt_and_dangles(tmp_path: Path) -> None:
    root = _root(tmp_path)
    with FileCache(root, store=":memory:") as cache:
        rec = Recorder(root, cache)
        first = rec.call("read_file", path="a.py")
        ref = rec.call("read_file", path="a.py", offset=5, limit=5)
        edit = rec.call("edit_file", path="a.py", old_string="line 3:", new_string="LINE 3:")
        after = rec.call("read_file", path="a.py", offset=1, limit=8)
    assert (ref.kind, after.kind) == ("unchanged", "unchanged")
    view = ModelView(rec.calls)
    view.feed(first.call_id, "[cleared tool result: read a.py]")  # pruned in this request
    assert "cannot be rebuilt" in (view.feed(ref.call_id, ref.text) or "")
    pruned = [(first.call_id, "[cleared]"), (ref.call_id, ref.text)]
    assert dangling_refs(pruned, rec.calls) == {ref.call_id: "base c1 is pruned"}
    assert dangling_refs([(ref.call_id, ref.text)], rec.calls) == {
        ref.call_id: "base c1 is missing"
    }
    assert dangling_refs(rec.results, rec.calls) == {}
    # an edit is known from its call: its cleared confirmation leaves refs on it intact
    cleared = [(c, "[cleared]" if c == edit.call_id else t) for c, t in rec.results]
    assert dangling_refs(cleared, rec.calls) == {}


@settings(
    max_examples=min(300, int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "60"))),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("read"), st.integers(1, 70), st.integers(1, 30)),
            st.tuples(st.just("whole"), st.just(0), st.just(0)),
            st.tuples(st.just("change"), st.integers(0, 80), st.integers(0, 2)),
            st.tuples(st.just("edit"), st.integers(0, 80), st.just(0)),
            st.tuples(st.just("prune"), st.integers(0, 40), st.just(0)),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_every_answer_rebuilds_from_what_is_left(tmp_path: Path, steps: list[Any]) -> None:
    """Random reads, outside changes, own edits and pruned results (``forget``): every answer
    rebuilds, from the results still there, to the bytes on disk."""
    root = _root(tmp_path)
    with FileCache(root, store=":memory:", diff_max_ratio=10.0) as cache:
        rec = Recorder(root, cache)
        pruned: set[str] = set()
        for op, a, b in steps:
            lines = (root / "a.py").read_text(encoding="utf-8").splitlines(keepends=True)
            if op == "change" and lines:
                at = a % len(lines)
                edits: dict[int, str | None] = {at: None if b == 2 else f"outside {a}\n"}
                _change(root, edits, {at: "new\n"} if b == 1 else None)
                continue
            if op == "prune" and rec.results:
                cid = rec.results[a % len(rec.results)][0]
                pruned.add(cid)
                rec.session.forget([cid])
                continue
            if op == "edit" and lines:
                old = lines[a % len(lines)]
                if lines.count(old) == 1 and old != f"e{a}\n":
                    call = rec.call("edit_file", path="a.py", old_string=old, new_string=f"e{a}\n")
                    assert call.kind == "edited"
                continue
            if op in ("read", "whole"):
                args = {"offset": a, "limit": b} if op == "read" else {}
                call = rec.call("read_file", path="a.py", **args)
                view = ModelView(rec.calls)
                for cid, text in rec.results:
                    problem = view.feed(cid, "[cleared]" if cid in pruned else text)
                    if cid == call.call_id:
                        assert problem is None, (problem, call.text)
                # an older ref may have lost its base here (nothing keeps it alive, unlike the
                # pruner's keep-alive); a new answer never relies on what is gone
                sent = [(c, "[cleared]" if c in pruned else t) for c, t in rec.results]
                assert call.call_id not in dangling_refs(sent, rec.calls)


def test_an_edit_with_several_replacements_is_replayed_in_order(tmp_path: Path) -> None:
    root = _root(tmp_path)
    with FileCache(root, store=":memory:") as cache:
        rec = Recorder(root, cache)
        first = rec.call("read_file", path="a.py")
        pairs = [("line 3:", "LINE 3:"), ("line 40:", "L40\nL40b:")]
        r = rec.session.edit("a.py", edits=pairs, call_id="multi")
        after = (root / "a.py").read_bytes()
        args = {"path": "a.py", "edits": [{"old_string": o, "new_string": n} for o, n in pairs]}
        multi = FileCall(
            "multi", "edit_file", "a.py", args, r.kind, r.text, first.after,
            (tag_of(after), disk_lines(after)),
        )  # fmt: skip
        rec.calls["multi"] = multi
        rec.results.append(("multi", r.text))
        again = rec.call("read_file", path="a.py", offset=35, limit=10)
    assert again.kind == "unchanged"
    view = ModelView(rec.calls)
    for cid, text in rec.results:
        assert view.feed(cid, text) is None


def test_an_intact_edit_confirmation_places_the_new_lines_when_the_read_was_pruned(
    tmp_path: Path,
) -> None:
    """The read the edit was made from is pruned (forgotten), its confirmation is intact: the
    confirmation says where the new text landed, so a FileRef to those lines rebuilds; lines
    the model held only through the pruned read do not."""
    root = _root(tmp_path)
    new = "line 9: rewritten by the model, a whole line of new text\n"
    with FileCache(root, store=":memory:") as cache:
        rec = Recorder(root, cache)
        first = rec.call("read_file", path="a.py")
        edit = rec.call("edit_file", path="a.py", old_string=LINES[9], new_string=new)
        rec.session.forget([first.call_id])  # pruned from every later request
        ref = rec.call("read_file", path="a.py", offset=10, limit=1)
        other = rec.call("read_file", path="a.py", offset=20, limit=2)
    assert "changed: line 10" in edit.text
    assert (ref.kind, other.kind) == ("unchanged", "partial")
    view = ModelView(rec.calls)
    view.feed(first.call_id, "[cleared tool result: read a.py]")
    assert view.feed(edit.call_id, edit.text) is None
    assert view.feed(ref.call_id, ref.text) is None  # line 10 is the edit's own text
    assert view.feed(other.call_id, other.text) is None
    # without the confirmation the model cannot tell where the edit landed
    blind = ModelView(rec.calls)
    blind.feed(first.call_id, "[cleared]")
    blind.feed(edit.call_id, "[cleared]")
    assert "cannot be rebuilt" in (blind.feed(ref.call_id, ref.text) or "")
    # nor from a confirmation that does not say where (too many places to list)
    unplaced = FileCall(**{**edit.__dict__, "text": edit.text.split("; changed")[0] + ".\n"})
    vague = ModelView({**rec.calls, edit.call_id: unplaced})
    vague.feed(first.call_id, "[cleared]")
    vague.feed(edit.call_id, unplaced.text)
    assert "cannot be rebuilt" in (vague.feed(ref.call_id, ref.text) or "")
