"""Writes the blobs of versions that leave a cache's memory, in one background thread.

Compressing and inserting a version's bytes (~1 ms per 100 KB) is work the read that evicted it
should not wait for. ``BlobWriter.put`` queues the version's lines; a daemon thread joins,
compresses (``Store.put_blob``) and stores them, oldest first.

Invariants and ownership:
- The queue and the first storage error are owned by the writer's condition; the store is
  thread-safe (``Store`` protocol), so the thread calls it directly.
- A queued version stays readable through ``lines`` until its blob is in the store, so a diff
  base is never missing in between.
- The queue is bounded (``max_bytes`` of queued text): past it, ``put`` writes in the caller, so
  memory stays bounded when the store is slower than the reads.
- ``needed(version)``, when given, is asked by the thread (holding none of the writer's locks)
  just before a write: a version nothing needs is dropped unwritten.
- ``drain`` waits until every queued blob is stored and raises the first ``StoreError`` the
  thread met (a lost blob only costs content instead of a diff later, but it is not hidden).
- The thread holds the GIL only in short stretches: it encodes a version in chunks of
  ``_CHUNK`` lines and yields between them, and compression and SQLite release the GIL. A read
  that wants the GIL back (after a file read or a store call) waits for one chunk, not for the
  whole encoding (CPython hands the GIL over only when its holder releases it or after the 5 ms
  switch interval).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from filecache.core.text import EOF_MARK
from filecache.errors import FileCacheError
from filecache.store.seal import Seal
from filecache.store.store import Store

__all__ = ["BlobWriter", "encode_lines"]

_CHUNK = 2048  # lines encoded per GIL stretch (~60 us): fewer yields, fewer waits to get it back


class BlobWriter:
    """A background writer of content blobs into ``store``."""

    def __init__(
        self,
        store: Store,
        max_bytes: int,
        needed: Callable[[str], bool] | None = None,
        seal: Seal | None = None,
    ) -> None:
        self._store = store
        self._seal = seal  # tags each blob (``seal.py``): a blob without its tag is not used
        self._needed = needed
        self._max_bytes = max_bytes
        self._cond = threading.Condition()
        self._queue: OrderedDict[str, tuple[list[str], int]] = OrderedDict()
        self._queued_bytes = 0
        self._busy: tuple[str, list[str]] | None = None  # the blob being written now
        self._error: FileCacheError | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def put(self, version: str, lines: list[str], size: int) -> None:
        """Store ``version``'s blob soon; ``size``: its memory, counted against the bound."""
        with self._cond:
            if not self._closed and self._queued_bytes + size <= self._max_bytes:
                if version not in self._queue:
                    self._queue[version] = (lines, size)
                    self._queued_bytes += size
                    self._start()
                    self._cond.notify_all()
                return
        self._write(version, lines)  # over the bound (or closed): in the caller

    def lines(self, version: str) -> list[str] | None:
        """A queued (not yet stored) version's lines, else None."""
        with self._cond:
            queued = self._queue.get(version)
            if queued is not None:
                return queued[0]
            if self._busy is not None and self._busy[0] == version:
                return self._busy[1]
            return None

    def drain(self) -> None:
        """Wait until every queued blob is stored; raise the first storage error met."""
        with self._cond:
            while self._queue or self._busy is not None:
                if self._thread is None or not self._thread.is_alive():
                    break  # no thread (never started, or gone): write the rest here
                self._cond.wait()
            rest = list(self._queue.items())
            self._queue.clear()
            self._queued_bytes = 0
            error, self._error = self._error, None
        for version, (lines, _) in rest:
            self._write(version, lines)
        if error is not None:
            raise error

    def close(self) -> None:
        """Drain, then stop the thread; later ``put`` calls write in the caller."""
        try:
            self.drain()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
                thread = self._thread
            if thread is not None:
                thread.join()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="filecache-blob-writer", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                version, (lines, size) = self._queue.popitem(last=False)
                self._queued_bytes -= size
                self._busy = (version, lines)
            try:
                if self._needed is None or self._needed(version):
                    self._write(version, lines, yielding=True)
            except FileCacheError as exc:
                with self._cond:
                    self._error = self._error or exc
            finally:
                with self._cond:
                    self._busy = None
                    self._cond.notify_all()

    def _write(self, version: str, lines: list[str], *, yielding: bool = False) -> None:
        data = encode_lines(lines, yielding=yielding)
        self._store.put_blob(version, data)
        if self._seal is not None:
            self._seal.put_tag(self._store, "blob", version, data)


def encode_lines(lines: list[str], *, yielding: bool = False) -> bytes:
    """``join_lines(lines).encode("utf-8")``, built in chunks; ``yielding``: release the GIL
    between chunks (``time.sleep(0)``) so that other threads get it back at once."""
    parts = []
    for i in range(0, len(lines), _CHUNK):
        parts.append("\n".join(lines[i : i + _CHUNK]).encode("utf-8"))
        if yielding:
            time.sleep(0)
    data = b"\n".join(parts)
    if not data:
        return data
    mark = EOF_MARK.encode("utf-8")
    return data[: -len(mark)] if data.endswith(mark) else data + b"\n"
