"""filecache: delta reads and safe pruning for LLM coding agents."""

from .cache import FileCache, ReadResult, Session, WriteResult
from .errors import (
    AccessDeniedError,
    BinaryFileError,
    ConfigError,
    ContentError,
    EditError,
    EncodingError,
    FileCacheError,
    FileTooLargeError,
    MarkerError,
    MissingFileError,
    NotARegularFileError,
    OutsideRootError,
    PathError,
    RangeError,
    RequestError,
    StoreError,
    TranscriptError,
)
from .ledger import CallRecord, Ledger, WriteRecord
from .render import instructions
from .settings import Settings
from .sqlite_store import SqliteStore
from .store import MemoryStore, Store

__all__ = [
    "AccessDeniedError",
    "BinaryFileError",
    "CallRecord",
    "ConfigError",
    "ContentError",
    "EditError",
    "EncodingError",
    "FileCache",
    "FileCacheError",
    "FileTooLargeError",
    "Ledger",
    "MarkerError",
    "MemoryStore",
    "MissingFileError",
    "NotARegularFileError",
    "OutsideRootError",
    "PathError",
    "RangeError",
    "ReadResult",
    "RequestError",
    "Session",
    "Settings",
    "SqliteStore",
    "Store",
    "StoreError",
    "TranscriptError",
    "WriteRecord",
    "WriteResult",
    "instructions",
]
