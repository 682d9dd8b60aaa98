"""Shell commands that change files in ways a replay can redo, and how they move lines.

``parse_shell_edit(command)`` recognises a command made only of these steps, joined by ``&&``,
``;`` or newlines (comments allowed):

- ``sed -i SCRIPT FILE`` / ``sed -i -e S1 -e S2 FILE`` where every script is made of ``d``,
  ``s/re/repl/[gpI0-9]``, ``a\\text`` / ``i\\text`` / ``c\\text`` (to the script's end)
  commands, each with an optional address (``N``, ``N,M``, ``N,$``, ``$``, ``/re/``), or is a
  single ``N r FILE``;
- a heredoc write: ``cat <<'EOF' > FILE`` (or ``>>``, or ``cat > FILE <<'EOF'``), the body up
  to the delimiter line (an unquoted delimiter only when the body has no ``$``, backquote or
  backslash, which the shell would expand);
- ``cat SRC > DST`` / ``cat SRC >> DST``;
- ``git checkout [--] PATH…`` of file paths: each file back to what it was before the session
  (the trace's ``files/``, which holds the repository's files at the task's commit).

Anything else makes the whole command ``None``: it is opaque (replay keeps its output).

``apply_edit`` redoes the steps on a directory (GNU sed, run with ``--sandbox`` so a script can
neither run commands nor write other files; ``N r FILE`` only reads ``FILE`` inside the root).
``move_lines`` says where each line of a file goes through one ``sed`` step without knowing
its text: the step is run on a file of unique tokens, one per line; lines a line-addressed
``s`` rewrites count as new. Steps whose effect depends on text the caller does not hold
(``/re/`` addresses, ``$``, an unaddressed ``s``) need the whole text (``needs_text``).

I/O: ``apply_edit`` and ``move_lines`` run ``sed`` in a subprocess; without GNU sed every
``sed`` step is unavailable (``sed_available``) and callers keep the command opaque.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from filecache.errors import FileCacheError
from filecache.fsio import locate

__all__ = [
    "EditStep",
    "apply_edit",
    "move_lines",
    "parse_shell_edit",
    "sed_available",
    "sed_text",
]

_ADDR = re.compile(r"(\d+)(?:,(\d+|\$))?|\$|/((?:[^/\\\n]|\\.)*)/")
_READ_INTO = re.compile(r"^\s*(\d+)\s*r\s+(\S+)\s*$")
_HEREDOC = re.compile(
    r"^cat\s+(?:<<\s*(?P<q1>['\"]?)(?P<d1>\w+)(?P=q1)\s*(?P<op1>>>?)\s*(?P<f1>[^\s'\"<>|&;$`*?~]+)"
    r"|(?P<op2>>>?)\s*(?P<f2>[^\s'\"<>|&;$`*?~]+)\s+<<\s*(?P<q2>['\"]?)(?P<d2>\w+)(?P=q2))\s*$"
)
_GIT_RESTORE = re.compile(r"^git\s+checkout\s+(?:--\s+)?((?:[\w./-]+\s*)+)$")
_CAT_INTO = re.compile(r"^cat\s+([^\s'\"<>|&;$`*?]+)\s*(>>?)\s*([^\s'\"<>|&;$`*?]+)\s*$")
_SHELL_SPECIAL = set("`$*?[]{}~<>;&()!|\\")
_TOKEN = "\x01filecache-line-{}\x02"


@dataclass(frozen=True)
class EditStep:
    """One file change. ``op``: ``sed`` (``scripts``), ``write`` / ``append`` (``text``),
    ``copy`` / ``append-copy`` (``source``'s bytes), ``read-into`` (``source`` inserted after
    line ``line``), ``restore`` (the file as it was before the session). ``after_ok``: run
    only if the step before succeeded (``&&``).
    ``needs_text``: the step's effect depends on lines' text (a ``sed`` step only);
    ``rewrites``: lines a line-addressed ``s`` changes."""

    op: str
    path: str
    scripts: tuple[str, ...] = ()
    text: str = ""
    source: str = ""
    line: int = 0
    after_ok: bool = False
    needs_text: bool = False
    rewrites: frozenset[int] = frozenset()


def _split(command: str) -> list[tuple[str, str | None, str]] | None:
    """Top-level parts: (text, heredoc body or None, separator before it)."""
    parts: list[tuple[str, str | None, str]] = []
    cur: list[str] = []
    sep = ";"
    quote = ""
    i = 0
    n = len(command)
    while i < n:
        ch = command[i]
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            i += 1
            continue
        if ch in "'\"":
            quote = ch
            cur.append(ch)
            i += 1
            continue
        if ch == "\\" and command[i + 1 : i + 2] == "\n":
            i += 2
            continue
        if command.startswith("&&", i) or command.startswith("||", i):
            if command.startswith("||", i):
                return None
            parts.append(("".join(cur).strip(), None, sep))
            cur, sep = [], "&&"
            i += 2
            continue
        if ch in ";\n":
            text = "".join(cur).strip()
            body = None
            found = re.search(r"<<-?\s*(['\"]?)(\w+)\1", text) if ch == "\n" else None
            if found is not None:
                if "<<-" in text:
                    return None
                end = command.find("\n" + found.group(2) + "\n", i)
                if end < 0 and command.endswith("\n" + found.group(2)):
                    end = len(command) - len(found.group(2)) - 1
                if end < 0:
                    return None
                body = command[i + 1 : end + 1]
                i = end + 1 + len(found.group(2))
            else:
                i += 1
            parts.append((text, body, sep))
            cur, sep = [], ";"
            continue
        cur.append(ch)
        i += 1
    if quote:
        return None
    parts.append(("".join(cur).strip(), None, sep))
    return [p for p in parts if p[0] and not p[0].startswith("#")]


def _s_end(script: str, pos: int) -> int | None:
    """Where an ``s`` command starting at ``pos`` ends (after its flags), or None."""
    delim = script[pos + 1 : pos + 2]
    if not delim or delim in "\\\n" or delim.isalnum() or delim.isspace():
        return None
    i, fields = pos + 2, 0
    while i < len(script) and fields < 2:
        if script[i] == "\\":
            i += 2
            continue
        if script[i] == "\n":
            return None
        if script[i] == delim:
            fields += 1
        i += 1
    if fields < 2:
        return None
    while i < len(script) and script[i] in "gpI0123456789":
        i += 1
    return i


def _script(script: str) -> tuple[bool, set[int]] | None:
    """(needs_text, lines a line-addressed ``s`` rewrites), or None when not accepted."""
    needs_text, rewrites = False, set[int]()
    pos = 0
    while pos < len(script):
        while pos < len(script) and script[pos] in " ;\n":
            pos += 1
        if pos >= len(script):
            break
        addr = _ADDR.match(script, pos)
        lines: range | None = None
        if addr is not None and addr.group(0):
            pos = addr.end()
            if addr.group(1) and addr.group(2) not in (None, "$"):
                lines = range(int(addr.group(1)), max(int(addr.group(1)), int(addr.group(2))) + 1)
            elif addr.group(1) and addr.group(2) is None:
                lines = range(int(addr.group(1)), int(addr.group(1)) + 1)
            else:
                needs_text = True  # $, N,$ or /re/: which lines depends on the text
        cmd = script[pos : pos + 1]
        if cmd == "d":
            pos += 1
        elif cmd in ("a", "i", "c"):
            return needs_text, rewrites  # the text runs to the end of the script
        elif cmd == "s":
            end = _s_end(script, pos)
            if end is None:
                return None
            if lines is None:
                needs_text = True
            else:
                rewrites.update(lines)
            pos = end
        else:
            return None
        rest = script[pos : pos + 1]
        if rest not in ("", ";", "\n", " "):
            return None
    return needs_text, rewrites


def _sed_step(words: list[str], after_ok: bool) -> EditStep | None:
    if len(words) < 4 or words[1] != "-i":
        return None
    args, path = words[2:-1], words[-1]
    scripts = args[1::2] if args and args[0] == "-e" else args
    if (args and args[0] == "-e" and args[0::2] != ["-e"] * len(scripts)) or not scripts:
        return None
    if any(s.startswith("-") for s in scripts) or path.startswith("-"):
        return None
    if len(scripts) == 1:
        found = _READ_INTO.match(scripts[0])
        if found is not None:
            return EditStep("read-into", path, source=found[2], line=int(found[1]),
                            after_ok=after_ok)  # fmt: skip
    needs_text, rewrites = False, set[int]()
    for script in scripts:
        parsed = _script(script)
        if parsed is None:
            return None
        needs_text = needs_text or parsed[0]
        rewrites |= parsed[1]
    return EditStep("sed", path, tuple(scripts), after_ok=after_ok, needs_text=needs_text,
                    rewrites=frozenset(rewrites))  # fmt: skip


def _unquoted_special(text: str) -> bool:
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
            elif quote == '"' and ch in "`$\\!":
                return True
        elif ch in "'\"":
            quote = ch
        elif ch in _SHELL_SPECIAL:
            return True
    return False


def parse_shell_edit(command: str) -> tuple[EditStep, ...] | None:
    """The file changes ``command`` makes, or None when it does anything else."""
    parts = _split(command)
    if not parts:
        return None
    steps: list[EditStep] = []
    for text, body, sep in parts:
        after_ok = sep == "&&"
        if body is not None:
            found = _HEREDOC.match(text)
            if found is None:
                return None
            quoted = bool(found["q1"] or found["q2"])
            if not quoted and any(ch in body for ch in "$`\\"):
                return None
            op = "append" if (found["op1"] or found["op2"]) == ">>" else "write"
            steps.append(EditStep(op, found["f1"] or found["f2"], text=body, after_ok=after_ok))
            continue
        found = _GIT_RESTORE.match(text)
        if found is not None:
            paths = found[1].split()
            if any(p.startswith("-") or not ("/" in p or "." in p) for p in paths):
                return None  # a branch, or an option: not a file restore
            steps += [
                EditStep("restore", p, after_ok=after_ok or k > 0) for k, p in enumerate(paths)
            ]
            continue
        found = _CAT_INTO.match(text)
        if found is not None:
            op = "append-copy" if found[2] == ">>" else "copy"
            steps.append(EditStep(op, found[3], source=found[1], after_ok=after_ok))
            continue
        if not text.startswith("sed ") or _unquoted_special(text):
            return None
        try:
            words = shlex.split(text)
        except ValueError:
            return None
        step = _sed_step(words, after_ok)
        if step is None:
            return None
        steps.append(step)
    return tuple(steps)


@functools.cache
def sed_available() -> bool:
    """Whether GNU sed (with ``--sandbox``) is on the PATH."""
    sed = shutil.which("sed")
    if sed is None:
        return False
    try:
        out = subprocess.run([sed, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return "GNU sed" in out.stdout


def sed_text(scripts: Sequence[str], text: str) -> str | None:
    """``text`` through ``sed --sandbox`` with ``scripts``; None when sed fails."""
    if not sed_available():
        return None
    argv = ["sed", "--sandbox"] + [a for s in scripts for a in ("-e", s)]
    try:
        out = subprocess.run(argv, input=text.encode("utf-8"), capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode("utf-8", "replace") if out.returncode == 0 else None


def _real(root: Path, path: str) -> Path | None:
    try:
        return locate(root, path).real
    except FileCacheError:
        return None


def apply_edit(steps: Sequence[EditStep], root: Path, originals: Path | None = None) -> list[bool]:
    """Redo ``steps`` on the files under ``root`` (paths relative to it); each step's success.

    ``originals``: the files as they were before the session (for ``restore``; without it a
    restore fails). A step after a failed ``&&`` step does not run (False); a path outside
    ``root`` fails.
    """
    if originals is not None:
        originals = originals.resolve()  # locate() needs a resolved root, never a relative one
    done: list[bool] = []
    for step in steps:
        if step.after_ok and done and not done[-1]:
            done.append(False)
            continue
        done.append(_apply_one(step, root, originals))
    return done


def _apply_one(step: EditStep, root: Path, originals: Path | None) -> bool:
    target = _real(root, step.path)
    if target is None:
        return False
    try:
        if step.op == "restore":
            source = _real(originals, step.path) if originals is not None else None
            if source is None or not source.is_file():
                return False
            target.write_bytes(source.read_bytes())
            return True
        if step.op in ("write", "append"):
            # files/ holds only the files a session touched: their folders may be missing here
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a" if step.op == "append" else "w", encoding="utf-8") as fh:
                fh.write(step.text)
            return True
        if step.op in ("copy", "append-copy", "read-into"):
            source = _real(root, step.source)
            if source is None or not source.is_file():
                return False
            data = source.read_bytes()
            if step.op == "read-into":
                return _read_into(target, data, step.line)
            if step.op == "copy":
                target.write_bytes(data)
            else:
                with target.open("ab") as fh:
                    fh.write(data)
            return True
        if not target.is_file():
            return False
        text = sed_text(step.scripts, target.read_bytes().decode("utf-8"))
        if text is None:
            return False
        target.write_bytes(text.encode("utf-8"))
        return True
    except (OSError, UnicodeDecodeError):
        return False


def _read_into(target: Path, data: bytes, line: int) -> bool:
    """GNU ``N r FILE``: FILE's bytes after line N (a missing final newline is added first)."""
    if not target.is_file():
        return False
    lines = target.read_bytes().split(b"\n")
    tail = lines.pop()
    body = [x + b"\n" for x in lines] + ([tail] if tail else [])
    if line < 1 or line > len(body):
        return False
    if not data.endswith(b"\n") and line < len(body):
        return False  # sed would join FILE's last line with the next one: not redone here
    if not body[line - 1].endswith(b"\n"):
        body[line - 1] += b"\n"
    body.insert(line, data)
    target.write_bytes(b"".join(body))
    return True


def move_lines(step: EditStep, count: int) -> list[int | None] | None:
    """For a ``sed`` step with ``needs_text`` False on a file of at least ``count`` lines:
    the old line number (1-based) of each of the first new lines (None: new text), up to the
    point where old line ``count`` would be; None when sed is unavailable or fails."""
    tokens = "".join(_TOKEN.format(k) + "\n" for k in range(1, count + 1))
    out = sed_text(step.scripts, tokens)
    if out is None:
        return None
    moved: list[int | None] = []
    for row in out.split("\n")[:-1] if out.endswith("\n") else out.split("\n"):
        found = re.fullmatch("\x01filecache-line-(\\d+)\x02", row)
        k = int(found.group(1)) if found else None
        moved.append(None if k is None or k in step.rewrites else k)
    return moved
