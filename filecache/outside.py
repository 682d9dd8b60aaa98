"""Notices of files changed outside the agent, for ``Session`` answers (``FileCache(watch=True)``).

The watcher (``filecache.watch``) calls ``Session.note_external_change(path)`` for every file
that changed on disk; the session's next answer starts with ``outside_notices``: per such file
the model holds, one notice with the diff from the model's version to the file (the ``diff``
answer machinery of ``Session``, so its facts move to the new version and rely on this answer's
call id), or one line that says to read it again when no diff can be shown. The change is
recorded like ``Session.rehash`` records one (a ``change`` event, which supersedes older reads),
so the pruner sees it.

Invariants:
- Once per change: a file is noticed only when its bytes differ from the last version this
  session saw (its own writes and ``rehash`` update that), and then that version becomes the
  seen one.
- The notice is computed from one read of the file: its version, its diff and the recorded
  change are of the same bytes.
- The file the answer itself is about is not noticed (the answer is its diff or content; a write
  replaces it, and the read after an edit answers the difference).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ContentError, FileCacheError, MissingFileError
from .fsio import read_bytes
from .hashing import version_of
from .render import render_outside_change

if TYPE_CHECKING:
    from .session import Session, _Turn

__all__ = ["outside_notices"]


def outside_notices(session: Session, turn: _Turn, call_id: str, skip: str | None) -> str:
    """The notices for files marked changed outside the agent, except ``skip`` (kept marked).

    Runs inside the call's turn: the marks are cleared only when the turn commits (a call that
    fails leaves them for the next one).
    """
    marked = sorted(session._outside - {skip} if skip else session._outside)
    notices = "".join(_notice(session, turn, path, call_id) for path in marked)
    turn.on_commit(lambda: session._outside.difference_update(marked))
    return notices


def _notice(session: Session, turn: _Turn, path: str, call_id: str) -> str:
    cache = session.cache
    view = turn.view(path)
    if view is None or not view.versions:
        return ""
    held = turn.seen.get(path, session._last_seen(path, view))
    try:
        loc = cache.locate(path)
        data: bytes | None = read_bytes(loc, cache.settings.max_file_bytes)
    except MissingFileError:
        data = None
    except FileCacheError:
        return ""  # unreadable now (too large, gone outside the root): the next read says why
    version = None if data is None else version_of(data)
    if version == held:
        return ""  # the session's own write, or changed back
    session._record_change(turn, call_id, path, version, held)
    if data is None or version is None:
        return render_outside_change(path, held, None, None)
    try:
        src = session._source_from_bytes(loc, data, True)
    except ContentError:
        return render_outside_change(path, held, version, None)
    total = len(src.lines)
    plain = cache.plain_tokens(src, 1, total)
    answer = session._cached_answer(view, src, 1, total, call_id, plain)
    if answer is not None and answer[0] == "diff":
        return render_outside_change(path, held, version, answer[1])
    return render_outside_change(path, held, version, None)
