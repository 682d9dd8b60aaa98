"""Sealed rows: what a store holds that changes an answer is trusted only under a key that the
store does not hold.

A store can come from elsewhere: a repository that ships ``.filecache/cache.db``, or another
tenant of a shared PostgreSQL database. The rows that decide what the model is shown without
being recomputed — outlines, token counts, blobs (the base of a diff) and pruning's sticky
projections — carry an HMAC-SHA256 tag under a key kept outside the store and the repository:
``FILECACHE_KEY`` (a fleet sets the same value on every machine), else a key file in the user's
config directory (``$XDG_CONFIG_HOME/filecache/key``, ``~/.config/filecache/key``), created with
mode 0600 on first use. A row whose tag does not verify is treated as absent: the derivation is
recomputed from bytes this process read, and the row replaced.

Invariants:
- A tag binds the namespace, the key and the value: a row copied to another key, or a value
  edited in place, fails. Tags are 128 bits (32 hex digits).
- Sealed rows live in namespaces of their own (``outline+s1``, ...): a release that does not seal
  never reads them, and its unsealed rows are never read here.
- No key file can be made (a read-only home): a key of this process only. Nothing it seals is
  reused by another process, and nothing is refused.
- The key is never written to a store, a log or a message.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from pathlib import Path

from filecache.store.store import KvStore

__all__ = ["KEY_ENV", "Seal", "default_seal", "key_path"]

KEY_ENV = "FILECACHE_KEY"
_SUFFIX = "+s1"  # the sealed form's namespace suffix (s1: HMAC-SHA256, 128-bit tags)
_TAG_HEX = 32
_VERIFIED_MAX = 65_536  # tags verified per process, remembered (a bounded set)


def key_path() -> Path:
    """Where the user's key file lives (whether or not it exists yet)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "filecache" / "key"


def _load_key() -> bytes:
    given = os.environ.get(KEY_ENV)
    if given:
        return hashlib.sha256(b"filecache key\0" + given.encode("utf-8")).digest()
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    except OSError:
        return _random(32)  # unreadable: a key of this process only
    import secrets  # here: only the first run on a machine makes a key (a read's start)

    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = path.with_name(f".key-{os.getpid()}-{secrets.token_hex(4)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, secrets.token_hex(32).encode("ascii") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # never replaces a key another process made meanwhile
        except FileExistsError:
            pass
        finally:
            os.unlink(temp)
        return _read_key(path)
    except OSError:
        return _random(32)


def _random(n: int) -> bytes:
    return os.urandom(n)  # what secrets.token_bytes returns


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        data = os.read(fd, 4096).strip()
    finally:
        os.close(fd)
    if len(data) < 32:
        raise OSError(f"{path}: too short to be a key")
    return hashlib.sha256(b"filecache key file\0" + data).digest()


class Seal:
    """Tags and checks sealed rows under one key (thread-safe)."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._verified: set[str] = set()
        self._lock = threading.Lock()

    def tag(self, *parts: str | bytes) -> str:
        """The tag of ``parts`` (each length-prefixed: no two lists of parts share one)."""
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        for part in parts:
            data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
            mac.update(len(data).to_bytes(8, "big"))
            mac.update(data)
        return mac.hexdigest()[:_TAG_HEX]

    def get(self, store: KvStore, namespace: str, key: str) -> str | None:
        """The sealed value of ``namespace``/``key``, or None (absent, or its tag is wrong)."""
        stored = store.cache_get(namespace + _SUFFIX, key)
        if stored is None or len(stored) < _TAG_HEX + 1 or stored[_TAG_HEX] != ":":
            return None
        tag, value = stored[:_TAG_HEX], stored[_TAG_HEX + 1 :]
        if not hmac.compare_digest(tag, self.tag(namespace, key, value)):
            return None
        return value

    def put(self, store: KvStore, namespace: str, key: str, value: str) -> None:
        """Store ``value`` sealed under ``namespace``/``key`` (replacing any row there)."""
        store.cache_put(namespace + _SUFFIX, key, f"{self.tag(namespace, key, value)}:{value}")

    def put_tag(self, store: KvStore, namespace: str, key: str, *parts: str | bytes) -> None:
        """Store the tag of ``parts`` (a row kept elsewhere: a blob, a projection)."""
        tag = self.tag(namespace, key, *parts)
        store.cache_put(namespace + _SUFFIX, key, tag)
        self._remember(tag)

    def check_tag(self, store: KvStore, namespace: str, key: str, *parts: str | bytes) -> bool:
        """Whether ``parts`` carry the tag stored for ``namespace``/``key``."""
        tag = self.tag(namespace, key, *parts)
        with self._lock:
            if tag in self._verified:
                return True
        stored = store.cache_get(namespace + _SUFFIX, key)
        if stored is None or not hmac.compare_digest(stored, tag):
            return False
        self._remember(tag)
        return True

    def _remember(self, tag: str) -> None:
        with self._lock:
            if len(self._verified) >= _VERIFIED_MAX:
                self._verified.clear()
            self._verified.add(tag)


_default: Seal | None = None
_default_source: tuple[str | None, Path] | None = None
_default_lock = threading.Lock()


def default_seal() -> Seal:
    """The process's seal: its key from ``FILECACHE_KEY`` or the user's key file (read again
    when either changes, as tests do)."""
    global _default, _default_source
    source = (os.environ.get(KEY_ENV), key_path())
    with _default_lock:
        if _default is None or _default_source != source:
            _default, _default_source = Seal(_load_key()), source
        return _default
