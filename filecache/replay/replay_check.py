"""Correctness counters of a replay: a model that rebuilds files only from the request as sent.

``ModelView`` reads filecache's answers the way the instructions tell a model to: content answers
give lines of the version named in their header; a diff is applied (parsed with ``unidiff`` and
applied here, never with filecache's diff code) to the copy of the version it names; a FileRef says
the lines of the copy of the named version are current; the model's own writes give the whole file
and its own edits are replayed on its copy of the file as it was. A read whose text in the request
is not the text filecache answered (pruned: cleared, outlined, truncated) gives nothing; a write or
an edit counts as long as its call is there with the arguments the model wrote (a call whose input
pruning cleared gives nothing). An answer replay sent as the agent's own tool recorded it
(``AGENT_VIEW``: filecache's was larger) gives the lines of that view that equal disk, and is never
checked for a span. ``RecordedView`` reads the recording the same literal way: the lines the agent's
own tools showed, the denominator of recall over every line.

Invariants:
- Only what is in the messages is used, plus the bytes on disk to compare with; a version tag
  is the first 8 hex digits of xxh3-128 of the bytes, computed here with ``xxhash``.
- A read is ``stale`` when, at its first appearance in a request, the lines it answers cannot
  be rebuilt from that request or differ from disk. A FileRef or diff is ``dangling`` when, in
  some request, its base result (or its base's base) is missing or pruned.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import xxhash
from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from filecache.core.kinds import Kind
from filecache.tools import EDIT_FILE, READ_FILE, WRITE_FILE

__all__ = [
    "AGENT_VIEW", "FileCall", "ModelView", "RecordedView", "dangling_refs", "disk_lines",
    "tag_of", "verified_lines",
]  # fmt: skip

AGENT_VIEW = "agent"  # a FileCall's kind: the recorded answer of the agent's own tool was sent

_HEADER = re.compile(
    r"^\[(?P<path>.+?): (?:(?P<label>[^\[\]]+?), )?(?:lines (?P<a>\d+)-(?P<b>\d+) of (?P<n>\d+)"
    r"|(?P<all>\d+) lines?|(?P<empty>empty file))(?:, xxh3 (?P<tag>[0-9a-f]+))?\]$"
)
_NUMBERED = re.compile(r"^ *(\d+)\t")
_DIFF = re.compile(
    r"^\[filecache\] (?P<path>.+?) changed since your result (?P<base>\S+) "
    r"\(xxh3 (?P<old>[0-9a-f]+) -> (?P<new>[0-9a-f]+)\); (?P<where>.*):$"
)
_SPAN = re.compile(
    r"^(?:all (?P<all>\d+) lines?|lines (?P<a>\d+)-(?P<b>\d+) of (?P<n>\d+)|the file is empty)"
)
_OLD_SPAN = re.compile(r"\(lines (?P<x>\d+)-(?P<y>\d+) of your version\)")
_NO_NEWLINE = "\\ No newline at end of file"
_LANDED = re.compile(r"; (?:changed|edit 1): ")  # an edit confirmation that places the edit
_BASE = re.compile(r"since your results? (\S+?(?: and \S+?)*) \(")
# The line before an answer to a read of a file the model's own edit is no longer in: a notice
# (what follows is the answer: a diff or the content), never the answer's header.
_UNDONE = re.compile(r"^\[filecache\] .+?: your edit \S+ is no longer on disk \([^)\n]*\)\n")

Lines = dict[int, str]  # line number -> text with its "\n" (none on an unterminated last line)


def tag_of(data: bytes) -> str:
    """The short version tag filecache shows for these bytes."""
    return xxhash.xxh3_128_hexdigest(data)[:8]


def disk_lines(data: bytes) -> tuple[str, ...]:
    """The lines of a file, each with its ``\\n`` (``\\r`` stays part of the line)."""
    parts = data.decode("utf-8", errors="replace").split("\n")
    return tuple([p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else []))


@dataclass(frozen=True)
class FileCall:
    """A file tool call of the filecache run, with the disk around it.

    Attributes:
        call_id, tool, path, args: the call (``read_file``/``write_file``/``edit_file``).
        kind: filecache's kind of answer (``error`` when the tool failed).
        text: the text filecache answered.
        before: (tag, lines) of the file before the call; None if it did not exist.
        after: (tag, lines) after the call; None if it does not exist.
        inner: for a shell read (``cat``, ``sed -n``...), the answer inside the harness's
            frame: the command's own output (no header: its lines are those of ``after``'s
            version at ``offset``, numbered ``N<TAB>`` by ``cat -n``/``nl``), or a FileRef/diff.
    """

    call_id: str
    tool: str
    path: str
    args: Mapping[str, Any]
    kind: str
    text: str
    before: tuple[str, tuple[str, ...]] | None
    after: tuple[str, tuple[str, ...]] | None
    inner: str | None = None

    def span(self) -> tuple[int, int] | None:
        """The lines a read asked for, from its arguments and the file on disk."""
        if self.after is None:
            return None
        total = len(self.after[1])
        offset, limit = self.args.get("offset"), self.args.get("limit")
        start = offset if isinstance(offset, int) else 1
        end = total if not isinstance(limit, int) else min(total, start + limit - 1)
        return start, end


@dataclass
class _Copy:
    total: int | None = None
    lines: Lines = field(default_factory=dict)


class ModelView:
    """The model's copies of files (per path, per version tag), rebuilt from messages.

    Args:
        calls: the file tool calls of the run, by call id.
        paths: only these paths are tracked (None: all).
    """

    def __init__(self, calls: Mapping[str, FileCall], paths: Iterable[str] | None = None) -> None:
        self.calls = calls
        self.paths = None if paths is None else set(paths)
        self.copies: dict[str, dict[str, _Copy]] = {}

    def feed(self, call_id: str, text: str, input_intact: bool = True) -> str | None:
        """Take in one tool result as the model sees it. Returns a problem (str) when the
        result is a read whose answer cannot be rebuilt or differs from disk, else None.
        ``input_intact`` False: the call's arguments as sent are not what the model wrote (a
        write's or an edit's input was cleared), so it learns nothing from them."""
        call = self.calls.get(call_id)
        if call is None or (self.paths is not None and call.path not in self.paths):
            return None
        if call.kind == Kind.ERROR:
            return None  # a failure: nothing to learn
        copies = self.copies.setdefault(call.path, {})
        if call.tool == READ_FILE.name and text != call.text:
            return None  # pruned: what it showed is gone
        # The model's own writes and edits count even when their confirmation was pruned: the
        # call's arguments say what it wrote, as long as they are sent as the model wrote them.
        if call.tool in (WRITE_FILE.name, EDIT_FILE.name) and not input_intact:
            if call.after is not None:
                copies.setdefault(call.after[0], _Copy(len(call.after[1])))
            return None
        if call.tool == WRITE_FILE.name:
            if call.after is not None:
                lines = disk_lines(str(call.args.get("content", "")).encode("utf-8"))
                copies[call.after[0]] = _Copy(len(lines), dict(enumerate(lines, 1)))
            return None
        if call.tool == EDIT_FILE.name:
            if call.before is not None and call.after is not None:
                base = copies.get(call.before[0])
                # The confirmation says where the edit landed ("changed: line N"); without it
                # the model can place its edit only inside lines it holds. With it, the lines
                # made only of the new text are known even when no line before it is (the
                # read the edit was made from was pruned).
                seen = call.before[1] if text == call.text else None
                if base is None and seen is not None and _LANDED.search(text):
                    base = _Copy()
                copies[call.after[0]] = _edited(base, call.args, len(call.after[1]), seen)
            return None
        if call.kind == AGENT_VIEW:  # the agent's own view, sent in place of a larger answer
            if call.after is not None:
                copy = copies.setdefault(call.after[0], _Copy(len(call.after[1])))
                copy.lines.update(_shell_lines(call))
            return None  # it shows what it shows: no span to check
        if call.kind == Kind.OUTLINE:
            return None
        problem = self._read(call, copies)
        return problem or self.check(call)

    def _read(self, call: FileCall, copies: dict[str, _Copy]) -> str | None:
        first, _, body = _answer(call).partition("\n")
        if call.inner is not None and call.kind in (Kind.FULL, Kind.PARTIAL) and call.after:
            copy = copies.setdefault(call.after[0], _Copy())
            copy.total = len(call.after[1])
            copy.lines.update(_shell_lines(call))
            return None
        if call.kind in (Kind.FULL, Kind.PARTIAL, Kind.SYMBOL):
            match = _HEADER.match(first)
            if match is None or match["tag"] is None:
                return f"{call.call_id}: content header not understood: {first[:80]!r}"
            total = 0 if match["empty"] else int(match["n"] or match["all"])
            copy = copies.setdefault(match["tag"], _Copy())
            copy.total = total
            parsed = _numbered_lines(body)
            if parsed is None:
                return f"{call.call_id}: content lines not understood"
            copy.lines.update(parsed)
            return None
        if call.kind == Kind.DIFF:
            return _apply_diff(call, first, body, copies)
        return None  # unchanged: nothing new, the check says whether it holds

    def check(self, call: FileCall) -> str | None:
        """Whether the lines ``call`` (a read) answered are rebuilt as they are on disk."""
        if (
            call.tool != READ_FILE.name
            or call.kind in (Kind.ERROR, Kind.OUTLINE, AGENT_VIEW)
            or call.after is None
        ):
            return None
        span = call.span()
        if span is None:
            return None
        tag, lines = call.after
        copy = self.copies.get(call.path, {}).get(tag)
        start, end = span
        for n in range(start, end + 1):
            held = copy.lines.get(n) if copy is not None else None
            if held is None:
                return f"{call.call_id}: {call.path} line {n} ({call.kind}) cannot be rebuilt"
            if held != lines[n - 1]:
                return f"{call.call_id}: {call.path} line {n} ({call.kind}) differs from disk"
        return None

    def held_any(self, path: str, lines: Sequence[str]) -> set[int]:
        """Line numbers that some copy of ``path`` (any version) holds equal to ``lines``:
        counted as ``RecordedView.current`` counts the recording's, by content."""
        out: set[int] = set()
        for copy in self.copies.get(path, {}).values():
            out |= {n for n, t in copy.lines.items() if n <= len(lines) and lines[n - 1] == t}
        return out

    def held(self, path: str, tag: str, lines: Sequence[str]) -> set[int]:
        """Line numbers of version ``tag`` of ``path`` held and equal to ``lines`` (disk)."""
        copy = self.copies.get(path, {}).get(tag)
        if copy is None:
            return set()
        return {n for n, text in copy.lines.items() if n <= len(lines) and lines[n - 1] == text}


# cat -n, nl -ba, filecache's content lines; Claude Code's Read ("     N→text", before 2.1.32x)
_SHOWN = re.compile("^ *(\\d+)[\t\u2192](.*)$", re.M)
_ABRIDGED = re.compile(r"^ *(\d+) (.*)$", re.M)  # SWE-agent's abbreviated view (kept lines)


class RecordedView:
    """The lines the recording showed the model, per path: the denominator of the recall over
    every line (``replay._Checker``).

    Fed with every recorded file tool result (and served shell read) in order: a numbered line
    (``cat -n``, ``nl -ba``, Claude Code's ``N→``, filecache's content, SWE-agent's edit
    snippets and abbreviated views) shows that line; a write shows its whole content; a shell
    read without numbers shows its lines from its offset. The newest showing of a line number
    wins; ``current`` keeps only the lines equal to disk now (tabs expanded, as SWE-agent shows
    them), so a line the recording showed before an edit moved or changed it does not count.
    """

    def __init__(self) -> None:
        self.lines: dict[str, dict[int, str]] = {}

    def feed(self, call: FileCall, recorded: str) -> None:
        if call.kind == "error":
            return
        shown = self.lines.setdefault(call.path, {})
        if call.tool == "write_file":
            shown.clear()
            content = str(call.args.get("content", ""))
            shown.update(enumerate((t.rstrip("\n") for t in disk_lines(content.encode())), 1))
            return
        if call.inner is not None and call.tool == "read_file":
            shown.update((n, t.rstrip("\n")) for n, t in _shell_lines(call).items())
            return
        for match in _SHOWN.finditer(recorded):
            shown[int(match.group(1))] = match.group(2)
        if "eliding lines" in recorded:
            for match in _ABRIDGED.finditer(recorded):
                shown.setdefault(int(match.group(1)), match.group(2))

    def current(self, path: str, lines: Sequence[str]) -> set[int]:
        """Line numbers the recording showed that equal ``lines`` (disk now)."""
        out = set()
        for n, text in self.lines.get(path, {}).items():
            if n <= len(lines):
                disk = lines[n - 1].rstrip("\n")
                if text in (disk, disk.expandtabs(), disk.rstrip("\r")):
                    out.add(n)
        return out


def verified_lines(recorded: str, lines: Sequence[str]) -> str:
    """The lines of an agent's own view (``RecordedView``'s reading of it) that equal
    ``lines`` (disk), as ``N<TAB>text`` rows: what the model learns from it, for sure."""
    view = RecordedView()
    view.feed(FileCall("", "read_file", "", {}, "", "", None, None), recorded)
    shown = view.lines.get("", {})
    held = sorted(view.current("", lines))
    return "".join(f"{n}\t{lines[n - 1]}" for n in held if shown.get(n) is not None)


def _answer(call: FileCall) -> str:
    """A read's answer as filecache rendered it (inside a shell frame: ``inner``), after the
    notice that the model's own edit is no longer on disk, if one leads it."""
    text = call.text if call.inner is None else call.inner
    notice = _UNDONE.match(text)
    return text[notice.end() :] if notice else text


def _shell_lines(call: FileCall) -> Lines:
    """The lines a shell read's own output shows: numbered (``N<TAB>``) or from its offset."""
    text = call.inner or ""
    rows = disk_lines(text.encode("utf-8"))
    offset = call.args.get("offset")
    start = offset if isinstance(offset, int) else 1
    numbered = all(_NUMBERED.match(row) for row in rows) and bool(rows)
    out: Lines = {}
    # grep -n of one run of lines: each row is "N:" (a match) or "N-" (context), N counting up
    # from the offset (a raw line that merely starts with digits does not count up so)
    marks = [f"{start + k}" for k in range(len(rows))]
    if (
        rows
        and not numbered
        and all(
            row.startswith(mark) and row[len(mark) : len(mark) + 1] in (":", "-")
            for row, mark in zip(rows, marks, strict=True)
        )
    ):
        pairs = enumerate(zip(rows, marks, strict=True))
        out = {start + k: row[len(mark) + 1 :] for k, (row, mark) in pairs}
        # grep -n of numbered lines (``nl -ba F | grep -n PAT``: "12:    12<TAB>text"): the
        # number after grep's is the line's own, so the line holds what follows its tab
        own: Lines = {}
        for n, text in out.items():
            match = _NUMBERED.match(text)
            if match is None or int(match.group(1)) != n:
                return out
            own[n] = text[match.end() :]
        return own
    for k, row in enumerate(rows):
        match = _NUMBERED.match(row) if numbered else None
        if match is not None:
            out[int(match.group(1))] = row[match.end() :]
        else:
            out[start + k] = row
    return out


def _numbered_lines(body: str) -> Lines | None:
    out: Lines = {}
    last: int | None = None
    for line in body.split("\n"):
        if line == _NO_NEWLINE and last is not None:
            out[last] = out[last].removesuffix("\n")
            continue
        if not line:
            continue
        match = _NUMBERED.match(line)
        if match is None:
            return None
        last = int(match.group(1))
        out[last] = line[match.end() :] + "\n"
    return out


def _apply_diff(call: FileCall, first: str, body: str, copies: dict[str, _Copy]) -> str | None:
    head = _DIFF.match(first)
    if head is None:
        return f"{call.call_id}: diff header not understood: {first[:80]!r}"
    span = _SPAN.match(head["where"])
    if span is None:
        return f"{call.call_id}: diff span not understood: {head['where']!r}"
    whole = span["all"] is not None
    total = int(span["all"] or span["n"] or 0)
    start, end = (1, total) if whole else (int(span["a"] or 1), int(span["b"] or 0))
    base = copies.get(head["old"])
    old = base.lines if base is not None else {}
    diff_lines = [line for line in body.split("\n") if not line.startswith("(")]
    diff_text = "\n".join(diff_lines).strip("\n")
    hunks: list[tuple[int, int, int, int]] = []  # normalised (s0, s_len, t0, t_len)
    new: Lines = {}
    if diff_text:
        try:
            patch = PatchSet(diff_text + "\n")
        except UnidiffParseError as exc:
            return f"{call.call_id}: diff not parsed by unidiff ({exc})"
        for patched in patch:
            for hunk in patched:
                s_len, t_len = hunk.source_length, hunk.target_length
                s0 = hunk.source_start + (1 if s_len == 0 else 0)
                t0 = hunk.target_start + (1 if t_len == 0 else 0)
                hunks.append((s0, s_len, t0, t_len))
                s, t = s0, t0
                rows = list(hunk)
                for i, row in enumerate(rows):
                    if row.line_type == "\\":
                        continue
                    value = row.value
                    if i + 1 < len(rows) and rows[i + 1].line_type == "\\":
                        value = value.removesuffix("\n")
                    if row.line_type in (" ", "-"):
                        if s in old and old[s] != value:
                            return f"{call.call_id}: diff context at line {s} differs from the copy"
                        s += 1
                    if row.line_type in (" ", "+"):
                        new[t] = value
                        t += 1
    old_span = _OLD_SPAN.search(head["where"])
    for n, text in old.items():
        if any(s0 <= n < s0 + s_len for s0, s_len, _, _ in hunks):
            continue
        before = [h for h in hunks if h[0] + h[1] <= n]
        after = [h for h in hunks if h[0] > n]
        if before:
            s0, s_len, t0, t_len = before[-1]
            target = n + (t0 + t_len) - (s0 + s_len)
        elif after:
            s0, _, t0, _ = after[0]
            target = n + t0 - s0
        elif whole:
            target = n
        elif old_span is not None and int(old_span["x"]) <= n <= int(old_span["y"]):
            target = n + start - int(old_span["x"])
        else:
            continue
        if whole or start <= target <= end:
            new.setdefault(target, text)
    copy = copies.setdefault(head["new"], _Copy())
    copy.total = total
    copy.lines.update(new)
    return None


def _runs(lines: Lines) -> list[tuple[int, list[str]]]:
    """Consecutive known lines: (first line number, texts)."""
    runs: list[tuple[int, list[str]]] = []
    for n in sorted(lines):
        if runs and runs[-1][0] + len(runs[-1][1]) == n:
            runs[-1][1].append(lines[n])
        else:
            runs.append((n, [lines[n]]))
    return runs


def _edited(
    base: _Copy | None, args: Mapping[str, Any], total: int, before: Sequence[str] | None
) -> _Copy:
    """The model's copy after its own edit of ``base`` (what it can know for sure): one
    ``old_string``/``new_string``, or ``edits``, a list of them applied in order. ``before``:
    the file as it was, when the model was told where the edit landed (else None)."""
    replace_all = bool(args.get("replace_all"))
    edits = args.get("edits")
    if isinstance(edits, list):
        pairs = [(str(e.get("old_string", "")), str(e.get("new_string", ""))) for e in edits]
        replace_all = replace_all or any(bool(e.get("replace_all")) for e in edits)
    else:
        pairs = [(str(args.get("old_string", "")), str(args.get("new_string", "")))]
    copy = base
    text = "".join(before) if before is not None else None
    for old, new in pairs:
        if copy is None or not old:
            return _Copy(total)
        if text is not None:
            copy, text = _edit_at(copy, text, old, new, replace_all)
        else:
            copy = _edit_once(copy, old, new, replace_all)
    return _Copy(total, copy.lines if copy is not None else {})


def _edit_at(
    base: _Copy, before: str, old: str, new: str, replace_all: bool
) -> tuple[_Copy | None, str]:
    """An edit whose place the model knows: a line of the result is known when each of its
    characters is new text or comes from a line the model holds. Returns the copy and the
    file's text after the edit."""
    lines = disk_lines(before.encode("utf-8"))
    known = bytearray(len(before))
    at = 0
    for n, line in enumerate(lines, 1):
        held = base.lines.get(n)
        if held is not None:
            if held != line:
                return None, before  # a copy that is not the file: nothing can be placed
            known[at : at + len(line)] = b"\x01" * len(line)
        at += len(line)
    text_parts: list[str] = []
    known_parts: list[bytes] = []
    pos = 0
    while True:
        hit = before.find(old, pos)
        if hit < 0:
            break
        text_parts += [before[pos:hit], new]
        known_parts += [bytes(known[pos:hit]), b"\x01" * len(new)]
        pos = hit + len(old)
        if not replace_all:
            break
    text_parts.append(before[pos:])
    known_parts.append(bytes(known[pos:]))
    after, flags = "".join(text_parts), b"".join(known_parts)
    out: Lines = {}
    at = 0
    for n, line in enumerate(disk_lines(after.encode("utf-8")), 1):
        if 0 not in flags[at : at + len(line)]:
            out[n] = line
        at += len(line)
    return _Copy(None, out), after


def _edit_once(base: _Copy, old: str, new: str, replace_all: bool) -> _Copy | None:
    """One replacement on the model's copy; None when the model cannot tell the result."""
    runs = _runs(base.lines)
    complete = (
        base.total is not None
        and len(runs) <= 1
        and sum(len(r) for _, r in runs) == base.total
        and (not runs or runs[0][0] == 1)
    )
    if replace_all:
        if not complete:
            return None
        text = "".join(runs[0][1]) if runs else ""
        lines = disk_lines(text.replace(old, new).encode("utf-8"))
        return _Copy(len(lines), dict(enumerate(lines, 1)))
    hits = [i for i, (_, texts) in enumerate(runs) if old in "".join(texts)]
    if len(hits) != 1:
        return None  # the model cannot tell where its edit landed
    out: Lines = {}
    shift = 0
    for i, (first, texts) in enumerate(runs):
        if i == hits[0]:
            edited = disk_lines("".join(texts).replace(old, new, 1).encode("utf-8"))
            out.update(enumerate(edited, first))
            shift = len(edited) - len(texts)
        else:
            out.update((first + k + (shift if i > hits[0] else 0), t) for k, t in enumerate(texts))
    return _Copy(None if base.total is None else base.total + shift, out)


def dangling_refs(
    results: Sequence[tuple[str, str]], calls: Mapping[str, FileCall]
) -> dict[str, str]:
    """FileRefs/diffs in one request (``(call id, text as sent)`` of its tool results) whose
    base (the result they name) is missing or pruned there: id -> why.

    Only the named base: the lines a diff shows need nothing older, and whether everything a
    ref relies on is still there is what ``ModelView`` checks.
    """
    sent = dict(results)
    out: dict[str, str] = {}
    for cid, text in results:
        call = calls.get(cid)
        if call is None or call.kind not in (Kind.UNCHANGED, Kind.DIFF) or text != call.text:
            continue
        found = _BASE.search(_answer(call).partition("\n")[0])
        if found is None:
            out[cid] = "names no base"
            continue
        for base in found.group(1).split(" and "):  # a FileRef may name several results
            based = calls.get(base)
            if based is None or base not in sent:
                out[cid] = f"base {base} is missing"
            elif based.tool == READ_FILE.name and sent[base] != based.text:
                out[cid] = f"base {base} is pruned"
        # an edit or write is known from its call's arguments, whatever its result became
    return out
