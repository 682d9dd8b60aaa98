"""filecache: delta reads and safe pruning for LLM coding agents.

Names are imported on first use (PEP 562): ``import filecache`` loads nothing else, so a command
or library call pays only for the modules it uses (the CLI's cold start; see bench_coldstart).
"""

import importlib as _importlib

_TYPE_CHECKING = False  # not typing's: importing typing costs a cold start ~4 ms
if _TYPE_CHECKING:  # type checkers follow these imports; nothing runs them
    from typing import Any

    from .cache import FileCache, ReadResult, Session, WriteResult
    from .core.render import instructions
    from .errors import (
        AccessDeniedError,
        BinaryFileError,
        CallAbandonedError,
        ConfigError,
        ConflictError,
        ContentError,
        EditError,
        EncodingError,
        FileCacheError,
        FileTooLargeError,
        InvalidContentError,
        MarkerError,
        MissingFileError,
        NotARegularFileError,
        OutsideRootError,
        PathError,
        RangeError,
        RequestError,
        StoreConflictError,
        StoreError,
        TranscriptError,
    )
    from .ledger import CallRecord, Ledger, WriteRecord
    from .prune.codecs.base import Transcript
    from .prune.pruner import PruneResult, prune_messages
    from .prune.pruning import PrunePlan, PrunePolicy
    from .prune.transcript import parse_transcript
    from .settings import Settings
    from .store.memory_store import MemoryStore
    from .store.sqlite_store import SqliteStore
    from .store.store import Store

__all__ = [
    "AccessDeniedError",
    "BinaryFileError",
    "CallAbandonedError",
    "CallRecord",
    "ConfigError",
    "ConflictError",
    "ContentError",
    "EditError",
    "EncodingError",
    "FileCache",
    "FileCacheError",
    "FileTooLargeError",
    "InvalidContentError",
    "Ledger",
    "MarkerError",
    "MemoryStore",
    "MissingFileError",
    "NotARegularFileError",
    "OutsideRootError",
    "PathError",
    "PrunePlan",
    "PrunePolicy",
    "PruneResult",
    "RangeError",
    "ReadResult",
    "RequestError",
    "Session",
    "Settings",
    "SqliteStore",
    "Store",
    "StoreConflictError",
    "StoreError",
    "Transcript",
    "TranscriptError",
    "WriteRecord",
    "WriteResult",
    "instructions",
    "parse_transcript",
    "prune_messages",
]

_MODULES = {
    "AccessDeniedError": "errors",
    "BinaryFileError": "errors",
    "CallAbandonedError": "errors",
    "CallRecord": "ledger",
    "ConfigError": "errors",
    "ConflictError": "errors",
    "InvalidContentError": "errors",
    "StoreConflictError": "errors",
    "ContentError": "errors",
    "EditError": "errors",
    "EncodingError": "errors",
    "FileCache": "cache",
    "FileCacheError": "errors",
    "FileTooLargeError": "errors",
    "Ledger": "ledger",
    "MarkerError": "errors",
    "MemoryStore": "store.memory_store",
    "MissingFileError": "errors",
    "NotARegularFileError": "errors",
    "OutsideRootError": "errors",
    "PathError": "errors",
    "PrunePlan": "prune.pruning",
    "PrunePolicy": "prune.pruning",
    "PruneResult": "prune.pruner",
    "RangeError": "errors",
    "ReadResult": "cache",
    "RequestError": "errors",
    "Session": "cache",
    "Settings": "settings",
    "SqliteStore": "store.sqlite_store",
    "Store": "store.store",
    "StoreError": "errors",
    "Transcript": "prune.codecs.base",
    "TranscriptError": "errors",
    "WriteRecord": "ledger",
    "WriteResult": "cache",
    "instructions": "core.render",
    "parse_transcript": "prune.transcript",
    "prune_messages": "prune.pruner",
}


if not _TYPE_CHECKING:  # mypy sees the imports above, not a __getattr__ that would type any name

    def __getattr__(name: str) -> "Any":
        module = _MODULES.get(name)
        if module is None:
            raise AttributeError(f"module 'filecache' has no attribute {name!r}")
        value = getattr(_importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
