"""An opt-in bash wrapper: read-like shell commands are served through the read cache.

Agents with only a shell read files with ``cat F``, ``nl -ba F``, ``sed -n 'A,Bp' F``,
``head -n N F``, ``tail -n N F``, and these piped through ``sed -n 'A,Bp'``. ``parse_read``
recognises exactly those (anything else — globs, several files, redirections, other flags — is
left to the shell), and ``serve_bash`` answers them from the ``Session``: the command's own
output the first time (byte-identical to what the shell prints, without running it), a FileRef
or a diff after that. Every other command runs, and then the files in the session's view are
re-hashed (``Session.rehash``), so a ``sed -i`` or a ``git checkout`` counts as a change.

Invariant: a recognised command's content answer equals what the command prints for the bytes
filecache read (for a text file within the root); anything filecache cannot serve exactly
(binary, outside the root, missing) falls back to running the command.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import FileCacheError
from .fsio import read_bytes
from .text import decode_text, split_lines

if TYPE_CHECKING:
    from .cache import Session

__all__ = ["BashRead", "parse_read", "serve_bash"]

_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+))?p$")


@dataclass(frozen=True)
class BashRead:
    """A recognised read: lines ``start..end`` (``end`` None: to the end; ``tail``: the last
    ``tail`` lines), numbered like ``nl -ba`` or raw."""

    path: str
    start: int = 1
    end: int | None = None
    tail: int | None = None
    numbered: bool = False


def _sed_range(expr: str) -> tuple[int, int] | None:
    m = _SED_RANGE.match(expr)
    if not m:
        return None
    a = int(m.group(1))
    b = int(m.group(2)) if m.group(2) else a
    return (a, b) if 1 <= a <= b else None


def _count(flag: str, words: list[str]) -> tuple[int, list[str]] | None:
    """``-n N``, ``-nN`` or ``-N`` at the front of ``words``: (N, rest)."""
    if words and words[0] == flag and len(words) > 1 and words[1].isdigit():
        return int(words[1]), words[2:]
    if words and words[0].startswith(flag) and words[0][len(flag) :].isdigit():
        return int(words[0][len(flag) :]), words[1:]
    if words and words[0].startswith("-") and words[0][1:].isdigit():
        return int(words[0][1:]), words[1:]
    return None


def _single(words: list[str]) -> BashRead | None:
    if not words:
        return None
    cmd, args = words[0], words[1:]
    if cmd == "cat" and len(args) == 1 and not args[0].startswith("-"):
        return BashRead(args[0])
    if cmd == "nl" and len(args) == 2 and args[0] == "-ba":
        return BashRead(args[1], numbered=True)
    if cmd == "sed" and len(args) == 3 and args[0] == "-n":
        span = _sed_range(args[1])
        return BashRead(args[2], span[0], span[1]) if span else None
    if cmd in ("head", "tail"):
        found = _count("-n", args)
        if found is None or len(found[1]) != 1 or found[0] < 1:
            return None
        n, rest = found
        return BashRead(rest[0], 1, n) if cmd == "head" else BashRead(rest[0], tail=n)
    return None


def parse_read(command: str) -> BashRead | None:
    """The read a command performs, or None if it is anything else."""
    if any(ch in command for ch in "><;&`$*?\n"):
        return None
    stages = command.split("|")
    if len(stages) > 2:
        return None
    try:
        first = _single(shlex.split(stages[0]))
        if first is None or len(stages) == 1:
            return first
        words = shlex.split(stages[1])
    except ValueError:
        return None
    if len(words) != 3 or words[:2] != ["sed", "-n"]:
        return None
    span = _sed_range(words[2])
    if span is None or first.tail is not None:
        return None
    base = first.start
    start = base + span[0] - 1
    end = base + span[1] - 1
    if first.end is not None:
        end = min(end, first.end)
    if start > end:
        return None
    return BashRead(first.path, start, end, numbered=first.numbered)


def serve_bash(
    session: Session, command: str, run: Callable[[str], str], call_id: str | None = None
) -> str:
    """What the model sees for ``command``: served from the cache when it is a read, else run."""
    read = parse_read(command)
    if read is not None:
        try:
            return _serve(session, read, call_id)
        except FileCacheError:
            pass  # not servable exactly (missing, binary, outside the root...): let bash say
    output = run(command)
    session.rehash(call_id)
    return output


def _serve(session: Session, read: BashRead, call_id: str | None) -> str:
    offset, limit = read.start, None if read.end is None else read.end - read.start + 1
    if read.tail is not None:
        # Only to place the range: the answer below hashes and slices its own single read.
        data = read_bytes(session.cache.locate(read.path), session.cache.settings.max_file_bytes)
        total = len(split_lines(decode_text(data, read.path)))
        offset, limit = max(1, total - read.tail + 1), read.tail
    result = session.read(
        read.path, offset=offset, limit=limit, mode="full", numbered=read.numbered,
        call_id=call_id,
    )  # fmt: skip
    if result.kind not in ("full", "partial") or not read.numbered:
        return result.text
    body = result.text.split("\n", 1)[1] if "\n" in result.text else ""
    return body.replace("\n\\ No newline at end of file\n", "\n")
