"""``FileCache``: the read cache over one root — settings, store, versions in memory, tokens.

Sessions (``session.py``) answer reads from it; ``FileCache`` holds what they share: decoded
versions (an LRU bounded by ``Settings.memory_mb``; blobs are written to the store off the read
path, by ``BlobWriter``'s thread or on ``flush``), token counts per version and range, and
outlines per version.

Invariants: a version's lines in memory are the decoded bytes of that version (keyed by its
hash); token counts are cached per (version, range, format); nothing here decides an answer.
A version read from a denied path (``denied``: the deny-list, case-insensitive, on the path, its
aliases and a link's target; or the file's identity, device and inode, is a denied file's, as
a hard link's is) is secret for this object's life: no blob, outline or token count of it is
written to the store, and its version is keyed (``version_for``: ``keyed:``, a BLAKE2b keyed
with ``secrecy.secret_key``), so no stored hash gives its content back. Bytes equal to a
secret version's are secret under any name; ``reveals`` finds a denied file's lines in a tool's
output (``secrecy.SecretIndex``, in memory only). Opening sweeps temporary files a killed write
left in the root (``fsio.sweep_temp_files``, at most once a minute per store).

Counts on the read path are ``tokens.fast_estimate``-s unless ``Settings.exact_counts``: then
the BPE vocabulary is loaded on the first count and exact counts are cached in the store.
``FileCache._lock`` owns the LRU, its sizes and the pending/stored sets.
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
import os
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from itertools import filterfalse
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import xxhash

from filecache.core.hashing import KEYED, keyed_digest, keyed_version, version_of
from filecache.core.results import ReadResult, Source, WriteResult, content_text
from filecache.core.text import content_header, join_lines, split_lines
from filecache.core.tokens import ESTIMATE_MARGIN, TokenCounter, fast_estimate, fast_estimate_text
from filecache.errors import (
    ConfigError,
    FileCacheError,
    MissingFileError,
    OutsideRootError,
    RequestError,
    StoreError,
)
from filecache.fsio import STALE_AFTER, Located, locate, read_bytes, sweep_temp_files
from filecache.secrecy import SecretIndex, secret_key
from filecache.session import Session
from filecache.settings import Settings, is_denied, load_settings
from filecache.store.blob_writer import BlobWriter
from filecache.store.opening import open_store
from filecache.store.seal import default_seal
from filecache.store.store import Event, Store, default_store_path, fallback_store_folder

if TYPE_CHECKING:
    from filecache.outline.outline import Outline
    from filecache.watch import Change, Watcher

__all__ = ["ROOT_SEPARATOR", "FileCache", "ReadResult", "Session", "WriteResult"]

ROOT_SEPARATOR = "#"
"""Between a session id and its root's hash, in the stored id of a session on a root that is not
its store's home root (``FileCache.session``)."""


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
        self._tokens = TokenCounter(self.settings.tokenizer)  # no vocabulary loaded yet
        self._protected = _store_files(self.store)
        self._protected_names = frozenset(map(str, self._protected))  # str: no Path hash per call
        self._lock = threading.RLock()
        self._lines: OrderedDict[str, list[str]] = OrderedDict()
        self._shapes: dict[str, _Shape] = {}  # per held version: chars, extra bytes, memory
        self._lines_size = 0
        self._budget = int(self.settings.memory_mb * 1024 * 1024)
        self.seal = default_seal()  # what the store holds is used only when it verifies
        self._writer = BlobWriter(
            self.store, max(self._budget // 4, 1 << 20), self._needed, self.seal
        )
        self._token_counts: dict[tuple[str, int, int, bool], int] = {}
        self._stored: set[str] = set()
        self._pending: set[str] = set()
        self._secret: set[str] = set()  # versions of denied files (see ``denied``)
        self._secret_plain: set[str] = set()  # their xxh3 versions: in memory, never stored
        self._secrets = SecretIndex(root_path, self.settings.deny)
        self._key: bytes | None = None
        self._ref_seal: str | None = None
        self._deny_memo: dict[str, bool] = {}  # names matched against settings.deny
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._path_locks: Path | None = None
        self._stored_ids: dict[str, str] = {}  # session id given -> stored (a claim holds)
        self.watcher: Watcher | None = None
        self._collect_garbage()
        self.recover()
        self._sweep_temp_files()
        if self.settings.watch:
            self.watch()

    def locate(self, path: str | Path) -> Located:
        """``path`` confined to the root, refusing the store's own files wherever they are."""
        loc = locate(self.root, path)
        if str(loc.real) in self._protected_names:
            raise OutsideRootError(f"{loc.rel}: filecache's own store is not served or written")
        return loc

    def session(self, session_id: str | None = None) -> Session:
        """A session: one model context. A known id continues that session from the store.

        The same id gives the same object while it is alive; another cache or process with the
        same id, root and store shares the session (each call catches up with the store first).
        On a root other than the one that first used the id in this store, the session is
        stored as ``ID#<root hash>`` (``session.id``): one id on two roots of one store names
        two sessions.
        """
        given = session_id or self.settings.session or "s-" + os.urandom(6).hex()
        sid = self._stored_session_id(given)
        with self._lock:
            session = self._sessions.get(sid)
        if session is not None:
            return session
        made = Session(self, sid)  # not under self._lock: it writes to the store
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
        suffix = ROOT_SEPARATOR + xxhash.xxh3_64_hexdigest(str(self.root).encode())[:8]
        bare = given.removesuffix(suffix)
        if bare != given and ROOT_SEPARATOR not in bare:
            return given
        if ROOT_SEPARATOR in given:
            raise RequestError(
                f"session id {given[:60]!r}: '{ROOT_SEPARATOR}' is reserved (it marks a "
                "session's form on another root of a shared store); choose an id without it"
            )
        with self.store.lock(f"claim:{given}"):
            owner = self.store.cache_get("session-root", given)
            if owner is None:
                owner = str(self.root)
                self.store.cache_put("session-root", given, owner)
        stored = given if owner == str(self.root) else given + suffix
        with self._lock:
            if len(self._stored_ids) >= 4096:
                self._stored_ids.clear()
            self._stored_ids[given] = stored
        return stored

    @contextlib.contextmanager
    def path_lock(self, rel: str) -> Iterator[None]:
        """Exclusive across threads and processes (and, with a shared store, machines) for the
        file ``rel``: held by a write or edit from reading the file to replacing it."""
        from filecache.store.locks import lock_file

        with self._lock:
            if self._path_locks is None:
                try:
                    self._path_locks = default_store_path(self.root).with_name("paths.lock")
                except StoreError:  # a linked store folder (a store named elsewhere is used)
                    folder = fallback_store_folder(self.root)
                    folder.mkdir(parents=True, exist_ok=True)
                    self._path_locks = folder / "paths.lock"
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
                    if data is not None and self._recovered(intent.path, data) == intent.after:
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

    def _recovered(self, rel: str, data: bytes) -> str | None:
        try:
            return self.version_for(self.locate(rel), data)
        except FileCacheError:
            return None

    # -- conversations and decorators (filecache/conversations.py, decorators.py) ------------

    def conversation(self, session_id: str | Session) -> contextlib.AbstractContextManager[Session]:
        """Bind ``session_id``'s session to this thread or task: ``with cache.conversation(id):``.

        Tools decorated with this ``FileCache`` answer from the bound session; with none bound
        they raise ``ConfigError`` (see ``filecache.conversations``)."""
        from filecache.conversations import conversation

        return cast("contextlib.AbstractContextManager[Session]", conversation(self, session_id))

    def read_tool(self, fn: Any = None, /, **options: Any) -> Any:
        """``Session.read_tool`` for the conversation bound where the tool is called."""
        from filecache.decorators import read_tool

        return read_tool(self, fn, **options)

    def edit_tool(self, fn: Any = None, /, **options: Any) -> Any:
        """``Session.edit_tool`` for the conversation bound where the tool is called."""
        from filecache.decorators import edit_tool

        return edit_tool(self, fn, **options)

    def write_tool(self, fn: Any = None, /, **options: Any) -> Any:
        """``Session.write_tool`` for the conversation bound where the tool is called."""
        from filecache.decorators import write_tool

        return write_tool(self, fn, **options)

    def watch(self) -> Watcher:
        """Watch the root for files changed outside the agent (also ``watch=True``); idempotent.

        Each live session that holds a changed file starts its next answer with a notice and
        the diff from its model's version. The store's own files and VCS folders are ignored.
        """
        from filecache.watch import Watcher

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
        """Stop the watcher, flush pending blobs and close the store.

        A blob that cannot be stored now (a full disk, a file-size limit, a store gone away) is
        a warning, never an error: every answer and edit was committed before, and a lost blob
        only means content instead of a diff later. So a call that succeeded never turns into a
        failure at the end (the CLI would exit non-zero after an edit it applied)."""
        if self.watcher is not None:
            self.watcher.stop()
        try:
            for step in (self.flush, self._writer.close):
                try:
                    step()
                except StoreError as exc:
                    _warn(f"some content was not kept for later diffs ({exc})")
        finally:
            self.store.close()

    @property
    def tokens(self) -> TokenCounter:
        """The exact counter (``Settings.tokenizer``); its vocabulary loads on the first count."""
        return self._tokens

    @property
    def exact(self) -> bool:
        """Whether read-path counts are exact (``Settings.exact_counts``) rather than estimates."""
        return self.settings.exact_counts

    @property
    def margin(self) -> float:
        """The fraction of estimated content an estimated answer may cost to replace it: 1 with
        exact counts, else ``tokens.ESTIMATE_MARGIN`` (see ``Session._cached_answer``)."""
        return 1.0 if self.settings.exact_counts else ESTIMATE_MARGIN

    @property
    def memory_used(self) -> int:
        """Bytes of decoded versions held in memory (what ``memory_mb`` bounds)."""
        with self._lock:
            return self._lines_size

    def __enter__(self) -> FileCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def denied(self, path: str | Located, version: str | None = None) -> bool:
        """Whether ``path`` matches the deny-list: its content is hashed but never stored.

        Matched case-insensitively on the name and the relative path, of the resolved file and
        of every alias of a ``Located`` (the path as asked, the links on the way); a ``Located``
        is also denied by its file's identity (device and inode: a hard link to a denied file,
        ``SecretIndex.denied_identity``). A denied ``version`` is remembered as secret: no
        blob, outline, token count, archive or projection of it is stored, whatever path it is
        read by later (``settings.is_denied``).
        """
        names = [path] if isinstance(path, str) else [path.rel, *path.aliases]
        if not any(map(self._denied_name, names)) and not self._denied_identity(path):
            return version is not None and self.secret(version)
        if version is not None:
            with self._lock:
                self._secret.add(version)
                self._pending.discard(version)
        return True

    def _denied_identity(self, path: str | Located) -> bool:
        if isinstance(path, str):
            return False
        try:
            st = os.stat(path.real, follow_symlinks=False)
        except OSError:
            return False
        return self._secrets.denied_identity(st)

    @property
    def key(self) -> bytes:
        """The key of denied files' versions (``secrecy.secret_key``), loaded on first use."""
        if self._key is None:
            self._key = secret_key(self.settings.key_file, self.root)
        return self._key

    def version_for(self, loc: Located, data: bytes) -> str:
        """The version of ``data`` read at ``loc``: ``version_of``, or for a denied file (by
        name or identity) or bytes equal to one's, a keyed version, remembered as secret.
        Every version of a file the session compares with goes through here."""
        plain = version_of(data)
        with self._lock:
            copied = plain in self._secret_plain
        if not copied and not self.denied(loc):
            return plain
        version = keyed_version(data, self.key)
        with contextlib.suppress(OSError):
            st = os.stat(loc.real, follow_symlinks=False)
            self._secrets.learn(loc.rel, (st.st_dev, st.st_ino), None)
        self._secrets.learn(loc.rel, None, data.decode("utf-8", "replace"))
        with self._lock:
            self._secret_plain.add(plain)
            self._secret.add(version)
            self._pending.discard(version)
        return version

    @property
    def ref_seal(self) -> str:
        """6 hex digits a file cannot know: a keyed hash of the root, on filecache's own lines
        in raw and shell answers (``render.render_sealed``); the same in every process on this
        machine (the key file's)."""
        if self._ref_seal is None:
            self._ref_seal = keyed_digest(f"filecache seal\0{self.root}", self.key)[6:12]
        return self._ref_seal

    def mark_secret(self, version: str) -> None:
        """Remember ``version`` as secret (a tool's output that printed a denied file)."""
        with self._lock:
            self._secret.add(version)
            self._pending.discard(version)

    def digest(self, text: str, keyed: bool) -> str:
        """The hash the ledger keeps of an answer or argument: keyed for a denied file's."""
        return keyed_digest(text, self.key) if keyed else version_of(text.encode("utf-8"))

    def reveals(self, text: str) -> str | None:
        """The denied file whose lines ``text`` holds (a tool's output that printed it under
        another name: ``cat .e*``), or None; such text is never stored (``SecretIndex``)."""
        return self._secrets.reveals(text)

    def _denied_name(self, name: str) -> bool:
        """``is_denied`` for the settings' deny-list, remembered per name (a glob match per
        pattern and read otherwise)."""
        found = self._deny_memo.get(name)
        if found is None:
            if len(self._deny_memo) >= 4096:
                self._deny_memo.clear()
            found = self._deny_memo[name] = is_denied(name, self.settings.deny)
        return found

    def secret(self, version: str) -> bool:
        """Whether ``version`` was read from a denied path (nothing derived from it is stored):
        one this object marked, or any keyed version (another process's, from the store)."""
        return version.startswith(KEYED) or version in self._secret

    def _collect_garbage(self) -> None:
        now = time.time()
        last = self.store.cache_get("meta", "gc_at")
        if last is not None and now - float(last) < 86400:
            return
        self.store.gc(now - self.settings.retention_days * 86400)
        self.store.cache_put("meta", "gc_at", repr(now))

    def _sweep_temp_files(self) -> None:
        """Remove temporary files a killed write left (``fsio.sweep_temp_files``): a tree walk
        at most once a minute per store, since a file is only stale after ``STALE_AFTER``."""
        now = time.time()
        last = self.store.cache_get("meta", "sweep_at")
        if last is not None and now - float(last) < STALE_AFTER:
            return
        sweep_temp_files(self.root, now=now)
        self.store.cache_put("meta", "sweep_at", repr(now))

    def remember(self, version: str, lines: list[str], storable: bool) -> None:
        """Keep a version's lines in memory; a storable one reaches the store's blobs later.

        Blobs are written off the read path: by ``BlobWriter``'s thread when a version leaves
        memory (past ``memory_mb``) and a live session still holds it (``_needed``), and on
        ``flush()`` and ``close()`` for every version still in memory. A blob lost to a crash
        only costs content instead of a diff later.
        """
        evicted: list[tuple[str, list[str], int]] = []
        with self._lock:
            if version in self._lines:
                self._lines.move_to_end(version)
                return
        shape = _shape_of(lines)  # a pass over the lines: outside the lock
        with self._lock:
            if version not in self._lines:
                self._lines[version] = lines
                self._shapes[version] = shape
                self._lines_size += shape.memory
                if storable and version not in self._stored and version not in self._secret:
                    self._pending.add(version)
                while self._lines_size > self._budget and len(self._lines) > 1:
                    old_version, old = self._lines.popitem(last=False)
                    size = self._shapes.pop(old_version).memory
                    self._lines_size -= size
                    if old_version in self._pending:  # its blob is written off the read path
                        self._pending.discard(old_version)
                        self._stored.add(old_version)
                        evicted.append((old_version, old, size))
            else:
                self._lines.move_to_end(version)
        for old_version, old, size in evicted:
            self._writer.put(old_version, old, size)

    def _needed(self, version: str) -> bool:
        """Whether a version that left memory is worth its blob: a live session's model holds
        it (the writer's thread asks, holding no lock of ours). One that none holds is dropped,
        and may be stored again if it comes back; a session continued later from the store
        then gets content instead of a diff from it (as for any lost blob)."""
        with self._lock:
            sessions = list(self._sessions.values())
        if any(session.holds_version(version) for session in sessions):
            return True
        with self._lock:
            self._stored.discard(version)
        return False

    def flush(self) -> None:
        """Write the blobs of versions seen so far to the store (and wait for queued ones)."""
        with self._lock:
            pending = [(v, self._lines[v]) for v in self._pending]
            self._pending.clear()
            self._stored.update(v for v, _ in pending)
        for version, lines in pending:
            data = join_lines(lines).encode("utf-8")
            self.store.put_blob(version, data)
            self.seal.put_tag(self.store, "blob", version, data)
        self._writer.drain()

    def held_lines(self, version: str) -> list[str] | None:
        """A version's lines if they are in memory (the store is not asked), else None."""
        with self._lock:
            lines = self._lines.get(version)
            if lines is not None:
                self._lines.move_to_end(version)
            return lines

    def lines_of(self, version: str) -> list[str] | None:
        """A held version's lines: from memory, else from the store's blob, else None."""
        lines = self.held_lines(version) or self._writer.lines(version)
        if lines is not None:
            return lines
        blob = self.store.get_blob(version)
        if blob is None or not self.seal.check_tag(self.store, "blob", version, blob):
            return None  # absent, or not what a process with our key stored: no diff from it
        lines = split_lines(blob.decode("utf-8"))
        self.remember(version, lines, False)
        return lines

    def outline_of(self, version: str, path: str, lines: Sequence[str] | None = None) -> Outline:
        """The outline of a version (parsed once per version and outline code revision)."""
        # Outlines are imported on first use: tree-sitter and the outline revision (a digest of
        # the grammar package and query files) are not needed to import filecache or to read.
        from filecache.outline.outline import cached_outline, language_for_path

        held = lines if lines is not None else self.lines_of(version)
        if held is None:
            raise RequestError(f"{path}: version {version} is no longer stored; read the file")
        return cached_outline(
            version, lambda: join_lines(held).encode("utf-8"), language_for_path(path)
        )

    def outline_text(
        self,
        version: str,
        path: str,
        lines: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """The rendered outline of a stored version.

        ``max_tokens`` is the budget of the text (o200k tokens), for the outlines DESIGN.md
        sizes: an auto-mode outline sent instead of a large file's content, and the pruner's
        middle tier. ``None`` (an explicit ``mode="outline"``) follows ``render_outline``'s own
        rule: every detail for a file of at most ``SMALL_FILE_LINES`` lines, else a fifth of the
        numbered file. Cached in the store by everything the text depends on: the version, the
        outline revision (code, renderer, grammars, queries), the path (its language and the
        header), the budget and the tokenizer that measured it. A denied file's outline is
        shown (it is what a read would show) but never stored.
        """
        # On first use (see outline_of).
        from filecache.outline.outline import OUTLINE_VERSION, language_for_path, render_outline
        from filecache.outline.outline_text import count_tokens_encoding

        secret = self.denied(path, version)
        budget = "default" if max_tokens is None else str(max_tokens)
        key = (  # the path last: it may hold ':'
            f"{version}:{OUTLINE_VERSION}:{language_for_path(path)}:{budget}:"
            f"{count_tokens_encoding()}:{path}"
        )
        cached = None if secret else self.seal.get(self.store, "outline", key)
        if cached is not None:
            return cached
        outline = self.outline_of(version, path, lines)
        text = render_outline(outline, path, max_tokens)
        if not secret:
            self.seal.put(self.store, "outline", key, text)
        return text

    def count(self, text: str) -> int:
        """Tokens of ``text``: exact with ``exact_counts``, else ``fast_estimate_text``."""
        if self.settings.exact_counts:
            return self._tokens.count(text)
        return fast_estimate_text(text, self._tokens.encoding)

    def plain_tokens(self, src: Source, start: int, end: int) -> int:
        """Tokens of the plain read of ``start..end`` (counted once per version and range).

        Without ``exact_counts`` an estimate from the range's characters, non-ASCII bytes and
        lines: the rendering is never built, so a new version costs no join and no count.
        """
        if not self.settings.exact_counts:
            return self._estimate_plain(src, start, end)
        key = (src.version, start, end, src.numbered)
        with self._lock:
            cached = self._token_counts.get(key)
        if cached is not None:
            return cached
        skey = f"{src.version}:{start}:{end}:{int(src.numbered)}:{self._tokens.encoding}"
        secret = src.version in self._secret  # a count reveals little; still, nothing stored
        stored = None if secret else self.seal.get(self.store, "tokens", skey)
        if stored is not None and stored.isdigit():
            n = int(stored)
        else:
            n = self._tokens.count(content_text(src, start, end))
            if not secret:
                self.seal.put(self.store, "tokens", skey, str(n))
        with self._lock:
            if len(self._token_counts) >= _TOKEN_COUNTS_MAX:  # a long-lived server: bound it
                self._token_counts.clear()
            self._token_counts[key] = n
        return n

    def _estimate_plain(self, src: Source, start: int, end: int) -> int:
        encoding = self._tokens.encoding
        if src.output is not None:  # a decorated tool's output is its own rendering
            return fast_estimate_text(src.output, encoding)
        total = len(src.lines)
        if end < start:
            chars = extra = lines = 0
        else:
            if start == 1 and end == total and isinstance(src.lines, list):
                with self._lock:
                    shape = self._shapes.get(src.version)
                if shape is None:
                    shape = _shape_of(src.lines)
            else:  # only the range (a streamed window of a huge file holds nothing else)
                shape = _shape_of(src.lines[start - 1 : end])
            chars, extra = shape.chars, shape.extra
            lines = end - start + 1
        body = fast_estimate(chars, extra, lines, numbered=src.numbered, encoding=encoding)
        if not src.numbered:
            return body
        header = content_header(src.path, start, end, total, src.version)
        return body + fast_estimate_text(header, encoding)


class _Shape:
    """What estimates and the memory bound need of a version's lines, computed once."""

    __slots__ = ("chars", "extra", "memory")

    def __init__(self, chars: int, extra: int, memory: int) -> None:
        self.chars = chars  # characters, without the newlines
        self.extra = extra  # UTF-8 bytes beyond one per character
        self.memory = memory  # bytes of the str objects and the list


_STR_ASCII = sys.getsizeof("")  # an ASCII str's size is this plus its length (CPython)
_LIST_SLOT = 8


def _shape_of(lines: Sequence[str]) -> _Shape:
    chars = sum(map(len, lines))
    count = len(lines)
    memory = chars + count * (_STR_ASCII + _LIST_SLOT) + 56  # as if every line were ASCII
    wide = list(filterfalse(str.isascii, lines))  # str.isascii is O(1): one C-level pass
    if not wide:
        return _Shape(chars, 0, memory)
    wide_chars = sum(map(len, wide))
    extra = sum(len(line.encode("utf-8", "surrogatepass")) for line in wide) - wide_chars
    memory += sum(map(sys.getsizeof, wide)) - wide_chars - len(wide) * _STR_ASCII
    return _Shape(chars, extra, memory)


def _store_files(store: Store) -> frozenset[Path]:
    """A SQLite store's database file and its journals (wherever the store lives)."""
    path = getattr(store, "path", None)
    if not isinstance(path, Path):
        return frozenset()
    base = path.resolve()
    suffixes = ("-wal", "-shm", "-journal", ".lock")
    return frozenset([base, *(base.with_name(base.name + s) for s in suffixes)])


def _warn(message: str) -> None:
    import logging  # on first use

    logging.getLogger("filecache").warning("filecache: warning: %s", message)
