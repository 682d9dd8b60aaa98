"""filecache inside Codex CLI: its hooks serve shell re-reads and record ``apply_patch`` edits.

Codex (0.169) has no read tool: the model reads files with its shell tool ``exec_command``
(``cat``, ``sed -n 'A,Bp'``, ``nl -ba``, ``head``, ``tail``), which hooks see as tool ``Bash``
with ``tool_input {"command": CMD}`` and the command's output as ``tool_response``; it edits
with the freeform ``apply_patch`` tool (``tool_input {"command": PATCH}``). ``install`` (in
``codex_install``) registers one command, ``python -I -m filecache.adapters.hosts codex``, for
the events below; ``run_hook`` answers each:

- ``PostToolUse`` on ``Bash``: a read the model already holds is answered, through
  ``HostSession.shell``, with filecache's FileRef (naming the model's ``call_id``) or a diff:
  the hook prints ``{"decision": "block", "reason": TEXT}``, and Codex sends TEXT to the model
  as the whole output of the call (docs/codex.md says why this, not a PreToolUse rewrite).
  The text keeps the two lines of Codex's own output shape that hold (``Process exited with
  code 0`` / ``Output:``). Any other command re-hashes the files in the view.
- ``PostToolUse`` on ``apply_patch``: the patch (``codex_patch``) becomes the session's edits,
  writes and deletions, so a read after the model's own patch is short.
- ``PreCompact``: forget everything (the context is about to be summarised). ``PostCompact``
  and ``SessionStart`` (startup, resume, compact, clear): keep only what the rollout says the
  context holds. Nothing is added to the context there: the first FileRef or diff of a context
  ends with ``render.shell_instructions()`` (what a FileRef and a diff mean, and the command
  that always prints the whole file), and the store remembers which call carried it
  (``HostSession.instructions_due``); once the rollout no longer holds that result, the next
  short answer carries it again.

Before every answer the session is reconciled with the rollout at ``transcript_path``
(``codex_rollout``): a result compaction dropped, Codex truncated, or a rewind removed backs no
FileRef. The rollout also says how the call ended: only a command that exited 0 is served;
anything else leaves Codex's output.

The hook's ``cwd`` is the call's ``workdir`` when the model gives one: a command's relative
paths resolve there, where the command ran. The root (the store, the settings and their
deny-list, the session) is the repository that folder is in (``base.project_root``: the nearest
``.git`` up from it), so a call in ``app/`` is in the project's one session and store.

Invariants: Codex's output stands unless filecache serves the read exactly (the base layer's
rules: denied files, outside the root, binary, missing, clipped output); every failure inside
the hook is one line in the hook log and an empty answer. One session per (Codex session id,
root = the repository). No state lives here between calls: it is all in the store.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filecache.adapters.hosts.host_specs import spec

if TYPE_CHECKING:
    from filecache.adapters.hosts.base import HostSession
    from filecache.adapters.hosts.codex_rollout import Rollout
    from filecache.adapters.hosts.config_files import Installed

__all__ = ["DISPLAY_NAME", "HOST_NAME", "abandon", "install", "installed", "run_hook", "shaped"]

HOST_NAME = "codex"
DISPLAY_NAME = spec(HOST_NAME).display

# Codex shows an exec_command result as "Chunk ID … / Wall time … / Process exited with code N /
# Original token count … / Output:" and the output; a served read keeps the lines that still hold.
_EXEC_SHAPE = "Process exited with code 0\nOutput:\n"


def shaped(text: str) -> str:
    """filecache's answer as the output of a Codex ``exec_command`` call that exited 0, with
    the recovery hint a shell reader can follow."""
    from filecache.core.render import shell_answer

    return _EXEC_SHAPE + shell_answer(text)


def install(*, scope: str | None, uninstall: bool, cwd: Path) -> str:
    """``filecache install codex``: see ``codex_install``."""
    from filecache.adapters.hosts.codex_install import install as install_hooks

    line: str = install_hooks(scope=scope, uninstall=uninstall, cwd=cwd)
    return line


def installed(cwd: Path) -> list[Installed]:
    """filecache's hooks for this host at each scope (``codex_install.installed``)."""
    from filecache.adapters.hosts.codex_install import installed as found

    out: list[Installed] = found(cwd)
    return out


def run_hook(args: list[str], payload: bytes) -> bytes:
    """Answer one Codex hook call (``payload``: its JSON input). Never raises: on any failure
    one line goes to the hook log and the answer is empty (Codex's own output stands); but a
    store that cannot be used or a bad setting is raised, for ``registry.run_hook`` to tell
    the user once (``notice``)."""
    from filecache.errors import ConfigError, StoreError

    try:
        data = json.loads(payload)
        return _dispatch(data) if isinstance(data, dict) else b""
    except (StoreError, ConfigError):
        raise
    except Exception as exc:  # a hook never breaks the host's session
        from filecache.adapters.hosts.base import log_failure

        log_failure(HOST_NAME, f"{type(exc).__name__}: {exc}")
        return b""


def abandon(args: list[str], payload: bytes) -> None:
    """The answer to this ``PostToolUse`` never reached Codex: nothing relies on it."""
    data = json.loads(payload)
    if not isinstance(data, dict) or data.get("hook_event_name") != "PostToolUse":
        return
    session_id, cwd, call = data.get("session_id"), data.get("cwd"), data.get("tool_use_id")
    if not all(isinstance(v, str) and v for v in (session_id, cwd, call)):
        return
    from filecache.adapters.hosts.base import HostSession, project_root

    root = project_root(str(cwd))
    with HostSession.open(HOST_NAME, str(session_id), str(cwd), root=root) as session:
        session.abandon(str(call))


def _dispatch(data: dict[str, Any]) -> bytes:
    event = data.get("hook_event_name")
    session_id, cwd = data.get("session_id"), data.get("cwd")
    if not isinstance(session_id, str) or not session_id or not isinstance(cwd, str):
        return b""
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        return b""
    tool = data.get("tool_name")
    if event == "PostToolUse" and tool not in ("Bash", "apply_patch"):
        return b""
    if event not in ("PostToolUse", "PreCompact", "PostCompact", "SessionStart"):
        return b""
    from filecache.adapters.hosts.base import HostSession, project_root

    # The repository's root, not the call's workdir: one store and one set of settings (its
    # deny-list) for every folder the model works in; a command's paths are its workdir's.
    with HostSession.open(HOST_NAME, session_id, cwd, root=project_root(cwd)) as session:
        if event == "PreCompact":
            session.reset()
            return b""
        rollout = _rollout(data, data.get("tool_use_id"))
        if event in ("PostCompact", "SessionStart"):
            source = data.get("source")
            if rollout is None or source == "clear":
                session.reset()
            else:
                session.keep_only(rollout.present)
            return b""
        call_id = data.get("tool_use_id")
        tool_input = data.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if not isinstance(call_id, str) or not call_id or not isinstance(command, str):
            return b""
        if rollout is not None:
            session.keep_only(rollout.present | {call_id})
        if tool == "apply_patch":
            _patched(session, command, call_id, data.get("tool_response"), rollout, cwd)
            return b""
        return _bash(session, command, call_id, data.get("tool_response"), rollout, cwd)


def _rollout(data: dict[str, Any], call_id: Any) -> Rollout | None:
    path = data.get("transcript_path")
    if not isinstance(path, str) or not path:
        return None
    from filecache.adapters.hosts.codex_rollout import read_rollout

    return read_rollout(path, [call_id] if isinstance(call_id, str) else [])


def _same_folder(a: str | None, b: str) -> bool:
    if a is None:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _bash(
    session: HostSession,
    command: str,
    call_id: str,
    response: Any,
    rollout: Rollout | None,
    cwd: str,
) -> bytes:
    ended = rollout.ended.get(call_id) if rollout is not None else None
    output = response if isinstance(response, str) else None
    if ended is None or ended.exit_code != 0 or not _same_folder(ended.cwd, cwd):
        # Failed, still running, run in another folder than the hook was told, or unknowable:
        # Codex's output stands; what the command did to files makes the next read a diff.
        session.changed(call_id)
        return b""
    text = session.shell(command, call_id, output=output, cwd=cwd)
    if text is None:
        return b""
    # The first short answer of a context carries the instructions (keep_only above dropped a
    # carrier the rollout no longer holds): the one policy of every host.
    told = spec(HOST_NAME).told
    answer = session.short_or_own(call_id, text, output or "", None if told is None else told())
    if answer is None:
        return b""
    return json.dumps({"decision": "block", "reason": shaped(answer)}).encode("utf-8")


def _patch_succeeded(call_id: str, response: Any, rollout: Rollout | None) -> bool:
    ended = rollout.ended.get(call_id) if rollout is not None else None
    if ended is not None:
        done: bool = ended.status == "completed"
        return done
    return isinstance(response, str) and response.startswith("Exit code: 0\n")


def _patched(
    session: HostSession,
    patch: str,
    call_id: str,
    response: Any,
    rollout: Rollout | None,
    cwd: str,
) -> None:
    from filecache.adapters.hosts.codex_patch import parse_patch

    ops = parse_patch(patch) if _patch_succeeded(call_id, response, rollout) else None
    if ops is None:
        session.changed(call_id)  # a failed or unreadable patch may still have touched files
        return
    for op in ops:
        path = os.path.join(cwd, op.path)
        if op.kind == "add":
            session.wrote(path, call_id, op.content)
        elif op.kind == "delete":
            session.deleted(path, call_id)
        elif op.move_to is not None or not op.exact:
            if op.move_to is not None:
                session.deleted(path, call_id)
            session.changed(call_id)
        else:
            session.edited(path, call_id, op.edits)
