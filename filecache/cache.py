"""``FileCache``: the read cache over one root — settings, store, versions in memory, tokens.

Sessions (``session.py``) answer reads from it; ``FileCache`` holds what they share: decoded
versions (an LRU, blobs written to the store off the read path), token counts per version and
range, and outlines per version.

Invariants: a version's lines in memory are the decoded bytes of that version (keyed by its
hash); token counts are cached per (version, range, format); nothing here decides an answer.
With ``watch=True`` a watcher (``filecache.watch``) marks every file changed on disk in every
live session of this cache; each session decides what its model is told (``outside.py``).

Concurrency: ``self._lock`` guards this object's own maps only and is never held while waiting
for a store, session or path lock (a thread holding a path lock may need it). One ``Session``
object per id per cache (``session(id)`` twice gives the same
object; other caches and processes share it through the store). ``path_lock(rel)`` is the lock
every write and edit holds from reading a file to replacing it: a record lock on
``paths.lock`` in the root's store folder (whatever store is used, so every filecache process
on the root takes the same one), plus the store's own lock of the same name (a shared store
extends it across machines). ``recover()`` (run on open) resolves intents that a killed
process left behind.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import (
    ConfigError,
    FileCacheError,
    MissingFileError,
    OutsideRootError,
    RequestError,
)
from .fsio import Located, locate, read_bytes
from .hashing import version_of
from .results import ReadResult, Source, WriteResult, content_text
from .session import Session
from .settings import Settings, load_settings
from .store import Event, Store, default_store_path, open_store
from .text import join_lines, split_lines
from .tokens import TokenCounter

if TYPE_CHECKING:
    from .outline import Outline
    from .watch import Change, Watcher

__all__ = ["FileCache", "ReadResult", "Session", "WriteResult"]


_LINES_BUDGET = 64 * 1024 * 1024  # characters of decoded versions kept in memory
_TOKEN_COUNTS_MAX = 100_000  # (version, range) token counts kept in memory (the store has all)


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
        self.root = root_path
        self.settings: Settings = load_settings(root_path, settings)
        self.store: Store = open_store(
            root_path, store if store is not None else self.settings.store
        )
        self.tokens = TokenCounter(self.settings.tokenizer)
        self._protected = _store_files(self.store)
        self._lock = threading.RLock()
        self._lines: OrderedDict[str, list[str]] = OrderedDict()
        self._lines_size = 0
        self._token_counts: dict[tuple[str, int, int, bool], int] = {}
        self._stored: set[str] = set()
        self._pending: set[str] = set()
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._path_locks: Path | None = None
        self.watcher: Watcher | None = None
        self._collect_garbage()
        self.recover()
        if self.settings.watch:
            self.watch()

    def locate(self, path: str | Path) -> Located:
        """``path`` confined to the root, refusing the store's own files wherever they are."""
        loc = locate(self.root, path)
        if loc.real in self._protected:
            raise OutsideRootError(f"{loc.rel}: filecache's own store is not served or written")
        return loc

    def session(self, session_id: str | None = None) -> Session:
        """A session: one model context. A known id continues that session from the store.

        The same id gives the same object while it is alive; another cache or process with the
        same id and store shares the session (each call catches up with the store first).
        """
        sid = session_id or self.settings.session or "s-" + os.urandom(6).hex()
        with self._lock:
            session = self._sessions.get(sid)
        if session is not None:
            return session
        made = Session(self, sid)  # not under self._lock: it writes to the store
        with self._lock:
            return self._sessions.setdefault(sid, made)

    @contextlib.contextmanager
    def path_lock(self, rel: str) -> Iterator[None]:
        """Exclusive across threads and processes (and, with a shared store, machines) for the
        file ``rel``: held by a write or edit from reading the file to replacing it."""
        from .locks import lock_file

        with self._lock:
            if self._path_locks is None:
                self._path_locks = default_store_path(self.root).with_name("paths.lock")
            where = self._path_locks
        name = f"path:{self.root}\0{rel}"
        with lock_file(where).hold(name), self.store.lock(name):
            yield

    def recover(self) -> int:
        """Resolve the intents of writes to this root that died before they were committed.

        An intent whose call was committed is dropped. Otherwise, if the file holds the bytes the
        write meant to write, the replace happened but was never confirmed to the model: it is
        recorded as a ``change`` (the model's next read gets a diff); if not, nothing happened.
        Each is resolved under its session's and path's locks, so a write still running in
        another process is never taken for a dead one. Returns how many were resolved.
        """
        resolved = 0
        for intent in self.store.intents(str(self.root)):
            with self.store.lock(f"session:{intent.session_id}"), self.path_lock(intent.path):
                if intent not in self.store.intents(str(self.root)):
                    continue  # its writer finished meanwhile
                events = self.store.events(intent.session_id)
                if not any(e.call_id == intent.call_id for e in events):
                    try:
                        data: bytes | None = read_bytes(self.locate(intent.path), None)
                    except MissingFileError:
                        data = None
                    except FileCacheError:
                        data = None
                    if data is not None and version_of(data) == intent.after:
                        head = events[-1].seq if events else 0
                        self.store.commit(
                            intent.session_id,
                            head,
                            [
                                Event(
                                    intent.session_id,
                                    head + 1,
                                    intent.call_id + "~recovered",
                                    "change",
                                    intent.path,
                                    version=intent.after,
                                    base_version=intent.before,
                                    kind="changed",
                                )
                            ],  # fmt: skip
                            {},
                        )
                self.store.drop_intent(intent.session_id, intent.call_id)
                resolved += 1
        return resolved

    def watch(self) -> Watcher:
        """Watch the root for files changed outside the agent (also ``watch=True``); idempotent.

        Each live session that holds a changed file starts its next answer with a notice and
        the diff from its model's version. The store's own files and VCS folders are ignored.
        """
        from .watch import Watcher

        with self._lock:
            if self.watcher is None:
                self.watcher = Watcher(
                    self.root,
                    self._changed,
                    debounce=self.settings.watch_debounce,
                    ignore=sorted(self._protected),  # the store's files, however it was given
                ).start()
            return self.watcher

    def _changed(self, changes: Sequence[Change]) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            for change in changes:
                session.note_external_change(change.path)

    def close(self) -> None:
        """Stop the watcher, flush pending blobs and close the store."""
        if self.watcher is not None:
            self.watcher.stop()
        self.flush()
        self.store.close()

    def __enter__(self) -> FileCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def denied(self, rel: str) -> bool:
        """Whether ``rel`` matches the deny-list (hashed, never stored)."""
        name = rel.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(rel, p) for p in self.settings.deny)

    def _collect_garbage(self) -> None:
        now = time.time()
        last = self.store.cache_get("meta", "gc_at")
        if last is not None and now - float(last) < 86400:
            return
        self.store.gc(now - self.settings.retention_days * 86400)
        self.store.cache_put("meta", "gc_at", repr(now))

    def remember(self, version: str, lines: list[str], storable: bool) -> None:
        """Keep a version's lines in memory; a storable one reaches the store's blobs later.

        Blobs are written off the read path: when a version leaves memory, on ``flush()`` and on
        ``close()``. A blob lost to a crash only costs content instead of a diff later.
        """
        with self._lock:
            if version not in self._lines:
                self._lines[version] = lines
                self._lines_size += sum(map(len, lines))
                if storable and version not in self._stored:
                    self._pending.add(version)
                while self._lines_size > _LINES_BUDGET and len(self._lines) > 1:
                    old_version, old = self._lines.popitem(last=False)
                    self._lines_size -= sum(map(len, old))
                    self._store_blob(old_version, old)
            else:
                self._lines.move_to_end(version)

    def _store_blob(self, version: str, lines: list[str]) -> None:
        if version in self._pending:
            self._pending.discard(version)
            self.store.put_blob(version, join_lines(lines).encode("utf-8"))
            self._stored.add(version)

    def flush(self) -> None:
        """Write the blobs of versions seen so far to the store."""
        with self._lock:
            for version in list(self._pending):
                self._store_blob(version, self._lines[version])

    def held_lines(self, version: str) -> list[str] | None:
        """A version's lines if they are in memory (the store is not asked), else None."""
        with self._lock:
            lines = self._lines.get(version)
            if lines is not None:
                self._lines.move_to_end(version)
            return lines

    def lines_of(self, version: str) -> list[str] | None:
        """A held version's lines: from memory, else from the store's blob, else None."""
        lines = self.held_lines(version)
        if lines is not None:
            return lines
        blob = self.store.get_blob(version)
        if blob is None:
            return None
        lines = split_lines(blob.decode("utf-8"))
        self.remember(version, lines, False)
        return lines

    def outline_of(self, version: str, path: str, lines: list[str] | None = None) -> Outline:
        """The outline of a version (parsed once per version and outline code revision)."""
        # Outlines are imported on first use: tree-sitter and the outline revision (a digest of
        # the grammar package and query files) are not needed to import filecache or to read.
        from .outline import cached_outline, language_for_path

        held = lines if lines is not None else self.lines_of(version)
        if held is None:
            raise RequestError(f"{path}: version {version} is no longer stored; read the file")
        return cached_outline(
            version, lambda: join_lines(held).encode("utf-8"), language_for_path(path)
        )

    def outline_text(
        self, version: str, path: str, lines: list[str] | None = None, tokens_full: int = 0
    ) -> str:
        """The rendered outline of a stored version, at most a fifth of the file's tokens.

        Cached in the store by (version, outline revision, path, token budget): the pruning pass
        calls this for its middle tier, and a second call costs no parse.
        """
        from .outline import OUTLINE_VERSION, render_outline  # on first use (see outline_of)

        key = f"{version}:{OUTLINE_VERSION}:{path}:{tokens_full}"
        cached = self.store.cache_get("outline", key)
        if cached is not None:
            return cached
        outline = self.outline_of(version, path, lines)
        text = render_outline(outline, path, tokens_full // 5 if tokens_full else None)
        self.store.cache_put("outline", key, text)
        return text

    def count(self, text: str) -> int:
        return self.tokens.count(text)

    def plain_tokens(self, src: Source, start: int, end: int) -> int:
        """Tokens of the plain read of ``start..end`` (counted once per version and range)."""
        key = (src.version, start, end, src.numbered)
        with self._lock:
            cached = self._token_counts.get(key)
        if cached is not None:
            return cached
        skey = f"{src.version}:{start}:{end}:{int(src.numbered)}:{self.tokens.encoding}"
        stored = self.store.cache_get("tokens", skey)
        if stored is not None:
            n = int(stored)
        else:
            n = self.count(content_text(src, start, end))
            if not self.denied(src.path):  # a deny-listed file leaves nothing in the store
                self.store.cache_put("tokens", skey, str(n))
        with self._lock:
            if len(self._token_counts) >= _TOKEN_COUNTS_MAX:  # a long-lived server: bound it
                self._token_counts.clear()
            self._token_counts[key] = n
        return n


def _store_files(store: Store) -> frozenset[Path]:
    """A SQLite store's database file and its journals (wherever the store lives)."""
    path = getattr(store, "path", None)
    if not isinstance(path, Path):
        return frozenset()
    base = path.resolve()
    suffixes = ("-wal", "-shm", "-journal", ".lock")
    return frozenset([base, *(base.with_name(base.name + s) for s in suffixes)])
