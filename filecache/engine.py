"""``Engine``: the parts of one root's read cache, in one frozen record.

``FileCache`` builds one per root (``cache.engine``) and hands it to each ``Session``
(``Session(engine, id)``, ``session.engine``); whatever needs a part of the cache reaches it
here, by name: ``engine.store``, ``engine.secrets.denied(path)``, ``engine.paths.locate(path)``.

- ``root``: the resolved root directory; ``settings``: its settings (``filecache.settings``);
- ``store``: the ``Store`` every session of the root commits to;
- ``paths``: paths confined to the root, the store's files refused (``fsio.Paths``);
- ``locks``: the lock a write or edit holds on a file from reading it to replacing it
  (``store.locks.PathLocks``);
- ``seal``: what tags the store's blobs and cached values (``store.seal``);
- ``secrets``: the root's denied files and secret versions (``secrecy.Secrets``);
- ``versions``, ``counts``, ``outlines``: decoded versions and their blobs, token counts,
  outlines (``sources``).

Invariants: the record never changes once built (each part owns its own state and lock), and
it holds no session. The one question a part asks the ``FileCache`` that built it is
``Versions``' ``needed``: from the blob writer's thread, off the read path, whether a live
session still holds a version that left memory (only the cache knows its sessions).
"""

from __future__ import annotations

from pathlib import Path

from filecache.core.records import record
from filecache.fsio import Paths
from filecache.secrecy import Secrets
from filecache.settings import Settings
from filecache.sources import Counts, Outlines, Versions
from filecache.store.locks import PathLocks
from filecache.store.seal import Seal
from filecache.store.store import Store

__all__ = ["Engine"]


@record(kw_only=True, eq=False)
class Engine:
    """One root's parts (module docstring); built by ``FileCache``."""

    root: Path
    settings: Settings
    store: Store
    paths: Paths
    locks: PathLocks
    seal: Seal
    secrets: Secrets
    versions: Versions
    counts: Counts
    outlines: Outlines
