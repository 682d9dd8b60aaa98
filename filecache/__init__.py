"""filecache: delta reads and safe pruning for LLM coding agents."""

from .cache import FileCache, ReadResult, Session, WriteResult
from .errors import (
    AccessDeniedError,
    BinaryFileError,
    ConfigError,
    ConflictError,
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
    StoreConflictError,
    StoreError,
    TranscriptError,
)
from .ledger import CallRecord, Ledger, WriteRecord
from .pruner import PruneResult, prune_messages
from .pruning import PrunePlan, PrunePolicy
from .render import instructions
from .settings import Settings
from .sqlite_store import SqliteStore
from .store import MemoryStore, Store
from .transcript import Transcript, parse_transcript

__all__ = [
    "AccessDeniedError",
    "BinaryFileError",
    "CallRecord",
    "ConfigError",
    "ConflictError",
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
