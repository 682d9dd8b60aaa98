"""The read-only shell commands agents read files with, parsed and rendered exactly (pure).

``parse_shell_read(command)`` recognises ``cat [-n] FILE…``, ``nl -ba FILE``,
``sed -n SCRIPT FILE`` (scripts of ``A,Bp`` / ``A,+Np`` / ``Ap`` / ``$p`` commands, joined by
``;`` or given as several ``-e``), ``head [-n N|-N] FILE``, ``tail [-n N|-N|-n +N] FILE``, and
one file's output piped through ``sed -n``, ``head`` or ``tail`` stages; and ``grep`` of one
file (``grep [-n] [-A N] [-B N] [-C N] [-F|-E|-G] [-e] PATTERN FILE``) or as the last stage of
such a pipe (``nl -ba F | grep -A 20 'def f'``), for a pattern that matches literally (no
character that is special in the regular expression, or ``-F``; never ``-i``, ``-v``, ``-w``,
``-o``, ``-c`` or other options). Anything else — other flags, several files in a pipe, globs,
quoting the parser does not take, variables, redirections, ``&&``, ``;``, ``cd`` — is
``None``: the caller runs it in the shell.

``render_output`` gives what the command prints for given file lines (``text.split_lines``
form), byte for byte as GNU coreutils and GNU sed print it; ``selection`` the file line numbers
it prints, in order (a line twice when a script prints it twice).

Invariant: for a parsed command and a text file, ``render_output`` equals the command's stdout
(checked against real subprocesses in ``tests/shell/test_shell_parse.py`` and
``tests/shell/test_shell_grep.py``); a file ``nl`` would treat specially (a section delimiter
line) raises ``NotServable``. A grep that matches nothing prints nothing (and exits 1): the
caller runs it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from filecache.core.text import EOF_MARK

__all__ = [
    "Grep",
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
_SED_CMD = re.compile(r"^(\d+|\$)(?:,(\d+|\$|\+\d+))?p$", re.ASCII)
_NL_DELIMITERS = frozenset({"\\:", "\\:\\:", "\\:\\:\\:"})
_BRE_SPECIAL = frozenset("\\.[]*^$")  # a pattern without these matches as a plain substring
_ERE_SPECIAL = _BRE_SPECIAL | frozenset("+?(){}|")
_GREP_FLAGS = frozenset("nFEG")  # short flags that may be combined (``-nF``)
_CONTEXT = re.compile(r"^-([ABC])(\d*)$", re.ASCII)
_COUNT_MAX = 2**64 - 1  # head and tail refuse a larger count ("Value too large")


def _digits(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also takes "²" (which ``int`` refuses) and "٣"
    (which head, sed and grep refuse), as ``\\d`` does without ``re.ASCII``."""
    return text.isascii() and text.isdigit()


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
    grep: Grep | None = None  # the last filter: the lines of the stream that match

    @property
    def path(self) -> str:
        return self.paths[0]


@dataclass(frozen=True)
class Grep:
    """``grep`` of the stream for a ``pattern`` that matches as a plain substring: ``number``
    (``-n``: ``N:`` before a match, ``N-`` before a context line, N its stream line), ``before``
    and ``after`` (``-B``/``-A``/``-C``: context lines), ``groups`` (``--`` between groups: GNU
    grep prints it once any of ``-A``/``-B``/``-C`` is given, ``-A 0`` included)."""

    pattern: str
    number: bool = False
    before: int = 0
    after: int = 0
    groups: bool = False

    def matches(self, line: str) -> bool:
        return self.pattern in line


def _grep(args: list[str]) -> tuple[Grep, list[str]] | None:
    """``grep`` options, pattern and file operands (the caller checks how many files)."""
    number = fixed = extended = False
    context: dict[str, int] = {}
    pattern: str | None = None
    operands: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if operands or not word.startswith("-") or word == "-":
            operands.append(word)
            continue
        found = _CONTEXT.match(word)
        if found is not None:
            value = found[2]
            if not value:
                if i >= len(args) or not _digits(args[i]):
                    return None
                value, i = args[i], i + 1
            context[found[1]] = int(value)
        elif word == "-e":
            if pattern is not None or i >= len(args):
                return None
            pattern, i = args[i], i + 1
        elif len(word) > 1 and set(word[1:]) <= _GREP_FLAGS:
            number |= "n" in word
            fixed |= "F" in word
            extended = (extended or "E" in word) and "G" not in word
        else:
            return None  # -i, -v, -w, -o, -c, -l, -r, long options...: not served
    if pattern is None:
        if not operands:
            return None
        pattern, operands = operands[0], operands[1:]
    special = set() if fixed else (_ERE_SPECIAL if extended else _BRE_SPECIAL)
    if not pattern or "\n" in pattern or any(ch in special for ch in pattern):
        return None
    before = context.get("B", context.get("C", 0))
    after = context.get("A", context.get("C", 0))
    return Grep(pattern, number, before, after, groups=bool(context)), operands


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
    elif args and args[0].startswith("-") and _digits(args[0][1:]):
        n, args = args[0][1:], args[1:]
    if args or n is None:
        return None
    if cmd == "tail" and n.startswith("+") and _digits(n[1:]) and int(n[1:]) <= _COUNT_MAX:
        return Stage("from", max(1, int(n[1:])))
    if not _digits(n) or int(n) > _COUNT_MAX:
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
    if cmd == "grep":
        found = _grep(args)
        if found is None or len(found[1]) != 1:
            return None
        return ShellRead((found[1][0],), "", (), found[0]), False
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
    command = command.strip(" \t\n")
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
    grep = read.grep
    for k, words in enumerate(stages[1:], 2):
        if grep is not None:
            return None  # a filter after grep: not served
        if words[0] == "grep" and k == len(stages):
            found = _grep(words[1:])
            if found is None or found[1]:
                return None
            grep = found[0]
            continue
        stage = _filter(words)
        if stage is None:
            return None
        filters.append(stage)
    return ShellRead(read.paths, read.numbering, read.stages + tuple(filters), grep)


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


def selection(
    read: ShellRead, totals: Sequence[int], files: Sequence[Sequence[str]] | None = None
) -> list[tuple[int, int]]:
    """``(file index, line number)`` of each output line, in order (a ``grep`` needs the
    ``files``' lines, ``split_lines`` form: without them it raises ``NotServable``)."""
    stream = _stream(read, totals)
    if read.grep is None:
        return stream
    if files is None:
        raise NotServable("grep: the lines are needed to tell which match")
    return [(f, n) for f, n, _, _ in _grep_rows(read, files, stream)]


def _grep_rows(
    read: ShellRead, files: Sequence[Sequence[str]], stream: Sequence[tuple[int, int]]
) -> list[tuple[int, int, int, str]]:
    """``(file, line, stream position (1-based), mark)`` of each line grep prints; ``mark`` is
    ``:`` for a match, ``-`` for context, and a row that opens a new group after a gap (when
    context is asked for) has its mark doubled (``"::"``/``"--"``): ``--`` comes before it."""
    grep = read.grep
    assert grep is not None
    offsets = _offsets(files)
    texts = [
        _numbered(read, offsets[f] + n, files[f][n - 1].removesuffix(EOF_MARK)) for f, n in stream
    ]
    hits = [k for k, text in enumerate(texts) if grep.matches(text)]
    shown: dict[int, str] = {}
    for k in hits:
        for j in range(max(0, k - grep.before), min(len(stream), k + grep.after + 1)):
            shown.setdefault(j, "-")
        shown[k] = ":"
    rows: list[tuple[int, int, int, str]] = []
    last = None
    for j in sorted(shown):
        mark = shown[j]
        if last is not None and j != last + 1 and grep.groups:
            mark *= 2
        rows.append((stream[j][0], stream[j][1], j + 1, mark))
        last = j
    return rows


def _offsets(files: Sequence[Sequence[str]]) -> list[int]:
    """Where each file's lines start in the stream the first command wrote (``cat -n``
    numbers across its files)."""
    offsets = [0]
    for lines in files[:-1]:
        offsets.append(offsets[-1] + len(lines))
    return offsets


def _numbered(read: ShellRead, number: int, body: str) -> str:
    return f"{number:6d}\t{body}" if read.numbering else body


def _stream(read: ShellRead, totals: Sequence[int]) -> list[tuple[int, int]]:
    return _piped(read, [(f, n) for f, total in enumerate(totals) for n in range(1, total + 1)])


_T = TypeVar("_T")


def _piped(
    read: ShellRead, stream: list[_T], sed_out: Callable[[list[_T]], list[_T]] = list
) -> list[_T]:
    """``stream`` (the first command's output lines) through the read's stages; ``sed_out``
    rewrites what each ``sed`` stage printed (``_unterminated``: its newlines)."""
    for stage in read.stages:
        if stage.op == "sed":
            stream = sed_out([stream[i] for i in _sed_pick(stage, len(stream))])
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
    return render_lines_at(read, files, selection(read, [len(lines) for lines in files], files))


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
    if read.grep is not None:
        return _render_grep(read, files, picked)
    # Numbers count the stream the first command wrote (cat -n numbers across its files).
    offsets = _offsets(files)
    unterminated = _unterminated(read, files) if read.stages else None
    parts: list[str] = []
    for k, (f, n) in enumerate(picked):
        line = files[f][n - 1]
        open_end = line.endswith(EOF_MARK)
        body = line[:-1] if open_end else line
        if read.numbering:
            body = f"{offsets[f] + n:6d}\t{body}"
        if read.numbering == "nl":
            open_end = False
        if read.stages:  # only the output's last line can lack its newline, as the stages say
            open_end = k + 1 == len(picked) and unterminated == (f, n)
        parts.append(body if open_end else body + "\n")
    return "".join(parts)


def _unterminated(read: ShellRead, files: Sequence[Sequence[str]]) -> tuple[int, int] | None:
    """The ``(file, line)`` the piped output ends on without a newline, or None. A file's last
    line may lack one (not under ``nl``, which ends every line); ``sed`` writes the newline
    before its next output line, so only its last output line can stay open, and only if that
    is the open line; ``head``, ``tail`` and ``tail -n +N`` pass the bytes through, so the
    open line stays open only if it is still the last one."""
    stream = _piped(
        read,
        [
            (f, n, read.numbering != "nl" and n == len(lines) and lines[-1].endswith(EOF_MARK))
            for f, lines in enumerate(files)
            for n in range(1, len(lines) + 1)
        ],
        lambda out: [(f, n, False) for f, n, _ in out[:-1]] + out[-1:],
    )
    return (stream[-1][0], stream[-1][1]) if stream and stream[-1][2] else None


def _render_grep(
    read: ShellRead, files: Sequence[Sequence[str]], picked: Sequence[tuple[int, int]]
) -> str:
    """grep's output for the rows among ``picked`` (every line ends in a newline)."""
    grep = read.grep
    assert grep is not None
    wanted = set(picked)
    offsets = _offsets(files)
    parts: list[str] = []
    rows = _grep_rows(read, files, _stream(read, [len(lines) for lines in files]))
    for f, n, position, mark in rows:
        if (f, n) not in wanted:
            continue
        if len(mark) == 2 and parts:
            parts.append("--\n")
        body = _numbered(read, offsets[f] + n, files[f][n - 1].removesuffix(EOF_MARK))
        prefix = f"{position}{mark[0]}" if grep.number else ""
        parts.append(f"{prefix}{body}\n")
    return "".join(parts)
