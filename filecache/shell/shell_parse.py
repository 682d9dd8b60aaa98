"""The read-only shell commands agents read files with, parsed and rendered exactly (pure).

``parse_shell_read(command)`` recognises ``cat [-n] FILE…``, ``nl -ba FILE``,
``sed -n SCRIPT FILE`` (scripts of ``A,Bp`` / ``A,+Np`` / ``Ap`` / ``$p`` commands, joined by
``;`` or given as several ``-e``), ``head [-n N|-N] FILE``, ``tail [-n N|-N|-n +N] FILE``, and
one file's output piped through ``sed -n``, ``head`` or ``tail`` stages. Anything else — other
flags, several files in a pipe, globs, quoting the parser does not take, variables,
redirections, ``&&``, ``;``, ``cd`` — is ``None``: the caller runs it in the shell.

``render_output`` gives what the command prints for given file lines (``text.split_lines``
form), byte for byte as GNU coreutils and GNU sed print it; ``selection`` the file line numbers
it prints, in order (a line twice when a script prints it twice).

Invariant: for a parsed command and a text file, ``render_output`` equals the command's stdout
(checked against real subprocesses in ``tests/shell/test_shell_parse.py``); a file ``nl`` would
treat
specially (a section delimiter line) raises ``NotServable``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from filecache.core.text import EOF_MARK

__all__ = [
    "NotServable",
    "ShellRead",
    "Stage",
    "parse_shell_read",
    "render_lines_at",
    "render_output",
    "selection",
    "spans",
]

_UNSAFE = set("`$*?[]{}~<>;&()!#\\\n\r\t")  # outside quotes these mean more than a word
_SED_CMD = re.compile(r"^(\d+|\$)(?:,(\d+|\$|\+\d+))?p$")
_NL_DELIMITERS = frozenset({"\\:", "\\:\\:", "\\:\\:\\:"})


class NotServable(Exception):
    """The command's output cannot be computed here exactly (the caller runs it)."""


@dataclass(frozen=True)
class Stage:
    """One line filter: ``sed`` (``ranges``: (first, last) with -1 for ``$``, a ``+N`` as
    ``last = -2 - N``), ``head`` (first ``count``), ``tail`` (last ``count``) or ``from``
    (``tail -n +N``: from stream line ``count``)."""

    op: str
    count: int = 0
    ranges: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ShellRead:
    """A recognised read: the files, how the first command numbers lines, the filters after.

    ``numbering`` is ``""`` (raw), ``"cat"`` (``cat -n``: an unterminated last line stays so)
    or ``"nl"`` (``nl -ba``: every output line ends in a newline).
    """

    paths: tuple[str, ...]
    numbering: str = ""
    stages: tuple[Stage, ...] = ()

    @property
    def path(self) -> str:
        return self.paths[0]


def _sed_script(script: str) -> list[tuple[int, int]] | None:
    ranges: list[tuple[int, int]] = []
    for part in script.split(";"):
        m = _SED_CMD.match(part.strip())
        if m is None:
            return None
        first = -1 if m[1] == "$" else int(m[1])
        if first == 0:
            return None
        last_text = m[2]
        if last_text is None:
            last = first
        elif last_text == "$":
            last = -1
        elif last_text.startswith("+"):
            last = -2 - int(last_text[1:])
        else:
            last = int(last_text)
            if last == 0:
                return None
        ranges.append((first, last))
    return ranges or None


def _sed(args: list[str]) -> Stage | None:
    """``sed -n SCRIPT`` or ``sed -n -e S1 -e S2``; the file (if any) is the caller's."""
    if not args or args[0] != "-n":
        return None
    rest, scripts = args[1:], []
    if rest and rest[0] == "-e":
        while len(rest) >= 2 and rest[0] == "-e":
            scripts.append(rest[1])
            rest = rest[2:]
    elif rest:
        scripts.append(rest[0])
        rest = rest[1:]
    if not scripts or rest:
        return None
    ranges: list[tuple[int, int]] = []
    for script in scripts:
        found = _sed_script(script)
        if found is None:
            return None
        ranges.extend(found)
    return Stage("sed", ranges=tuple(ranges))


def _head_tail(cmd: str, args: list[str]) -> Stage | None:
    """``-n N``, ``-nN``, ``-N``, nothing (10); tail also ``-n +N``."""
    n: str | None = "10"
    if args and args[0] == "-n" and len(args) >= 2:
        n, args = args[1], args[2:]
    elif args and args[0].startswith("-n") and len(args[0]) > 2:
        n, args = args[0][2:], args[1:]
    elif args and args[0].startswith("-") and args[0][1:].isdigit():
        n, args = args[0][1:], args[1:]
    if args or n is None:
        return None
    if cmd == "tail" and n.startswith("+") and n[1:].isdigit():
        return Stage("from", max(1, int(n[1:])))
    if not n.isdigit():
        return None
    return Stage(cmd, int(n))


def _first(words: list[str]) -> tuple[ShellRead, bool] | None:
    """The command that reads the file(s); the bool: more files are allowed (cat only)."""
    cmd, args = words[0], words[1:]
    files = [a for a in args if not a.startswith("-")]
    flags = [a for a in args if a.startswith("-")]
    if cmd == "cat":
        if flags not in ([], ["-n"]) or not files or args[: len(flags)] != flags:
            return None
        return ShellRead(tuple(files), "cat" if flags else ""), True
    if cmd == "nl":
        if args[:1] != ["-ba"] or len(args) != 2 or args[1].startswith("-"):
            return None
        return ShellRead((args[1],), "nl"), False
    if not args or args[-1].startswith("-"):
        return None
    path, opts = args[-1], args[:-1]
    stage = _filter([cmd, *opts])
    if stage is None:
        return None
    return ShellRead((path,), "", (stage,)), False


def _filter(words: list[str]) -> Stage | None:
    cmd, args = words[0], words[1:]
    if cmd == "sed":
        return _sed(args)
    if cmd in ("head", "tail"):
        return _head_tail(cmd, args)
    return None


def _stages(command: str) -> list[list[str]] | None:
    """Words of each ``|`` stage, or None when anything but plain words and pipes occurs."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    stages: list[list[str]] = [[]]
    for token in tokens:
        if token == "|":
            stages.append([])
        elif set(token) == {"|"}:
            return None
        else:
            stages[-1].append(token)
    return stages if all(stages) else None


def _unquoted_unsafe(command: str) -> bool:
    """Whether a character the shell would interpret appears outside single quotes."""
    quote = ""
    for ch in command:
        if quote:
            if ch == quote:
                quote = ""
            elif quote == '"' and ch in "`$\\!":
                return True
            continue
        if ch in "'\"":
            quote = ch
        elif ch in _UNSAFE:
            return True
    return bool(quote)


def parse_shell_read(command: str) -> ShellRead | None:
    """The read ``command`` performs, or None when it is anything else (run it in the shell)."""
    command = command.strip()
    if not command or _unquoted_unsafe(command):
        return None
    stages = _stages(command)
    if not stages:
        return None
    first = _first(stages[0])
    if first is None:
        return None
    read, many = first
    if len(read.paths) > 1 and (len(stages) > 1 or not many):
        return None
    if any(not p or p.startswith("-") for p in read.paths):
        return None
    filters = []
    for words in stages[1:]:
        stage = _filter(words)
        if stage is None:
            return None
        filters.append(stage)
    return ShellRead(read.paths, read.numbering, read.stages + tuple(filters))


# -- rendering ----------------------------------------------------------------------------------


def _sed_pick(stage: Stage, size: int) -> list[int]:
    """Stream positions (0-based) ``sed -n`` prints, in output order (GNU sed semantics)."""
    out: list[int] = []
    active = [False] * len(stage.ranges)
    ends = [0] * len(stage.ranges)
    for i in range(size):
        n = i + 1
        is_last = n == size
        for k, (first, last) in enumerate(stage.ranges):
            if active[k]:
                out.append(i)
                end = ends[k]
                if (end == -1 and is_last) or (end != -1 and n >= end):
                    active[k] = False
                continue
            hit = is_last if first == -1 else n == first
            if not hit:
                continue
            out.append(i)
            if last == -1:
                active[k] = not is_last
                ends[k] = -1
            elif last <= -2:
                end = n + (-2 - last)
                active[k] = end > n
                ends[k] = end
            elif first != -1 and last > n:
                active[k] = True
                ends[k] = last
    return out


def selection(read: ShellRead, totals: Sequence[int]) -> list[tuple[int, int]]:
    """``(file index, line number)`` of each output line, in order."""
    stream = [(f, n) for f, total in enumerate(totals) for n in range(1, total + 1)]
    for stage in read.stages:
        if stage.op == "sed":
            stream = [stream[i] for i in _sed_pick(stage, len(stream))]
        elif stage.op == "head":
            stream = stream[: stage.count]
        elif stage.op == "tail":
            stream = stream[max(0, len(stream) - stage.count) :] if stage.count else []
        else:  # from
            stream = stream[stage.count - 1 :]
    return stream


def spans(lines: Sequence[int]) -> list[tuple[int, int]]:
    """Runs of consecutive line numbers, in output order."""
    out: list[tuple[int, int]] = []
    for n in lines:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def render_output(read: ShellRead, files: Sequence[Sequence[str]]) -> str:
    """What the command prints for these files' lines (``split_lines`` form, in ``paths`` order).

    Raises:
        NotServable: ``nl`` on a file with a section delimiter line (it renumbers there), or
            ``cat -n`` of several files where one before the last lacks its final newline.
    """
    return render_lines_at(read, files, selection(read, [len(lines) for lines in files]))


def render_lines_at(
    read: ShellRead, files: Sequence[Sequence[str]], picked: Sequence[tuple[int, int]]
) -> str:
    """The command's output format applied to the ``(file index, line)`` lines ``picked``.

    Raises:
        NotServable: as ``render_output``.
    """
    if read.numbering == "nl" and any(
        line.removesuffix(EOF_MARK) in _NL_DELIMITERS for line in files[0]
    ):
        raise NotServable("nl treats this file's delimiter lines specially")
    if read.numbering == "cat" and any(
        lines and lines[-1].endswith(EOF_MARK) for lines in files[:-1]
    ):
        raise NotServable("cat -n joins an unterminated last line with the next file's first")
    # Numbers count the stream the first command wrote (cat -n numbers across its files).
    offsets = [0]
    for lines in files[:-1]:
        offsets.append(offsets[-1] + len(lines))
    parts: list[str] = []
    for k, (f, n) in enumerate(picked):
        line = files[f][n - 1]
        open_end = line.endswith(EOF_MARK)
        body = line[:-1] if open_end else line
        if read.numbering:
            body = f"{offsets[f] + n:6d}\t{body}"
        if read.numbering == "nl":
            open_end = False
        if open_end and k + 1 < len(picked) and read.stages:
            open_end = False  # sed: the next output line starts on a new line
        parts.append(body if open_end else body + "\n")
    return "".join(parts)
