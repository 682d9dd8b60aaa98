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

from filecache.store.store import Store

__all__ = ["KEY_ENV", "Seal", "default_seal", "key_path"]

KEY_ENV = "FILECACHE_KEY"
_SUFFIX = "+s1"  # the sealed form's namespace suffix (s1: HMAC-SHA256, 128-bit tags)
_TAG_HEX = 32
_VERIFIED_MAX = 65_536  # tags verified per process, remembered (a bounded set)


def key_path() -> Path:
    """Where the user's key file lives (whether or not it exists yet): the one key of
    ``filecache.secrecy`` (keyed versions of denied files), from which the seal's is derived."""
    from filecache.secrecy import default_key_file

    path = default_key_file()
    return path if path is not None else Path.home() / ".config" / "filecache" / "key"


def _load_key() -> bytes:
    """The seal's key, derived from the machine's one key (``FILECACHE_KEY``, else
    ``FILECACHE_KEY_FILE``, else the user's key file, made 0600 on first use)."""
    from filecache.secrecy import secret_key

    given = os.environ.get(KEY_ENV)
    if given:
        return hashlib.sha256(b"filecache key\0" + given.encode("utf-8")).digest()
    base = secret_key(os.environ.get("FILECACHE_KEY_FILE"), None)
    return hashlib.sha256(b"filecache seal\0" + base).digest()


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

    def get(self, store: Store, namespace: str, key: str) -> str | None:
        """The sealed value of ``namespace``/``key``, or None (absent, or its tag is wrong)."""
        stored = store.cache_get(namespace + _SUFFIX, key)
        if stored is None or len(stored) < _TAG_HEX + 1 or stored[_TAG_HEX] != ":":
            return None
        tag, value = stored[:_TAG_HEX], stored[_TAG_HEX + 1 :]
        if not hmac.compare_digest(tag, self.tag(namespace, key, value)):
            return None
        return value

    def put(self, store: Store, namespace: str, key: str, value: str) -> None:
        """Store ``value`` sealed under ``namespace``/``key`` (replacing any row there)."""
        store.cache_put(namespace + _SUFFIX, key, f"{self.tag(namespace, key, value)}:{value}")

    def put_tag(self, store: Store, namespace: str, key: str, *parts: str | bytes) -> None:
        """Store the tag of ``parts`` (a row kept elsewhere: a blob, a projection)."""
        tag = self.tag(namespace, key, *parts)
        store.cache_put(namespace + _SUFFIX, key, tag)
        self._remember(tag)

    def check_tag(self, store: Store, namespace: str, key: str, *parts: str | bytes) -> bool:
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
_default_source: tuple[str | None, str | None, Path] | None = None
_default_lock = threading.Lock()


def default_seal() -> Seal:
    """The process's seal: its key from ``FILECACHE_KEY`` or the user's key file (read again
    when either changes, as tests do)."""
    global _default, _default_source
    source = (os.environ.get(KEY_ENV), os.environ.get("FILECACHE_KEY_FILE"), key_path())
    with _default_lock:
        if _default is None or _default_source != source:
            _default, _default_source = Seal(_load_key()), source
        return _default
