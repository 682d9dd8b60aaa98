"""Secrets by identity and by content: what filecache knows of a root's denied files.

The deny-list (``settings.deny``) names files whose content is never stored in any form. Names
alone are not enough: a hard link to ``.env`` under another name is the same file, and a shell
command prints it without naming it (``cat .e*``, ``cat "$(ls -a | grep en)"``). A
``SecretIndex`` holds, in this process's memory only (never in a store):

- the identities ``(st_dev, st_ino)`` of the root's denied files: every file read by a denied
  name (its own, an alias, a link's target) and every file the walk finds under a denied name
  (a link with a denied name counts for its target);
- the lines of their content (every version this process read, and what the walk read), for
  ``reveals``: a text that holds one of those lines (stripped, at least ``MIN_LINE`` characters)
  is a secret's output. Substring matching, so ``cat -n``'s numbers and ``grep``'s ``path:``
  prefixes do not hide a line.

Limits (said in docs/secrets.md): a line shorter than ``MIN_LINE`` characters is
not looked for; output that transforms the content (``base64``, ``tr``, a part of a line)
is not recognised; content a denied file held before this process and never seen by it since
is unknown; the walk skips VCS folders, ``node_modules``, virtual environments (a vendored
``cacert.pem`` is no secret, and its 3,500 lines would be searched for in every output) and the
store, and stops after ``fsio.SWEEP_MAX_ENTRIES`` names. A false match only costs what is not
stored. ``reveals`` remembers its answer per text (by xxh3) until the lines change, so a
transcript's results are searched once, not on every pruning pass.

When the walk runs: for ``reveals``, at most once per ``REWALK_AFTER`` seconds, or 10 times
the last walk's time if longer (a walk stops after 100,000 names: about 2 s on 2 busy cores
for a root holding ``/usr``, 10 ms for this repository); for a read of a
file with more than one hard link that is not known, when the file's ``st_ctime`` (which a new
link or rename sets) is not older than the last walk.

``secret_key`` is the key of keyed versions (``core.hashing.keyed_version``): derived from the
key of sealed store rows (``store.seal``: ``FILECACHE_KEY``, which a fleet sets to one value on
every machine, else ``$XDG_CONFIG_HOME/filecache/key``), so one key file serves both; or, with
``settings.key_file`` set and no ``FILECACHE_KEY``, 32 random bytes in that file, made on first
use with mode 0600 and refused inside the root. Where no key file can be kept, a key for this
process only (denied files then get content, never a FileRef, in other processes).

``Secrets`` is what a ``FileCache`` (and the sessions it hands it to) knows of one root's
denied files: whether a path or a version is denied, the keyed version of a denied file's
bytes (``version_for``), the digests the ledger keeps, the key and the seal of filecache's own
lines. A version read from a denied path is secret: nothing derived from it is stored (the
parts that store things ask ``marked``/``secret``: ``sources.Versions`` before it writes a
pending blob). The store keeps a keyed hash of its content's hash (never the content), so
bytes equal to it, read under any name by any later object or process, are secret too
(``cp .env copy.txt``: the copy rule across hook calls).

Concurrency: ``SecretIndex._lock`` guards its maps; a walk runs under it. ``Secrets._lock``
guards its sets and memo; it calls nothing outside this module while held.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import xxhash

from filecache.core.hashing import KEYED, keyed_digest, keyed_version, version_of
from filecache.errors import ConfigError, StoreError
from filecache.fsio import STORE_DIR, SWEEP_MAX_ENTRIES, Located
from filecache.settings import Settings, deny_pattern
from filecache.store.seal import KEY_ENV, default_seal
from filecache.store.store import KvStore

__all__ = [
    "MIN_LINE",
    "REWALK_AFTER",
    "SecretIndex",
    "Secrets",
    "holds_private_key",
    "secret_key",
    "secret_lines",
]

MIN_LINE = 6
"""Characters (stripped) a denied file's line needs to be looked for in output: shorter lines
(``}``, ``fi``, empty ones) are everywhere."""

REWALK_AFTER = 2.0
"""Seconds a walk of the root for denied names stays fresh for ``reveals``."""

_READ_MAX = 1 << 20  # bytes of one denied file the walk reads for its lines
_LINES_MAX = 20_000  # lines remembered in all (a root full of keys must not fill memory)
_SKIP = frozenset(
    {".git", ".hg", ".svn", STORE_DIR, "node_modules", ".venv", "venv", ".tox", ".nox",
     "site-packages", "__pycache__"}
)  # fmt: skip
_MEMO_MAX = 4096  # texts whose answer ``reveals`` remembers
_COPIES = "denied-content"  # the store's namespace of denied contents' keyed identities
_CTIME_SLACK_NS = 1_000_000_000  # file-system clocks lag the wall clock by a tick


_process_key: bytes | None = None
_keys: dict[str, bytes] = {}
_keys_lock = threading.Lock()


def secret_key(key_file: str | None, root: Path | None) -> bytes:
    """The key of keyed versions (see the module docstring); a key file's is cached per file.

    Raises:
        ConfigError: ``key_file`` is inside ``root`` (a key that ships with the repository
            protects nothing).
    """
    global _process_key
    if os.environ.get(KEY_ENV) or not key_file:
        return bytes.fromhex(default_seal().tag(b"filecache: the key of denied versions"))
    path = Path(key_file).expanduser()
    if root is not None:
        with contextlib.suppress(OSError, ValueError):
            resolved = path.resolve()
            if resolved == root or root in resolved.parents:
                raise ConfigError(
                    f"key_file {path} is inside the root {root}; keep the key outside the "
                    "repository (set FILECACHE_KEY_FILE to a path in your home folder)"
                )
    with _keys_lock:
        found = _keys.get(str(path))
        if found is not None:
            return found
        key = _load_or_make(path)
        if key is None:
            if _process_key is None:
                _process_key = os.urandom(32)
            return _process_key
        _keys[str(path)] = key
        return key


def _load_or_make(path: Path) -> bytes | None:
    """The key in ``path``, made there (mode 0600, atomically) if absent; None if neither."""
    for _attempt in range(3):
        with contextlib.suppress(FileNotFoundError):
            data = path.read_bytes()
            if len(data) >= 32:
                return data[:32]
            return None  # a key file we did not make and cannot use: a key for this process
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, os.urandom(32))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # fails if another process made it first: read theirs
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
        except OSError:
            return None
    return None


_PRIVATE_KEY = re.compile(
    rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"  # PEM, PKCS#8, OpenSSH, PGP
    rb"|---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----"  # RFC 4716 (ssh.com)
    rb"|PuTTY-User-Key-File-\d+: "  # PuTTY .ppk
)


def holds_private_key(data: bytes | str) -> bool:
    """Whether ``data`` holds a private key's header (PEM ``-----BEGIN … PRIVATE KEY-----``,
    OpenSSH, PGP ``PRIVATE KEY BLOCK``, PuTTY): denied whatever the file's name."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if b"PRIVATE KEY" not in raw and b"PuTTY-User-Key-File-" not in raw:
        return False  # the common case: one fast scan, no regular expression
    return _PRIVATE_KEY.search(raw) is not None


def secret_lines(text: str) -> Iterable[str]:
    """The lines of a denied file's text worth looking for elsewhere: stripped, of at least
    ``MIN_LINE`` characters."""
    # Split on "\n" only, as a file's lines are (``core.text.split_lines``): ``splitlines``
    # also splits at form feeds, \x1c-\x1e, \x85 and \u2028, and a line it cuts into pieces
    # shorter than MIN_LINE was never looked for. A "\r" goes with ``strip``.
    for line in text.split("\n"):
        line = line.strip()
        if len(line) >= MIN_LINE:
            yield line


class SecretIndex:
    """The denied files of one root: identities and content lines (module docstring)."""

    def __init__(self, root: Path, deny: tuple[str, ...]) -> None:
        self.root = root
        self.deny = deny
        # the deny-list compiled once (``settings.deny_pattern``): a match for a lower-cased
        # denied name or relative path
        self.denied_name = deny_pattern(deny).match
        self._lock = threading.Lock()
        self._ids: set[tuple[int, int]] = set()
        self._lines: dict[str, str] = {}  # line -> the denied path it came from
        self._read: dict[tuple[int, int], tuple[int, int]] = {}  # id -> (size, mtime) read
        self._walked_ns: int | None = None  # when the last walk started (time.time_ns)
        self._rewalk_ns = 0  # no walk for ``reveals`` before then
        self._memo: dict[tuple[int, str], tuple[int, str | None]] = {}  # text -> (lines, hit)

    def learn(self, rel: str, ident: tuple[int, int] | None, text: str | None) -> None:
        """A denied file was read (or found): remember its identity and its lines."""
        with self._lock:
            if ident is not None:
                self._ids.add(ident)
            if text is not None:
                self._add_lines(rel, text)

    def _add_lines(self, rel: str, text: str) -> None:
        for line in secret_lines(text):
            if len(self._lines) >= _LINES_MAX:
                return
            self._lines.setdefault(line, rel)

    def denied_identity(self, st: os.stat_result) -> bool:
        """Whether the file of ``st`` is a denied file under another name (a hard link)."""
        ident = (st.st_dev, st.st_ino)
        with self._lock:
            if ident in self._ids:
                return True
            if st.st_nlink < 2 or not stat.S_ISREG(st.st_mode):
                return False  # its only name is the one being checked
            walked = self._walked_ns
            if walked is None or st.st_ctime_ns >= walked - _CTIME_SLACK_NS:
                self._walk()
            return ident in self._ids

    def reveals(self, text: str) -> str | None:
        """The denied path one of whose lines ``text`` holds, or None (module docstring)."""
        if not text:
            return None
        if holds_private_key(text):
            return "(a private key)"
        key = (len(text), xxhash.xxh3_64_hexdigest(text.encode("utf-8", "surrogatepass")))
        with self._lock:
            if self._walked_ns is None or time.time_ns() >= self._rewalk_ns:
                self._walk()
            known = self._memo.get(key)
            if known is not None and known[0] == len(self._lines):
                return known[1]  # lines are only ever added: the same count, the same lines
            lines = list(self._lines.items())
        hit = next((rel for line, rel in lines if line in text), None)
        with self._lock:
            if len(self._memo) >= _MEMO_MAX:
                self._memo.clear()
            self._memo[key] = (len(lines), hit)
        return hit

    def _walk(self) -> None:
        """Find the root's files with denied names (held lock): identities and lines."""
        self._walked_ns = start = time.time_ns()
        try:
            self._walk_tree()
        finally:  # a slow walk (a huge root) is not run again sooner than 10 times its cost
            took = time.time_ns() - start
            self._rewalk_ns = start + max(int(REWALK_AFTER * 1e9), 10 * took)

    def _walk_tree(self) -> None:
        seen = 0
        for here, dirs, files in os.walk(self.root, followlinks=False):
            dirs[:] = [d for d in dirs if d not in _SKIP]
            seen += len(dirs) + len(files)
            if seen > SWEEP_MAX_ENTRIES:
                dirs[:] = []
            for name in files:
                full = os.path.join(here, name)
                rel = os.path.relpath(full, self.root).replace(os.sep, "/")
                if self.denied_name(rel.lower()):
                    self._found(rel, full)

    def _found(self, rel: str, full: str) -> None:
        try:
            st = os.stat(full)  # a link with a denied name: its target is denied
        except OSError:
            return
        if not stat.S_ISREG(st.st_mode):
            return
        ident = (st.st_dev, st.st_ino)
        self._ids.add(ident)
        shape = (st.st_size, st.st_mtime_ns)
        if self._read.get(ident) == shape or st.st_size > _READ_MAX:
            return
        try:
            fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return
        try:
            data = os.read(fd, _READ_MAX)
        except OSError:
            return
        finally:
            os.close(fd)
        self._read[ident] = shape
        self._add_lines(rel, data.decode("utf-8", "replace"))


class Secrets:
    """One root's denied files and secret versions (module docstring).

    Args:
        root: the root.
        settings: its settings (``deny``, ``key_file``).
    """

    def __init__(
        self,
        root: Path,
        settings: Settings,
        store: KvStore | None = None,
    ) -> None:
        self.root = root
        self.settings = settings
        self._store = store  # where denied contents' keyed identities outlive this object
        self._lock = threading.Lock()
        self._secret: set[str] = set()  # versions of denied files (see ``denied``)
        self._secret_plain: set[str] = set()  # their xxh3 versions: in memory, never stored
        self._index = SecretIndex(root, settings.deny)
        self._denied_name = self._index.denied_name
        self._key: bytes | None = None
        self._ref_seal: str | None = None

    def denied(self, path: str | Located, version: str | None = None) -> bool:
        """Whether ``path`` matches the deny-list (its content is hashed but never stored), or
        ``version`` is secret already. Asks only: ``mark_if_denied`` also remembers.

        Matched case-insensitively on the name and the relative path, of the resolved file and
        of every alias of a ``Located`` (the path as asked, the links on the way); a ``Located``
        is also denied by its file's identity (device and inode: a hard link to a denied file,
        ``SecretIndex.denied_identity``). The names are checked by ``settings.is_denied``'s
        pattern, compiled once (``deny_pattern``).
        """
        return self._path_denied(path) or (version is not None and self.secret(version))

    def mark_if_denied(self, path: str | Located, version: str) -> bool:
        """``denied(path, version)``, and a ``version`` read from a denied ``path`` is
        remembered as secret: no blob, outline, token count, archive or projection of it is
        stored, whatever path it is read by later."""
        if not self._path_denied(path):
            return self.secret(version)
        self.mark(version)
        return True

    def _path_denied(self, path: str | Located) -> bool:
        names = [path] if isinstance(path, str) else [path.rel, *path.aliases]
        return any(map(self._denied_name, map(str.lower, names))) or self._denied_identity(path)

    def _denied_identity(self, path: str | Located) -> bool:
        if isinstance(path, str):
            return False
        try:
            st = os.stat(path.real, follow_symlinks=False)
        except OSError:
            return False
        return self._index.denied_identity(st)

    @property
    def key(self) -> bytes:
        """The key of denied files' versions (``secret_key``), loaded on first use."""
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
        if not copied and self._store is not None:
            copied = self._store.cache_get(_COPIES, self._copy_key(plain)) is not None
        if not copied and not self.denied(loc) and not holds_private_key(data):
            return plain
        version = keyed_version(data, self.key)
        with contextlib.suppress(OSError):
            st = os.stat(loc.real, follow_symlinks=False)
            self._index.learn(loc.rel, (st.st_dev, st.st_ino), None)
        self._index.learn(loc.rel, None, data.decode("utf-8", "replace"))
        with self._lock:
            new = plain not in self._secret_plain
            self._secret_plain.add(plain)
        if new and not copied and self._store is not None:
            # A copy read by another process (a hook call per tool call) is known too: the
            # store keeps a keyed hash of the content's hash, never the content.
            with contextlib.suppress(StoreError):
                self._store.cache_put(_COPIES, self._copy_key(plain), "1")
        self.mark(version)
        return version

    def _copy_key(self, plain: str) -> str:
        return keyed_digest(f"filecache denied content\0{plain}", self.key)

    @property
    def ref_seal(self) -> str:
        """6 hex digits a file cannot know: a keyed hash of the root, on filecache's own lines
        in raw and shell answers (``render.render_sealed``); the same in every process on this
        machine (the key file's)."""
        if self._ref_seal is None:
            seal = self._seal_of(str(self.root))
            with self._lock:  # a seal_as meanwhile wins: never raise here
                if self._ref_seal is None:
                    self._ref_seal = seal
        return self._ref_seal

    def seal_as(self, name: str) -> None:
        """Key the seal by ``name`` instead of the root's path: a replay copies a session's
        files to a new temporary root each run, and names it by the session so that its
        answers, and their token counts, are the same in every run on this machine.

        Raises:
            ConfigError: the seal was used already (the model may hold lines sealed with it).
        """
        seal = self._seal_of(name)
        with self._lock:
            if self._ref_seal not in (None, seal):
                raise ConfigError("the seal is in use: seal_as must come before the first answer")
            self._ref_seal = seal

    def _seal_of(self, name: str) -> str:
        return keyed_digest(f"filecache seal\0{name}", self.key)[6:12]

    def mark(self, version: str) -> None:
        """Remember ``version`` as secret (read from a denied path, or a tool's output that
        printed a denied file's lines)."""
        with self._lock:
            self._secret.add(version)

    def marked(self, version: str) -> bool:
        """Whether this object marked ``version`` secret (``secret`` also knows keyed ones)."""
        return version in self._secret

    def digest(self, text: str, keyed: bool) -> str:
        """The hash the ledger keeps of an answer or argument: keyed for a denied file's."""
        return keyed_digest(text, self.key) if keyed else version_of(text.encode("utf-8"))

    def reveals(self, text: str) -> str | None:
        """The denied file whose lines ``text`` holds (a tool's output that printed it under
        another name: ``cat .e*``), or None; such text is never stored (``SecretIndex``)."""
        return self._index.reveals(text)

    def secret(self, version: str) -> bool:
        """Whether ``version`` was read from a denied path (nothing derived from it is stored):
        one this object marked, or any keyed version (another process's, from the store)."""
        return version.startswith(KEYED) or version in self._secret
