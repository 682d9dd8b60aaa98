"""Notices of files changed outside the agent, for ``Session`` answers (``FileCache(watch=True)``).

The watcher (``filecache.watch``) calls ``Session.note_external_change(path)`` for every file
that changed on disk, which marks it here; the session's next answer starts with
``OutsideChanges.notices``: per such file the model holds, one notice with the diff from the
model's version to the file (the planner's ``diff`` answer, so its facts move to the new version
and rely on this answer's call id), or one line that says to read it again when no diff can be
shown. The change is recorded like ``Session.rehash`` records one (a ``change`` event, which
supersedes older reads), so the pruner sees it.

Invariants:
- Once per change: a file is noticed only when its bytes differ from the last version this
  session saw (its own writes and ``rehash`` update that), and then that version becomes the
  seen one.
- The notice is computed from one read of the file: its version, its diff and the recorded
  change are of the same bytes.
- The file the answer itself is about is not noticed (the answer is its diff or content; a write
  replaces it, and the read after an edit answers the difference).
- Marks are cleared only when the answer's turn commits: a call that fails leaves them.
"""

from __future__ import annotations

from filecache.core.planner import ReadRequest, base_lines, plan_lines
from filecache.core.render import render_outside_change
from filecache.core.results import Kind
from filecache.engine import Engine
from filecache.errors import ContentError, FileCacheError, MissingFileError
from filecache.fsio import read_bytes
from filecache.turns import SessionState, Turn

__all__ = ["OutsideChanges"]


class OutsideChanges:
    """The files a watcher saw change that the session's model holds, until they are noticed."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.marked: set[str] = set()

    def mark(self, path: str) -> None:
        self.marked.add(path)

    def notices(self, state: SessionState, turn: Turn, call_id: str, skip: str | None) -> str:
        """The notices for the marked files, except ``skip`` (kept marked); "" when none.

        Runs inside the call's turn: the marks are cleared only when the turn commits.
        """
        if not self.marked:
            return ""
        marked = sorted(self.marked - {skip} if skip else self.marked)
        notices = "".join(self._notice(state, turn, path, call_id) for path in marked)
        turn.on_commit(lambda: self.marked.difference_update(marked))
        return notices

    def _notice(self, state: SessionState, turn: Turn, path: str, call_id: str) -> str:
        engine = self.engine
        view = turn.view(path)
        if view is None or not view.versions:
            return ""
        held = turn.seen.get(path, state.last_seen(path, view))
        try:
            loc = engine.paths.locate(path)
            data: bytes | None = read_bytes(loc, engine.settings.max_file_bytes)
        except MissingFileError:
            data = None
        except FileCacheError:
            return ""  # unreadable now (too large, gone outside the root): the next read says why
        version = None if data is None else engine.secrets.version_for(loc, data)
        if version == held:
            return ""  # the session's own write, or changed back
        turn.record_change(call_id, path, version, held)
        if data is None or version is None:
            return render_outside_change(path, held, None, None)
        try:
            src = engine.versions.source_of(loc, data, True)
        except ContentError:
            return render_outside_change(path, held, version, None)
        total = len(src.lines)
        plain = engine.counts.plain_tokens(src, 1, total)
        request = ReadRequest(
            src=src, start=1, end=total, call_id=call_id, seq=turn.next_seq(), plain=plain
        )
        decision = plan_lines(
            request, view, bases=base_lines(view, version, engine.versions.lines_of),
            call_seq=state.call_seq, count=engine.counts.count,
            diff_max_ratio=engine.settings.diff_max_ratio,
            max_versions=engine.settings.versions_per_path, margin=engine.counts.margin,
        )  # fmt: skip
        if decision.kind == Kind.DIFF:
            turn.views[path] = decision.view
            return render_outside_change(path, held, version, decision.text)
        return render_outside_change(path, held, version, None)
