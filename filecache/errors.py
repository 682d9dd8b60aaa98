"""The exceptions filecache raises, all under one root.

Every message says what happened and what to do about it. Each class carries the exit code the
CLI uses for it (as click's ``ClickException.exit_code``)::

    FileCacheError                      exit 1
    ├── PathError                       exit 2   a path that cannot be served (empty, a NUL,
    │   │                                        over 4,096 bytes, a name over 255; no space)
    │   ├── OutsideRootError                     resolves (symlinks included) outside the root,
    │   │                                        or a folder became a link while in use
    │   ├── MissingFileError                     missing (also: deleted mid-session)
    │   ├── NotARegularFileError                 a directory, FIFO, socket or device
    │   └── AccessDeniedError                    the OS refused (permissions)
    ├── ContentError                    exit 3   a file whose content filecache will not serve
    │   ├── BinaryFileError                      NUL bytes or a known binary signature
    │   ├── EncodingError                        not valid UTF-8
    │   └── FileTooLargeError                    over ``max_file_bytes`` without offset/limit,
    │                                            or a range of lines over it
    ├── RequestError                    exit 2   arguments that cannot be honoured
    │   ├── RangeError                           offset past the end, bad limit
    │   ├── EditError                            old_string missing or not unique
    │   ├── MarkerError                          new content carries filecache's own markers
    │   └── InvalidContentError                  new content with a NUL byte or no UTF-8 form
    ├── TranscriptError                 exit 2   a malformed message list (also: not JSON,
    │                                            nested over 128 deep)
    ├── ConfigError                     exit 2   a bad setting
    ├── StoreError                      exit 4   the store failed
    │   └── StoreConflictError                   another writer moved the session on first
    ├── CallAbandonedError              exit 1   the caller gave up on the call (cancelled):
    │                                            nothing was recorded
    └── ConflictError                   exit 5   the file changed under a write/edit
"""

from __future__ import annotations


class FileCacheError(Exception):
    """Root of every error filecache raises."""

    exit_code = 1


class PathError(FileCacheError):
    """The path cannot be served: empty, a NUL byte, over ``fsio.PATH_MAX`` bytes, a name over
    ``fsio.NAME_MAX`` bytes, a name the file system refuses, or no space left on the device."""

    exit_code = 2


class OutsideRootError(PathError):
    """The path resolves outside the cache root."""


class MissingFileError(PathError):
    """The file does not exist (or was deleted)."""


class NotARegularFileError(PathError):
    """The path is a directory, FIFO, socket or device."""


class AccessDeniedError(PathError):
    """The operating system refused access."""


class ContentError(FileCacheError):
    """The file's content is not something filecache serves."""

    exit_code = 3


class BinaryFileError(ContentError):
    """The file is binary."""


class EncodingError(ContentError):
    """The file is not valid UTF-8."""


class FileTooLargeError(ContentError):
    """The file is over the size limit and no range was asked for."""


class RequestError(FileCacheError):
    """The arguments cannot be honoured."""

    exit_code = 2


class RangeError(RequestError):
    """The requested line range does not fit the file."""


class EditError(RequestError):
    """An edit's ``old_string`` does not occur exactly as required."""


class MarkerError(RequestError):
    """New content contains filecache's own stub or placeholder markers."""


class InvalidContentError(RequestError):
    """New content that filecache would not serve back as the same text (a NUL byte, a lone
    surrogate): refused before anything is written."""


class TranscriptError(FileCacheError):
    """A message list is malformed."""

    exit_code = 2


class ConfigError(FileCacheError):
    """A setting is invalid."""

    exit_code = 2


class StoreError(FileCacheError):
    """The store failed (SQLite error, corrupt blob)."""

    exit_code = 4


class StoreConflictError(StoreError):
    """The session's ledger moved on (another writer) between reading and committing it.

    Nothing was written; ``Session`` catches it, brings its view up to date and retries.
    """


class ConflictError(FileCacheError):
    """A write or edit lost a race: the file changed between reading and replacing it.

    Nothing was written; the message says what changed and what to do (read it again).
    """

    exit_code = 5


class CallAbandonedError(FileCacheError):
    """The call's caller gave up on it (``Session.abandon``: a cancelled task, an MCP
    ``notifications/cancelled``) before its answer was recorded: nothing was recorded."""
