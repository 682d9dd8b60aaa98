"""Reading and writing a host's own configuration files, for ``filecache install``.

Every installer reads a JSON object (Claude Code's settings.json, Codex's hooks.json,
opencode.json) and writes a file back without ever leaving half of one: ``load_json_object``
refuses what it cannot merge with (the user fixes it by hand, nothing is written), and
``write_atomically`` replaces the file in one rename, keeping its mode. A file that is a symlink
(dotfiles kept by stow or chezmoi) is written through: the link's final target is replaced, in
the target's folder, and the link stays a link.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from filecache.errors import ConfigError

__all__ = ["CLIENT", "client_command", "load_json_object", "write_atomically"]

CLIENT = Path(__file__).resolve().with_name("hook_client.py")
"""The hook client script every installed hook command runs (``hook_client``)."""


def client_command(host: str) -> str:
    """The hook command of ``host``: this interpreter, isolated and without ``site``, on the
    thin client's file (``<python> -I -S <.../hosts/hook_client.py> HOST``).

    ``-I``: the project's folder (where the host runs the hook) is not on ``sys.path``, so a
    repository cannot put its own ``filecache/`` in our place. ``-S``: the client needs only the
    interpreter's built-in modules, and skipping ``site`` (the virtualenv's ``.pth`` files, an
    editable install's finder) is most of a bare start's cost; it loads ``site`` itself before
    it runs a call in-process. ``python -I -m filecache.adapters.hosts HOST`` is the same
    client, with ``site`` (what earlier releases installed; it keeps working)."""
    return f"{shlex.quote(sys.executable)} -I -S {shlex.quote(str(CLIENT))} {host}"


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
