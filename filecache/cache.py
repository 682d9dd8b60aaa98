"""``FileCache``: the read cache over one root: it builds the root's ``Engine`` and its sessions.

``FileCache`` opens the root's settings and store and builds its parts once, as one frozen
record (``filecache.engine.Engine``: ``cache.engine``): paths confined to the root
(``fsio.Paths``), the path locks, the root's denied files and secret versions
(``secrecy.Secrets``), decoded versions in memory and their blobs (``sources.Versions``),
token counts (``sources.Counts``) and outlines (``sources.Outlines``). Each ``Session`` is
handed the record (``Session(engine, id)``); whoever needs a part reaches it by name there
(``cache.engine.store``, ``session.engine.secrets``). ``FileCache`` itself keeps what spans
its sessions: ``session``, ``conversation`` and the three tool decorators, ``watch``,
``recover`` and ``close``.

Invariants: nothing here decides an answer. A version read from a denied path
(``engine.secrets.denied``: the deny-list, case-insensitive, on the path, its aliases and a
link's target; or the file's identity, device and inode, is a denied file's, as a hard link's
is) is secret for this object's life: no blob, outline or token count of it is written to the
store, and its version is keyed (``Secrets.version_for``: ``keyed:``, a BLAKE2b keyed with
``secrecy.secret_key``), so no stored hash gives its content back. Bytes equal to a secret
version's are secret under any name; ``Secrets.reveals`` finds a denied file's lines in a
tool's output (``secrecy.SecretIndex``, in memory only). Opening sweeps temporary files a
killed write left in the root (``fsio.sweep_temp_files``, at most once a minute per store).

Counts on the read path are ``tokens.fast_estimate``-s unless ``Settings.exact_counts``: then
the BPE vocabulary is loaded on the first count and exact counts are cached in the store.
``FileCache._lock`` owns the sessions map and the stored-id memo; each part owns its own state.
With ``watch=True`` a watcher (``filecache.watch``) marks every file changed on disk in every
live session of this cache; each session decides what its model is told (``outside.py``).

Concurrency: ``self._lock`` guards this object's own maps only and is never held while waiting
for a store, session or path lock (a thread holding a path lock may need it). One ``Session``
object per id per cache (``session(id)`` twice gives the same
object; other caches and processes share it through the store). ``engine.locks.hold(rel)`` is
the lock every write and edit holds from reading a file to replacing it: a record lock on
``paths.lock`` in the root's store folder (whatever store is used, so every filecache process
on the root takes the same one), plus the store's own lock of the same name (a shared store
extends it across machines). ``recover()`` (run on open) resolves intents that a killed
process left behind.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import xxhash

from filecache.conversations import bind, current_session, open_conversation
from filecache.core.kinds import Tool
from filecache.core.results import Kind, ReadResult, WriteResult
from filecache.engine import Engine
from filecache.errors import (
    ConfigError,
    FileCacheError,
    MissingFileError,
    RequestError,
    StoreError,
)
from filecache.fsio import STALE_AFTER, Paths, read_bytes, sweep_temp_files
from filecache.secrecy import Secrets
from filecache.session import Session
from filecache.settings import load_settings
from filecache.sources import Counts, Outlines, Versions
from filecache.store.locks import PathLocks
from filecache.store.opening import open_store, store_files
from filecache.store.seal import default_seal
from filecache.store.store import Event

if TYPE_CHECKING:
    from filecache.watch import Change, Watcher

__all__ = ["ROOT_SEPARATOR", "FileCache", "ReadResult", "Session", "WriteResult"]

ROOT_SEPARATOR = "#"
"""Between a session id and its root's hash, in the stored id of a session on a root that is not
its store's home root (``FileCache.session``)."""


class FileCache:
    """A read cache over one root directory.

    Args:
        root: the directory whose files are served; paths outside it are refused.
        store: a SQLite path, ``":memory:"``, a ``Store`` object, or None for
            ``<root>/.filecache/cache.db``.
        **settings: overrides of ``filecache.settings.Settings`` (``watch=True``: watch the root
            for files changed outside the agent; ``close()`` stops the watcher).
    """

    def __init__(self, root: str | Path, store: Any = None, **settings: Any) -> None:
        root_path = Path(root).resolve()
        if not root_path.is_dir():
            raise ConfigError(f"root {root} is not a directory")
        self._lock = threading.RLock()
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._stored_ids: dict[str, str] = {}  # session id given -> stored (a claim holds)
        self._watcher: Watcher | None = None
        options = load_settings(root_path, settings)
        opened = open_store(root_path, store if store is not None else options.store)
        seal = default_seal()  # what the store holds is used only when it verifies
        secrets = Secrets(root_path, options, opened)
        versions = Versions(
            opened, seal, secrets, max_file_bytes=options.max_file_bytes,
            budget=int(options.memory_mb * 1024 * 1024), needed=self._needed,
        )  # fmt: skip
        self.engine = Engine(
            root=root_path,
            settings=options,
            store=opened,
            paths=Paths(root_path, store_files(opened)),
            locks=PathLocks(root_path, opened),
            seal=seal,
            secrets=secrets,
            versions=versions,
            counts=Counts(options, opened, seal, versions, secrets),
            outlines=Outlines(opened, seal, versions, secrets),
        )
        """The root's parts (``filecache.engine``), handed to every session of this cache."""
        self._collect_garbage()
        self.recover()
        self._sweep_temp_files()
        if options.watch:
            self.watch()

    def session(self, session_id: str | None = None) -> Session:
        """A session: one model context. A known id continues that session from the store.

        The same id gives the same object while it is alive; another cache or process with the
        same id, root and store shares the session (each call catches up with the store first).
        On a root other than the one that first used the id in this store, the session is
        stored as ``ID#<root hash>`` (``session.id``): one id on two roots of one store names
        two sessions.
        """
        given = session_id or self.engine.settings.session or "s-" + os.urandom(6).hex()
        sid = self._stored_session_id(given)
        with self._lock:
            session = self._sessions.get(sid)
        if session is not None:
            return session
        made = Session(self.engine, sid)  # not under self._lock: it writes to the store
        with self._lock:
            return self._sessions.setdefault(sid, made)

    def _stored_session_id(self, given: str) -> str:
        """The id a session of this root is stored under: ``given`` on the root that first used
        it in this store (its claim, a row in the store), ``given#<hash of the root>`` on any
        other, so that one id used on two roots sharing a store never shares views of equal
        relative paths. A session of an older store (no claim) is claimed by the first root
        that continues it.

        Raises:
            RequestError: ``given`` holds ``#`` (reserved for the other roots' form), unless it
                is already this root's form.
        """
        known = self._stored_ids.get(given)
        if known is not None:
            return known
        root, store = self.engine.root, self.engine.store
        suffix = ROOT_SEPARATOR + xxhash.xxh3_64_hexdigest(str(root).encode())[:8]
        bare = given.removesuffix(suffix)
        if bare != given and ROOT_SEPARATOR not in bare:
            return given
        if ROOT_SEPARATOR in given:
            raise RequestError(
                f"session id {given[:60]!r}: '{ROOT_SEPARATOR}' is reserved (it marks a "
                "session's form on another root of a shared store); choose an id without it"
            )
        with store.lock(f"claim:{given}"):
            owner = store.cache_get("session-root", given)
            if owner is None:
                owner = str(root)
                store.cache_put("session-root", given, owner)
        stored = given if owner == str(root) else given + suffix
        with self._lock:
            if len(self._stored_ids) >= 4096:
                self._stored_ids.clear()
            self._stored_ids[given] = stored
        return stored

    def recover(self) -> int:
        """Resolve the intents of writes to this root that died before they were committed.

        An intent whose call was committed is dropped. Otherwise, if the file holds the bytes the
        write meant to write, the replace happened but was never confirmed to the model: it is
        recorded as a ``change`` (the model's next read gets a diff); if not, nothing happened.
        Each is resolved under its session's and path's locks, so a write still running in
        another process is never taken for a dead one. Returns how many were resolved.
        """
        resolved = 0
        engine = self.engine
        store, root = engine.store, str(engine.root)
        for intent in store.intents(root):
            with store.lock(f"session:{intent.session_id}"), engine.locks.hold(intent.path):
                if intent not in store.intents(root):
                    continue  # its writer finished meanwhile
                events = store.events(intent.session_id)
                if not any(e.call_id == intent.call_id for e in events):
                    try:
                        data: bytes | None = read_bytes(engine.paths.locate(intent.path), None)
                    except MissingFileError:
                        data = None
                    except FileCacheError:
                        data = None
                    if data is not None and self._recovered(intent.path, data) == intent.after:
                        head = events[-1].seq if events else 0
                        store.commit(
                            intent.session_id,
                            head,
                            [
                                Event(
                                    session_id=intent.session_id,
                                    seq=head + 1,
                                    call_id=intent.call_id + "~recovered",
                                    tool=str(Tool.CHANGE),
                                    path=intent.path,
                                    version=intent.after,
                                    base_version=intent.before,
                                    kind=str(Kind.CHANGED),
                                )
                            ],  # fmt: skip
                            {},
                        )
                store.drop_intent(intent.session_id, intent.call_id)
                resolved += 1
        return resolved

    def _recovered(self, rel: str, data: bytes) -> str | None:
        try:
            return self.engine.secrets.version_for(self.engine.paths.locate(rel), data)
        except FileCacheError:
            return None

    # -- conversations and decorators (filecache/conversations.py, decorators.py) ------------

    @contextlib.contextmanager
    def conversation(self, session_id: str | Session) -> Iterator[Session]:
        """Bind ``session_id``'s session (or a ``Session`` of this cache) to this thread or
        task: ``with cache.conversation(id):``. Yields the bound ``Session``.

        Tools decorated with this ``FileCache`` answer from the bound session; with none bound
        they raise ``ConfigError`` (see ``filecache.conversations``). Bindings nest: the
        innermost one for a cache wins."""
        if isinstance(session_id, Session):
            if session_id.engine is not self.engine:
                raise ConfigError("that session belongs to another FileCache")
            with bind(self, session_id):
                yield session_id
        elif isinstance(session_id, str) and session_id:
            with open_conversation(self, session_id, self.session) as session:
                yield session
        else:
            raise ConfigError(
                f"a conversation id must be a non-empty string or a Session, got {session_id!r}"
            )

    def read_tool(self, fn: Any = None, /, **options: Any) -> Any:
        """``Session.read_tool`` for the conversation bound where the tool is called."""
        from filecache.decorators import read_tool

        return read_tool(self._bound, fn, **options)

    def edit_tool(self, fn: Any = None, /, **options: Any) -> Any:
        """``Session.edit_tool`` for the conversation bound where the tool is called."""
        from filecache.decorators import edit_tool

        return edit_tool(self._bound, fn, **options)

    def write_tool(self, fn: Any = None, /, **options: Any) -> Any:
        """``Session.write_tool`` for the conversation bound where the tool is called."""
        from filecache.decorators import write_tool

        return write_tool(self._bound, fn, **options)

    def _bound(self, tool: str) -> Session:
        """The session bound to this cache where ``tool`` runs (the decorators' resolver)."""
        return cast(Session, current_session(self, tool))

    def watch(self) -> Watcher:
        """Watch the root for files changed outside the agent (also ``watch=True``); idempotent.

        Each live session that holds a changed file starts its next answer with a notice and
        the diff from its model's version. The store's own files and VCS folders are ignored.
        """
        from filecache.watch import Watcher

        with self._lock:
            if self._watcher is None:
                self._watcher = Watcher(
                    self.engine.root,
                    self._changed,
                    debounce=self.engine.settings.watch_debounce,
                    # the store's files, however it was given
                    ignore=sorted(self.engine.paths.protected),
                ).start()
            return self._watcher

    def _changed(self, changes: Sequence[Change]) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            for change in changes:
                session.note_external_change(change.path)

    def close(self) -> None:
        """Stop the watcher, flush pending blobs and close the store.

        A blob that cannot be stored now (a full disk, a file-size limit, a store gone away) is
        a warning, never an error: every answer and edit was committed before, and a lost blob
        only means content instead of a diff later. So a call that succeeded never turns into a
        failure at the end (the CLI would exit non-zero after an edit it applied)."""
        if self._watcher is not None:
            self._watcher.stop()
        versions = self.engine.versions
        try:
            for step in (versions.flush, versions.close):
                try:
                    step()
                except StoreError as exc:
                    _warn(f"some content was not kept for later diffs ({exc})")
        finally:
            self.engine.store.close()

    def _needed(self, version: str) -> bool:
        """Whether a version that left memory is worth its blob: a live session's model holds
        it (``Versions`` asks from its writer's thread, holding no lock of ours)."""
        with self._lock:
            sessions = list(self._sessions.values())
        return any(session.holds_version(version) for session in sessions)

    def __enter__(self) -> FileCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _collect_garbage(self) -> None:
        now = time.time()
        store = self.engine.store
        last = store.cache_get("meta", "gc_at")
        if last is not None and now - float(last) < 86400:
            return
        store.gc(now - self.engine.settings.retention_days * 86400)
        store.cache_put("meta", "gc_at", repr(now))

    def _sweep_temp_files(self) -> None:
        """Remove temporary files a killed write left (``fsio.sweep_temp_files``): a tree walk
        at most once a minute per store, since a file is only stale after ``STALE_AFTER``."""
        now = time.time()
        store = self.engine.store
        last = store.cache_get("meta", "sweep_at")
        if last is not None and now - float(last) < STALE_AFTER:
            return
        sweep_temp_files(self.engine.root, now=now)
        store.cache_put("meta", "sweep_at", repr(now))


def _warn(message: str) -> None:
    import logging  # on first use

    logging.getLogger("filecache").warning("filecache: warning: %s", message)
