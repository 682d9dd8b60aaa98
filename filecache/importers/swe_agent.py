"""SWE-agent ``.traj`` files -> session traces.

A ``.traj`` holds ``history`` (the messages the model saw), ``trajectory`` (per step the
executed ``action``, its ``observation`` and the ``thought``) and ``replay_config`` (with
``env.repo.base_commit``). The trace has the run's first system and first user message, then per
step with an action one assistant message (the thought, or null) with one tool call ``call_<n>``
and one tool message (the observation, CRLF turned into LF). A step without an action (the model
answered without a tool call and was asked again) is left out, as the model did not see it.

The tool call comes from the history's JSON ``tool_calls`` where the model made one (native
function calling), else from the executed action parsed as bash parses it. Mapping:

- ``str_replace_editor view F [--view_range A B]`` -> ``read_file`` (offset A, limit B-A+1; B = -1:
  no limit); a directory listing stays ``bash``;
- ``create F --file_text T`` -> ``write_file``; ``str_replace F --old_str O --new_str N`` ->
  ``edit_file``;
- everything else -> ``bash {command: action}`` verbatim, also editor calls on paths outside the
  repository and ``insert``/``undo_edit`` (which count as changing their file).

This reproduces the traces of ``swe-agent-dev.tar.gz`` message for message.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from filecache.errors import TranscriptError
from filecache.importers.logs import (
    changed_paths,
    content_text,
    load_json,
    relative_path,
    trace_name,
)
from filecache.importers.trace import FileCall, Recorded, Shown, tool_call

__all__ = ["parse_swe_agent"]

_VIEW_HEAD = "Here's the result of running `cat -n` on "
_LINE = re.compile(r"^ *(\d+)(?:\t(.*))?$")
_CLIPPED = "<response clipped>"
_ABBREVIATED = "<NOTE>This file is too large to display entirely."
_EDITORS = ("str_replace_editor", "str_replace_based_edit_tool")
_FLAGS = {
    "--view_range": "view_range",
    "--file_text": "file_text",
    "--old_str": "old_str",
    "--new_str": "new_str",
    "--insert_line": "insert_line",
}


def _editor_args(action: str) -> dict[str, Any] | None:
    """``str_replace_editor COMMAND PATH --flag value ...`` parsed as bash would."""
    try:
        words = shlex.split(action)
    except ValueError:
        return None
    if len(words) < 3 or words[0] not in _EDITORS:
        return None
    args: dict[str, Any] = {"command": words[1], "path": words[2]}
    i = 3
    while i < len(words):
        key = _FLAGS.get(words[i])
        if key is None:
            return None
        if key == "view_range":
            try:
                args[key] = [int(words[i + 1]), int(words[i + 2])]
            except (IndexError, ValueError):
                return None
            i += 3
            continue
        if i + 1 >= len(words):
            return None
        args[key] = words[i + 1]
        i += 2
    return args


def _native_args(message: Mapping[str, Any] | None) -> dict[str, Any] | None:
    calls = message.get("tool_calls") if message else None
    if not calls:
        return None
    fn = calls[0].get("function") or {}
    if fn.get("name") not in _EDITORS:
        return None
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except (TypeError, json.JSONDecodeError):
        return None
    return args if isinstance(args, dict) else None


def _shown(observation: str, ranged_to_end: bool, whole: bool) -> Shown:
    body = observation.split("\n", 1)[1] if "\n" in observation else ""
    clipped = _CLIPPED in body
    if clipped:
        body = body[: body.index(_CLIPPED)]
    lines: dict[int, str] = {}
    for raw in body.split("\n"):
        m = _LINE.match(raw)
        if m:
            lines[int(m.group(1))] = m.group(2) or ""
    if clipped and lines:
        lines.pop(max(lines))  # cut mid-line
    abbreviated = whole and len(lines) < max(lines, default=0)
    total = None
    if lines and not clipped and not abbreviated and (whole or ranged_to_end):
        # The viewer splits on "\n": a file that ends with one shows an empty line after it.
        if lines[max(lines)] == "":
            lines.pop(max(lines))
        total = max(lines, default=0)
    if abbreviated:
        lines = {}
    return Shown(lines, total)


def _viewed(observation: str) -> bool:
    """A file view (whole, ranged or abbreviated), not an error."""
    return observation.startswith((_VIEW_HEAD, _ABBREVIATED))


def _map(
    args: Mapping[str, Any] | None, action: str, observation: str, root: str, cid: str
) -> tuple[str, dict[str, Any], FileCall | None]:
    """(tool, arguments, FileCall or None) of one step."""
    bash = ("bash", {"command": action}, None)
    if args is None:
        return bash
    rel = relative_path(str(args.get("path", "")), root)
    command = args.get("command")
    if rel is None or not str(args.get("path", "")).startswith(root.rstrip("/") + "/"):
        return bash
    if command == "view":
        if observation.startswith("Here's the files and directories"):
            return bash
        call_args: dict[str, Any] = {"path": rel}
        span = args.get("view_range")
        if isinstance(span, list) and len(span) == 2:
            first, last = int(span[0]), int(span[1])
            call_args["offset"] = first
            if last != -1:
                call_args["limit"] = last - first + 1
        failed = not _viewed(observation)
        shown = None
        if not failed:
            whole = "offset" not in call_args
            to_end = "offset" in call_args and "limit" not in call_args
            shown = _shown(observation, to_end, whole)
        return "read_file", call_args, FileCall(cid, "read_file", call_args, failed, shown)
    if command == "create" and isinstance(args.get("file_text"), str):
        call_args = {"path": rel, "content": args["file_text"]}
        failed = not observation.startswith("File created successfully")
        return "write_file", call_args, FileCall(cid, "write_file", call_args, failed)
    if command == "str_replace" and isinstance(args.get("old_str"), str):
        new = args.get("new_str")
        call_args = {"path": rel, "old_string": args["old_str"], "new_string": new or ""}
        failed = not re.match(r"The file \S+ has been edited", observation)
        return "edit_file", call_args, FileCall(cid, "edit_file", call_args, failed)
    return bash


def parse_swe_agent(path: Path) -> Recorded:
    """Parse one ``.traj`` (plain or gzipped) into a ``Recorded`` session.

    Raises:
        TranscriptError: not a SWE-agent trajectory.
    """
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("trajectory"), list):
        raise TranscriptError(f"{path}: not a SWE-agent .traj (no 'trajectory' list)")
    history = [m for m in data.get("history") or [] if isinstance(m, dict)]
    try:
        config = json.loads(data.get("replay_config") or "{}")
    except (TypeError, json.JSONDecodeError):
        config = {}
    repo = ((config.get("env") or {}).get("repo") or {}) if isinstance(config, dict) else {}
    root = "/" + str(repo.get("repo_name") or "testbed").strip("/")
    messages: list[dict[str, Any]] = []
    for role in ("system", "user"):
        first = next((m for m in history if m.get("role") == role), None)
        if first is not None:
            messages.append({"role": role, "content": content_text(first.get("content"))})
    actions = [m for m in history if m.get("role") == "assistant"]
    steps = [s for s in data["trajectory"] if isinstance(s, dict) and s.get("action")]
    recorded = Recorded(trace_name(path), f"swe-agent: {Path(path).name}", messages)
    if repo.get("base_commit"):
        recorded.extra["base_commit"] = repo["base_commit"]
    skipped = len(data["trajectory"]) - len(steps)
    if skipped:
        recorded.notes.append(f"{skipped} step(s) without an action left out")
    opaque: dict[str, str] = {}
    for n, step in enumerate(steps, 1):
        cid = f"call_{n}"
        action = str(step["action"])
        observation = str(step.get("observation") or "").replace("\r\n", "\n")
        message = actions[n - 1] if n - 1 < len(actions) else None
        if message is not None and message.get("action") not in (None, step["action"]):
            message = None
        args = _native_args(message) or _editor_args(action)
        tool, call_args, file_call = _map(args, action, observation, root, cid)
        if file_call is not None:
            recorded.calls[cid] = file_call
        else:
            opaque[cid] = action
        thought = str(step.get("thought") or "")
        entry = tool_call(cid, tool, call_args)
        messages.append({"role": "assistant", "content": thought or None, "tool_calls": [entry]})
        messages.append({"role": "tool", "tool_call_id": cid, "content": observation})
    paths = {c.path for c in recorded.calls.values()}
    for cid, action in opaque.items():
        editor = _editor_args(action)
        if editor is not None and editor.get("command") in ("insert", "undo_edit"):
            rel = relative_path(str(editor.get("path", "")), root)
            recorded.changes[cid] = frozenset([rel]) if rel else frozenset()
            continue
        if editor is None:
            changed = changed_paths(action, paths)
            if changed is None or changed:
                recorded.changes[cid] = changed
    recorded.normalize = str.expandtabs
    return recorded
