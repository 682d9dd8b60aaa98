"""Reading and writing a host's own configuration files, for ``filecache install``.

Every installer reads a JSON object (Claude Code's settings.json, Codex's hooks.json,
opencode.json) and writes a file back without ever leaving half of one: ``load_json_object``
refuses what it cannot merge with (the user fixes it by hand, nothing is written), and
``write_atomically`` replaces the file in one rename, keeping its mode. A file that is a symlink
(dotfiles kept by stow or chezmoi) is written through: the link's final target is replaced, in
the target's folder, and the link stays a link.

The hook command (``client_command``) guarantees by itself that a hook never blocks or corrupts
its host: a POSIX ``sh`` line runs the interpreter only when it and the client script exist,
discards stderr, prints the client's stdout only when the client exited 0, and always exits 0.
``hook_parts`` reads any hook command filecache ever wrote (this form, and the bare
``-I -S .../hook_client.py``, ``-m filecache.adapters.hosts`` and ``filecache hook`` forms of
earlier releases), whatever interpreter it names and whether or not that still exists.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filecache.errors import ConfigError

__all__ = [
    "CLIENT",
    "GUARD",
    "HookParts",
    "Installed",
    "client_command",
    "hook_parts",
    "load_json_object",
    "write_atomically",
]

CLIENT = Path(__file__).resolve().with_name("hook_client.py")
"""The hook client script every installed hook command runs (``hook_client``)."""


GUARD = (
    "exec 2>/dev/null; "
    'if [ -x "$1" ] && [ -f "$2" ] && o=$("$1" -I -S "$2" "$3"); '
    'then printf %s "$o"; else cat >/dev/null; fi; exit 0'
)
"""The ``sh`` script every hook command runs (``$1`` the interpreter, ``$2`` the client, ``$3``
the host): the host's own result stands whatever fails. No interpreter or no script (the
package uninstalled, the virtualenv removed): nothing runs, the payload is read and dropped (a
host writing it must not meet a closed pipe). A client that fails (an import error, a crash, a
kill) prints nothing: its output is printed only after it exited 0, and only as a whole
(Claude Code and Codex parse stdout as JSON). Exit status 0 always; stderr goes nowhere."""

_NAME = "filecache-hook"  # $0 of the guard: what ps shows


def client_command(host: str) -> str:
    """The hook command of ``host``: ``/bin/sh -c GUARD`` on this interpreter and the thin
    client's file, both by absolute path
    (``/bin/sh -c '...' filecache-hook <python> <.../hosts/hook_client.py> HOST``).

    The guard (``GUARD``) runs ``<python> -I -S <client> HOST``. ``-I``: the project's folder
    (where the host runs the hook) is not on ``sys.path``, so a repository cannot put its own
    ``filecache/`` in our place. ``-S``: the client needs only the interpreter's built-in
    modules, and skipping ``site`` (the virtualenv's ``.pth`` files, an editable install's
    finder) is most of a bare start's cost; it loads ``site`` itself before it runs a call
    in-process. ``/bin/sh`` by its path: the host may run the command through the user's own
    shell (fish, say), or split it into words without one."""
    quote = shlex.quote
    return f"/bin/sh -c {quote(GUARD)} {_NAME} {quote(sys.executable)} {quote(str(CLIENT))} {host}"


@dataclass(frozen=True)
class HookParts:
    """What a hook command filecache wrote runs: the host it serves, the interpreter and the
    client script (None: not named, as in ``filecache hook HOST``), and whether the command
    is guarded (``GUARD``: harmless when they are gone)."""

    host: str
    interpreter: str | None
    script: str | None
    guarded: bool

    @property
    def runs(self) -> bool:
        """Whether the interpreter and the script it names are still there."""
        if self.interpreter is None:
            return False
        there = os.access(self.interpreter, os.X_OK)
        return there and (self.script is None or os.path.isfile(self.script))


_MODULE = "filecache.adapters.hosts"


def hook_parts(command: str) -> HookParts | None:
    """The parts of ``command`` when it is a hook command filecache wrote (any release, any
    interpreter), else None."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if len(argv) == 7 and argv[:2] == ["/bin/sh", "-c"] and argv[3] == _NAME:
        if _client(argv[5]) and argv[6]:
            return HookParts(argv[6], argv[4], argv[5], argv[2] == GUARD)
        return None
    if len(argv) >= 2 and _client(argv[-2]):  # PYTHON -I -S .../hook_client.py HOST
        return HookParts(argv[-1], argv[0] if len(argv) > 2 else None, argv[-2], False)
    if len(argv) >= 3 and argv[-3:-1] == ["-m", _MODULE]:  # PYTHON -I -m filecache... HOST
        return HookParts(argv[-1], argv[0] if len(argv) > 3 else None, None, False)
    if len(argv) == 3 and os.path.basename(argv[0]) == "filecache" and argv[1] == "hook":
        return HookParts(argv[2], argv[0], None, False)
    return None


def _client(path: str) -> bool:
    return os.path.basename(path) == "hook_client.py"


@dataclass(frozen=True)
class Installed:
    """filecache's hooks for one host at one scope: the file that holds them, what each of its
    commands (or opencode's plugin entries) runs, and the ports its http hooks call (Claude
    Code's ``install --http``; ``count`` includes them)."""

    host: str
    scope: str
    path: Path
    interpreter: str | None
    script: str | None
    guarded: bool
    count: int
    http_ports: tuple[int, ...] = ()

    @property
    def runs(self) -> bool:
        return HookParts(self.host, self.interpreter, self.script, self.guarded).runs


def load_json_object(path: Path, *, missing: Any = None) -> Any:
    """The JSON object in ``path``; ``missing`` when there is no file, ``{}`` when it is empty.

    Raises:
        ConfigError: unreadable, not JSON, or not an object (one line that says to fix it).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return missing
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror}); fix its permissions") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"{path}: not valid JSON ({exc}); fix it by hand, then install again"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object; fix it by hand, then install again")
    return data


def write_atomically(path: Path, text: str, *, within: Path | None = None) -> None:
    """Replace ``path`` with ``text`` in one rename (its mode kept; its folder made).

    A symlink is followed to its final target, which is the file replaced (the temporary file
    is made beside the target, so the rename stays on one file system): the link stays a link.
    ``within`` (a project install's project): a link that leads out of it is refused, so a
    repository's ``.claude/settings.json -> ~/.claude/settings.json`` cannot turn a project
    install into a user-wide one.

    Raises:
        ConfigError: the folder or the file cannot be written, or leads out of ``within``.
    """
    target = Path(os.path.realpath(path))
    if within is not None:
        top = os.path.realpath(within)
        if os.path.commonpath([str(target), top]) != top:
            raise ConfigError(
                f"{path} leads out of the project (to {target}) through a symbolic link; "
                "filecache does not write a project's settings there: remove the link, or "
                "install for the user (--user)"
            )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".filecache", dir=target.parent
        )
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write it ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ConfigError(f"{path}: cannot write it ({exc.strerror})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
