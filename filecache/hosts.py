"""What a conversation binding and a tool decorator need of a cache and a session, and the type
of ``Session.cache``.

A ``Session`` answers with the parts its ``FileCache`` hands it (``paths``, ``secrets``,
``versions``, ``counts``, ``outlines``: concrete objects of ``locations``, ``secrecy`` and
``sources``), not with ``FileCache`` methods; ``CacheHost`` names those parts and the few
``FileCache`` methods that conversations, decorators, the shell reads, pruning and replay use
through ``session.cache``. ``filecache.conversations`` and the tool decorators
(``filecache.decorators``) are reached from methods of both ``FileCache`` and ``Session``, so
they name the other side by the protocols here, never by importing ``filecache.cache`` or
``filecache.session`` (no import cycle: ``tests/test_layout.py``). ``FileCache`` and
``Session`` satisfy them (mypy checks it where they pass ``self``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from filecache.core.results import ReadResult
    from filecache.core.tokens import TokenCounter
    from filecache.fsio import Located
    from filecache.locations import Root
    from filecache.secrecy import Secrets
    from filecache.settings import Settings
    from filecache.sources import Counts, Outlines, Versions
    from filecache.store.store import Store

__all__ = ["CacheHost", "SessionHost"]


@runtime_checkable
class CacheHost(Protocol):
    """The ``FileCache`` members its sessions (and what they are passed to), conversations and
    decorated tools use."""

    root: Path
    settings: Settings
    store: Store
    # the parts a session answers with; the methods below are the cache's one-line forms of
    # theirs that conversations, decorators, shell reads, pruning and replay use
    paths: Root
    secrets: Secrets
    versions: Versions
    counts: Counts
    outlines: Outlines

    @property
    def tokens(self) -> TokenCounter: ...
    def session(self, session_id: str | None = None) -> SessionHost: ...
    def locate(self, path: str | Path) -> Located: ...
    def secret(self, version: str) -> bool: ...
    def reveals(self, text: str) -> str | None: ...
    def lines_of(self, version: str) -> list[str] | None: ...
    def outline_text(
        self,
        version: str,
        path: str,
        lines: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> str: ...


@runtime_checkable
class SessionHost(Protocol):
    """The ``Session`` members conversations and decorated tools use."""

    id: str

    @property
    def cache(self) -> CacheHost: ...
    def answer_output(
        self,
        key: str,
        path: str,
        output: str,
        *,
        fresh: bool = False,
        call_id: str | None = None,
        lines: tuple[int, int] | None = None,
    ) -> ReadResult: ...
    def record_write(self, path: str, tool: str, call_id: str | None = None) -> str: ...
