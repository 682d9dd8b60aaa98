"""``Session``: one model context's view, ledger rows and answers.

Each call is a pipeline: read the bytes (``fsio``, through the ``Root`` part), ask a pure
planner (``core.planner.plan_read``; ``core.edits.plan_edit``/``plan_write``), commit its
decision in the call's turn (``turns``), return the rendered answer. The root's parts it is
handed (``Engine``, which ``FileCache`` builds: ``paths``, ``secrets``, ``versions``, ``counts``,
``outlines``) answer what the planner asks of a version; the session decides nothing itself.

Invariants (docs/design.md, "The one invariant"):
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
  ledger row. A read skips the catch-up (a query per call): its commit checks the head, and a
  read whose commit finds the store moved on is run again after catching up.
- Writes and edits also hold the file's path lock (``Engine.locks``) from reading the
  bytes they change to replacing them, and follow record-intent → replace → commit: an
  ``Intent`` is stored, the file replaced only if it still holds the bytes the change was
  computed from, then the event committed and the intent dropped. If the commit fails the old
  bytes are put back; a process killed in between leaves the intent, which
  ``FileCache.recover`` resolves from what is on disk.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from filecache.core.hashing import args_hash
from filecache.core.kinds import Tool
from filecache.core.planner import (
    MODES,
    ReadAsk,
    ReadDecision,
    ReadRules,
    check_read,
    plan_read,
    streams_window,
)
from filecache.core.render import RETRIED_DETAIL, render_sealed, render_write
from filecache.core.results import Kind, ReadResult, Source, WriteResult
from filecache.core.text import decode_text, encode_text, split_lines
from filecache.core.views import Facts
from filecache.engine import Engine
from filecache.errors import (
    CallAbandonedError,
    ConflictError,
    ContentError,
    EditError,
    EncodingError,
    FileCacheError,
    FileTooLargeError,
    MissingFileError,
    OutsideRootError,
    RequestError,
    StoreConflictError,
)
from filecache.fsio import Located, read_bytes, read_window, remove_file, write_bytes
from filecache.outside import OutsideChanges
from filecache.sources import read_lookups
from filecache.store.store import Intent
from filecache.turns import SessionState, Turn

if TYPE_CHECKING:  # edits and the ledger are imported where used: not on a read's start
    from filecache.core.edits import ChangePlan
    from filecache.ledger import Ledger, LedgerFold
    from filecache.prune.codecs.base import Transcript

__all__ = ["MODES", "Session", "check_session_id", "new_call_id"]


_T = TypeVar("_T")


class Session:
    """One model context: its views, its ledger rows, its answers. Thread- and process-safe.

    Get one with ``FileCache.session(id)``: the same id gives the same object in one cache, and
    objects of one id in other caches or processes share the session through the store.
    """

    def __init__(self, engine: Engine, session_id: str) -> None:
        check_session_id(session_id)
        self.engine = engine
        """The root's parts this session answers with (``FileCache`` builds them, once)."""
        self.id = session_id
        self._lock = threading.RLock()
        self._state = SessionState(engine.store, session_id, engine.settings.versions_per_path)
        self._paths, self._secrets, self._versions = engine.paths, engine.secrets, engine.versions
        self._counts, self._outlines = engine.counts, engine.outlines
        self._seal = functools.partial(getattr, self._secrets, "ref_seal")  # asked when needed
        self._outside = OutsideChanges(engine)  # files the watcher saw change
        self._ledger: tuple[int, LedgerFold] | None = None  # (the events' life, their fold)
        engine.store.touch_session(session_id)

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
        ranged = offset is not None or limit is not None
        check_read(mode, symbol, ranged)
        cid = self._call_id(call_id)
        self._state.ended(cid, failed=False)

        def read_at(loc: Located) -> ReadResult:
            for attempt in range(3):
                try:
                    with self._turn(optimistic=attempt == 0) as turn:
                        if cid in self._state.call_seq:  # a retry: its first answer was lost
                            self._forget_in(turn, {cid})  # answered again, from scratch
                        return self._read(
                            turn, loc, offset, limit, mode, symbol, fresh, numbered, cid, ranged
                        )
                except StoreConflictError:
                    if attempt == 2:
                        raise
            raise AssertionError("unreachable")  # pragma: no cover

        return self._attempt(cid, path, read_at)

    def _attempt(self, cid: str, path: str | Path, call: Callable[[Located], _T]) -> _T:
        """Run one attempt of the call ``cid`` at ``path`` (``_at``); one that raised recorded
        nothing of itself, so an abandonment of it is spent (``SessionState.ended``)."""
        try:
            return self._at(path, call)
        except BaseException:
            self._state.ended(cid, failed=True)
            raise

    def _at(self, path: str | Path, call: Callable[[Located], _T]) -> _T:
        """``call`` at ``path``'s location (``Paths.remembered``); refused on a remembered one
        (a link appeared on its way), it runs once more on a fresh resolution."""
        loc = self._paths.remembered(path)
        try:
            return call(loc)
        except OutsideRootError:
            fresh = self._paths.relocate(path, loc)
            if fresh is None:
                raise
        return call(fresh)

    def _read(
        self,
        turn: Turn,
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
        """Read the bytes, ask the planner, record its decision (``_answered``)."""
        limit_bytes = self.engine.settings.max_file_bytes
        try:
            data = read_bytes(loc, limit_bytes)
        except FileTooLargeError:
            if not streams_window(mode, ranged):
                raise
            # A range of a file over the limit: streamed, hashed whole, only the range kept
            # (lines cut at text.MAX_LINE_CHARS); always content, never stored (fsio.read_window).
            key = self._secrets.key if self._secrets.denied(loc) else None  # keyed if denied
            window = read_window(loc, offset, limit, budget=limit_bytes, key=key)
            self._secrets.mark_if_denied(
                loc, window.version
            )  # its lines are never stored in any case
            src = Source(
                key=loc.rel,
                path=loc.rel,
                version=window.version,
                lines=window.lines,
                numbered=numbered,
            )
            first, count = window.lines.start, len(window.lines.kept)
            lines = (first, first + count - 1)
            return self._answer(turn, src, cid, lambda seq: ReadAsk(
                src=src, call_id=cid, seq=seq, lines=lines, fresh=True, partial=True))  # fmt: skip
        src = self._versions.source_of(loc, data, numbered)
        return self._answer(turn, src, cid, lambda seq: ReadAsk(
            src=src, call_id=cid, seq=seq, offset=offset, limit=limit, mode=mode, symbol=symbol,
            fresh=fresh,
        ))  # fmt: skip

    def write(self, path: str | Path, content: str, *, call_id: str | None = None) -> WriteResult:
        """Create or replace ``path`` with ``content`` (atomically, under the path's lock).

        Raises:
            MarkerError: ``content`` carries filecache's own markers.
            ConflictError: the file kept changing under the write (another writer).
            StoreError: the store failed; the file is as before and nothing was recorded.
        """
        cid = self._call_id(call_id)

        def write_at(loc: Located) -> WriteResult:
            def plan(old: str | None, held: Facts | None) -> ChangePlan:
                from filecache.core.edits import plan_write

                return plan_write(loc.rel, old, content, cid)

            return self._change(loc, cid, "written", plan, [content], must_exist=False,
                                retry=call_id is not None)  # fmt: skip

        return self._attempt(cid, path, write_at)

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
        cid = self._call_id(call_id)
        from filecache.core.edits import plan_edit

        return self._attempt(cid, path, lambda loc: self._change(
            loc, cid, "edited",
            lambda old, held: plan_edit(loc.rel, old, held, pairs, replace_all, cid),
            [new for _, new in pairs], must_exist=True, retry=call_id is not None,
        ))  # fmt: skip

    def forget(self, call_ids: Iterable[str]) -> None:
        """The model no longer has these results: drop every fact that relies on them."""
        with self._turn() as turn:
            self._forget_in(turn, frozenset(call_ids))

    def withdraw(self, call_ids: Iterable[str]) -> None:
        """The caller did not send these answers: it showed the model something else (a host
        hook that left the host's own output). Every fact relying on them goes, as with
        ``forget``, and the ledger records that they were withdrawn (``Kind.WITHDRAWN``), so
        ``stats`` credits them as the plain reads the model got, not as what filecache
        answered."""
        ids = frozenset(call_ids)
        with self._turn() as turn:
            self._forget_in(turn, ids)
            turn.log(self._call_id(None), Tool.FORGET, "", kind=Kind.WITHDRAWN,
                     deps=tuple(sorted(ids)))  # fmt: skip

    def _forget_in(self, turn: Turn, ids: Iterable[str]) -> None:
        ids = frozenset(ids)
        dropped = False
        for key, held in list(self._state.views.items()):
            current = turn.views.get(key, held)  # the turn's copy, else the session's view
            if current.forgets(ids):  # copied only when forgetting changes it
                dropped |= turn.new_view(key).forget(ids)
        if dropped:  # an event moves the store's head: other objects of the session catch up
            turn.log(self._call_id(None), "forget", "", kind="forgot", deps=tuple(sorted(ids)))

    def abandon(self, call_ids: str | Iterable[str]) -> None:
        """The caller gave up on these calls (a cancelled task, a timeout, an MCP
        ``notifications/cancelled``): their answers never reached the model, so they leave no
        fact. Never blocks. A call still running (or not yet started) is rolled back at its
        commit (a write or edit that already replaced its file is recorded as an edit the model
        did not see); one already committed is forgotten by this session object's next call,
        in that call's commit (``settle`` does it at once). Once the abandoned attempt ended, a
        call with the same id is a retry: answered as ``read``/``edit`` say."""
        self._state.abandon([call_ids] if isinstance(call_ids, str) else call_ids)

    def settle(self) -> None:
        """Record now what ``abandon`` left for the next call (blocks for the session's turn)."""
        with self._turn():
            pass

    def holds_version(self, version: str) -> bool:
        """Whether the model holds lines of ``version`` of some path (a diff may start there)."""
        with self._lock:
            return any(version in view.versions for view in self._state.views.values())

    def held_call_ids(self) -> set[str]:
        """Every call id that some fact of the model's view relies on."""
        with self._turn():
            return set().union(*(view.call_ids() for view in self._state.views.values()))

    def sync(self, transcript: Transcript) -> set[str]:
        """Reconcile with a transcript changed elsewhere (compaction, rewind, server clearing).

        Every result the view relies on (reads, and writes/edits, whose confirmation says where
        an edit landed) must still be in the transcript with exactly the text filecache
        answered (compared by hash), and a write's or edit's call must still carry what it
        wrote (a client may clear tool inputs); everything else is forgotten. Returns the
        forgotten ids.
        """
        texts = {r.call_id: r.text for r in transcript.results()}
        arguments = {cid: call.arguments for cid, call in transcript.calls_by_id().items()}
        from filecache.ledger import stale_calls

        with self.lock:
            calls = self.ledger().calls
            gone = stale_calls(
                self.held_call_ids(), calls, texts, arguments, self._secrets.digest,
                self._args_hash,
            )  # fmt: skip
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
                key: self._state.last_seen(key, view)
                for key, view in self._state.views.items()
                if view.versions and key not in self._state.tool_keys
            }  # a decorated tool's output is not a file: its next call is hashed
            for key, held in newest.items():
                try:
                    loc = self._paths.locate(key)
                    data = read_bytes(loc, self.engine.settings.max_file_bytes)
                    version: str | None = self._secrets.version_for(loc, data)
                except MissingFileError:
                    version = None  # deleted: a change too
                except FileCacheError:
                    continue  # unreadable now: the next read says why
                if version == held:
                    continue
                turn.record_change(cid, key, version, held)
                changed.append(key)
        return changed

    @property
    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold it to make a sequence of calls atomic (the pruner does): this session's thread
        lock and its store lock (other processes), reentrant; every call takes it too."""
        return self._hold()

    @contextlib.contextmanager
    def _hold(self) -> Iterator[None]:
        with self._lock, self.engine.store.lock(f"session:{self.id}"):
            yield

    def note_external_change(self, path: str) -> None:
        """A watcher saw ``path`` change on disk: if the model holds it, the next answer starts
        with a notice and the diff from the model's version (``filecache.outside``)."""
        with self._lock:
            view = self._state.views.get(path)
            if view is not None and view.versions and path not in self._state.tool_keys:
                self._outside.mark(path)

    def ledger(self) -> Ledger:
        """A snapshot of this session's ledger (what the pruner consumes): of the events this
        object keeps, caught up with the store first (another object, thread or process of the
        session may have moved it on)."""
        from filecache.ledger import LedgerFold

        with self._hold():
            state = self._state
            if self._current is None:  # a turn caught up when it began
                state.catch_up()
            fold = self._ledger
            if fold is None or fold[0] != state.lives or fold[1].count > len(state.events):
                fold = self._ledger = (state.lives, LedgerFold(self.id))
            fold[1].add(state.events[fold[1].count :])  # only the events since the last one
            return fold[1].snapshot()

    def read_tool(self, fn: Any = None, /, **options: Any) -> Any:
        """Decorate an agent's own read tool: cache on its output (see filecache.decorators).

        ``@session.read_tool`` or ``@session.read_tool(offset="offset", limit="limit")``."""
        from filecache.decorators import read_tool

        return read_tool(self._itself, fn, **options)

    def edit_tool(self, fn: Any = None, /, **options: Any) -> Any:
        """Decorate an agent's own edit tool: its calls become edits in the ledger."""
        from filecache.decorators import edit_tool

        return edit_tool(self._itself, fn, **options)

    def write_tool(self, fn: Any = None, /, **options: Any) -> Any:
        """Decorate an agent's own write tool: its calls become writes in the ledger."""
        from filecache.decorators import write_tool

        return write_tool(self._itself, fn, **options)

    def _itself(self, tool: str) -> Session:
        """The decorators' resolver for this session's own tools: every call answers here."""
        return self

    # -- async face (filecache.decorators, frameworks): the blocking work runs in a thread -----

    # A cancelled task (``asyncio.wait_for``, ``task.cancel()``) abandons its call: the thread
    # runs on, but its answer never reaches the caller, so it leaves no fact (``abandon``).

    async def aread(self, path: str | Path, **options: Any) -> ReadResult:
        """``read`` off the event loop (``asyncio.to_thread``); cancelling it abandons it."""
        return await self._off_loop(self.read, (path,), options)

    async def awrite(self, path: str | Path, content: str, **options: Any) -> WriteResult:
        """``write`` off the event loop; cancelled before the file was replaced, it changes
        nothing; after, the change is recorded as one the model did not see."""
        return await self._off_loop(self.write, (path, content), options)

    async def aedit(self, path: str | Path, *args: Any, **options: Any) -> WriteResult:
        """``edit`` off the event loop; cancelling it abandons it (as ``awrite``)."""
        return await self._off_loop(self.edit, (path, *args), options)

    async def _off_loop(
        self, method: Callable[..., _T], args: tuple[Any, ...], options: dict[str, Any]
    ) -> _T:
        import asyncio  # on first use: 19 ms of every CLI call's start otherwise

        cid = self._call_id(options.pop("call_id", None))
        try:
            return await asyncio.to_thread(functools.partial(method, *args, call_id=cid, **options))
        except asyncio.CancelledError:
            self.abandon(cid)
            with contextlib.suppress(RuntimeError):  # a loop shutting down: the next call does it
                asyncio.get_running_loop().run_in_executor(None, self._settle_quietly)
            raise

    def _settle_quietly(self) -> None:
        with contextlib.suppress(FileCacheError):
            self.settle()

    # -- answering --------------------------------------------------------------------------

    def answer_output(
        self,
        key: str,
        path: str,
        output: str,
        *,
        fresh: bool = False,
        call_id: str | None = None,
        lines: tuple[int, int] | None = None,
    ) -> ReadResult:
        """Answer a decorated read tool's ``output`` for the argument ``key``.

        ``lines=(start, end)`` answers only those lines of ``output`` (1-based, inclusive): the
        content is then their raw text, ``render_lines(numbered=False)``."""
        # A denied path's output, or one that prints a denied file's lines, is keyed and kept
        # out of the store like a denied file's read.
        secret = self._secrets.denied(path) or self._secrets.reveals(output) is not None
        version = self._secrets.digest(output, secret)
        if secret:
            self._secrets.mark_if_denied(path, version)  # marks it when the path is denied
            self._secrets.mark(version)
        split = split_lines(output)
        self._versions.remember(version, split, not secret)
        start, end = lines or (1, len(split))
        whole = start == 1 and end == len(split)
        src = Source(
            key=key, path=path, version=version, lines=split, numbered=False,
            output=output if whole else None,
        )  # fmt: skip
        cid = self._call_id(call_id)
        with self._turn() as turn:
            self._state.tool_keys.add(key)
            return self._answer(turn, src, cid, lambda seq: ReadAsk(
                src=src, call_id=cid, seq=seq, lines=(start, end), fresh=fresh, mode="full",
            ), own_output=True)  # fmt: skip

    def record_write(self, path: str, tool: str, call_id: str | None = None) -> str:
        """Record a write/edit done outside ``Session`` (decorated tools); returns the call id."""
        cid = self._call_id(call_id)
        with self._turn() as turn:
            turn.log(cid, tool, path, kind=str(Kind.WRITTEN if tool == Tool.WRITE else Kind.EDITED))
        return cid

    def adopt_change(
        self,
        path: str | Path,
        *,
        call_id: str,
        content: str | None = None,
        edits: Sequence[tuple[str, str]] | None = None,
        replace_all: bool = False,
        deleted: bool = False,
    ) -> str:
        """Record a change that a host's own tool already made (Claude Code's Edit, Codex's
        apply_patch...): the model knows what it wrote, so the lines it held stay held.

        Exactly one of ``content`` (the whole file written), ``edits`` ((old, new) pairs applied
        in order to the version the model holds) or ``deleted``. Under the path's lock the file
        is read once: when its bytes are exactly what the change makes of the version the model
        holds (or ``content``), the model's facts map through the change as for ``edit`` and
        ``write``; otherwise (the model held nothing to apply the edits to, or something else
        changed the file too) it is recorded as a change, so the next read is a diff or the
        content. Nothing on disk is written. Returns ``Kind.EDITED``/``WRITTEN`` when adopted,
        ``Kind.CHANGED`` otherwise.

        Raises:
            PathError, StoreError: as for ``read``; nothing was recorded.
        """
        if sum((content is not None, edits is not None, deleted)) != 1:
            raise RequestError("adopt_change needs exactly one of content, edits or deleted")

        def adopt_at(loc: Located) -> str:
            with self._turn() as turn, self.engine.locks.hold(loc.rel):
                data = self._current_bytes(loc)
                view = turn.view(loc.rel)
                held = (
                    self._state.last_seen(loc.rel, view)
                    if view is not None and view.versions
                    else self._state.seen.get(loc.rel)
                )
                facts = view.get(held) if view is not None and held else None
                planned = None
                if not deleted and data is not None:
                    lines = None
                    if content is None and held is not None:
                        lines = self._versions.lines_of(held)  # what the edits apply to
                    from filecache.core.edits import plan_adopt

                    planned = plan_adopt(
                        loc.rel, lines, facts, content=content, edits=edits,
                        replace_all=replace_all, call_id=call_id,
                    )  # fmt: skip
                if planned is not None and data is not None:
                    kind, change = planned
                    if encode_text(change.text, loc.rel) == data:
                        adopted = self._secrets.version_for(loc, data)
                        self._record_written(turn, loc, call_id, kind, data, adopted, held,
                                             change, ())  # fmt: skip
                        return kind
                version = None if data is None else self._secrets.version_for(loc, data)
                turn.record_change(call_id, loc.rel, version, held)
                return Kind.CHANGED

        return self._at(path, adopt_at)

    def _answer(
        self,
        turn: Turn,
        src: Source,
        cid: str,
        ask_at: Callable[[int], ReadAsk],
        *,
        own_output: bool = False,
    ) -> ReadResult:
        """Answer the read ``cid`` of ``src``: ``ask_at(seq)`` is the read as asked, given the
        sequence number its answer gets (after the notices, which may log changes first).
        ``own_output``: ``src`` is a tool's own output (a decorated tool's), so no answer is
        larger than it: a FileRef or diff that would be is sent as that output instead."""
        settings = self.engine.settings
        notice = self._notices(turn, cid, src.key)
        view = turn.view(src.key)
        ask = ask_at(turn.next_seq())
        lookups = read_lookups(self._versions, self._counts, self._outlines, src, self._seal)
        rules = ReadRules(
            outline_threshold=settings.outline_threshold, diff_max_ratio=settings.diff_max_ratio,
            max_versions=settings.versions_per_path, margin=self._counts.margin,
        )  # fmt: skip
        call_seq = self._state.call_seq
        decision = plan_read(ask, view, call_seq=call_seq, lookups=lookups, rules=rules)
        if (
            own_output
            and decision.kind in (Kind.UNCHANGED, Kind.DIFF, Kind.OUTLINE)
            and decision.tokens > decision.request.plain
        ):  # never larger than the tool's own output: that output, as content
            ask = replace(ask, fresh=True)
            decision = plan_read(ask, view, call_seq=call_seq, lookups=lookups, rules=rules)
        return self._answered(turn, decision, notice)

    def _answered(self, turn: Turn, decision: ReadDecision, notice: str) -> ReadResult:
        """Log the decision in the turn and return its result (the view becomes the turn's)."""
        request = decision.request
        src = request.src
        turn.views[src.key] = decision.view
        turn.seen[src.key] = src.version
        text, tokens = decision.text, decision.tokens  # a raw answer's sealed (plan_read)
        if notice and not src.numbered:  # and so are a notice's lines
            notice = render_sealed(notice, self._secrets.ref_seal)
        if notice:
            text, tokens = notice + text, tokens + self._counts.count(notice)
        start, end = request.start, request.end
        turn.log(
            request.call_id, "read", src.path, start=start, end=end, version=src.version,
            base_version=decision.base_version, kind=str(decision.kind),
            base_call_id=decision.base_call_id, tokens=tokens, tokens_full=request.plain,
            text_hash=self._secrets.digest(text, self._secrets.secret(src.version)),
            deps=tuple(sorted(decision.relied)),
        )  # fmt: skip
        return ReadResult(
            kind=str(decision.kind), text=text, path=src.path, version=src.version,
            call_id=request.call_id, base_call_id=decision.base_call_id, tokens=tokens,
            tokens_full=request.plain, start=start, end=end, line_count=len(src.lines),
        )  # fmt: skip

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
        retry: bool,
    ) -> WriteResult:
        """Write what ``plan`` makes of the file's current text: record-intent → replace →
        commit, under this session's turn and the path's lock (see the module docstring).

        ``written``: what the call's arguments carried (content or new strings), whose hashes
        ``sync`` checks later. ``retry``: the caller gave the call id, so this may be a retry
        (``_done_before``); a generated one is new.
        """
        engine = self.engine
        self._state.ended(cid, failed=False)
        with self._turn() as turn, self.engine.locks.hold(loc.rel):
            done = self._done_before(turn, loc, cid, kind) if retry else None
            if done is not None:
                return done
            for _attempt in range(5):
                old_data = self._current_bytes(loc)
                if old_data is None and must_exist:
                    raise EditError(f"{loc.rel}: no such file; use write to create it")
                old, before = self._previous(loc, old_data)
                if must_exist and old is None and old_data is not None:
                    self._refuse_edit(loc, old_data)  # the read's error for the same cause
                view = turn.view(loc.rel)
                planned = plan(old, view.get(before) if view and before else None)
                data = encode_text(planned.text, loc.rel)  # no NUL, no lone surrogate: served back
                if self._current_bytes(loc) == old_data:
                    break  # unchanged since it was read: replace it now (we hold the lock)
            else:
                raise ConflictError(
                    f"{loc.rel}: kept changing while being {kind} (another program writes it "
                    "without filecache's lock); nothing was written; read it again and retry"
                )
            version = self._secrets.version_for(loc, data)  # keyed for a denied file
            if self._state.is_abandoned(cid):
                raise CallAbandonedError(f"{loc.rel}: the call {cid} was abandoned; not {kind}")
            intent = Intent(
                session_id=self.id, call_id=cid, root=str(engine.root), path=loc.rel,
                before=before, after=version,
            )  # fmt: skip
            engine.store.put_intent(intent)
            try:
                write_bytes(loc, data)
            except BaseException:
                with contextlib.suppress(FileCacheError):
                    engine.store.drop_intent(self.id, cid)
                raise
            turn.replaced = True
            try:
                result = self._record_written(turn, loc, cid, kind, data, version, before,
                                              planned, written)  # fmt: skip
                turn.commit()
            except BaseException:
                self._undo_write(loc, old_data, data)
                with contextlib.suppress(FileCacheError):
                    engine.store.drop_intent(self.id, cid)
                raise
            with contextlib.suppress(FileCacheError):  # left behind: recovery drops it
                engine.store.drop_intent(self.id, cid)
            return result

    def _done_before(self, turn: Turn, loc: Located, cid: str, kind: str) -> WriteResult | None:
        """A retried write or edit (the same call id, in any process or replica): the answer
        from the ledger when an earlier attempt was applied, never a second application.

        Applied means: committed under ``cid``; or replaced but never committed (its process
        died), which leaves an intent, or the ``change`` that ``FileCache.recover`` made of it.
        The confirmation is recorded under ``cid`` then, without facts: the model learns that
        the file changed, and its next read is content or a diff."""
        state, store = self._state, self.engine.store
        seq = state.call_seq.get(cid)  # the turn caught up: the state's events are the store's
        if seq is not None:
            event = state.event(seq)
            if event is not None and event.tool in ("write", "edit") and event.version:
                return self._retried(loc, event.kind, event.version, event.base_version, cid, None)
        recovered = state.call_seq.get(cid + "~recovered")
        if recovered is not None:
            event = state.event(recovered)
            if event is not None and event.version:
                return self._retried(loc, kind, event.version, event.base_version, cid, turn)
        root = str(self.engine.root)
        for intent in store.intents(root):
            if (intent.session_id, intent.call_id, intent.path) != (self.id, cid, loc.rel):
                continue
            # we hold the path's lock: its writer is not between replace and commit (it died)
            data = self._current_bytes(loc)
            if data is not None and self._secrets.version_for(loc, data) == intent.after:
                result = self._retried(loc, kind, intent.after, intent.before, cid, turn)
                turn.on_commit(lambda: store.drop_intent(self.id, cid))
                return result
            store.drop_intent(self.id, cid)  # never replaced: the retry applies it
        return None

    def _retried(
        self,
        loc: Located,
        kind: str,
        version: str,
        before: str | None,
        cid: str,
        turn: Turn | None,
    ) -> WriteResult:
        """The confirmation of a write or edit applied by an earlier attempt of ``cid``;
        ``turn``: record it there (it was never confirmed before)."""
        lines = self._versions.lines_of(version)
        if lines is None:
            data = self._current_bytes(loc)
            lines = split_lines(decode_text(data, loc.rel)) if data is not None else []
        message = render_write(loc.rel, kind, version, len(lines), RETRIED_DETAIL)
        tokens = self._counts.count(message)
        if turn is not None:
            turn.seen[loc.rel] = version
            turn.log(
                cid, str(Tool.WRITE if kind == Kind.WRITTEN else Tool.EDIT), loc.rel,
                version=version,
                base_version=before, kind=kind, tokens=tokens, tokens_full=tokens,
                text_hash=self._secrets.digest(message, False),
            )  # fmt: skip
        return WriteResult(
            kind=kind, text=message, path=loc.rel, version=version, base_version=before,
            call_id=cid, tokens=tokens,
        )  # fmt: skip

    def _record_written(
        self,
        turn: Turn,
        loc: Located,
        cid: str,
        kind: str,
        data: bytes,
        version: str,
        before: str | None,
        planned: ChangePlan,
        written: Sequence[str],
    ) -> WriteResult:
        """Record the change ``planned`` made (``data``, of ``version``) in the turn: the facts
        the model holds of the new version, the ledger row, the confirmation."""
        notice = self._notices(turn, cid, loc.rel)
        lines = split_lines(planned.text)
        # as for reads: denied files and files over max_file_bytes are never stored (the
        # version says which: ``version_for`` keyed and marked it if the file is denied)
        secret = self._secrets.secret(version)
        storable = not secret and len(data) <= self.engine.settings.max_file_bytes
        self._versions.remember(version, lines, storable)
        message = notice + render_write(loc.rel, kind, version, len(lines), planned.detail)
        tokens = self._counts.count(message)
        seq = turn.next_seq()
        turn.seen[loc.rel] = version
        facts = turn.new_view(loc.rel).facts_for(version, len(lines), seq)
        facts.origin = cid  # the model's own change: a read that finds it undone says so
        facts.add_spans(planned.spans)
        turn.log(
            cid, str(Tool.WRITE if kind == Kind.WRITTEN else Tool.EDIT), loc.rel, version=version,
            base_version=before, kind=kind, tokens=tokens, tokens_full=tokens,
            text_hash=self._secrets.digest(message, False),
            args=tuple(self._args_hash(w, secret) for w in written),
        )  # fmt: skip
        return WriteResult(
            kind=kind, text=message, path=loc.rel, version=version, base_version=before,
            call_id=cid, tokens=tokens,
        )  # fmt: skip

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
                remove_file(loc)  # through the checked parent descriptor, as the write was
            else:
                write_bytes(loc, old)

    def _refuse_edit(self, loc: Located, data: bytes) -> None:
        """An edit of a file that is not text it can serve fails as a read of it does (the
        same class and exit code: binary, not UTF-8, too large).

        Raises:
            ContentError: always.
        """
        limit = self.engine.settings.max_file_bytes
        if len(data) > limit:
            raise FileTooLargeError(
                f"{loc.rel}: {len(data):,} bytes, over the {limit:,}-byte limit; filecache "
                "edits files up to max_file_bytes: raise it, or use another tool"
            )
        decode_text(data, loc.rel)  # raises BinaryFileError or EncodingError
        raise EncodingError(f"{loc.rel}: not a text file filecache can edit")  # not reached

    def _previous(self, loc: Located, data: bytes | None) -> tuple[str | None, str | None]:
        """The text (if it is text and not too large) and version of a file about to be
        replaced; (None, None) for a new file."""
        if data is None:
            return None, None
        version = self._secrets.version_for(loc, data)
        if len(data) > self.engine.settings.max_file_bytes:
            return None, version
        try:
            return decode_text(data, loc.rel), version
        except ContentError:
            return None, version

    # -- turns and bookkeeping ----------------------------------------------------------------

    @contextlib.contextmanager
    def _turn(self, *, optimistic: bool = False) -> Iterator[Turn]:
        """One call's exclusive turn: catch up with the store, work on copies, commit at the end
        (unless the call raised). Reentrant: a nested turn is the outer one.

        ``optimistic``: skip the catch-up once the view is loaded, for a call that always
        commits and has no effect outside memory before it (a read): its commit's
        compare-and-swap on the head then finds a store that moved on (``StoreConflictError``,
        nothing written), and the caller runs it again in a turn that catches up."""
        with self._hold():
            if self._current is not None:
                yield self._current
                return
            if not (optimistic and self._state.loaded):
                self._state.catch_up()
            turn = Turn(self._state)
            self._current = turn
            gone = self._state.take_committed_abandoned()
            try:
                if gone:  # answers that never reached their caller: forgotten in this commit
                    self._forget_in(turn, gone)
                yield turn
                turn.commit()
            except BaseException:
                if gone:
                    self._state.give_back(gone)
                raise
            finally:
                self._current = None

    _current: Turn | None = None

    def _notices(self, turn: Turn, cid: str, path: str) -> str:
        """What the answer about ``path`` starts with: notices of other files the watcher saw
        change (``outside.py``); none marked, nothing to ask."""
        return self._outside.notices(self._state, turn, cid, path) if self._outside.marked else ""

    def _args_hash(self, text: str, secret: bool) -> str:
        """The ledger's tag of what a write/edit carried: keyed for a denied file's."""
        return self._secrets.digest(text, True) if secret else args_hash(text)

    def _call_id(self, call_id: str | None) -> str:
        return call_id if call_id else new_call_id()


def new_call_id() -> str:
    """A generated call id, ``fc-`` and 12 digits."""
    # os.urandom is what secrets.token_hex reads; secrets itself (hmac) costs ~10 ms import.
    # 12 decimal digits (~40 bits): always 4 o200k tokens, where 10 hex digits cost 4-10.
    return f"fc-{int.from_bytes(os.urandom(5)) % 10**12:012d}"


def check_session_id(session_id: str) -> None:
    """Refuse a session id with a control or format character (a newline, a tab, a zero-width
    or bidirectional mark): it would break every line that names it (``sessions list``, logs)
    and can pass for another id on screen.

    Raises:
        RequestError: saying which character, and what ids may hold.
    """
    for ch in session_id:
        if not ch.isprintable():  # Unicode's Other and Separator classes, but for " "
            raise RequestError(
                f"session id {session_id[:40]!r} contains the unprintable character "
                f"U+{ord(ch):04X}; use letters, digits and punctuation (e.g. agent-1)"
            )


if TYPE_CHECKING:
    _Plan = Callable[[str | None, Facts | None], ChangePlan]
    """What a write or edit makes of the file's current text (or None) and the facts the model
    holds of that version (``plan_write``, ``plan_edit``)."""
