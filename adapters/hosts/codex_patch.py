"""Codex's ``apply_patch`` input, parsed into what the model wrote (pure).

The freeform ``apply_patch`` tool takes Codex's patch format::

    *** Begin Patch
    *** Add File: PATH        then every line prefixed by "+"
    *** Delete File: PATH
    *** Update File: PATH     then an optional "*** Move to: PATH", then chunks:
    @@ [CONTEXT]              a chunk (the first one may omit its "@@"), lines prefixed by
     kept / -removed / +added  " ", "-" or "+"; "*** End of File" anchors it at the end
    *** End Patch

``parse_patch`` turns it into one ``FileOp`` per file. An update becomes ``edits``: per chunk,
the (old, new) text it replaces — the kept and removed lines, then the kept and added ones —
which is what ``HostSession.edited`` adopts *only if* disk is what those replacements make of
the version the model held (so a chunk Codex matched loosely, with whitespace differences, is
recorded as a change, never as something the model knows). A chunk that only adds lines (no
kept or removed line to anchor it as a replacement) cannot be expressed as one: the op is then
``exact=False`` and the caller records a plain change.

Invariant: parsing never guesses. Text that is not a well-formed patch (no Begin/End markers, an
unknown line inside a file section) gives ``None``: the caller then treats the call as a change
of unknown files.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FileOp", "parse_patch"]

_BEGIN = "*** Begin Patch"
_END = "*** End Patch"
_ADD = "*** Add File: "
_DELETE = "*** Delete File: "
_UPDATE = "*** Update File: "
_MOVE = "*** Move to: "
_EOF = "*** End of File"


@dataclass(frozen=True)
class FileOp:
    """One file of a patch: ``kind`` is ``add`` (``content``), ``delete``, or ``update``
    (``edits`` in order; ``move_to`` when the file is also renamed; ``exact`` False when a
    chunk could not be expressed as a replacement)."""

    kind: str
    path: str
    content: str = ""
    edits: tuple[tuple[str, str], ...] = ()
    move_to: str | None = None
    exact: bool = True


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _body(text: str) -> list[str] | None:
    """The lines between Begin and End Patch (a heredoc around them is tolerated)."""
    lines = _lines(text)
    try:
        begin = next(i for i, line in enumerate(lines) if line.strip() == _BEGIN)
        end = max(i for i, line in enumerate(lines) if line.strip() == _END)
    except (StopIteration, ValueError):
        return None
    return lines[begin + 1 : end] if begin < end else None


def _header(line: str) -> bool:
    return line.startswith(("*** Add File: ", "*** Delete File: ", "*** Update File: "))


def parse_patch(text: str) -> list[FileOp] | None:
    """The files ``text`` adds, deletes and updates, in patch order, or None if it is not a
    well-formed patch."""
    body = _body(text)
    if body is None:
        return None
    ops: list[FileOp] = []
    i = 0
    while i < len(body):
        line = body[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith(_ADD):
            path = line[len(_ADD) :].strip()
            added: list[str] = []
            i += 1
            while i < len(body) and body[i].startswith("+"):
                added.append(body[i][1:])
                i += 1
            ops.append(FileOp("add", path, content="".join(a + "\n" for a in added)))
        elif line.startswith(_DELETE):
            ops.append(FileOp("delete", line[len(_DELETE) :].strip()))
            i += 1
        elif line.startswith(_UPDATE):
            op, i = _update(body, i)
            if op is None:
                return None
            ops.append(op)
        else:
            return None
        if not ops[-1].path:
            return None
    return ops


def _update(body: list[str], i: int) -> tuple[FileOp | None, int]:
    path = body[i][len(_UPDATE) :].strip()
    i += 1
    move_to = None
    if i < len(body) and body[i].startswith(_MOVE):
        move_to = body[i][len(_MOVE) :].strip() or None
        i += 1
    edits: list[tuple[str, str]] = []
    exact = True
    old: list[str] = []
    new: list[str] = []
    changed = False

    def close() -> None:
        nonlocal exact, old, new, changed
        if changed:
            if old:
                edits.append(("".join(o + "\n" for o in old), "".join(n + "\n" for n in new)))
            else:
                exact = False  # only added lines: no text to anchor a replacement on
        old, new, changed = [], [], False

    while i < len(body) and not _header(body[i]):
        line = body[i]
        if line.startswith("@@"):
            close()
        elif line.strip() == _EOF:
            close()
        elif line.startswith("-"):
            old.append(line[1:])
            changed = True
        elif line.startswith("+"):
            new.append(line[1:])
            changed = True
        elif line.startswith(" "):
            old.append(line[1:])
            new.append(line[1:])
        elif line == "":
            old.append("")  # Codex reads a bare empty line as an empty kept line
            new.append("")
        else:
            return None, i
        i += 1
    close()
    if not edits and exact and move_to is None:
        return None, i  # an update with no change at all is not something Codex applies
    return FileOp("update", path, edits=tuple(edits), move_to=move_to, exact=exact), i
