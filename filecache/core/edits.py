"""Pure helpers of edits: where an edit landed, markers, replacements, and
the change planners ``plan_edit`` and ``plan_write`` (what a write or edit makes of a file's
text: the new text, the facts the model holds of it, the confirmation's detail).

Invariants: ``apply_edit`` replaces exactly what it reports (the pieces give every character's
provenance) and refuses an ``old_string`` that is empty, absent or (without ``replace_all``) not
unique; ``check_markers`` refuses new content that adds filecache's own answer markers, as a
model reads them: compared after ``fold`` (compatibility forms such as fullwidth brackets,
case, look-alike letters, zero-width and combining characters), and a file that would hold a
FileRef-shaped line it did not hold before is refused whatever the marker count.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence

from filecache.core.diffing import Opcode
from filecache.core.records import record
from filecache.core.render import MARKERS, fileref_like
from filecache.core.results import Kind
from filecache.core.text import join_lines, split_lines
from filecache.core.views import Facts, Piece, Span, map_through_edit
from filecache.errors import EditError, FileCacheError, MarkerError

__all__ = [
    "MAX_LANDINGS",
    "ChangePlan",
    "apply_edit",
    "check_markers",
    "describe_landings",
    "fold",
    "landings",
    "old_span",
    "plan_adopt",
    "plan_edit",
    "plan_write",
]

_LONE_LF = re.compile(r"(?<!\r)\n")


def old_span(ops: Sequence[Opcode], start: int, end: int) -> tuple[int, int]:
    """Lines ``start..end`` of the new side as a 1-based range of the old side."""

    def old_line(x: int, first: bool) -> int:
        for tag, a0, a1, b0, b1 in ops:
            if b0 <= x - 1 < b1:
                if tag == "equal":
                    return a0 + (x - 1 - b0) + 1
                return a0 + 1 if first else a1
        return 0

    return old_line(start, True), old_line(end, False)


MAX_LANDINGS = 20
"""An edit landing in more places is confirmed without positions, and the model's view of the
file is not carried through it (the next read sends content)."""


def landings(text: str, pieces: Sequence[Piece]) -> list[tuple[int, int]]:
    """Where each replacement landed in ``text`` (the text after it), as 1-based line spans.

    Taken from the pieces, not from a diff, so repetitive text cannot misplace them. A
    replacement by nothing is ``(n, n - 1)``: lines removed just before line ``n``.
    """
    starts = [0]
    pos = text.find("\n")
    while pos >= 0:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    out: list[tuple[int, int]] = []
    offset = 0
    for piece in pieces:
        if piece.src is None:
            first = bisect_right(starts, offset)
            last = bisect_right(starts, offset + piece.length - 1) if piece.length else first - 1
            out.append((first, last))
        offset += piece.length
    return out


def describe_landings(steps: Sequence[Sequence[tuple[int, int]]]) -> str:
    """The confirmation's "changed: ..." part: every place, so the model can place the edit."""

    def span(first: int, last: int) -> str:
        if last < first:
            return f"lines removed before line {first}"
        return f"line {first}" if first == last else f"lines {first}-{last}"

    parts = [", ".join(span(*where) for where in step) for step in steps]
    if len(parts) == 1:
        return f"; changed: {parts[0]}"
    return "; " + "; ".join(f"edit {n}: {p}" for n, p in enumerate(parts, 1))


# Look-alikes of the letters and brackets of filecache's markers (Unicode's confusables for
# them, after NFKD and case folding): Cyrillic, Greek, Armenian and Latin forms a model reads
# as the ASCII letter, and bracket shapes read as [ ].
_CONFUSABLE = {
    "a": "аɑαａ", "c": "сϲⅽᴄ", "d": "ԁⅾ", "e": "еєҽε℮ｅ", "f": "ƒẝſ", "h": "һнհ",
    "i": "іıɩιӏ¡ꙇ", "l": "ӏⅼ|ǀ1ℓ", "o": "оοօσ0", "r": "гᴦṛ", "s": "ѕꜱ", "t": "тτ", "u": "υսᴜ",
    "n": "ոп", "m": "мⅿ", "p": "рρ", "k": "кκ", "x": "хχ", "y": "уγ",
    "[": "⟦〔【「『［⁅〚⦋⦍⦏", "]": "⟧〕】」』］⁆〛⦌⦎⦐", ":": "：∶։˸",
}  # fmt: skip
_FOLD = {ord(c): letter for letter, chars in _CONFUSABLE.items() for c in chars}
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff]"
    "|[\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]"
)
_SPACES = re.compile(r"[^\S\n]+")
_FOLDED_MARKERS = {
    m.lower(): re.compile(re.escape(m.lower()).replace("\\ ", "[^\\S\n]+")) for m in MARKERS
}  # each marker, any run of spaces inside it


def fold(text: str) -> str:
    """``text`` as a model reads it, for the marker guard: compatibility forms (fullwidth,
    ligatures) decomposed (NFKD), zero-width, bidi and combining characters dropped, case
    folded, look-alikes of the markers' letters and brackets made ASCII, spaces collapsed.
    Lines stay lines."""
    return _SPACES.sub(" ", _fold_letters(text))


def _fold_letters(text: str) -> str:
    if not text.isascii():  # O(1); ASCII text has nothing to decompose or drop
        text = _INVISIBLE.sub("", unicodedata.normalize("NFKD", text))
    return text.casefold().translate(_FOLD)


def _marker_lines(folded: str) -> Counter[str]:
    """The FileRef-shaped lines of a folded text; only lines holding ``filecache`` or
    ``cleared`` are looked at (a large file with one mention costs a few searches)."""
    found: Counter[str] = Counter()
    starts: set[int] = set()
    for word in ("filecache", "cleared"):
        at = folded.find(word)
        while at >= 0:
            start = folded.rfind("\n", 0, at) + 1
            end = folded.find("\n", at)
            end = len(folded) if end < 0 else end
            if start not in starts:
                starts.add(start)
                line = _SPACES.sub(" ", folded[start:end]).strip()
                if fileref_like(line):
                    found[line] += 1
            at = folded.find(word, end)
    return found


def check_markers(rel: str, old: str, new: str) -> None:
    """Refuse ``new`` (a file's new text, or what a call writes) if, read as a model reads it
    (``fold``), it adds one of filecache's markers to ``old`` or holds a FileRef-shaped line
    (``render.fileref_like``) that ``old`` does not: an edit that removes one marker and adds
    a whole FileRef line elsewhere is refused. A marker line already there may stay."""
    letters = _fold_letters(new)
    if "filecache" not in letters and "cleared" not in letters:
        return  # the common case: no marker and no FileRef-shaped line can be there
    folded_new, folded_old = letters, _fold_letters(old)
    added = next(
        (
            marker
            for marker, pattern in _FOLDED_MARKERS.items()
            if len(pattern.findall(folded_new)) > len(pattern.findall(folded_old))
        ),
        None,
    )
    if added is None:
        before = _marker_lines(folded_old)
        lines = _marker_lines(folded_new)
        if any(n > before[line] for line, n in lines.items()):
            added = "a FileRef line"
    if added is not None:
        shown = added if added == "a FileRef line" else repr(added)
        raise MarkerError(
            f"{rel}: the new content contains {shown} (as read, ignoring case, look-alike and "
            "invisible characters), filecache's own answer text; write the file's real content "
            "(read it with fresh=true to see it)"
        )


def _crlf(s: str, keep_first_lf: bool) -> str:
    """``s`` with every lone LF made CRLF (a leading one kept when ``keep_first_lf``)."""
    if keep_first_lf and s.startswith("\n"):
        return "\n" + _LONE_LF.sub("\r\n", s[1:])
    return _LONE_LF.sub("\r\n", s)


def apply_edit(
    rel: str, text: str, old: str, new: str, replace_all: bool
) -> tuple[str, list[Piece], int]:
    """Apply one replacement; returns the text, its pieces (provenance) and the count."""
    if not old:
        raise EditError(f"{rel}: old_string is empty; use write to create or replace a file")
    if old == new:
        raise EditError(f"{rel}: old_string and new_string are the same; nothing to change")
    if "\r\n" in text and text.count("\n") == text.count("\r\n"):
        # A CRLF file edited with LF strings: match and write CRLF, as the file has (also
        # for a new_string that adds lines to an old_string without any). An old_string that
        # starts at the LF of a CRLF names no CR: that LF (and a new_string's first) stays.
        at_lf = old.startswith("\n")
        old, new = _crlf(old, at_lf), _crlf(new, at_lf)
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # Mixed line endings: an LF old_string may still match a CRLF stretch.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise EditError(
            f"{rel}: old_string not found; read the file again (fresh=true) and copy the exact "
            "text, including whitespace"
        )
    if count > 1 and not replace_all:
        raise EditError(
            f"{rel}: old_string occurs {count} times; pass replace_all=true or include more "
            "context to make it unique"
        )
    pieces: list[Piece] = []
    out: list[str] = []
    pos = 0
    while True:
        at = text.find(old, pos)
        if at < 0:
            break
        pieces.append(Piece(at - pos, pos))
        pieces.append(Piece(len(new), None))
        out.append(text[pos:at])
        out.append(new)
        pos = at + len(old)
    pieces.append(Piece(len(text) - pos, pos))
    out.append(text[pos:])
    return "".join(out), pieces, count


@record
class ChangePlan:
    """What a write or edit makes of a file: the new ``text``, the ``spans`` the model holds of
    it afterwards (its facts, each relying on the call and on what it held before), and the
    confirmation's ``detail`` (how many replacements, where they landed)."""

    text: str
    spans: list[Span]
    detail: str


def plan_write(rel: str, old: str | None, content: str, call_id: str) -> ChangePlan:
    """A write of ``content`` over ``old`` (None: a new file, or not text): every line is a
    fact of the write's call (the model wrote it).

    Raises:
        MarkerError: ``content`` adds filecache's own markers.
    """
    check_markers(rel, old or "", content)
    count = len(split_lines(content))
    return ChangePlan(content, [(1, count, (frozenset([call_id]),))] if count else [], "")


def plan_edit(
    rel: str,
    old: str | None,
    held: Facts | None,
    pairs: Sequence[tuple[str, str]],
    replace_all: bool,
    call_id: str,
) -> ChangePlan:
    """The (old, new) ``pairs`` applied in order to ``old``, all or none; ``held``: the facts
    the model holds of the version ``old`` is (None: none), mapped through each replacement
    (``views.map_through_edit``). Past ``MAX_LANDINGS`` places the model cannot place them,
    so it holds nothing of the result. ``held`` is not changed.

    Raises:
        EditError: ``old`` is not text, or an ``old_string`` is missing or not unique.
        MarkerError: the result adds filecache's own markers.
    """
    if old is None:
        raise EditError(f"{rel}: not a text file filecache can edit; use write")
    old_lines = split_lines(old)
    facts = held
    text, replaced, steps = old, 0, []
    for old_s, new_s in pairs:
        text, pieces, count = apply_edit(rel, text, old_s, new_s, replace_all)
        replaced += count
        new_lines = split_lines(text)
        facts = Facts("", len(new_lines), map_through_edit(old_lines, facts, new_lines, pieces,
                                                           call_id))  # fmt: skip
        old_lines = new_lines
        steps.append(landings(text, pieces))
    check_markers(rel, old, text)
    detail = f"{replaced} replacement{'s' if replaced != 1 else ''}"
    if sum(map(len, steps)) <= MAX_LANDINGS:
        return ChangePlan(text, facts.spans if facts else [], detail + describe_landings(steps))
    return ChangePlan(text, [], detail)  # too many places to list: the model holds nothing


def plan_adopt(
    rel: str,
    held: Sequence[str] | None,
    facts: Facts | None,
    *,
    content: str | None,
    edits: Sequence[tuple[str, str]] | None,
    replace_all: bool,
    call_id: str,
) -> tuple[Kind, ChangePlan] | None:
    """What a change a host's own tool made (``Session.adopt_change``) makes of the version
    the model holds (its lines ``held``, its facts ``facts``): ``content`` written whole (every
    line a fact of the call), or ``edits`` applied to ``held`` as ``plan_edit`` applies them.
    (kind, plan) without a confirmation's detail, or None when it cannot be placed: no
    version held to apply the edits to, or they do not apply to it. Nothing is refused: the
    change already happened."""
    if content is not None:
        count = len(split_lines(content))
        spans: list[Span] = [(1, count, (frozenset([call_id]),))] if count else []
        return Kind.WRITTEN, ChangePlan(content, spans, "")
    if held is None or not edits:
        return None  # the model holds no version to apply them to: a plain change
    try:
        change = plan_edit(rel, join_lines(held), facts, edits, replace_all, call_id)
    except FileCacheError:
        return None  # the edits do not apply to what the model holds
    return Kind.EDITED, ChangePlan(change.text, change.spans, "")
