"""What every host integration shares: one host model context as a filecache ``Session``.

A *host* (Claude Code, Codex CLI, opencode) owns the model's context and runs its own file
tools; its hook or plugin hands filecache each tool call after the host ran it. ``HostSession``
turns those calls into the session's reads, shell reads, adopted edits and forgettings; the
host modules beside it (``claude_code``, ``codex``, ``opencode``) speak the host's protocol and
shape the answer as the host's tool result.

Invariants (docs/design.md, "Inside the agents people run"):
- One filecache session per (host, host session id, root): the stored id is derived from all
  three, so a shared store never mixes projects, hosts or contexts.
- The host's answer is the fallback: ``read`` and ``shell`` return None for anything filecache
  does not serve exactly (outside the root, a denied file, binary, missing, too large, a range
  the host clipped differently), and then the host's output stands. A denied file is never
  read through the session, so nothing of it (not even a version) is stored.
- A content answer that differs from what the host showed (the file changed between the host's
  read and ours, or the host clipped lines) backs no FileRef: its call is forgotten at once, so
  the model is never told it holds text it was not shown.
- What the model holds is the host's business: ``keep_only`` forgets every result the host's
  own record of the context no longer has; ``reset`` forgets all (compaction, clear).
- How to read a short answer is said once per model context, in the first FileRef or diff
  (``instructions_due``): the store remembers which result carried it, and the next short
  answer carries it again once that result is no longer held (``keep_only``, ``reset``, or the
  host's ``held`` test). A session whose answers are all content pays nothing for it.

Concurrency: a hook runs as one process per tool call, several at once for parallel calls; the
session's store lock and turns (``filecache.session``) make them safe. Nothing here keeps state
across calls but the store.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from filecache.cache import FileCache
from filecache.core.hashing import version_of
from filecache.core.results import Kind, ReadResult
from filecache.core.text import render_lines
from filecache.errors import FileCacheError
from filecache.fsio import Located
from filecache.session import Session
from filecache.store.store import ClosesOnExit

__all__ = [
    "HostRead",
    "HostSession",
    "host_session_id",
    "log_failure",
    "log_path",
    "pool",
    "project_root",
]

_SAFE_ID = re.compile(r"[A-Za-z0-9._-]{1,80}")
# The store's key-value namespace for the call whose result carries the instructions, per session.
_CARRIER = "host-instructions"


@dataclass(frozen=True)
class HostRead:
    """filecache's answer to a host's read of lines ``start..end`` of ``path``.

    ``kind`` is ``full``/``partial`` (``text``: the raw lines, no numbers, no header),
    ``unchanged`` (a one-line FileRef) or ``diff``; ``same_as_host``: the content equals what
    the host showed, so the host's own output may stand unchanged.
    """

    kind: str
    text: str
    path: str
    abs_path: str
    start: int
    end: int
    total: int
    version: str
    base_call_id: str | None
    tokens: int
    tokens_full: int
    same_as_host: bool

    @property
    def is_content(self) -> bool:
        return self.kind in (Kind.FULL, Kind.PARTIAL)


def host_session_id(host: str, host_session_id: str, root: Path) -> str:
    """The stored session id of one host context on one root: readable, and unique per
    (host, id, root) — a shared store never mixes them."""
    sid = host_session_id if _SAFE_ID.fullmatch(host_session_id) else _digest(host_session_id)
    return f"{host}:{sid}@{_digest(str(root))[:8]}"


def _relative_paths(root: Path, store: str | None) -> dict[str, str]:
    """The settings of ``root`` (absolute) naming a relative path (``store``, ``key_file``: from
    ``FILECACHE_*`` or the root's pyproject.toml), made absolute against the calling process's
    working folder, as a process per call resolves them. The resident hook server answers every
    project from one process whose own working folder is ``/``: resolved there, two projects'
    relative stores would be one file (or none)."""
    from filecache.adapters.hosts import call_env

    from filecache.settings import load_settings
    from filecache.store.store_url import is_store_url

    if not root.is_dir():
        return {}  # FileCache says so
    settings = load_settings(root.resolve())
    here = call_env.getcwd()
    out = {}
    given = store if store is not None else settings.store
    if given and given != ":memory:" and not is_store_url(given):
        if not os.path.isabs(given):  # as SqliteStore opens it: no ``~``
            out["store"] = os.path.join(here, given)
    key_file = settings.key_file
    if key_file and not os.path.isabs(os.path.expanduser(key_file)):  # as secret_key reads it
        out["key_file"] = os.path.join(here, key_file)
    return out


def _is_repository(git: Path) -> bool:
    """Whether ``git`` is a repository's ``.git``: a folder holding ``HEAD``, or a gitfile
    (``gitdir: ...``: a worktree, a submodule). An empty ``.git`` folder is not: Codex's
    sandbox leaves one as a mount point in writable folders such as ``/tmp``, and taking it
    for a repository made ``/tmp`` the root of every project below it."""
    try:
        if git.is_dir():
            return (git / "HEAD").is_file()
        with git.open("rb") as f:
            return f.read(8) == b"gitdir: "
    except OSError:
        return False


def project_root(folder: str | Path) -> Path:
    """The repository ``folder`` is in: the nearest folder up from it holding ``.git``, else
    the nearest holding a ``pyproject.toml`` with a ``[tool.filecache]`` table, else
    ``folder`` itself; never the home folder or ``/`` above it. A host that runs a call in a
    subfolder (Codex's ``workdir``) is still in the repository's one store, under its settings
    (its deny-list)."""
    start = Path(folder)
    home = Path(os.path.expanduser("~"))
    chain = []
    for here in (start, *start.parents):
        if here != start and (here == home or here == here.parent):
            break
        chain.append(here)
    for here in chain:
        if _is_repository(here / ".git"):
            return here
    for here in chain:
        try:
            if "tool.filecache" in (here / "pyproject.toml").read_text("utf-8", "replace"):
                return here
        except OSError:
            continue
    return start


class _Pool:
    """The open ``FileCache``s of a resident process (``pool``); off in a process per call."""

    def __init__(self) -> None:
        self.on = False
        self.lock = threading.Lock()
        self.caches: dict[tuple[object, ...], FileCache] = {}
        self.files: dict[int, tuple[int, int] | None] = {}  # id(cache) -> its store file


_POOL = _Pool()


def pool() -> None:
    """Keep each root's ``FileCache`` open between calls in this process (the resident hook
    servers: ``hook_server``, ``hook_http``), as opencode's resident keeps its sessions. A
    process per call never turns it on."""
    _POOL.on = True


def _store_file(cache: FileCache) -> tuple[int, int] | None:
    path = getattr(cache.engine.store, "path", None)
    if path is None:
        return None  # not a file (PostgreSQL, memory): nothing to replace under it
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_dev, st.st_ino)


def _same_store_file(cache: FileCache) -> bool:
    """The store file ``cache`` opened is still the one at its path (not deleted, replaced)."""
    return _POOL.files.get(id(cache)) == _store_file(cache)


class HostSession(ClosesOnExit):
    """One model context of a host, on one root (see the module docstring)."""

    def __init__(
        self, host: str, cache: FileCache, session: Session, *, pooled: bool = False
    ) -> None:
        self.host = host
        self.cache = cache
        self.session = session
        self._shared = pooled

    @classmethod
    def open(
        cls,
        host: str,
        host_session_id_: str,
        cwd: str | Path,
        *,
        root: str | Path | None = None,
        store: str | None = None,
    ) -> HostSession:
        """The session of host context ``host_session_id_`` on ``root`` (default: ``cwd``).

        ``store`` as ``FileCache``'s (default: the root's settings, ``FILECACHE_STORE``, then
        ``<root>/.filecache/cache.db``).
        """
        from filecache.adapters.hosts import call_env  # the calling process's, in the server

        where = Path(call_env.getcwd(), root if root is not None else cwd)  # an absolute one wins
        paths = _relative_paths(where, store)
        if _POOL.on:
            return cls._pooled(host, host_session_id_, where, paths, store)
        cache = FileCache(where, store=paths.pop("store", store), **paths)
        try:
            session = cache.session(host_session_id(host, host_session_id_, cache.engine.root))
        except BaseException:
            cache.close()
            raise
        return cls(host, cache, session)

    @classmethod
    def _pooled(
        cls, host: str, sid: str, where: Path, paths: dict[str, str], store: str | None
    ) -> HostSession:
        """``open`` in a resident process: the ``FileCache`` of this root, store and settings
        stays open between calls (``pool``), so a call pays neither opening the store nor
        the checkpoint of closing it. A changed setting (the root's pyproject), or a store
        file removed or replaced since, opens a new one."""
        from filecache.settings import load_settings

        try:
            settings = load_settings(where.resolve()) if where.is_dir() else None
        except FileCacheError:
            settings = None  # FileCache says why, below
        key = (str(where), store, tuple(sorted(paths.items())), settings)
        with _POOL.lock:
            cache = _POOL.caches.get(key)
            if cache is not None and not _same_store_file(cache):
                _POOL.caches.pop(key)  # left to the collector: another call may still use it
                _POOL.files.pop(id(cache), None)
                cache = None
            if cache is None:
                cache = FileCache(where, store=paths.get("store", store),
                                  **{k: v for k, v in paths.items() if k != "store"})  # fmt: skip
                _POOL.caches[key] = cache
                _POOL.files[id(cache)] = _store_file(cache)
        session = cache.session(host_session_id(host, sid, cache.engine.root))
        return cls(host, cache, session, pooled=True)

    def close(self) -> None:
        if not self._shared:
            self.cache.close()

    # -- what the model still holds ---------------------------------------------------------

    def keep_only(self, present: Iterable[str]) -> set[str]:
        """The host's context holds exactly the results of ``present`` (plus the calls of the
        turn in progress, which the caller includes): forget every fact relying on another id.
        Returns the ids forgotten."""
        keep = set(present)
        with self.session.lock:
            gone = self.session.held_call_ids() - keep
            if gone:
                self.session.forget(gone)
            carrier = self._carrier()
            if carrier and carrier not in keep:
                self._set_carrier("")
        return gone

    def relied_on(self) -> set[str]:
        """The call ids whose results this session relies on: its facts' and the carrier of
        the instructions (what to ask the host's record about, ``keep_only``'s domain)."""
        with self.session.lock:
            ids = set(self.session.held_call_ids())
            carrier = self._carrier()
        return ids | {carrier} if carrier else ids

    def reset(self) -> None:
        """The host dropped the model's context (compaction, clear): forget everything."""
        with self.session.lock:
            held = self.session.held_call_ids()
            if held:
                self.session.forget(held)
            if self._carrier():
                self._set_carrier("")

    def lines_answered(self, call_id: str) -> tuple[str, int, str] | None:
        """The lines a read answer of ``call_id`` stood for (a FileRef or diff as much as
        content): (path, first line number, the raw lines of the version it reflects), or None
        when the ledger has no such read or the version's lines are not kept."""
        record = self.session.ledger().calls.get(call_id)
        if record is None or record.version is None or record.start is None:
            return None
        lines = self.cache.engine.versions.lines_of(record.version)
        if lines is None:
            return None
        end = record.end if record.end is not None else len(lines)
        return (
            record.path,
            record.start,
            render_lines(record.path, lines, record.start, end, numbered=False),
        )

    def expired(self, call_id: str) -> None:
        """The host sends the model another text in place of ``call_id``'s short answer (its
        base left the context): nothing relies on it, and it carries no instructions."""
        self.abandon(call_id)

    def abandon(self, call_id: str) -> None:
        """The answer to ``call_id`` never reached the host (its client gave up or was
        killed): forget every fact relying on it, and it carries no instructions."""
        with self.session.lock:
            self.session.forget([call_id])
            if self._carrier() == call_id:
                self._set_carrier("")

    def instructions_due(
        self, call_id: str, held: Callable[[str], bool] | None = None, *, claim: bool = True
    ) -> bool:
        """Whether the short answer of ``call_id`` carries the instructions: True when no result
        the model holds carries them (none yet, or the one that did is gone: ``keep_only``,
        ``reset``, or ``held(carrier)`` False), and then ``call_id`` is their carrier (unless
        ``claim`` is False: only asking). Atomic under the session's lock: of two short answers
        at once, exactly one carries them."""
        with self.session.lock:
            carrier = self._carrier()
            if carrier and carrier != call_id and (held is None or held(carrier)):
                return False
            if claim:
                self._set_carrier(call_id)
            return True

    def short_or_own(
        self,
        call_id: str,
        short: str,
        own: str,
        note: str | None,
        held: Callable[[str], bool] | None = None,
    ) -> str | None:
        """The one policy of every host for a short answer (a FileRef, a diff) to ``call_id``:
        what the model gets instead of the host's ``own`` output, or None to leave that.

        With ``note`` (what the host's model is told, ``HostSpec.told``) on its own last line
        when it is due (``instructions_due``; a trailing newline of ``short`` stays last).
        None when the answer, with a due note, would be no shorter than ``own``: then the
        host's output stands, and ``call_id`` is forgotten (the model holds what the host
        showed, which filecache did not check)."""
        extra = "" if note is None else "\n" + note
        if len(short) + len(extra) >= len(own) and (
            note is None or self.instructions_due(call_id, held, claim=False)
        ):
            self.session.withdraw([call_id])  # stats: the host's own read, no saving
            return None
        if note is None or not self.instructions_due(call_id, held):
            return short
        end = "\n" if short.endswith("\n") else ""
        return short.rstrip("\n") + extra + end

    def _carrier(self) -> str:
        return self.cache.engine.store.cache_get(_CARRIER, self.session.id) or ""

    def _set_carrier(self, call_id: str) -> None:
        self.cache.engine.store.cache_put(_CARRIER, self.session.id, call_id)

    # -- the host's tools, after the host ran them -----------------------------------------

    def read(
        self,
        path: str,
        call_id: str,
        *,
        start: int | None = None,
        end: int | None = None,
        host_text: str | None = None,
        matches: Callable[[str], bool] | None = None,
        mode: str = "full",
        crlf_shown_as_lf: bool = False,
    ) -> HostRead | None:
        """The model's read of lines ``start..end`` (1-based, inclusive; None: the whole file)
        as filecache answers it, or None when the host's output should stand.

        ``crlf_shown_as_lf``: the host shows a file's ``\r\n`` line breaks as ``\n`` (Claude
        Code's Read does): lines that differ from ``host_text`` only so are the same lines, and
        a short answer's text (a diff's lines) is given with ``\n`` breaks too. A lone ``\r``
        is never taken for a line break.

        What the host's tool returned is the proof: ``host_text`` (the raw lines it showed)
        or ``matches`` (a test of the raw lines of the version read) must agree with the lines
        the answer stands for, content, FileRef and diff alike; a FileRef or diff with neither
        is never sent."""
        loc = self._served(path)
        if loc is None:
            return None
        offset = start
        limit = None if end is None else end - (start or 1) + 1
        if limit is not None and limit < 1:
            return None
        try:
            result = self.session.read(
                loc, offset=offset, limit=limit, mode=mode, numbered=False, call_id=call_id
            )
        except FileCacheError:
            return None  # the host says what went wrong, in its own words
        content = result.kind in (Kind.FULL, Kind.PARTIAL)
        lines = self._content(result)  # the lines this answer stands for, of the version read
        text = lines if content else result.text
        if crlf_shown_as_lf and lines is not None and _crlf_only(lines):
            lines = lines.replace("\r\n", "\n")  # the lines as the host shows them
        if crlf_shown_as_lf and text is not None and _crlf_only(text):
            text = text.replace("\r\n", "\n")  # a diff's lines too
        if matches is None and host_text is not None:
            matches = host_text.__eq__
        if matches is None:
            agrees = content  # content stands for itself; a short answer needs the proof
        else:
            agrees = lines is not None and matches(lines)
        if not agrees:
            # The host showed other text (it clipped lines, the file changed in between, or a
            # read tool that prints something else), or nothing to compare with: the model
            # holds what the host showed, so nothing may rely on this call.
            self.session.forget([call_id])
            return None
        same = content and text == host_text
        assert text is not None
        return HostRead(
            result.kind, text, result.path, str(self.cache.engine.root / result.path),
            result.start, result.end, result.line_count, result.version, result.base_call_id,
            result.tokens, result.tokens_full, same,
        )  # fmt: skip

    def shell(
        self, command: str, call_id: str, *, output: str | None = None, cwd: str | None = None
    ) -> str | None:
        """What the model should see for the shell ``command`` instead of ``output``, or None
        when the host's output should stand (a first read equal to it, not a read, not
        servable, or a FileRef or diff whose lines are not what the shell printed: a shell
        function ``cat``, another file). Relative paths are the shell's: resolved against
        ``cwd`` (the folder the shell is in; default: the root). A command that is not a
        served read re-hashes the files in the view, so a change it made makes the next read a
        diff."""
        from filecache.shell.bash_reads import answer_shell_read
        from filecache.shell.shell_parse import NotServable, parse_shell_read

        root = self.cache.engine.root
        here = os.path.join(root, cwd) if cwd is not None else str(root)
        self._learn_named(command, here)
        read = parse_shell_read(command)
        if read is not None:
            read = replace(read, paths=tuple(os.path.join(here, p) for p in read.paths))
        if read is None or any(self._served(p) is None for p in read.paths):
            self.session.rehash(call_id)
            return None
        try:
            answer = answer_shell_read(self.session, read, call_id)
        except (FileCacheError, NotServable):
            self.session.rehash(call_id)
            return None
        if answer.output is None or output is None or answer.output != output:
            # The shell printed other bytes (or we cannot tell): the model holds what it
            # printed, so nothing may rely on this call.
            if output is not None or answer.kind in (Kind.UNCHANGED, Kind.DIFF):
                self.session.forget([call_id])
            return None
        if answer.kind in (Kind.UNCHANGED, Kind.DIFF):
            return answer.text
        return None

    def edited(
        self,
        path: str,
        call_id: str,
        edits: Sequence[tuple[str, str]],
        *,
        replace_all: bool = False,
    ) -> str | None:
        """The host applied ``edits`` ((old, new) in order) to ``path``: adopted when disk is
        what they make of the version the model holds (``Session.adopt_change``). Returns the
        kind recorded, or None for a path filecache does not serve."""
        return self._adopt(path, call_id, edits=list(edits), replace_all=replace_all)

    def wrote(self, path: str, call_id: str, content: str) -> str | None:
        """The host wrote ``content`` to ``path`` (a Write tool, a file a patch adds)."""
        return self._adopt(path, call_id, content=content)

    def deleted(self, path: str, call_id: str) -> str | None:
        """The host deleted ``path``."""
        return self._adopt(path, call_id, deleted=True)

    def changed(self, call_id: str) -> list[str]:
        """Something the host ran may have changed files: re-hash the view (``rehash``)."""
        return self.session.rehash(call_id)

    # -- helpers ----------------------------------------------------------------------------

    def _content(self, result: ReadResult) -> str | None:
        """The raw lines ``result`` stands for (of the version it read), without a notice
        before them (an outside change, an edit of the model's undone): the host shows the
        lines, not the notice. None when they are not known (not kept)."""
        lines = self.cache.engine.versions.lines_of(result.version)
        if lines is None:  # a streamed range of a file too large to keep: its text is the lines
            return result.text if result.kind in (Kind.FULL, Kind.PARTIAL) else None
        return render_lines(result.path, lines, result.start, result.end, numbered=False)

    def _served(self, path: str) -> str | None:
        """``path`` relative to the root when filecache serves it (inside the root, not
        denied), else None."""
        try:
            loc = self.cache.engine.paths.locate(path)
        except FileCacheError:
            return None
        # by name, alias, link target and identity (hard links)
        if self.cache.engine.secrets.denied(loc):
            self._learn_denied(loc)
            return None
        return loc.rel

    def _learn_denied(self, loc: Located) -> None:
        """Hash a denied file the host showed or a command named (never store it): the store
        keeps a keyed hash of its content's hash, so a copy of it (``cp .env copy.txt``) read
        by a later hook call is denied too (``Secrets.version_for``)."""
        from filecache.fsio import read_bytes

        try:
            self.cache.engine.secrets.version_for(
                loc, read_bytes(loc, self.cache.engine.settings.max_file_bytes)
            )
        except (OSError, FileCacheError):
            pass

    def _learn_named(self, command: str, here: str) -> None:
        """The denied files a shell command names (``cp .env copy.txt``): learned."""
        import shlex

        try:
            words = shlex.split(command, comments=False)
        except ValueError:
            words = command.split()
        for word in dict.fromkeys(w for w in words if w and not w.startswith("-")):
            if self.cache.engine.secrets.denied(word):
                self._served(os.path.join(here, word))  # a denied file in the root: learned

    def _adopt(
        self,
        path: str,
        call_id: str,
        *,
        content: str | None = None,
        edits: list[tuple[str, str]] | None = None,
        replace_all: bool = False,
        deleted: bool = False,
    ) -> str | None:
        rel = self._served(path) if not deleted else self._inside(path)
        if rel is None:
            return None
        try:
            return self.session.adopt_change(
                rel, call_id=call_id, content=content, edits=edits, replace_all=replace_all,
                deleted=deleted,
            )  # fmt: skip
        except FileCacheError:
            self.session.rehash(call_id)
            return None

    def _inside(self, path: str) -> str | None:
        try:
            return self.cache.engine.paths.locate(path).rel
        except FileCacheError:
            return None


def _crlf_only(text: str) -> bool:
    """``text`` has ``\r\n`` line breaks and no other ``\r``."""
    return "\r\n" in text and "\r" not in text.replace("\r\n", "")


def _digest(text: str) -> str:
    return version_of(text.encode("utf-8", "surrogatepass")).split(":", 1)[1][:16]


def log_path() -> Path:
    """Where hooks log their failures: ``$XDG_CACHE_HOME/filecache/hooks.log``."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "filecache" / "hooks.log"


def log_failure(host: str, message: str) -> None:
    """One line to ``log_path()`` (never stdout, never raises): a hook that fails internally
    logs this and returns nothing, so the host's own output stands."""
    line = " ".join(message.split())[:500]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    try:
        path = log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{stamp} {host} pid={os.getpid()}: {line}\n")
    except OSError:
        print(f"filecache hook ({host}): {line}", file=sys.stderr)
