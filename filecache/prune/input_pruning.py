"""Superseded tool inputs: the payloads of the model's own writes and edits, once it holds them
elsewhere.

Pure. A write's ``content`` (or an edit's ``old_string``/``new_string``, a ``MultiEdit``'s
``edits``) is re-sent on every later request as part of the model's own call. Once the same file was
written again (by the model, or changed outside: a shell command), or a later content read that is
still verbatim in the transcript shows the whole file, the payload is history: ``superseded_inputs``
finds those calls and ``cleared_arguments`` gives each its new arguments, where every long string is
replaced by a short reference (``render.render_cleared_input``: its size, why, and that reading the
file gives what it holds now). ``pruning.plan_prune`` turns them into actions
(``PruneAction.target`` = ``"input"``) that the cost gate weighs like any other, and checks them
again after the gate.

Invariants:
- Never for an input that a later FileRef or diff still in the transcript relies on
  (``relied``): its lines are what the model holds of the file; nor for one superseded only by
  a read that is degraded, cleared, or about to be (``kept``); nor for a failed call, a denied
  file (``secret``: its content is never stored, not even as an archived original), or a call
  whose result is in the protected tail.
- Never for an input whose file is gone (a change seen outside deleted it: ``rm``, ``git
  clean``): the reference would send the model to read a file that no longer exists.
- A heredoc's target is the file the shell wrote: after a ``cd`` in the same command it is that
  folder's (``cd sub && cat > f.txt <<EOF`` writes ``sub/f.txt``); after a ``cd`` this cannot
  follow, the heredoc is not taken for a write at all.
- A read answered without a ledger (an unknown answer, ``""``) never supersedes: it may be a
  tool's truncated view of the file. Only a ledger's ``full`` answer, or a later write, does.
- The new arguments keep every key, the path as given and every value's JSON type (a replaced
  string is a string, so the call still validates against its tool's schema); the call id, its
  name and its result are untouched. The text is deterministic in the call's arguments and the
  reason, and a projection recorded before (``prior``) is used as it is: the same bytes on
  every later request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from filecache.core.kinds import Kind, Tool
from filecache.core.render import INPUT_MARKER, MARKERS, render_cleared_input
from filecache.prune.file_tools import same_written
from filecache.prune.results import ResultInfo

__all__ = [
    "INPUT_SUFFIX", "MIN_PAYLOAD", "Superseded", "cleared_arguments", "cleared_heredocs",
    "heredoc_writes", "is_cleared_input", "superseded_inputs",
]  # fmt: skip

MIN_PAYLOAD = 200
"""Strings shorter than this (characters) stay: a reference would not be much shorter."""
_HEREDOC_LINE = re.compile(
    r"^[ \t]*cat[ \t]+(?:<<[ \t]*(?P<q1>['\"]?)(?P<d1>\w+)(?P=q1)[ \t]*"
    r">[ \t]*(?P<f1>[^\s'\"<>|&;$`]+)"
    r"|>[ \t]*(?P<f2>[^\s'\"<>|&;$`]+)[ \t]+<<[ \t]*(?P<q2>['\"]?)(?P<d2>\w+)(?P=q2))[ \t]*$",
    re.M,
)
INPUT_SUFFIX = "#input"
"""The store keys a call's archived input and its projection under ``call_id + INPUT_SUFFIX``
(a result's are under ``call_id``)."""


@dataclass(frozen=True, kw_only=True)
class Superseded:
    """Why a call's input may go: ``reason``; ``read``: the later read that shows the file
    (it must stay verbatim), or None when a later write superseded it; ``heredocs``: for a
    shell command, the targets of the heredoc writes whose bodies go (others stay)."""

    reason: str
    read: str | None = None
    heredocs: tuple[str, ...] = ()


def heredoc_writes(command: str) -> list[tuple[str, int, int]]:
    """``(target, start, end)`` of each heredoc that replaces a file (``cat <<'EOF' > F`` or
    ``cat > F <<'EOF'`` on a line of its own, then the body up to the delimiter line): the body
    is ``command[start:end]``. Appends (``>>``) and anything else are not writes of a file."""
    out: list[tuple[str, int, int]] = []
    for found in _HEREDOC_LINE.finditer(command):
        target = _in_shell_folder(command[: found.start()], found["f1"] or found["f2"])
        if target is None:
            continue  # written where the shell was after a cd we cannot follow: not known
        delimiter = found["d1"] or found["d2"]
        start = found.end() + 1
        if start > len(command):
            continue
        close = re.compile(rf"^{re.escape(delimiter)}$", re.M).search(command, start)
        if close is None:
            continue
        out.append((target, start, close.start()))
    return out


_CD = re.compile(r"(?:^|[;&|(]|&&|\|\|)[ \t]*(?:cd|pushd|popd)\b(?P<rest>[^\n;&|)]*)", re.M)
_PLAIN_DIR = re.compile(r"[ \t]+(?P<dir>[\w.][\w./-]*)[ \t]*")


def _in_shell_folder(before: str, target: str) -> str | None:
    """``target`` as a path from the folder the command started in: after ``cd sub`` it is
    ``sub/target``. None when a ``cd`` before it goes where this cannot follow (a variable,
    ``cd -``, ``cd`` alone, ``pushd``/``popd``, several), unless the target is absolute."""
    moves = list(_CD.finditer(before))
    if not moves or target.startswith("/"):
        return target
    folder = ""
    for move in moves:
        plain = _PLAIN_DIR.fullmatch(move["rest"])
        if plain is None or not move[0].lstrip("&|;( \t").startswith("cd"):
            return None
        if plain["dir"].startswith("/"):
            return None  # absolute: not a path from the root the planner knows
        folder = f"{folder}/{plain['dir']}" if folder else plain["dir"]
    return f"{folder}/{target}"


def superseded_inputs(
    infos: Sequence[ResultInfo],
    *,
    kept: Collection[str],
    relied: Collection[str],
    protected: Collection[str],
    secret: Collection[str],
    done: Collection[str] = (),
    commands: Mapping[str, str] | None = None,
) -> dict[str, Superseded]:
    """call id of a write or edit (or of a shell command with heredoc writes: ``commands``,
    call id -> command) -> why its input is superseded. ``kept``: the reads that stay verbatim
    in this pass (one of them may show the file); ``done``: inputs already replaced. Two paths
    are one file by ``results.same_written``."""
    commands = commands or {}
    targets: list[list[str]] = []  # per result: the files its call's input wrote
    for info in infos:
        if info.kind in (Tool.WRITE, Tool.EDIT) and info.path is not None:
            targets.append([info.path])
        elif info.call_id in commands and info.answer != Kind.ERROR:
            targets.append([t for t, _, _ in heredoc_writes(commands[info.call_id])])
        else:
            targets.append([])
    why: dict[str, Superseded] = {}
    for i, info in enumerate(infos):
        cid = info.call_id
        if not targets[i] or cid in done or cid in relied or cid in protected or cid in secret:
            continue
        if info.answer == Kind.ERROR:
            continue
        gone: dict[str, tuple[str, str | None]] = {}
        for path in targets[i]:
            for n in range(i + 1, len(infos)):
                later = infos[n]
                if later.answer == Kind.ERROR:
                    continue
                if any(same_written(t, path) for t in targets[n]) and later.kind != Tool.EDIT:
                    gone[path] = (f"superseded by write {later.call_id}", None)
                    break
                if later.path is None or not same_written(later.path, path):
                    continue
                if later.kind == Tool.CHANGE and later.version is None:
                    break  # the file is gone: the input is the model's only copy; it stays
                if later.kind in (Tool.WRITE, Tool.CHANGE):  # the file is no longer this
                    verb = "write" if later.kind == Tool.WRITE else "a change seen outside"
                    gone[path] = (f"superseded by {verb} {later.call_id}", None)
                    break
                if (
                    later.kind == Tool.READ
                    and later.answer == Kind.FULL  # the ledger's: the whole file, as content
                    and later.call_id in kept
                ):
                    gone[path] = (
                        f"the file is shown in full by read {later.call_id}",
                        later.call_id,
                    )
                    break
        if not gone:
            continue
        if info.kind in (Tool.WRITE, Tool.EDIT):
            reason, read = gone[targets[i][0]]
            why[cid] = Superseded(reason=reason, read=read)
        else:  # a command's heredocs: each superseded one goes (a kept read: the first's)
            reason, read = next(iter(gone.values()))
            reads = {r for _, r in gone.values() if r is not None}
            if len(reads) > 1:
                continue  # one read to keep verbatim per call, so the check stays simple
            why[cid] = Superseded(reason=reason, read=next(iter(reads), None), heredocs=tuple(gone))
    return why


def cleared_heredocs(command: str, targets: Collection[str], reason: str) -> str | None:
    """``command`` with the body of each heredoc write to one of ``targets`` replaced by a
    reference line (the delimiters stay: it is still the same shell command's shape)."""
    out, at, changed = [], 0, False
    for target, start, end in heredoc_writes(command):
        body = command[start:end]
        if target not in targets or len(body) < MIN_PAYLOAD or body.startswith(MARKERS):
            continue
        out += [command[at:start], render_cleared_input(target, body, reason), "\n"]
        at, changed = end, True
    if not changed:
        return None
    out.append(command[at:])
    return "".join(out)


def _cleared(value: Any, path: str, reason: str) -> tuple[Any, bool]:
    """``value`` with every long string (not the path, not one of filecache's own texts)
    replaced by a reference; and whether anything was."""
    if isinstance(value, str):
        if len(value) >= MIN_PAYLOAD and value != path and not value.startswith(MARKERS):
            return render_cleared_input(path, value, reason), True
        return value, False
    if isinstance(value, list):
        items = [_cleared(v, path, reason) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    if isinstance(value, dict):
        pairs = {k: _cleared(v, path, reason) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return value, False


def cleared_arguments(arguments: Mapping[str, Any], path: str, reason: str) -> str | None:
    """The new arguments of a superseded write or edit (JSON object text), or None when no
    argument is long enough to be worth a reference."""
    new, changed = _cleared(dict(arguments), path, reason)
    if not changed:
        return None
    return json.dumps(new, ensure_ascii=False)


def is_cleared_input(raw_arguments: str) -> bool:
    """Whether a call's arguments already carry a cleared input (a pass before replaced it)."""
    return INPUT_MARKER in raw_arguments
