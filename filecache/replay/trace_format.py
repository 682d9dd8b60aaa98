"""The parts of the trace format (docs/design.md, "Session trace format") that importers add.

Three additions to ``filecache-trace/1``, all optional, so every older trace reads as before:

- ``cwd``: the directory the agent's shell ran in, which ``files/`` stands for (mini-swe-agent:
  ``/testbed``). Replay maps the paths of ``bash`` commands through it; without it, an
  absolute path maps to the shortest tail of it that names a file in ``files/``. A ``bash``
  call whose command is a read (``cat``, ``nl -ba``, ``sed -n``, ``head``, ``tail``:
  ``shell_parse``) is answered through the cache when the recorded result holds what the
  command prints on the replayed files; one made only of edits replay can redo (``sed -i``,
  heredocs: ``shell_edit``) is redone on the replayed files; ``replay_shell`` says how.

- ``edit_file`` may carry ``edits``, a list of ``{old_string, new_string, replace_all?}``
  applied in order, all or none (Claude Code's ``MultiEdit``), instead of one
  ``old_string``/``new_string``.
- ``transcript.json`` may carry ``unknown``, written by ``filecache import`` when the log does
  not hold the files as they were before the session::

      "unknown": {
        "note": "files/ was rebuilt from what the log's reads show; ...",
        "files": {"src/a.py": {"lines": 120, "unknown": [[1, 40], [90, 120]],
                               "end_known": false}},
        "calls": {"call_7": "lines 41-60 of src/a.py are not in the log"}
      }

  ``files`` says which lines of ``files/<path>`` are placeholders (``PLACEHOLDER``) and whether
  the file's length is known; ``calls`` names the file tool calls that a run on ``files/`` cannot
  reproduce (their lines are not in the log, or the recorded output differs from the rebuilt
  file, for instance after a ``sed -i`` that replay does not run). Replay keeps the recorded
  output of those calls in every run, does not execute them, and reports them (``unknown_calls``).

Which agent recorded a trace is in its ``source`` (``swe-agent: ...``, ``mini-swe-agent: ...``,
``claude-code: ...``); ``agent_read_mode`` says from it how filecache answers the agent's
whole-file reads in a replay.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from filecache.errors import RequestError

__all__ = [
    "ABBREVIATING_AGENTS",
    "PLACEHOLDER",
    "TRACE_FORMAT",
    "agent_read_mode",
    "edit_pairs",
    "unknown_calls",
]

TRACE_FORMAT = "filecache-trace/1"
"""The ``format`` of ``transcript.json`` that replay reads and importers write."""

PLACEHOLDER = "\u2026 [filecache import: this line is not in the log] \u2026"
"""The text of a line of a rebuilt ``files/<path>`` that no read in the log showed."""


def unknown_calls(trace: Mapping[str, Any]) -> dict[str, str]:
    """The file tool calls a trace marks as not reproducible: call id -> why (may be empty).

    ``unknown.calls`` may be a mapping (id -> reason) or a list of ids; anything else is none.
    """
    unknown = trace.get("unknown")
    calls = unknown.get("calls") if isinstance(unknown, Mapping) else None
    if isinstance(calls, Mapping):
        return {str(k): str(v) for k, v in calls.items()}
    if isinstance(calls, list):
        return {str(k): "" for k in calls}
    return {}


def edit_pairs(args: Mapping[str, Any]) -> tuple[list[tuple[str, str]], bool]:
    """The ``(old, new)`` pairs of an ``edit_file`` with ``edits``, and whether to replace all.

    ``Session.edit`` takes one ``replace_all`` for the whole list: it is true when any edit asks
    for it (an edit that then matches differently fails or succeeds as it did not in the log,
    and the importer's check marks it unknown).

    Raises:
        RequestError: ``edits`` is not a non-empty list of objects with string fields.
    """
    edits = args.get("edits")
    if not isinstance(edits, list) or not edits:
        raise RequestError("argument 'edits' must be a non-empty list of edits")
    pairs: list[tuple[str, str]] = []
    replace_all = bool(args.get("replace_all", False))
    for i, edit in enumerate(edits):
        old = edit.get("old_string") if isinstance(edit, Mapping) else None
        new = edit.get("new_string") if isinstance(edit, Mapping) else None
        if not isinstance(old, str) or not isinstance(new, str):
            raise RequestError(f"edits[{i}] needs string old_string and new_string")
        pairs.append((old, new))
        replace_all = replace_all or bool(edit.get("replace_all", False))
    return pairs, replace_all


ABBREVIATING_AGENTS = ("swe-agent",)
"""Agents whose own file viewer abbreviates a whole-file view of a large file (SWE-agent's
``str_replace_editor view`` elides long bodies of a file over 16,000 characters), by the start of
a trace's ``source``."""


def agent_read_mode(trace: Mapping[str, Any]) -> str:
    """How filecache answers the whole-file reads of the agent that recorded ``trace``: ``auto``
    (an outline for a large file) only where the agent's own tool abbreviates one
    (``ABBREVIATING_AGENTS``), else ``full``: the model asked for the content and its own tool
    would have shown it (clipped, the cap sends that view), so an outline would hide lines it
    edits next."""
    source = str(trace.get("source") or "")
    return "auto" if source.startswith(ABBREVIATING_AGENTS) else "full"
