"""File-system edge: confining paths to the root, reading bytes once, writing atomically.

Invariants:
- A path is checked as text first, in time linear in its length: no NUL, at most ``PATH_MAX``
  bytes, no component over ``NAME_MAX`` bytes, encodable for the file system. Only then is it
  resolved (symlinks followed); it must stay inside the root, and the store's own folder
  (``.filecache``) is never served or written, nor are the files ``locate`` is told to refuse
  (a store kept elsewhere).
- ``locate`` remembers, in the dict it is given (``remember``), a resolution on which no
  symbolic link was: the path as asked, normalised lexically, *is* the resolved path, with no
  ``..`` (which a link before it would change) and no aliases. A remembered ``Located`` is never
  followed through a link: every walk below is ``O_NOFOLLOW``, so a component that has become a
  link since is refused, and the caller runs the call again on a fresh resolution
  (``Paths.relocate``). At most ``MAX_REMEMBERED`` paths (then it starts afresh);
  thread-safe: a dict read or written whole under the GIL.
- Every open, stat, mkdir and rename goes through a descriptor of the parent folder, reached
  from the root one component at a time with ``O_NOFOLLOW``: a folder swapped for a symbolic
  link after ``locate`` resolved the path is refused (``OutsideRootError``), never followed
  outside the root. The walk's first step checks the root is still the folder ``locate`` saw
  (``Located.root_id``): a root, or a folder above it, swapped for a link is refused too.
- A read looks at the file with ``stat`` before any open: FIFOs, sockets and devices are
  refused without being opened (a blocked writer on a FIFO stays blocked), and so is a file
  over the size limit. The open is non-blocking and must yield the same inode as a second
  guard. A read opens the file once and returns (or hashes) the bytes it read.
- A write goes to a temporary file ``.fc-<pid>-<hex>.tmp`` in the same folder and is renamed
  into place with ``os.rename(src_dir_fd=, dst_dir_fd=)`` (``rename(2)`` replaces atomically;
  CPython has no ``dir_fd`` for ``os.replace``): the target is either the old bytes or the new
  ones, never a mix. A refused write leaves the file byte-identical. Temporary files left by a
  killed process are removed by ``sweep_temp_files`` once their process is gone. The new file
  keeps the old one's mode, and its owner and group where the process may set them (root); it
  is a new inode, so another hard link to the old file keeps the old bytes (as ``sed -i``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from filecache.core.records import record
from filecache.core.text import MAX_LINE_CHARS, Window, scan_window
from filecache.errors import (
    AccessDeniedError,
    FileTooLargeError,
    MissingFileError,
    NotARegularFileError,
    OutsideRootError,
    PathError,
)

__all__ = [
    "MAX_REMEMBERED",
    "NAME_MAX",
    "PATH_MAX",
    "Located",
    "Paths",
    "check_path",
    "link_free",
    "locate",
    "read_bytes",
    "read_window",
    "remove_file",
    "sweep_temp_files",
    "write_bytes",
]

STORE_DIR = ".filecache"
PATH_MAX = 4096  # bytes in a path (Linux PATH_MAX), checked before anything is resolved
NAME_MAX = 255  # bytes in one component (ext4, xfs, btrfs, APFS)
CHUNK = 1 << 20  # bytes per read of a streamed (ranged) read
MAX_REMEMBERED = 4096  # resolutions ``locate`` keeps in a ``remember`` dict

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# Descriptor-relative calls confine every step (Linux, macOS, BSDs); elsewhere (Windows)
# full paths are used and the swap guard is best effort.
_DIR_FD = {os.open, os.stat, os.mkdir, os.rename, os.unlink} <= os.supports_dir_fd

TEMP_NAME = re.compile(r"\.fc-(?:(\d+)-)?[0-9a-f]{12}\.tmp")
"""filecache's temporary files (``.fc-<pid>-<hex>.tmp``; older releases: ``.fc-<hex>.tmp``)."""

STALE_AFTER = 60.0  # seconds without a write before a dead process's temporary file is swept
ORPHAN_AFTER = 86400.0  # a temporary file whose pid lives (reused) or is unknown: one day
SWEEP_MAX_ENTRIES = 100_000  # names a whole-tree sweep looks at, at most (about 0.1 s)
_SWEEP_SKIP = frozenset({".git", ".hg", ".svn", STORE_DIR, "node_modules"})


@record
class Located:
    """A path confined to the root.

    Attributes:
        rel: the resolved path relative to the root (POSIX; ``"."`` for the root itself).
        real: the resolved absolute path.
        root: the root it is confined to.
        aliases: the other names the request went through (the path as asked, and each
            symbolic link on the way to the final file), relative to the root; the deny-list
            is matched on these too.
        root_id: the root's ``(st_dev, st_ino)`` when resolved: every walk from the root checks
            the folder it opens is still that one (a root, or a folder above it, swapped for a
            link to elsewhere is refused, not walked).
    """

    rel: str
    real: Path
    root: Path
    aliases: tuple[str, ...] = ()
    root_id: tuple[int, int] | None = None


def _shown(text: str) -> str:
    """A long path or name, shortened for a one-line message."""
    return text if len(text) <= 80 else f"{text[:60]}…({len(text):,} characters)"


def _require_utf8(path: str) -> None:
    """Refuse a path whose bytes are not UTF-8 (Python holds them as lone surrogates): every
    answer, header and store key names the file in UTF-8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise PathError(
            f"{_shown(shown)}: the path is not valid UTF-8; filecache reads and writes only "
            "files whose names are text (rename it, or use a shell tool)"
        ) from None


def check_path(raw: str) -> None:
    """Refuse, in linear time and before any file-system call, a path that no file can have.

    Raises:
        PathError: empty, a NUL byte, not encodable, not UTF-8, over ``PATH_MAX`` bytes, or a
            component over ``NAME_MAX`` bytes.
    """
    if not raw:
        raise PathError("empty path; give a file path relative to the root")
    if "\x00" in raw:
        raise PathError(f"{_shown(repr(raw))}: path contains a NUL byte")
    if len(raw) > PATH_MAX:  # characters: each is at least one byte
        raise PathError(
            f"{_shown(raw)}: path of {len(raw):,} characters, over the {PATH_MAX:,}-byte limit"
        )
    try:
        encoded = os.fsencode(raw)
    except UnicodeEncodeError as exc:
        raise PathError(f"{_shown(repr(raw))}: path is not valid text ({exc.reason})") from exc
    _require_utf8(raw)
    if len(encoded) > PATH_MAX:
        raise PathError(
            f"{_shown(raw)}: path of {len(encoded):,} bytes, over the {PATH_MAX:,}-byte limit"
        )
    for part in encoded.split(b"/"):
        if len(part) > NAME_MAX:
            name = os.fsdecode(part)
            raise PathError(
                f"{_shown(name)}: a file or folder name of {len(part):,} bytes, over the "
                f"{NAME_MAX}-byte limit of the file system; use a shorter name"
            )


def locate(
    root: Path,
    path: str | os.PathLike[str],
    *,
    refuse: frozenset[str] = frozenset(),
    remember: dict[str, Located] | None = None,
) -> Located:
    """Resolve ``path`` (relative to ``root`` or absolute inside it) and confine it to the root.

    ``root`` must be resolved (absolute, no symbolic links). ``refuse``: resolved paths never
    served or written (a store's files wherever it lives). ``remember``: where link-free
    resolutions are kept and found again (module docstring).
    """
    if remember is not None and isinstance(path, str):
        known = remember.get(path)
        if known is not None:
            return known
    raw = os.fspath(path)
    if not isinstance(raw, str):
        raise PathError(f"{raw!r}: give the path as text, not bytes")
    check_path(raw)
    # On strings, not Paths: this runs on every call (a Path costs several microseconds).
    base = str(root)
    inside = base if base.endswith("/") else base + "/"
    candidate = raw if os.path.isabs(raw) else os.path.join(base, raw)
    try:
        real = os.path.realpath(candidate)  # raises when a link is swapped while it is read
    except OSError as exc:
        raise PathError(f"{raw}: cannot resolve path ({exc})") from exc
    try:  # as Path.resolve: realpath leaves a symlink loop in place; stat finds it
        os.stat(real)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathError(f"{raw}: cannot resolve path (Symlink loop from {real!r})") from exc
    if real != base and not real.startswith(inside):
        raise OutsideRootError(
            f"{raw}: resolves to {real}, outside the root {root}; only files under the root "
            "can be read or written"
        )
    rel = "." if real == base else real[len(inside) :]
    _require_utf8(rel)  # a link inside the root may lead to a name that is not
    if rel == STORE_DIR or rel.startswith(STORE_DIR + "/"):
        raise OutsideRootError(f"{raw}: filecache's own store folder is not served")
    try:
        st = os.stat(base)
    except OSError as exc:
        raise _os_error(raw, exc) from exc
    if real in refuse:
        raise OutsideRootError(f"{rel}: filecache's own store is not served or written")
    aliases = _aliases(base, inside, candidate, rel)
    loc = Located(rel, Path(real), root, aliases, (st.st_dev, st.st_ino))
    if remember is not None and isinstance(path, str) and link_free(loc, path):
        if len(remember) >= MAX_REMEMBERED:
            remember.clear()
        remember[path] = loc
    return loc


def link_free(loc: Located, asked: str) -> bool:
    """Whether ``asked`` resolved to itself: no ``..``, no alias, lexically the real path."""
    if loc.aliases or ".." in asked.split("/"):
        return False
    return str(loc.real) == os.path.normpath(os.path.join(loc.root, asked))


class Paths:
    """One root's paths, a part ``FileCache`` hands its sessions: confined to the root, the
    store's own files refused wherever they are (``refuse``, decided once by the caller).

    ``remembered`` is ``locate`` remembering link-free resolutions (a fifth of an unchanged
    re-read: ``realpath``, one ``lstat`` per component, a ``readlink`` for aliases), which
    sessions use: a call refused on a remembered location (a link appeared on its way) is run
    once more on ``relocate``'s fresh resolution, so its answer is what an unremembered call
    would have given (the module's invariants).
    """

    def __init__(self, root: Path, refuse: frozenset[Path] = frozenset()) -> None:
        self.root = root
        self.protected = refuse
        """The resolved paths never served or written (a store's files)."""
        self._refuse = frozenset(map(str, refuse))
        self.known: dict[str, Located] = {}
        """``remembered``'s link-free resolutions, by the path as asked."""

    def locate(self, path: str | os.PathLike[str]) -> Located:
        """``path`` confined to the root, refusing the store's own files wherever they are."""
        return locate(self.root, path, refuse=self._refuse)

    def remembered(self, path: str | os.PathLike[str]) -> Located:
        """``locate``, answered from (and kept in) ``known`` when no link was on the way."""
        return locate(self.root, path, refuse=self._refuse, remember=self.known)

    def relocate(self, path: str | os.PathLike[str], stale: Located) -> Located | None:
        """After a call refused ``stale``, ``remembered``'s answer for ``path``: a fresh
        resolution (not remembered), or None when ``stale`` was resolved afresh already (the
        refusal stands). ``stale`` is forgotten, unless another thread remembered the path
        anew meanwhile (that call is then retried all the same)."""
        if not isinstance(path, str) or not link_free(stale, path):
            return None
        if self.known.get(path) is stale:
            self.known.pop(path, None)
        return self.locate(path)


def _aliases(base: str, inside: str, candidate: str, rel: str) -> tuple[str, ...]:
    """The path as asked (normalised lexically) and each link of a symlink chain at its end."""
    names: list[str] = []
    here = os.path.normpath(candidate)
    for _ in range(40):  # the kernel's own limit on links followed
        if here == base:
            names.append(".")
        elif here.startswith(inside):
            names.append(here[len(inside) :])
        else:
            names.append(os.path.basename(here))
        try:
            target = os.readlink(here)
        except (OSError, ValueError):
            break
        here = os.path.normpath(os.path.join(os.path.dirname(here), target))
    if len(names) == 1:
        return () if names[0] == rel else (names[0],)
    return tuple(dict.fromkeys(n for n in names if n != rel))


def _os_error(rel: str, exc: OSError) -> PathError:
    if exc.errno == errno.ENOENT:
        return MissingFileError(f"{rel}: no such file; check the path (it may have been deleted)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return AccessDeniedError(f"{rel}: permission denied by the operating system")
    if exc.errno == errno.EROFS:
        return AccessDeniedError(f"{rel}: the file system is read-only; nothing was changed")
    if exc.errno == errno.ELOOP:
        return OutsideRootError(
            f"{rel}: became a symbolic link after it was resolved; refused (read it again)"
        )
    if exc.errno == errno.EISDIR:
        return NotARegularFileError(f"{rel}: is a directory; list it with a shell tool instead")
    if exc.errno == errno.ENAMETOOLONG:
        return PathError(f"{_shown(rel)}: name too long for the file system; use a shorter one")
    if exc.errno == errno.ENOTDIR:
        return PathError(f"{rel}: a part of the path is a file, not a folder")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return PathError(f"{rel}: no space left on the device; nothing was changed")
    return PathError(f"{rel}: {exc.strerror or exc}")


def _require_regular(rel: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise NotARegularFileError(f"{rel}: is a directory; list it with a shell tool instead")
    if stat.S_ISLNK(mode):
        raise OutsideRootError(f"{rel}: became a symbolic link after it was resolved; refused")
    what = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    raise NotARegularFileError(f"{rel}: is {what}, not a regular file; filecache reads files only")


def _moved(loc: Located) -> OutsideRootError:
    return OutsideRootError(
        f"{loc.rel}: a folder on its path became a symbolic link after it was resolved (moved "
        "while being opened); refused, read it again"
    )


@contextlib.contextmanager
def _parent(loc: Located, *, create: bool) -> Iterator[tuple[int | None, str]]:
    """``(descriptor of the parent folder, final name)``, reached from the root without
    following a link; missing folders are made on the way when ``create``. Without
    descriptor-relative calls: ``(None, full path)``."""
    if loc.rel == ".":
        raise NotARegularFileError(f"{loc.rel}: is a directory; list it with a shell tool instead")
    parts = loc.rel.split("/")
    if not _DIR_FD:
        if create:
            try:
                loc.real.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise _os_error(loc.rel, exc) from exc
        yield None, str(loc.real)
        return
    try:
        fd = os.open(loc.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise _os_error(loc.rel, exc) from exc
    try:
        if loc.root_id is not None:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != loc.root_id:
                raise _moved(loc)  # the root (or a folder above it) is another folder now
        for part in parts[:-1]:
            inner = _step(loc, fd, part, create)
            os.close(fd)
            fd = inner
        yield fd, parts[-1]
    finally:
        os.close(fd)


def _step(loc: Located, fd: int, part: str, create: bool) -> int:
    """Open folder ``part`` under ``fd`` (made if missing and ``create``)."""
    flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
    try:
        for _ in range(3):  # a folder made or removed by someone else in between: retry
            try:
                return os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
        return os.open(part, flags, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise _moved(loc) from exc
        raise _os_error(loc.rel, exc) from exc


def _stat_file(loc: Located, dfd: int | None, name: str, max_bytes: int | None) -> os.stat_result:
    """``lstat`` of the final name, refusing links, non-regular files and oversize ones."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError as exc:
        raise _os_error(loc.rel, exc) from exc
    _require_regular(loc.rel, st.st_mode)
    if max_bytes is not None and st.st_size > max_bytes:
        raise _too_large(loc, st.st_size, max_bytes)
    return st


def _too_large(loc: Located, size: int, max_bytes: int) -> FileTooLargeError:
    return FileTooLargeError(
        f"{loc.rel}: {size:,} bytes, over the {max_bytes:,}-byte limit; read a part "
        "with offset/limit, or raise max_file_bytes"
    )


_REOPENS = 256
"""How many times ``_open_file`` looks again at a file replaced between its stat and its open
(each look costs a stat, an open and a close; only a file that keeps being replaced uses more
than one)."""


@contextlib.contextmanager
def _open_file(loc: Located, max_bytes: int | None) -> Iterator[tuple[int, int]]:
    """A read-only descriptor of the regular file ``loc``, checked by ``stat`` before the open,
    and its size when opened.

    A file replaced between the ``stat`` and the open (an atomic write by another writer) is
    looked at again, up to ``_REOPENS`` times: the descriptor is always of the object that was
    checked. (Eight was too few: a writer replacing the file in a tight loop won eight races in
    a row about once in a few thousand reads, and the read was refused.)
    """
    with _parent(loc, create=False) as (dfd, name):
        for _attempt in range(_REOPENS):
            st = _stat_file(loc, dfd, name, max_bytes)
            try:
                fd = os.open(name, os.O_RDONLY | _NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
            except FileNotFoundError:
                continue  # removed (or being replaced) since the stat: look again
            except OSError as exc:
                raise _os_error(loc.rel, exc) from exc
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) == (st.st_dev, st.st_ino):
                break
            os.close(fd)  # replaced in between: look again
        else:
            raise OutsideRootError(f"{loc.rel}: kept being replaced while opened; read it again")
        try:
            yield fd, opened.st_size
        finally:
            os.close(fd)


def _read_to_end(fd: int, cap: int | None, size: int) -> bytes:
    """The bytes from ``fd``'s offset to its end (at most ``cap``), in reads sized by ``size``
    (its ``fstat``): one read and one that sees the end, no buffer of ``cap`` bytes
    (``read(cap)`` allocates it whole, 4 MiB per read of a small file) and no file object."""
    chunks: list[bytes] = []
    total = 0
    want = size + 1  # one more than the size: a file that grew is read on
    while cap is None or total < cap:
        chunk = os.read(fd, want if cap is None else min(want, cap - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = max(size, CHUNK)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_bytes(loc: Located, max_bytes: int | None = None) -> bytes:
    """The file's bytes, read in one open. Over ``max_bytes``: refused without reading it."""
    with _open_file(loc, max_bytes) as (fd, size):
        try:
            data = _read_to_end(fd, None if max_bytes is None else max_bytes + 1, size)
        except OSError as exc:
            raise _os_error(loc.rel, exc) from exc
    if max_bytes is not None and len(data) > max_bytes:  # grew after the stat
        raise _too_large(loc, len(data), max_bytes)
    return data


def read_window(
    loc: Located,
    offset: int | None,
    limit: int | None,
    *,
    budget: int,
    line_chars: int = MAX_LINE_CHARS,
    key: bytes | None = None,
) -> Window:
    """Lines ``offset..offset+limit-1`` of a file of any size, in bounded memory (``key``: a
    denied file's, whose version is keyed; see ``text.scan_window``).

    One open; the whole file is streamed in ``CHUNK``-byte reads and hashed (the version is
    that of every byte of this one read) and checked as text (``text.scan_window``), but only
    the requested lines are kept, each cut at ``line_chars`` characters; more than ``budget``
    characters of kept lines is refused (``FileTooLargeError``: ask for fewer lines).

    Returns:
        The window; ``window.lines`` has the file's line count as its length, and the range
        answered is ``window.lines.start`` .. ``start + len(window.lines.kept) - 1``.
    """
    from filecache.core.planner import line_range  # the one wording of range errors

    start = 1 if offset is None else offset
    line_range(loc.rel, start, offset, limit)  # offset and limit themselves (start <= total)
    stop = None if limit is None else start + limit - 1
    with _open_file(loc, None) as (fd, _size):

        def chunks() -> Iterator[bytes]:
            while True:
                try:
                    chunk = os.read(fd, CHUNK)
                except OSError as exc:
                    raise _os_error(loc.rel, exc) from exc
                if not chunk:
                    return
                yield chunk

        window = scan_window(
            chunks(), loc.rel, start, stop, line_chars=line_chars, budget=budget, key=key
        )
    line_range(loc.rel, len(window.lines), offset, limit)  # an offset past the end
    return window


def write_bytes(loc: Located, data: bytes) -> None:
    """Atomically replace (or create) the file with ``data``; parents are created inside root.

    The temporary file and the final rename go through a descriptor of the parent folder,
    reached from the root without following a link (see the module docstring), so a folder
    swapped for a link in the meantime cannot send the write outside the root.
    """
    with _parent(loc, create=True) as (dfd, name):
        try:
            existing: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        except OSError as exc:
            raise _os_error(loc.rel, exc) from exc
        if existing is not None:
            _require_regular(loc.rel, existing.st_mode)
        mode = stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_UMASK
        owner = (existing.st_uid, existing.st_gid) if existing is not None else None
        try:
            _replace(dfd, name, data, mode, owner)
        except OSError as exc:
            raise _os_error(loc.rel, exc) from exc


def remove_file(loc: Located) -> None:
    """Remove the regular file ``loc`` (missing: nothing to do), through the parent folder's
    descriptor like every other change: a folder swapped for a link is refused, not followed."""
    with _parent(loc, create=False) as (dfd, name):
        try:
            _require_regular(loc.rel, os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _os_error(loc.rel, exc) from exc


def _replace(
    dfd: int | None, target: str, data: bytes, mode: int, owner: tuple[int, int] | None = None
) -> None:
    folder = "" if dfd is not None else os.path.dirname(target) + os.sep
    for _ in range(100):
        tmp = f"{folder}.fc-{os.getpid()}-{os.urandom(6).hex()}.tmp"
        try:
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dfd
            )
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 random names taken
        raise OSError(errno.EEXIST, "no free temporary name")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
            if owner is not None and owner != (os.geteuid(), os.getegid()):
                with contextlib.suppress(PermissionError):  # root keeps the owner; others can't
                    os.fchown(fh.fileno(), *owner)
        if dfd is not None:  # rename(2) replaces the target atomically
            os.rename(tmp, target, src_dir_fd=dfd, dst_dir_fd=dfd)
        else:
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OverflowError:  # not a pid at all
        return False
    return True


def _stale(name: str, mtime: float, now: float) -> bool:
    found = TEMP_NAME.fullmatch(name)
    if found is None:
        return False
    age = now - mtime
    pid = found.group(1)
    if pid is not None and not _pid_alive(int(pid)):
        return age > STALE_AFTER
    return age > ORPHAN_AFTER


def sweep_temp_files(
    root: Path,
    folders: Iterable[str] | None = None,
    *,
    now: float | None = None,
    max_entries: int = SWEEP_MAX_ENTRIES,
) -> list[str]:
    """Remove filecache's own stale temporary files under ``root``; returns their paths.

    Only names of ``TEMP_NAME``'s form are touched, only regular files, and only stale ones:
    untouched for ``STALE_AFTER`` seconds with their process (the pid in the name) gone, or
    untouched for ``ORPHAN_AFTER`` (a pid reused, or no pid in the name). ``folders`` (relative
    to ``root``) limits the sweep to those folders; else the whole tree is walked without
    following links, skipping VCS folders, ``node_modules`` and the store's folder, and
    stopping after ``max_entries`` names (a root holding a home folder must not stall an open;
    a write's own folder can always be swept by passing it in ``folders``).
    """
    now = time.time() if now is None else now
    removed: list[str] = []
    if folders is not None:
        tops = [root / f for f in folders]
    else:
        tops = [root]
    seen = 0
    for top in tops:
        if not _DIR_FD:
            break
        for here, dirs, files, dfd in _walk(top):
            if folders is not None:
                dirs[:] = []
            else:
                dirs[:] = [d for d in dirs if d not in _SWEEP_SKIP]
            seen += len(dirs) + len(files)
            if seen > max_entries:
                dirs[:] = []
            for name in files:
                if not name.startswith(".fc-"):
                    continue
                with contextlib.suppress(OSError):
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and _stale(name, st.st_mtime, now):
                        os.unlink(name, dir_fd=dfd)
                        removed.append(os.path.relpath(os.path.join(here, name), root))
    return removed


def _walk(top: Path) -> Iterator[tuple[str, list[str], list[str], int]]:
    """``os.fwalk(top, follow_symlinks=False)``, top-down, where a folder that cannot be opened
    or listed is skipped: ``os.fwalk`` lets the listing's error end the whole walk (Python
    3.11: root in a container cannot list ``/proc/1/fd``, so a root of ``/`` failed every
    open). A folder is opened ``O_NOFOLLOW``: a link is never walked into, even one swapped in
    after the listing. ``dirs`` may be pruned in place, as with ``os.walk``. Iterative (a deep
    tree is no recursion); one descriptor per level, all closed when the walk ends."""
    stack: list[tuple[int, str, Iterator[str]]] = []  # open folders, each with its dirs to do
    fd, here = _open_folder(str(top), None), str(top)
    try:
        while True:
            if fd is not None:
                listed = _list_folder(fd)
                if listed is None:
                    os.close(fd)
                else:
                    dirs, files = listed
                    stack.append((fd, here, iter(dirs)))  # iterates dirs as the caller prunes it
                    yield here, dirs, files, fd
            if not stack:
                return
            parent, path, names = stack[-1]
            name = next(names, None)
            if name is None:
                os.close(stack.pop()[0])
                fd = None
                continue
            fd, here = _open_folder(name, parent), os.path.join(path, name)
    finally:
        for parent, _, _ in stack:
            os.close(parent)


def _open_folder(name: str, dir_fd: int | None) -> int | None:
    flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return None


def _list_folder(fd: int) -> tuple[list[str], list[str]] | None:
    """The folder's subfolders and other names (links among them); None: it cannot be listed."""
    dirs: list[str] = []
    files: list[str] = []
    try:
        with os.scandir(fd) as entries:  # a duplicate of fd, closed with the listing
            for entry in entries:
                with contextlib.suppress(OSError):  # gone since the listing
                    (dirs if entry.is_dir(follow_symlinks=False) else files).append(entry.name)
    except OSError:
        return None
    return dirs, files


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import: umask() is process-wide, not thread-safe
