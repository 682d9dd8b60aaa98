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
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from filecache.core.kinds import Kind, Tool
from filecache.core.render import INPUT_MARKER, MARKERS, render_cleared_input

if TYPE_CHECKING:
    from filecache.prune.pruning import ResultInfo

__all__ = [
    "INPUT_SUFFIX", "MIN_PAYLOAD", "cleared_arguments", "is_cleared_input", "superseded_inputs",
]  # fmt: skip

MIN_PAYLOAD = 200
"""Strings shorter than this (characters) stay: a reference would not be much shorter."""
INPUT_SUFFIX = "#input"
"""The store keys a call's archived input and its projection under ``call_id + INPUT_SUFFIX``
(a result's are under ``call_id``)."""


def superseded_inputs(
    infos: Sequence[ResultInfo],
    *,
    kept: Callable[[ResultInfo], bool],
    relied: Collection[str],
    protected: Collection[str],
    secret: Collection[str],
    same_path: Callable[[str, str], bool],
    done: Collection[str] = (),
) -> dict[str, tuple[str, str | None]]:
    """call id of a write or edit -> (why its input is superseded, the read that shows the file
    now, or None when a later write superseded it). ``done``: inputs already replaced."""
    why: dict[str, tuple[str, str | None]] = {}
    for i, info in enumerate(infos):
        if info.kind not in (Tool.WRITE, Tool.EDIT) or info.path is None:
            continue
        cid = info.call_id
        if cid in done or cid in relied or cid in protected or cid in secret:
            continue
        if info.answer == Kind.ERROR:
            continue
        for later in infos[i + 1 :]:
            if later.path is None or not same_path(later.path, info.path):
                continue
            if later.answer == Kind.ERROR:
                continue
            if later.kind in (Tool.WRITE, Tool.CHANGE):  # the file is no longer what it wrote
                verb = "write" if later.kind == Tool.WRITE else "a change seen outside"
                why[cid] = (f"superseded by {verb} {later.call_id}", None)
                break
            if (
                later.kind == Tool.READ
                and later.answer == Kind.FULL  # the ledger's: the whole file, as content
                and kept(later)
            ):
                why[cid] = (f"the file is shown in full by read {later.call_id}", later.call_id)
                break
    return why


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
