"""Reading agent logs, and guessing which files a shell command may change.

``read_log`` accepts a plain or gzipped file (the corpora ship ``.gz``). ``changed_paths`` is
the rebuild's caution: a shell command that names a file and is not plainly read-only (``grep``,
``cat``, ``ls``, ...) may have changed it, so what later reads show of that file is no longer
taken as its content before the session. A command that may change files it does not name
(``git checkout``, ``patch``, a glob under ``sed -i``) may have changed any file. The guess errs
towards "changed": the check in ``trace.py`` catches what it misses, and a wrong "changed" only
costs a read that replay keeps as recorded.
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from filecache.errors import TranscriptError

__all__ = [
    "changed_paths", "content_text", "load_json", "read_log", "relative_path", "trace_name",
]  # fmt: skip

_READ_ONLY = frozenset(
    "cat nl head tail grep egrep fgrep rg ag ls ll find wc file stat diff cmp less more echo "
    "printf sort uniq cut tr awk sed pwd cd true false test [ which type git".split()
)
_GIT_READ_ONLY = frozenset("diff log show status grep blame ls-files rev-parse branch".split())
_ANY_FILE = re.compile(
    r"\bgit\s+(checkout|restore|reset|stash|apply|am|revert|merge|rebase|pull|cherry-pick)\b"
    r"|\bpatch\b|\b(sed|perl)\s+[^|;&]*-i\S*\s[^|;&]*[*?]"
)
# A new branch at the current commit: no file changes (``git checkout -b NAME`` with no start
# point, ``git switch -c NAME``)
_NEW_BRANCH = re.compile(
    r"\bgit\s+(?:checkout\s+-[bB]|switch\s+-[cC]|switch\s+--create)\s+[\w./-]+\s*(?=$|[;&|\n])"
)
_REDIRECT = re.compile(r"(?<![0-9&<>])>{1,2}(?!&)\s*(?!/dev/null)")


def read_log(path: Path) -> str:
    """The text of a log file, gunzipped when it is gzip data.

    Raises:
        TranscriptError: unreadable, or not UTF-8 text.
    """
    try:
        data = Path(path).read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return data.decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise TranscriptError(f"{path}: cannot read the log ({exc})") from exc


def load_json(path: Path) -> Any:
    """A JSON log (plain or gzipped)."""
    try:
        return json.loads(read_log(path))
    except json.JSONDecodeError as exc:
        raise TranscriptError(f"{path}: not JSON ({exc})") from exc


def content_text(content: Any) -> str:
    """A chat message's content as text: a string, or the ``text`` of its parts joined."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def trace_name(path: Path) -> str:
    """A trace directory name from a log's file name, without its log suffixes."""
    name = Path(path).name
    for suffix in (".gz", ".json", ".jsonl", ".traj", ".txt"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")  # a Windows path: D:\\work or D:/work


def relative_path(path: str, root: str) -> str | None:
    """``path`` relative to the agent's working root, or None when it lies outside it.

    A Windows root (``D:\\work\\proj``) takes paths with either separator, and its drive and
    names in any case (as Windows does); the result uses ``/``."""
    if _DRIVE.match(root) or "\\" in root:
        root, path = root.replace("\\", "/"), path.replace("\\", "/")
        base = root.rstrip("/")
        if _DRIVE.match(path) or path.startswith("/"):
            if not path.lower().startswith(base.lower() + "/"):
                return None
            path = path[len(base) + 1 :]
    elif _DRIVE.match(path):
        return None
    root = root.rstrip("/")
    if path.startswith(root + "/"):
        path = path[len(root) + 1 :]
    elif path.startswith("/"):
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _words(command: str) -> list[list[str]]:
    try:
        tokens = shlex.split(command, posix=True)
    except ValueError:
        return [command.split()]
    stages: list[list[str]] = [[]]
    for token in tokens:
        if token in ("|", "||", "&&", ";", "&"):
            stages.append([])
        else:
            stages[-1].append(token)
    return [s for s in stages if s]


def _read_only(command: str) -> bool:
    if _REDIRECT.search(command) or "<<" in command or "tee " in command:
        return False
    for words in _words(re.sub(r"([|;&]+)", r" \1 ", command)):
        name = words[0].rsplit("/", 1)[-1]
        if name not in _READ_ONLY:
            return False
        if name == "sed" and any(w.startswith("-i") or w == "--in-place" for w in words[1:]):
            return False
        if name == "git" and (len(words) < 2 or words[1] not in _GIT_READ_ONLY):
            return False
        if name == "find" and any(w in ("-delete", "-exec", "-execdir") for w in words):
            return False
    return True


def _names(command: str, path: str) -> bool:
    """Whether ``command`` names ``path`` (or its file name) as a whole word."""
    name = path.rsplit("/", 1)[-1]
    return any(
        re.search(rf"(?<![\w.-]){re.escape(word)}(?![\w.-])", command) for word in (path, name)
    )


def changed_paths(command: str, paths: Iterable[str]) -> frozenset[str] | None:
    """Which of ``paths`` the shell ``command`` may change; None when it may change any file."""
    command = _NEW_BRANCH.sub("true", command)
    if _ANY_FILE.search(command):
        return None
    named = frozenset(p for p in paths if _names(command, p))
    if not named or _read_only(command):
        return frozenset()
    return named
