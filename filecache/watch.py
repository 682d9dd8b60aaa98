"""Watching a root for files changed outside the agent: a watchdog observer, debounced.

``Watcher(root, on_change)`` starts a watchdog observer on ``root`` and calls ``on_change``
with the changed files (``Change``: path relative to the root, POSIX, and what happened), from
its own thread. ``filecache watch`` prints them; ``FileCache(root, watch=True)`` marks them in
its sessions, so the next answer to a session that holds such a file starts with a notice.

Invariants:
- Paths under the store's folder (``.filecache``), under VCS folders (``.git``, ``.hg``,
  ``.svn``, ``.bzr``, ``_darcs``, ``.jj``) and under ``ignore`` never reach ``on_change``;
  directories and opens/reads do not either.
- A burst of events reaches ``on_change`` once: ``debounce`` seconds after the last event of the
  burst (and at most ``max_delay`` after its first), one ``Change`` per path, sorted. A file
  created and removed within one burst (an editor's or filecache's own temporary file) is left
  out.
- ``on_change`` runs on the watcher's thread, one batch at a time; an exception it raises is
  logged and the watcher goes on. ``wait(batches, timeout)`` lets a caller (a test) wait until
  that many batches have been delivered.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import (
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from filecache.fsio import STORE_DIR

__all__ = ["VCS_DIRS", "Change", "Watcher"]

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", ".jj"})
_log = logging.getLogger("filecache.watch")


@dataclass(frozen=True)
class Change:
    """A file changed outside the agent: ``kind`` is ``created``, ``modified`` or ``deleted``."""

    path: str
    kind: str


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            return
        if event.event_type == "moved":
            # An atomic save (temporary file moved over the target) reads as a modification.
            self.watcher._note(os.fsdecode(event.src_path), created=False)
            self.watcher._note(os.fsdecode(event.dest_path), created=False)
        elif event.event_type in ("created", "modified", "deleted"):
            self.watcher._note(os.fsdecode(event.src_path), event.event_type == "created")


class Watcher:
    """A debounced watchdog observer over one root; see the module docstring.

    Args:
        root: the directory to watch (recursively).
        on_change: called with each batch of changes.
        debounce: seconds of quiet that end a burst of events.
        max_delay: a burst that never goes quiet is delivered after this many seconds.
        ignore: more files or folders (absolute, or relative to the root) to leave out.
    """

    def __init__(
        self,
        root: str | Path,
        on_change: Callable[[Sequence[Change]], None],
        *,
        debounce: float = 0.2,
        max_delay: float = 2.0,
        ignore: Iterable[str | Path] = (),
    ) -> None:
        self.root = Path(root).resolve()
        self.on_change = on_change
        self.debounce = debounce
        self.max_delay = max(max_delay, debounce)
        self._ignored = tuple(self._relative(Path(p)) for p in ignore)
        self._cond = threading.Condition()
        self._pending: dict[str, bool] = {}  # path -> created within this burst
        self._first = self._last = 0.0
        self._stopping = False
        self._batches = 0
        self._observer = Observer()
        self._thread = threading.Thread(target=self._deliver, name="filecache-watch", daemon=True)

    def _relative(self, path: Path) -> str:
        path = path if path.is_absolute() else self.root / path
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return "\0"  # outside the root: never matches

    def ignored(self, rel: str) -> bool:
        """Whether changes to ``rel`` (relative to the root) are left out."""
        parts = rel.split("/")
        if parts[0] == STORE_DIR or any(p in VCS_DIRS for p in parts):
            return True
        return any(rel == p or rel.startswith(p + "/") for p in self._ignored)

    def start(self) -> Watcher:
        """Start watching; events after this returns are seen."""
        self._observer.schedule(
            _Handler(self),
            str(self.root),
            recursive=True,
            event_filter=[FileCreatedEvent, FileModifiedEvent, FileDeletedEvent, FileMovedEvent],
        )
        self._observer.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; a burst in progress is delivered first."""
        if self._observer.is_alive():
            self._observer.stop()
            self._observer.join()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait(self, batches: int, timeout: float) -> bool:
        """Block until at least ``batches`` batches were delivered (False on timeout)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._batches >= batches, timeout)

    @property
    def batches(self) -> int:
        """Batches delivered so far."""
        with self._cond:
            return self._batches

    def _note(self, path: str, created: bool) -> None:
        try:
            rel = Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return
        if rel == "." or self.ignored(rel):
            return
        now = time.monotonic()
        with self._cond:
            if not self._pending:
                self._first = now
            self._pending[rel] = self._pending.get(rel, False) or created
            self._last = now
            self._cond.notify_all()

    def _deliver(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending) or self._stopping)
                if not self._pending:
                    return
                while not self._stopping:
                    due = min(self._last + self.debounce, self._first + self.max_delay)
                    left = due - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                burst, self._pending = self._pending, {}
            changes = self._resolve(burst)
            if changes:
                try:
                    self.on_change(changes)
                except Exception:  # the watcher outlives a failing callback
                    _log.exception("filecache watch: on_change failed")
            with self._cond:
                self._batches += 1 if changes else 0
                self._cond.notify_all()

    def _resolve(self, burst: dict[str, bool]) -> list[Change]:
        changes: list[Change] = []
        for rel, created in sorted(burst.items()):
            exists = (self.root / rel).is_file()
            if not exists and created:
                continue  # came and went within the burst
            kind = "deleted" if not exists else "created" if created else "modified"
            changes.append(Change(rel, kind))
        return changes
