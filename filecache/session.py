"""``Session``: one model context's view, ledger rows and answers.

Invariants (DESIGN "The one invariant"):
- A version is the xxh3 of the bytes of one read; the answer is computed from those same bytes.
- ``unchanged`` only when every requested line is a fact of the current version; ``diff`` only
  when every requested line that the diff does not show is a fact of one held version, and the
  diff is clearly smaller than the content; otherwise content.
- Every answer is recorded in the ledger before it is returned; facts record every call id
  they rely on, and ``forget`` drops them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .diffing import diff_lines, equal_blocks, hunks_touching, unified_hunks
from .edits import (
    MAX_LANDINGS,
    apply_edit,
    check_markers,
    describe_landings,
    landings,
    line_range,
    old_span,
)
from .errors import (
    ContentError,
    EditError,
    FileCacheError,
    FileTooLargeError,
    MissingFileError,
    RequestError,
)
from .fsio import Located, read_bytes, write_bytes
from .hashing import args_hash, version_of
from .ledger import Ledger, build_ledger
from .outside import outside_notices
from .render import render_diff, render_file_ref, render_outline_answer, render_write
from .results import ReadResult, Source, WriteResult, content_text
from .store import Event
from .text import decode_text, split_lines
from .views import Facts, PathView, map_through_edit

if TYPE_CHECKING:
    from .cache import FileCache
    from .transcript import Transcript

__all__ = ["MODES", "Session"]

F = TypeVar("F", bound=Callable[..., Any])

_DIFF_CANDIDATES = 2  # held versions tried as a diff base, newest first
MODES = ("auto", "full", "outline")


class Session:
    """One model context: its views, its ledger rows, its answers. Thread-safe."""

    def __init__(self, cache: FileCache, session_id: str) -> None:
        self.cache = cache
        self.id = session_id
        self._lock = threading.RLock()
        max_versions = cache.settings.versions_per_path
        self._views: dict[str, PathView] = {
            key: PathView.from_json(state, max_versions)
            for key, state in cache.store.load_views(session_id).items()
        }
        events = cache.store.events(session_id)
        self._seq = events[-1].seq if events else 0
        self._call_seq: dict[str, int] = {e.call_id: e.seq for e in events}
        self._tool_keys: set[str] = {key for key in self._views if "{" in key}
        self._seen: dict[str, str | None] = {}  # last version observed per path
        self._outside: set[str] = set()  # paths the watcher saw change (``outside.py``)
        cache.store.touch_session(session_id)

    # -- public API -------------------------------------------------------------------------

    def read(
        self,
        path: str | Path,
        *,
        offset: int | None = None,
        limit: int | None = None,
        mode: str = "auto",
        symbol: str | None = None,
        fresh: bool = False,
        numbered: bool = True,
        call_id: str | None = None,
    ) -> ReadResult:
        """Read ``path`` as the model should see it: content, a FileRef, a diff or an outline.

        Args:
            path: relative to the root, or absolute inside it.
            offset: first line (1-based); ``limit``: how many lines.
            mode: ``auto`` (an outline instead of the content of a whole-file read over
                ``outline_threshold`` tokens), ``full`` (never an outline), ``outline``.
            symbol: read one definition (``Pop``, ``Queue.Pop``) instead of a line range.
            fresh: send content even if the model holds it.
            numbered: ``cat -n`` lines under a header (False: the raw lines).
            call_id: the tool call id (generated when None).

        Raises:
            PathError, ContentError, RequestError: with a message that says what to do.
        """
        if mode not in MODES:
            raise RequestError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        ranged = offset is not None or limit is not None
        if symbol is not None and (ranged or mode == "outline"):
            raise RequestError("pass symbol alone, without offset/limit or mode='outline'")
        loc = self.cache.locate(path)
        data = read_bytes(loc, None if ranged else self.cache.settings.max_file_bytes)
        src = self._source_from_bytes(loc, data, numbered)
        if mode == "outline":
            return self._answer_outline(src, call_id, large=False)
        label = None
        if symbol is not None:
            from .outline import find_symbol  # on first use (see FileCache.outline_of)

            definition = find_symbol(
                self.cache.outline_of(src.version, src.path, src.lines), symbol
            )
            start, end, label = (
                definition.start_line,
                definition.end_line,
                definition.qualified_name,
            )
        else:
            start, end = line_range(loc.rel, len(src.lines), offset, limit)
        may_outline = mode == "auto" and not ranged and symbol is None and numbered
        return self._answer(src, start, end, fresh, call_id, label=label, may_outline=may_outline)

    def write(self, path: str | Path, content: str, *, call_id: str | None = None) -> WriteResult:
        """Create or replace ``path`` with ``content`` (atomically)."""
        loc = self.cache.locate(path)
        cid = self._call_id(call_id)
        with self._lock:  # read-to-replace under the lock: no edit of this session in between
            old, before = self._previous(loc)
            check_markers(loc.rel, old or "", content)
            count = len(split_lines(content))
            spans = [(1, count, frozenset([cid]))] if count else []
            return self._commit(loc, before, content, spans, "written", cid, "", [content])

    def edit(
        self,
        path: str | Path,
        old_string: str | None = None,
        new_string: str | None = None,
        *,
        replace_all: bool = False,
        edits: Sequence[tuple[str, str]] | None = None,
        call_id: str | None = None,
    ) -> WriteResult:
        """Replace ``old_string`` with ``new_string`` (or apply ``edits`` in order, all or none)."""
        if edits is None:
            if old_string is None or new_string is None:
                raise EditError("edit needs old_string and new_string, or edits=[(old, new), ...]")
            edits = [(old_string, new_string)]
        elif old_string is not None or new_string is not None:
            raise EditError("pass either old_string/new_string or edits, not both")
        loc = self.cache.locate(path)
        cid = self._call_id(call_id)
        with self._lock:  # read-to-replace under the lock: no edit of this session in between
            if not loc.real.exists():
                raise EditError(f"{loc.rel}: no such file; use write to create it")
            data = read_bytes(loc, self.cache.settings.max_file_bytes)
            old, before = decode_text(data, loc.rel), version_of(data)
            view = self._views.get(loc.rel)
            old_lines = split_lines(old)
            facts = view.get(before) if view else None
            text, replaced, steps = old, 0, []
            for old_s, new_s in edits:
                text, pieces, count = apply_edit(loc.rel, text, old_s, new_s, replace_all)
                replaced += count
                new_lines = split_lines(text)
                spans = map_through_edit(old_lines, facts, new_lines, pieces, cid)
                facts = _scratch(spans, len(new_lines))
                old_lines = new_lines
                steps.append(landings(text, pieces))
            check_markers(loc.rel, old, text)
            detail = f"{replaced} replacement{'s' if replaced != 1 else ''}"
            if sum(map(len, steps)) <= MAX_LANDINGS:
                detail += describe_landings(steps)
                spans = facts.spans if facts else []
            else:  # too many places to list: the model cannot place them, so hold nothing
                spans = []
            written = [new for _, new in edits]
            return self._commit(loc, before, text, spans, "edited", cid, detail, written)

    def forget(self, call_ids: Iterable[str]) -> None:
        """The model no longer has these results: drop every fact that relies on them."""
        ids = frozenset(call_ids)
        with self._lock:
            for key, view in list(self._views.items()):
                if view.forget(ids):
                    self._save_view(key, view)

    def holds_version(self, version: str) -> bool:
        """Whether the model holds lines of ``version`` of some path (a diff may start there)."""
        with self._lock:
            return any(version in view.versions for view in self._views.values())

    def held_call_ids(self) -> set[str]:
        """Every call id that some fact of the model's view relies on."""
        with self._lock:
            return {
                cid
                for view in self._views.values()
                for facts in view.versions.values()
                for _, _, deps in facts.spans
                for cid in deps
            }

    def sync(self, transcript: Transcript) -> set[str]:
        """Reconcile with a transcript changed elsewhere (compaction, rewind, server clearing).

        Every result the view relies on (reads, and writes/edits, whose confirmation says where
        an edit landed) must still be in the transcript with exactly the text filecache
        answered (compared by hash), and a write's or edit's call must still carry what it
        wrote (a client may clear tool inputs); everything else is forgotten. Returns the
        forgotten ids.
        """
        results = {r.call_id: r.text for r in transcript.results()}
        calls = transcript.calls_by_id()
        ledger = self.ledger().calls
        gone: set[str] = set()
        for cid in self.held_call_ids():
            record = ledger.get(cid)
            text = results.get(cid)
            if text is None:
                gone.add(cid)
            elif record is not None and record.text_hash is not None:
                if version_of(text.encode("utf-8")) != record.text_hash:
                    gone.add(cid)
            if record is not None and record.args:  # a write/edit: its arguments must remain
                call = calls.get(cid)
                carried = _strings(call.arguments) if call is not None else set()
                if not set(record.args) <= {args_hash(v) for v in carried}:
                    gone.add(cid)
        if gone:
            self.forget(gone)
        return gone

    def rehash(self, call_id: str | None = None) -> list[str]:
        """After a tool that is not a file tool (bash, ...): re-hash the files in the view.

        A file whose bytes are no longer the newest version the model holds counts as a write
        (recorded as a ``change``, which supersedes older reads); the next read is then a diff.
        Only files in the view are touched, so this is cheap. Returns the changed paths.
        """
        changed: list[str] = []
        with self._lock:
            views = [(key, view) for key, view in self._views.items() if view.versions]
            newest = {key: self._last_seen(key, view) for key, view in views}
        for key, held in newest.items():
            if key in self._tool_keys:
                continue  # a decorated tool's output, not a file: its next call is hashed
            try:
                data = read_bytes(self.cache.locate(key), self.cache.settings.max_file_bytes)
                version: str | None = version_of(data)
            except MissingFileError:
                version = None  # deleted: a change too
            except FileCacheError:
                continue  # unreadable now: the next read says why
            if version == held:
                continue
            self._record_change(self._call_id(call_id), key, version, held)
            changed.append(key)
        return changed

    @property
    def lock(self) -> threading.RLock:
        """Held by every answer; hold it to make a sequence of calls atomic (the pruner does)."""
        return self._lock

    def note_external_change(self, path: str) -> None:
        """A watcher saw ``path`` change on disk: if the model holds it, the next answer starts
        with a notice and the diff from the model's version (see ``filecache.outside``)."""
        with self._lock:
            view = self._views.get(path)
            if view is not None and view.versions and path not in self._tool_keys:
                self._outside.add(path)

    def ledger(self) -> Ledger:
        """A snapshot of this session's ledger (what the pruner consumes)."""
        return build_ledger(self.id, self.cache.store.events(self.id))

    def read_tool(self, fn: F) -> F:
        """Decorate an agent's own read tool: cache on its output (see adapters.decorators)."""
        from filecache.adapters.decorators import wrap_read_tool

        return cast(F, wrap_read_tool(self, fn))

    def edit_tool(self, fn: F) -> F:
        """Decorate an agent's own edit tool: its calls become edits in the ledger."""
        from filecache.adapters.decorators import wrap_write_tool

        return cast(F, wrap_write_tool(self, fn, "edit"))

    def write_tool(self, fn: F) -> F:
        """Decorate an agent's own write tool: its calls become writes in the ledger."""
        from filecache.adapters.decorators import wrap_write_tool

        return cast(F, wrap_write_tool(self, fn, "write"))

    # -- answering --------------------------------------------------------------------------

    def answer_output(
        self, key: str, path: str, output: str, *, fresh: bool = False, call_id: str | None = None
    ) -> ReadResult:
        """Answer a decorated read tool's ``output`` for the argument ``key``."""
        version = version_of(output.encode("utf-8"))
        lines = split_lines(output)
        self._tool_keys.add(key)
        self.cache.remember(version, lines, not self.cache.denied(path))
        src = Source(key, path, version, lines, False, output)
        return self._answer(src, 1, len(lines), fresh, call_id)

    def record_write(self, path: str, tool: str, call_id: str | None = None) -> str:
        """Record a write/edit done outside ``Session`` (decorated tools); returns the call id."""
        cid = self._call_id(call_id)
        with self._lock:
            self._log(Event(self.id, self._next_seq(cid), cid, tool, path, kind=tool + "ed"))
        return cid

    def _source_from_bytes(self, loc: Located, data: bytes, numbered: bool) -> Source:
        version = version_of(data)
        lines = self.cache.held_lines(version)
        if lines is None:  # decoded once per version (in memory): only then is it kept
            lines = split_lines(decode_text(data, loc.rel))
            settings = self.cache.settings
            storable = len(data) <= settings.max_file_bytes and not self.cache.denied(loc.rel)
            self.cache.remember(version, lines, storable)
        return Source(loc.rel, loc.rel, version, lines, numbered)

    def _answer(
        self,
        src: Source,
        start: int,
        end: int,
        fresh: bool,
        call_id: str | None,
        *,
        label: str | None = None,
        may_outline: bool = False,
    ) -> ReadResult:
        cid = self._call_id(call_id)
        total = len(src.lines)
        plain = self.cache.plain_tokens(src, start, end)
        if (
            may_outline
            and plain > self.cache.settings.outline_threshold
            and not fresh  # fresh=true is the recovery path every FileRef names: content
            and not self._holds(src, start, end)
        ):
            return self._answer_outline(src, cid, large=True)
        notice = outside_notices(self, cid, src.key) if self._outside else ""
        with self._lock:
            seq = self._next_seq(cid)
            self._seen[src.key] = src.version
            view = self._views.get(src.key)
            answer = (
                None
                if fresh or view is None
                else self._cached_answer(view, src, start, end, cid, plain)
            )
            if answer is None:
                text = content_text(src, start, end, label)
                kind = "symbol" if label else "full" if start == 1 and end == total else "partial"
                base = base_version = None
                relied: frozenset[str] = frozenset()
                view = view or self._views.setdefault(
                    src.key, PathView(self.cache.settings.versions_per_path)
                )
                view.facts_for(src.version, total, seq).add(start, end, frozenset([cid]))
                self._save_view(src.key, view)
                tokens = self.cache.count(text) if label else plain
            else:
                kind, text, base, base_version, tokens, relied = answer
                if kind == "diff":
                    self._save_view(src.key, view)  # type: ignore[arg-type]
            if notice:
                text, tokens = notice + text, tokens + self.cache.count(notice)
            result = ReadResult(
                kind, text, src.path, src.version, cid, base, tokens, plain, start, end, total
            )
            self._log(
                Event(
                    self.id,
                    seq,
                    cid,
                    "read",
                    src.path,
                    start,
                    end,
                    src.version,
                    base_version,
                    kind,
                    base,
                    tokens,
                    plain,
                    version_of(text.encode("utf-8")),
                    deps=tuple(sorted(relied)),
                )
            )
            return result

    def _holds(self, src: Source, start: int, end: int) -> bool:
        """Whether the model holds ``start..end`` of some version (a ref or diff may do)."""
        view = self._views.get(src.key)
        return view is not None and any(f.covering(start, end) for f in view.recent())

    def _answer_outline(self, src: Source, call_id: str | None, *, large: bool) -> ReadResult:
        cid = self._call_id(call_id)
        total = len(src.lines)
        plain = self.cache.plain_tokens(src, 1, total)
        outline_text = self.cache.outline_text(src.version, src.path, src.lines, plain)
        notice = outside_notices(self, cid, src.key) if self._outside else ""
        text = notice + render_outline_answer(outline_text, large=large, tokens_full=plain)
        tokens = self.cache.count(text)
        with self._lock:
            seq = self._next_seq(cid)
            self._log(
                Event(
                    self.id, seq, cid, "read", src.path, 1, total, src.version, None, "outline",
                    None, tokens, plain, version_of(text.encode("utf-8")),
                )
            )  # fmt: skip
        return ReadResult(
            "outline", text, src.path, src.version, cid, None, tokens, plain, 1, total, total
        )

    def _cached_answer(
        self, view: PathView, src: Source, start: int, end: int, cid: str, plain: int
    ) -> tuple[str, str, str, str, int, frozenset[str]] | None:
        """``(kind, text, base call id, base version, tokens, every call id relied on)``."""
        total = len(src.lines)
        current = view.get(src.version)
        deps = current.covering(start, end) if current else None
        if deps and current is not None:
            base = self._newest(deps)
            text = render_file_ref(src.path, src.version, start, end, total, base)
            tokens = self.cache.count(text)
            if tokens >= self.cache.margin * plain:  # margin: 1, or estimates' margin
                return None  # a reference no smaller than the content: send the content
            view.facts_for(src.version, total, self._seq)
            return "unchanged", text, base, src.version, tokens, deps
        tried = 0
        for held in view.recent():
            if held.version == src.version:
                continue
            if tried == _DIFF_CANDIDATES:
                break
            tried += 1
            old_lines = self.cache.lines_of(held.version)
            if old_lines is None:
                continue
            ops = diff_lines(old_lines, src.lines)
            blocks = equal_blocks(ops)
            need: set[str] = set()
            for a0, b0, size in blocks:
                lo, hi = max(b0 + 1, start), min(b0 + size, end)
                if lo > hi:
                    continue
                have = held.covering(lo - b0 + a0, hi - b0 + a0)
                if have is None:
                    break
                need |= have
            else:
                if not need:
                    continue
                whole = start == 1 and end == total
                hunks = unified_hunks(old_lines, src.lines, ops)
                if not whole:
                    hunks = hunks_touching(hunks, start, end)
                base = self._newest(need)
                mapped = None if whole else old_span(ops, start, end)
                text = render_diff(
                    src.path, base, held.version, src.version, hunks, (start, end, total), mapped
                )
                tokens = self.cache.count(text)
                if tokens > self.cache.settings.diff_max_ratio * self.cache.margin * plain:
                    continue
                facts = view.facts_for(src.version, total, self._seq)
                keep = [(start, end)] + [(h.b_start, h.b_start + h.b_len - 1) for h in hunks]
                carried = _scratch(held.map_blocks(blocks, frozenset([cid])), total)
                carried.restrict(sorted(keep))
                for s, e, d in carried.spans:
                    facts.add(s, e, d)
                for h in hunks:
                    facts.add(h.b_start, h.b_start + h.b_len - 1, frozenset([cid]))
                return "diff", text, base, held.version, tokens, frozenset(need)
        return None

    # -- writing ----------------------------------------------------------------------------

    def _previous(self, loc: Located) -> tuple[str | None, str | None]:
        """The text (if it is text) and version (if not too large) of a file about to be
        replaced; (None, None) for a new file."""
        if not loc.real.exists():
            return None, None
        try:
            data = read_bytes(loc, self.cache.settings.max_file_bytes)
        except FileTooLargeError:
            return None, None
        try:
            return decode_text(data, loc.rel), version_of(data)
        except ContentError:
            return None, version_of(data)

    def _commit(
        self,
        loc: Located,
        before: str | None,
        text: str,
        spans: list[tuple[int, int, frozenset[str]]],
        kind: str,
        cid: str,
        detail: str,
        written: Sequence[str] = (),
    ) -> WriteResult:
        """Write ``text``; ``written``: what the call's arguments carried (content or new
        strings), whose hashes ``sync`` checks later."""
        data = text.encode("utf-8")
        write_bytes(loc, data)
        # after the write: a failed write must not consume (and lose) a pending notice
        notice = outside_notices(self, cid, loc.rel) if self._outside else ""
        version = version_of(data)
        lines = split_lines(text)
        # as for reads: denied files and files over max_file_bytes are never stored
        storable = (
            not self.cache.denied(loc.rel) and len(data) <= self.cache.settings.max_file_bytes
        )
        self.cache.remember(version, lines, storable)
        message = notice + render_write(loc.rel, kind, version, len(lines), detail)
        tokens = self.cache.count(message)
        with self._lock:
            seq = self._next_seq(cid)
            self._seen[loc.rel] = version
            view = self._views.setdefault(loc.rel, PathView(self.cache.settings.versions_per_path))
            facts = view.facts_for(version, len(lines), seq)
            for s, e, d in spans:
                facts.add(s, e, d)
            self._save_view(loc.rel, view)
            tool = "write" if kind == "written" else "edit"
            self._log(
                Event(
                    self.id,
                    seq,
                    cid,
                    tool,
                    loc.rel,
                    None,
                    None,
                    version,
                    before,
                    kind,
                    None,
                    tokens,
                    tokens,
                    version_of(message.encode("utf-8")),
                    args=tuple(args_hash(w) for w in written),
                )
            )
        return WriteResult(kind, message, loc.rel, version, before, cid, tokens)

    # -- bookkeeping --------------------------------------------------------------------------

    def _call_id(self, call_id: str | None) -> str:
        # os.urandom is what secrets.token_hex reads; secrets itself (hmac) costs ~10 ms import
        return call_id if call_id else "fc-" + os.urandom(5).hex()

    def _next_seq(self, call_id: str) -> int:
        with self._lock:
            self._seq += 1
            self._call_seq[call_id] = self._seq
            return self._seq

    def _last_seen(self, key: str, view: PathView) -> str | None:
        """The version of ``key`` this session last saw (read, wrote or noticed), else the newest
        its model holds."""
        return self._seen.get(key, next(reversed(view.versions)))

    def _record_change(self, cid: str, key: str, version: str | None, held: str | None) -> None:
        """``key`` is now ``version`` (None: deleted), not the ``held`` one: a ``change`` event,
        which supersedes older reads; ``version`` becomes the one seen."""
        with self._lock:
            seq = self._next_seq(cid)
            self._seen[key] = version
            self._log(
                Event(self.id, seq, cid, "change", key, version=version, base_version=held,
                      kind="changed")
            )  # fmt: skip

    def _newest(self, deps: frozenset[str] | set[str]) -> str:
        return max(deps, key=lambda c: self._call_seq.get(c, -1))

    def _save_view(self, key: str, view: PathView) -> None:
        self.cache.store.save_view(self.id, key, None if view.empty() else view.to_json())

    def _log(self, event: Event) -> None:
        self.cache.store.add_event(event)


def _scratch(spans: list[tuple[int, int, frozenset[str]]], line_count: int) -> Facts:
    return Facts("", line_count, list(spans))


def _strings(value: object) -> set[str]:
    """Every string inside a call's (JSON) arguments."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values())) if value else set()
    if isinstance(value, (list, tuple)):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return set()
