"""A bash wrapper: the read-only commands agents read files with are served through the cache.

Agents with only a shell read files with ``cat F``, ``nl -ba F``, ``sed -n 'A,Bp' F``,
``head -n N F``, ``tail -n N F`` and these piped through ``sed -n`` / ``head`` / ``tail``.
``shell_parse.parse_shell_read`` recognises exactly those (anything else is left to the shell),
and ``serve_bash`` answers them from the ``Session``:

- the first time, the command's own output, byte-identical to what the shell prints (computed
  from the bytes the session read and hashed, without running the command), so a served read
  never costs more than the shell;
- a re-read of lines the model holds: the one-line FileRef every read answers with
  (``render.render_file_ref``); a file changed since: the diff;
- a command whose output is not one run of one file's lines (several files, several ``sed``
  ranges): its output as content, recorded in the view (no FileRef for it).

Every other command runs (``run``), and then the files in the session's view are re-hashed
(``Session.rehash``), so a ``sed -i``, ``patch``, ``git checkout`` or a script counts as a
change. Paths are relative to the session's root (the shell's working directory) or absolute
inside it.

Invariant: every content answer is the command's output for the bytes of the versions the
session recorded, and it shows exactly the lines recorded as held under ``call_id``; anything
filecache cannot serve exactly (binary, outside the root, missing, empty output) runs in the
shell.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from filecache.core.kinds import Kind
from filecache.core.text import decode_text, split_lines
from filecache.errors import FileCacheError
from filecache.fsio import Located, read_bytes
from filecache.shell.shell_parse import (
    NotServable,
    ShellRead,
    parse_shell_read,
    render_lines_at,
    selection,
    spans,
)

if TYPE_CHECKING:
    from filecache.session import Session

__all__ = ["ShellAnswer", "answer_shell_read", "serve_bash"]


@dataclass(frozen=True)
class ShellAnswer:
    """A served shell read: the text, filecache's kind of answer, and the lines it covers.

    ``start``/``end`` are the one run of lines answered (single-file, single-run reads; else
    the first and last line of the first file), ``version`` the version answered from.
    """

    text: str
    kind: str
    path: str
    start: int
    end: int
    version: str
    call_id: str
    output: str | None = None
    """What the command prints for the lines answered, of ``version`` (None: not known): a
    host compares it with the output its shell produced before a FileRef or diff stands for
    that output."""


def serve_bash(
    session: Session, command: str, run: Callable[[str], str], call_id: str | None = None
) -> str:
    """What the model sees for ``command``: served from the cache when it is a read, else run."""
    read = parse_shell_read(command)
    if read is not None:
        try:
            return answer_shell_read(session, read, call_id).text
        except (FileCacheError, NotServable):
            pass  # not servable exactly (missing, binary, outside the root...): let bash say
    output = run(command)
    session.rehash(call_id)
    return output


def answer_shell_read(session: Session, read: ShellRead, call_id: str | None) -> ShellAnswer:
    """Answer a parsed shell read through ``session`` (see the module docstring).

    Raises:
        FileCacheError: a file cannot be read as text inside the root.
        NotServable: the output cannot be computed exactly here, or is empty.
    """
    cid = call_id or "fc-" + os.urandom(5).hex()
    # Only to place the lines (tail, $, a range past the end): every answer below is rendered
    # from the version each session.read hashed, never from these bytes.
    rels, placing = [], []
    for path in read.paths:
        loc = session.engine.paths.locate(path)
        _check_the_shell_names(path, loc)
        data = read_bytes(loc, session.engine.settings.max_file_bytes)
        rels.append(loc.rel)
        placing.append(split_lines(decode_text(data, loc.rel)))
    picked = selection(read, [len(lines) for lines in placing], placing)
    if not picked:
        raise NotServable("the command prints nothing")
    numbers = [n for f, n in picked]
    runs = spans(numbers)
    # A grep's output says which lines match, besides what they hold: always content (a
    # FileRef to the lines would not say that no other line matches).
    if len(read.paths) == 1 and len(runs) == 1 and read.grep is None:
        start, end = runs[0]
        result = session.read(
            rels[0], offset=start, limit=end - start + 1, mode="full", numbered=False,
            call_id=cid,
        )  # fmt: skip
        if result.kind in (Kind.UNCHANGED, Kind.DIFF):
            try:
                prints: str | None = _render(session, read, [result.version], picked,
                                             [(start, end)])  # fmt: skip
            except NotServable:
                prints = None
            return ShellAnswer(result.text, result.kind, result.path, start, end,
                               result.version, cid, prints)  # fmt: skip
        text = _render(session, read, [result.version], picked, [(result.start, result.end)])
        return ShellAnswer(text, result.kind, result.path, result.start, result.end,
                           result.version, cid, text)  # fmt: skip
    # Several files or runs: content (fresh), every run recorded as held under this call id.
    versions, bounds = [], []
    for f, rel in enumerate(rels):
        mine = [n for g, n in picked if g == f]
        lo = hi = 0
        version = ""
        for start, end in sorted(spans(sorted(set(mine)))):
            result = session.read(
                rel, offset=start, limit=end - start + 1, mode="full", numbered=False,
                fresh=True, call_id=cid,
            )  # fmt: skip
            version = result.version
            lo, hi = (result.start if not lo else lo), result.end
        versions.append(version)
        bounds.append((lo, hi))
    try:
        text = _render(session, read, versions, picked, bounds)
    except NotServable:
        session.forget([cid])  # the shell answers: the model sees its output, not these facts
        raise
    return ShellAnswer(text, "partial", rels[0], bounds[0][0], bounds[0][1], versions[0], cid,
                       text)  # fmt: skip


def _check_the_shell_names(path: str, loc: Located) -> None:
    """The shell's file for ``path`` is ``loc``'s: the kernel resolves a path one name at a time
    (``F/`` is no folder, ``gone/../F`` needs ``gone``, ``link/../F`` is beside the link's
    target), where ``locate`` read it as written.

    Raises:
        NotServable: the shell opens another file, or none.
    """
    try:
        same = os.path.samefile(os.path.join(loc.root, path), loc.real)
    except OSError:
        same = False
    if not same:
        raise NotServable(f"{path}: the shell opens another file, or none")


def _render(
    session: Session,
    read: ShellRead,
    versions: list[str],
    picked: list[tuple[int, int]],
    bounds: list[tuple[int, int]],
) -> str:
    files = []
    for version in versions:
        lines = session.engine.versions.lines_of(version) if version else []
        if lines is None:
            raise NotServable("the version read is no longer held")
        files.append(lines)
    # A file that changed since the placing read: show only lines the session recorded.
    if read.grep is not None:  # which lines match is the version's, not the placing read's
        picked = selection(read, [len(lines) for lines in files], files)
        if any(not bounds[f][0] <= n <= bounds[f][1] for f, n in picked):
            raise NotServable("the file changed while it was read")
    kept = [(f, n) for f, n in picked if bounds[f][0] <= n <= bounds[f][1] and n <= len(files[f])]
    return render_lines_at(read, files, kept)
