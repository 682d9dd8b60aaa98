"""File-system edge: confining paths to the root, reading bytes once, writing atomically.

Invariants:
- Every path is resolved with symlinks followed and must stay inside the root; the store's own
  folder (``.filecache``) is never served or written.
- A read opens the file once and returns the bytes it read; FIFOs, sockets and devices are
  refused from ``stat`` before any open (and the open is non-blocking as a second guard).
- A write goes to a temporary file in the same directory and is moved into place with
  ``os.replace``: the target is either the old bytes or the new ones, never a mix. A refused
  write leaves the file byte-identical.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .errors import (
    AccessDeniedError,
    FileTooLargeError,
    MissingFileError,
    NotARegularFileError,
    OutsideRootError,
    PathError,
)

__all__ = ["Located", "locate", "read_bytes", "write_bytes"]

STORE_DIR = ".filecache"


@dataclass(frozen=True)
class Located:
    """A path confined to the root: ``rel`` (POSIX, for display and keys) and ``real``."""

    rel: str
    real: Path


def locate(root: Path, path: str | os.PathLike[str]) -> Located:
    """Resolve ``path`` (relative to ``root`` or absolute inside it) and confine it to the root."""
    raw = os.fspath(path)
    if "\x00" in raw:
        raise PathError(f"{raw!r}: path contains a NUL byte")
    if not raw:
        raise PathError("empty path; give a file path relative to the root")
    candidate = Path(raw)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        real = candidate.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loops
        raise PathError(f"{raw}: cannot resolve path ({exc})") from exc
    if real != root and root not in real.parents:
        raise OutsideRootError(
            f"{raw}: resolves to {real}, outside the root {root}; only files under the root "
            "can be read or written"
        )
    rel = real.relative_to(root).as_posix()
    if rel == STORE_DIR or rel.startswith(STORE_DIR + "/"):
        raise OutsideRootError(f"{raw}: filecache's own store folder is not served")
    return Located(rel, real)  # the root itself is "." (so messages name it)


def _os_error(rel: str, exc: OSError) -> PathError:
    if exc.errno == errno.ENOENT:
        return MissingFileError(f"{rel}: no such file; check the path (it may have been deleted)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return AccessDeniedError(f"{rel}: permission denied by the operating system")
    if exc.errno == errno.ELOOP:
        return OutsideRootError(
            f"{rel}: became a symbolic link after it was resolved; refused (read it again)"
        )
    if exc.errno == errno.EISDIR:
        return NotARegularFileError(f"{rel}: is a directory; list it with a shell tool instead")
    return PathError(f"{rel}: {exc.strerror or exc}")


def _require_regular(rel: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise NotARegularFileError(f"{rel}: is a directory; list it with a shell tool instead")
    what = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    raise NotARegularFileError(f"{rel}: is {what}, not a regular file; filecache reads files only")


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FD = os.open in os.supports_dir_fd and os.replace in os.supports_dir_fd


def _fd_path(fd: int) -> Path | None:
    """Where an open descriptor really is (Linux ``/proc``); None where that cannot be asked."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def _same_place(loc: Located, fd: int, expected: Path) -> None:
    """Refuse an object that is not where ``locate`` resolved it: a directory on the way was
    swapped for a symbolic link in between (the final component is covered by O_NOFOLLOW)."""
    actual = _fd_path(fd)
    # "<path> (deleted)": the file we opened, there, was replaced (an atomic write) or removed
    # since; its bytes are still one consistent version read from the right place.
    if actual is not None and actual not in (expected, Path(f"{expected} (deleted)")):
        raise OutsideRootError(
            f"{loc.rel}: moved while being opened (now {actual}); refused, read it again"
        )


def read_bytes(loc: Located, max_bytes: int | None = None) -> bytes:
    """The file's bytes, read in one open. Over ``max_bytes``: refused without reading it."""
    try:
        fd = os.open(loc.real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _NOFOLLOW)
    except OSError as exc:
        raise _os_error(loc.rel, exc) from exc
    try:
        _same_place(loc, fd, loc.real)
        st = os.fstat(fd)
        _require_regular(loc.rel, st.st_mode)
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileTooLargeError(
                f"{loc.rel}: {st.st_size:,} bytes, over the {max_bytes:,}-byte limit; read a part "
                "with offset/limit, or raise max_file_bytes"
            )
        with open(fd, "rb", closefd=False) as fh:
            return fh.read()
    except OSError as exc:
        raise _os_error(loc.rel, exc) from exc
    finally:
        os.close(fd)


def write_bytes(loc: Located, data: bytes) -> None:
    """Atomically replace (or create) the file with ``data``; parents are created inside root.

    The temporary file and the final rename go through a descriptor of the parent directory,
    opened without following a symbolic link and checked to be where ``locate`` resolved it, so
    a directory swapped for a link in the meantime cannot send the write outside the root.
    """
    parent, name = loc.real.parent, loc.real.name
    try:
        parent.mkdir(parents=True, exist_ok=True)
        dfd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW)
    except OSError as exc:
        if os.path.islink(parent):  # O_NOFOLLOW|O_DIRECTORY on a link: ENOTDIR or ELOOP
            raise OutsideRootError(
                f"{loc.rel}: its folder became a symbolic link after it was resolved; refused"
            ) from exc
        raise _os_error(loc.rel, exc) from exc
    try:
        _same_place(loc, dfd, parent)
        at = {"dir_fd": dfd} if _DIR_FD else {}
        target = name if _DIR_FD else str(loc.real)
        try:
            existing = os.stat(target, follow_symlinks=False, **at)
        except FileNotFoundError:
            existing = None
        if existing is not None:
            if stat.S_ISLNK(existing.st_mode):
                raise OutsideRootError(
                    f"{loc.rel}: became a symbolic link after it was resolved; refused"
                )
            _require_regular(loc.rel, existing.st_mode)
        mode = stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_UMASK
        _replace(loc, dfd, target, data, mode)
    except OSError as exc:
        raise _os_error(loc.rel, exc) from exc
    finally:
        os.close(dfd)


def _replace(loc: Located, dfd: int, target: str, data: bytes, mode: int) -> None:
    at = {"dir_fd": dfd} if _DIR_FD else {}
    base = "" if _DIR_FD else str(loc.real.parent) + os.sep
    for _ in range(100):
        tmp = f"{base}.fc-{os.urandom(6).hex()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, **at)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 random names taken
        raise OSError(errno.EEXIST, "no free temporary name")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        if _DIR_FD:
            os.replace(tmp, target, src_dir_fd=dfd, dst_dir_fd=dfd)
        else:
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, **at)
        raise


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import: umask() is process-wide, not thread-safe
