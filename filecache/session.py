"""``Session``: one model context's view, ledger rows and answers.

Invariants (DESIGN "The one invariant"):
- A version is the xxh3 of the bytes of one read; the answer is computed from those same bytes.
- ``unchanged`` only when every requested line is a fact of the current version; ``diff`` only
  when every requested line that the diff does not show is a fact of one held version, and the
  diff is clearly smaller than the content; otherwise content.
- Every answer is recorded in the ledger before it is returned; facts record every call id
  they rely on, and ``forget`` drops them.

Concurrency (who owns what):
- The store owns a session's truth: its events and saved views. Every call runs as one *turn*:
  under the session's thread lock and the store's ``session:<id>`` lock (threads, processes,
  and with a shared store machines), it first catches up with the store (another object,
  thread or process of this session may have moved it on), then works on copies of the views
  it touches, then commits its events and those views in one store transaction. Only after the
  commit do the copies become the session's views: a call that raises leaves no fact and no
  ledger row.
- Writes and edits also hold the file's path lock (``FileCache.path_lock``) from reading the
  bytes they change to replacing them, and follow record-intent → replace → commit: an
  ``Intent`` is stored, the file replaced only if it still holds the bytes the change was
  computed from, then the event committed and the intent dropped. If the commit fails the old
  bytes are put back; a process killed in between leaves the intent, which
  ``FileCache.recover`` resolves from what is on disk.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
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
    ConflictError,
    ContentError,
    EditError,
    FileCacheError,
    MissingFileError,
    RequestError,
    StoreConflictError,
)
from .fsio import Located, read_bytes, write_bytes
from .hashing import args_hash, version_of
from .ledger import Ledger, build_ledger
from .outside import outside_notices
from .render import render_diff, render_file_ref, render_outline_answer, render_write
from .results import ReadResult, Source, WriteResult, content_text
from .store import Event, Intent
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
    """One model context: its views, its ledger rows, its answers. Thread- and process-safe.

    Get one with ``FileCache.session(id)``: the same id gives the same object in one cache, and
    objects of one id in other caches or processes share the session through the store.
    """

    def __init__(self, cache: FileCache, session_id: str) -> None:
        self.cache = cache
        self.id = session_id
        self._lock = threading.RLock()
        self._views: dict[str, PathView] = {}
        self._seq = 0  # the store's head as of the last turn
        self._call_seq: dict[str, int] = {}
        self._tool_keys: set[str] = set()
        self._seen: dict[str, str | None] = {}  # last version observed per path
        self._outside: set[str] = set()  # paths the watcher saw change (``outside.py``)
        self._loaded = False  # the first turn loads the view from the store
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
            StoreError: the store failed; nothing was recorded and the view is as before.
        """
        if mode not in MODES:
            raise RequestError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        ranged = offset is not None or limit is not None
        if symbol is not None and (ranged or mode == "outline"):
            raise RequestError("pass symbol alone, without offset/limit or mode='outline'")
        loc = self.cache.locate(path)
        cid = self._call_id(call_id)
        for attempt in range(3):
            try:
                with self._turn() as turn:
                    return self._read(
                        turn, loc, offset, limit, mode, symbol, fresh, numbered, cid, ranged
                    )
            except StoreConflictError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(
        self,
        turn: _Turn,
        loc: Located,
        offset: int | None,
        limit: int | None,
        mode: str,
        symbol: str | None,
        fresh: bool,
        numbered: bool,
        cid: str,
        ranged: bool,
    ) -> ReadResult:
        data = read_bytes(loc, None if ranged else self.cache.settings.max_file_bytes)
        src = self._source_from_bytes(loc, data, numbered)
        if mode == "outline":
            return self._answer_outline(turn, src, cid, large=False)
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
        return self._answer(turn, src, start, end, fresh, cid, label=label, may_outline=may_outline)

    def write(self, path: str | Path, content: str, *, call_id: str | None = None) -> WriteResult:
        """Create or replace ``path`` with ``content`` (atomically, under the path's lock).

        Raises:
            MarkerError: ``content`` carries filecache's own markers.
            ConflictError: the file kept changing under the write (another writer).
            StoreError: the store failed; the file is as before and nothing was recorded.
        """
        loc = self.cache.locate(path)
        cid = self._call_id(call_id)

        def plan(
            old: str | None, before: str | None
        ) -> tuple[str, list[tuple[int, int, frozenset[str]]], str]:
            check_markers(loc.rel, old or "", content)
            count = len(split_lines(content))
            return content, ([(1, count, frozenset([cid]))] if count else []), ""

        return self._change(loc, cid, "written", plan, [content], must_exist=False)

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
        """Replace ``old_string`` with ``new_string`` (or apply ``edits`` in order, all or none).

        The replacement is computed from the file's bytes under the path's lock, so edits of
        other sessions, processes or servers are never lost; if the file changes under the edit
        anyway (a writer that does not take the lock), it is applied again to the new bytes.

        Raises:
            EditError: ``old_string`` is missing or not unique.
            MarkerError, ConflictError, StoreError: as for ``write``.
        """
        if edits is None:
            if old_string is None or new_string is None:
                raise EditError("edit needs old_string and new_string, or edits=[(old, new), ...]")
            pairs: Sequence[tuple[str, str]] = [(old_string, new_string)]
        elif old_string is not None or new_string is not None:
            raise EditError("pass either old_string/new_string or edits, not both")
        else:
            pairs = list(edits)
        loc = self.cache.locate(path)
        cid = self._call_id(call_id)
        return self._change(
            loc, cid, "edited", self._edit_plan(loc, cid, pairs, replace_all),
            [new for _, new in pairs], must_exist=True,
        )  # fmt: skip

    def _edit_plan(
        self,
        loc: Located,
        cid: str,
        pairs: Sequence[tuple[str, str]],
        replace_all: bool,
    ) -> _Plan:
        def plan(
            old: str | None, before: str | None
        ) -> tuple[str, list[tuple[int, int, frozenset[str]]], str]:
            if old is None:
                raise EditError(f"{loc.rel}: not a text file filecache can edit; use write")
            turn = self._current
            view = turn.view(loc.rel) if turn is not None else None
            old_lines = split_lines(old)
            facts = view.get(before) if view and before else None
            text, replaced, steps = old, 0, []
            for old_s, new_s in pairs:
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
            return text, spans, detail

        return plan

    def forget(self, call_ids: Iterable[str]) -> None:
        """The model no longer has these results: drop every fact that relies on them."""
        ids = frozenset(call_ids)
        with self._turn() as turn:
            for key in list(self._views):
                view = turn.view(key)
                if view is not None:
                    view.forget(ids)

    def held_call_ids(self) -> set[str]:
        """Every call id that some fact of the model's view relies on."""
        with self._turn():
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
        with self.lock:
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
        cid = self._call_id(call_id)
        with self._turn() as turn:
            newest = {
                key: self._last_seen(key, view)
                for key, view in self._views.items()
                if view.versions and key not in self._tool_keys
            }  # a decorated tool's output is not a file: its next call is hashed
            for key, held in newest.items():
                try:
                    data = read_bytes(self.cache.locate(key), self.cache.settings.max_file_bytes)
                    version: str | None = version_of(data)
                except MissingFileError:
                    version = None  # deleted: a change too
                except FileCacheError:
                    continue  # unreadable now: the next read says why
                if version == held:
                    continue
                self._record_change(turn, cid, key, version, held)
                changed.append(key)
        return changed

    @property
    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold it to make a sequence of calls atomic (the pruner does): this session's thread
        lock and its store lock (other processes), reentrant; every call takes it too."""
        return self._hold()

    @contextlib.contextmanager
    def _hold(self) -> Iterator[None]:
        with self._lock, self.cache.store.lock(f"session:{self.id}"):
            yield

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
        self.cache.remember(version, lines, not self.cache.denied(path))
        src = Source(key, path, version, lines, False, output)
        cid = self._call_id(call_id)
        with self._turn() as turn:
            self._tool_keys.add(key)
            return self._answer(turn, src, 1, len(lines), fresh, cid)

    def record_write(self, path: str, tool: str, call_id: str | None = None) -> str:
        """Record a write/edit done outside ``Session`` (decorated tools); returns the call id."""
        cid = self._call_id(call_id)
        with self._turn() as turn:
            turn.log(cid, tool, path, kind=tool + "ed")
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
        turn: _Turn,
        src: Source,
        start: int,
        end: int,
        fresh: bool,
        cid: str,
        *,
        label: str | None = None,
        may_outline: bool = False,
    ) -> ReadResult:
        total = len(src.lines)
        plain = self.cache.plain_tokens(src, start, end)
        if (
            may_outline
            and plain > self.cache.settings.outline_threshold
            and not fresh  # fresh=true is the recovery path every FileRef names: content
            and not self._holds(turn, src, start, end)
        ):
            return self._answer_outline(turn, src, cid, large=True)
        notice = outside_notices(self, turn, cid, src.key) if self._outside else ""
        seq = turn.next_seq()
        turn.seen[src.key] = src.version
        view = turn.view(src.key)
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
            view = view or turn.new_view(src.key)
            view.facts_for(src.version, total, seq).add(start, end, frozenset([cid]))
            tokens = self.cache.count(text) if label else plain
        else:
            kind, text, base, base_version, tokens, relied = answer
        if notice:
            text, tokens = notice + text, tokens + self.cache.count(notice)
        turn.log(
            cid, "read", src.path, start=start, end=end, version=src.version,
            base_version=base_version, kind=kind, base_call_id=base, tokens=tokens,
            tokens_full=plain, text_hash=version_of(text.encode("utf-8")),
            deps=tuple(sorted(relied)),
        )  # fmt: skip
        return ReadResult(
            kind, text, src.path, src.version, cid, base, tokens, plain, start, end, total
        )

    def _holds(self, turn: _Turn, src: Source, start: int, end: int) -> bool:
        """Whether the model holds ``start..end`` of some version (a ref or diff may do)."""
        view = turn.view(src.key)
        return view is not None and any(f.covering(start, end) for f in view.recent())

    def _answer_outline(self, turn: _Turn, src: Source, cid: str, *, large: bool) -> ReadResult:
        total = len(src.lines)
        plain = self.cache.plain_tokens(src, 1, total)
        outline_text = self.cache.outline_text(src.version, src.path, src.lines, plain)
        notice = outside_notices(self, turn, cid, src.key) if self._outside else ""
        text = notice + render_outline_answer(outline_text, large=large, tokens_full=plain)
        tokens = self.cache.count(text)
        turn.log(
            cid, "read", src.path, start=1, end=total, version=src.version, kind="outline",
            tokens=tokens, tokens_full=plain, text_hash=version_of(text.encode("utf-8")),
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
            if tokens >= plain:
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
                if tokens > self.cache.settings.diff_max_ratio * plain:
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

    def _change(
        self,
        loc: Located,
        cid: str,
        kind: str,
        plan: _Plan,
        written: Sequence[str],
        *,
        must_exist: bool,
    ) -> WriteResult:
        """Write what ``plan`` makes of the file's current text: record-intent → replace →
        commit, under this session's turn and the path's lock (see the module docstring).

        ``written``: what the call's arguments carried (content or new strings), whose hashes
        ``sync`` checks later.
        """
        cache = self.cache
        with self._turn() as turn, cache.path_lock(loc.rel):
            for _attempt in range(5):
                old_data = self._current_bytes(loc)
                if old_data is None and must_exist:
                    raise EditError(f"{loc.rel}: no such file; use write to create it")
                old, before = self._previous(loc, old_data)
                text, spans, detail = plan(old, before)
                data = text.encode("utf-8")
                if self._current_bytes(loc) == old_data:
                    break  # unchanged since it was read: replace it now (we hold the lock)
            else:
                raise ConflictError(
                    f"{loc.rel}: kept changing while being {kind} (another program writes it "
                    "without filecache's lock); nothing was written; read it again and retry"
                )
            version = version_of(data)
            intent = Intent(self.id, cid, str(cache.root), loc.rel, before, version)
            cache.store.put_intent(intent)
            try:
                write_bytes(loc, data)
            except BaseException:
                with contextlib.suppress(FileCacheError):
                    cache.store.drop_intent(self.id, cid)
                raise
            try:
                result = self._record_written(turn, loc, cid, kind, data, text, before, spans,
                                              detail, written)  # fmt: skip
                turn.commit()
            except BaseException:
                self._undo_write(loc, old_data, data)
                with contextlib.suppress(FileCacheError):
                    cache.store.drop_intent(self.id, cid)
                raise
            with contextlib.suppress(FileCacheError):  # left behind: recovery drops it
                cache.store.drop_intent(self.id, cid)
            return result

    def _record_written(
        self,
        turn: _Turn,
        loc: Located,
        cid: str,
        kind: str,
        data: bytes,
        text: str,
        before: str | None,
        spans: list[tuple[int, int, frozenset[str]]],
        detail: str,
        written: Sequence[str],
    ) -> WriteResult:
        notice = outside_notices(self, turn, cid, loc.rel) if self._outside else ""
        version = version_of(data)
        lines = split_lines(text)
        # as for reads: denied files and files over max_file_bytes are never stored
        storable = (
            not self.cache.denied(loc.rel) and len(data) <= self.cache.settings.max_file_bytes
        )
        self.cache.remember(version, lines, storable)
        message = notice + render_write(loc.rel, kind, version, len(lines), detail)
        tokens = self.cache.count(message)
        seq = turn.next_seq()
        turn.seen[loc.rel] = version
        facts = turn.new_view(loc.rel).facts_for(version, len(lines), seq)
        for s, e, d in spans:
            facts.add(s, e, d)
        turn.log(
            cid, "write" if kind == "written" else "edit", loc.rel, version=version,
            base_version=before, kind=kind, tokens=tokens, tokens_full=tokens,
            text_hash=version_of(message.encode("utf-8")),
            args=tuple(args_hash(w) for w in written),
        )  # fmt: skip
        return WriteResult(kind, message, loc.rel, version, before, cid, tokens)

    def _current_bytes(self, loc: Located) -> bytes | None:
        """The file's bytes now (None: it does not exist); any size (what a write replaces)."""
        try:
            return read_bytes(loc, None)
        except MissingFileError:
            return None

    def _undo_write(self, loc: Located, old: bytes | None, new: bytes) -> None:
        """Put the old bytes back after a failed commit (we still hold the path lock)."""
        with contextlib.suppress(FileCacheError):
            if self._current_bytes(loc) != new:
                return  # someone wrote since: leave theirs
            if old is None:
                loc.real.unlink(missing_ok=True)
            else:
                write_bytes(loc, old)

    def _previous(self, loc: Located, data: bytes | None) -> tuple[str | None, str | None]:
        """The text (if it is text and not too large) and version of a file about to be
        replaced; (None, None) for a new file."""
        if data is None:
            return None, None
        version = version_of(data)
        if len(data) > self.cache.settings.max_file_bytes:
            return None, version
        try:
            return decode_text(data, loc.rel), version
        except ContentError:
            return None, version

    # -- turns and bookkeeping ----------------------------------------------------------------

    @contextlib.contextmanager
    def _turn(self) -> Iterator[_Turn]:
        """One call's exclusive turn: catch up with the store, work on copies, commit at the end
        (unless the call raised). Reentrant: a nested turn is the outer one."""
        with self._hold():
            if self._current is not None:
                yield self._current
                return
            self._catch_up()
            turn = _Turn(self)
            self._current = turn
            try:
                yield turn
                turn.commit()
            finally:
                self._current = None

    _current: _Turn | None = None

    def _catch_up(self) -> None:
        """Bring the view up to date when the store is ahead (another object, thread or process
        of this session committed since our last turn)."""
        store = self.cache.store
        head = store.head(self.id)
        if head == self._seq and self._loaded:
            return
        if head < self._seq:  # the session was deleted (and maybe begun again) elsewhere
            self._call_seq.clear()
            self._seen.clear()
            self._seq = 0
        events = store.events(self.id, after=self._seq)
        for e in events:
            self._call_seq[e.call_id] = e.seq
            if e.tool in ("read", "write", "edit", "change") and e.kind != "error":
                self._seen[e.path] = e.version
        max_versions = self.cache.settings.versions_per_path
        self._views = {
            key: PathView.from_json(state, max_versions)
            for key, state in store.load_views(self.id).items()
        }
        self._tool_keys |= {key for key in self._views if "{" in key}
        self._seq = head
        self._loaded = True

    def _call_id(self, call_id: str | None) -> str:
        # os.urandom is what secrets.token_hex reads; secrets itself (hmac) costs ~10 ms import
        return call_id if call_id else "fc-" + os.urandom(5).hex()

    def _last_seen(self, key: str, view: PathView) -> str | None:
        """The version of ``key`` this session last saw (read, wrote or noticed), else the newest
        its model holds."""
        return self._seen.get(key, next(reversed(view.versions)))

    def _record_change(
        self, turn: _Turn, cid: str, key: str, version: str | None, held: str | None
    ) -> None:
        """``key`` is now ``version`` (None: deleted), not the ``held`` one: a ``change`` event,
        which supersedes older reads; ``version`` becomes the one seen."""
        turn.seen[key] = version
        turn.log(cid, "change", key, version=version, base_version=held, kind="changed")

    def _newest(self, deps: frozenset[str] | set[str]) -> str:
        return max(deps, key=lambda c: self._call_seq.get(c, -1))


_Plan = Callable[[str | None, str | None], tuple[str, list[tuple[int, int, frozenset[str]]], str]]
"""What a write or edit makes of the file's current text: (new text, facts, detail)."""


class _Turn:
    """One call's pending work: copies of the views it touches and the events it logs.

    Owned by the thread holding the session's turn; ``commit`` hands both to the store in one
    transaction and, only then, makes the copies the session's views.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.base = session._seq
        self.events: list[Event] = []
        self.views: dict[str, PathView] = {}
        self.seen: dict[str, str | None] = {}
        self.committed = False
        self._after: list[Callable[[], None]] = []

    def on_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once this turn's work is committed (never if it fails)."""
        self._after.append(action)

    def view(self, key: str) -> PathView | None:
        """This call's copy of the view of ``key`` (None if the model holds nothing of it)."""
        found = self.views.get(key)
        if found is None:
            held = self.session._views.get(key)
            if held is None:
                return None
            found = self.views[key] = held.copy()
        return found

    def new_view(self, key: str) -> PathView:
        found = self.view(key)
        if found is None:
            found = self.views[key] = PathView(self.session.cache.settings.versions_per_path)
        return found

    def next_seq(self) -> int:
        return self.base + len(self.events) + 1

    def log(self, call_id: str, tool: str, path: str, **fields: Any) -> Event:
        event = Event(self.session.id, self.next_seq(), call_id, tool, path, **fields)
        self.events.append(event)
        return event

    def commit(self) -> None:
        if self.committed:
            return
        self.committed = True
        s = self.session
        if not self.events and not self.views:
            self._run_after()
            return
        states = {key: None if v.empty() else v.to_json() for key, v in self.views.items()}
        if not self.events:
            unchanged = {
                key: s._views[key].to_json() if key in s._views else None for key in states
            }
            if unchanged == states:
                self._run_after()
                return  # read-only turn
        s._seq = s.cache.store.commit(s.id, self.base, self.events, states)
        for event in self.events:
            s._call_seq[event.call_id] = event.seq
        s._seen.update(self.seen)
        for key, view in self.views.items():
            if view.empty():
                s._views.pop(key, None)
            else:
                s._views[key] = view
        self._run_after()

    def _run_after(self) -> None:
        for action in self._after:
            action()


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
