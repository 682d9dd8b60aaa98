"""What a ``Session``, a conversation binding and a tool decorator need of a cache and a session.

``Session`` is held by its ``FileCache`` and holds it back; ``filecache.conversations`` and the
tool decorators (``filecache.decorators``) are reached from methods of both. Each of
those modules names the other side by the protocol here, never by importing ``filecache.cache``
or ``filecache.session``, so the package has no import cycle (``tests/test_layout.py``).
``FileCache`` and ``Session`` satisfy them (mypy checks it where they pass ``self``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from filecache.core.results import ReadResult, Source
    from filecache.core.tokens import TokenCounter
    from filecache.fsio import Located
    from filecache.locations import Root
    from filecache.outline.outline import Outline
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
    # the parts a session answers with (``secrecy``, ``sources``); the methods below are the
    # cache's one-line forms of theirs, for the conversations, decorators and adapters
    paths: Root
    secrets: Secrets
    versions: Versions
    counts: Counts
    outlines: Outlines

    @property
    def margin(self) -> float: ...
    @property
    def tokens(self) -> TokenCounter: ...
    def session(self, session_id: str | None = None) -> SessionHost: ...
    def locate(self, path: str | Path) -> Located: ...
    def path_lock(self, rel: str) -> AbstractContextManager[None]: ...
    def secret(self, version: str) -> bool: ...
    def denied(self, path: str | Located, version: str | None = None) -> bool: ...
    @property
    def key(self) -> bytes: ...
    def version_for(self, loc: Located, data: bytes) -> str: ...
    @property
    def ref_seal(self) -> str: ...
    def digest(self, text: str, keyed: bool) -> str: ...
    def mark_secret(self, version: str) -> None: ...
    def reveals(self, text: str) -> str | None: ...
    def remember(self, version: str, lines: list[str], storable: bool) -> None: ...
    def held_lines(self, version: str) -> list[str] | None: ...
    def lines_of(self, version: str) -> list[str] | None: ...
    def outline_of(
        self, version: str, path: str, lines: Sequence[str] | None = None
    ) -> Outline: ...
    def outline_text(
        self,
        version: str,
        path: str,
        lines: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> str: ...
    def count(self, text: str) -> int: ...
    def plain_tokens(self, src: Source, start: int, end: int) -> int: ...


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
