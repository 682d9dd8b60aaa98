"""The ``filecache`` command's entry point (``[project.scripts]``): ``--version`` and ``--help``
answered without importing click or the library, so they start within 1.5x of ``python -c
pass`` (``bench/bench_coldstart.py``); ``read`` without click (``filecache.cli_read.fast_read``)
when it can be; every other command line goes to ``filecache.cli.main``. ``read``, ``edit`` and
``write`` (``ONE_CALL``) end through ``os._exit`` once their output is flushed, leaving the
SQLite store's write-ahead log synced but not checkpointed (``sqlite_store.defer_checkpoints``:
the checkpoint was most of a call's end).

``HELP`` is click's own top-level help at 80 columns (``tests/cli/test_cli_entry.py`` renders
it and compares; after adding a command, paste what that test prints); on a narrower terminal
click renders it. ``VERSION`` is the distribution's (the test compares it with the metadata).
"""

from __future__ import annotations

import os
import sys

__all__ = ["HELP", "ONE_CALL", "VERSION", "main"]

ONE_CALL = ("read", "edit", "write")
"""The commands a shell agent runs once per tool call: each process ends as soon as its call is
done, without the SQLite store's checkpoint (``_exit``)."""

VERSION = "0.1.0"
HELP = """\
Usage: filecache [OPTIONS] COMMAND [ARGS]...

  Delta reads for LLM coding agents: FileRefs and diffs instead of re-sent
  files.

Options:
  --version   Show the version and exit.
  -h, --help  Show this message and exit.

Commands:
  archive    Originals of tool results that pruning changed.
  doctor     Say what serves the hosts here: filecache's hooks of every...
  edit       Replace text in PATH: OLD must occur exactly once unless...
  gateway    Serve the model API on 127.0.0.1 with filecache's request...
  hook       The hook HOST runs for each tool call: the payload on stdin,...
  import     Convert agent logs (SOURCES: files or directories) into traces...
  install    Put filecache inside HOST's own tools (Claude Code: the...
  outline    Print PATH's outline: definitions with signatures and line...
  prune      Prune SOURCE (a message list, or an object with...
  read       Read PATH as the session's model should see it: content,...
  replay     Replay recorded sessions (DIR/files + DIR/transcript.json):...
  run        Run HOST (claude, codex, opencode, gemini or kilo) with ARGS...
  serve      Run an MCP server with...
  sessions   The sessions in the store: list, show, delete, gc.
  stats      What filecache saved, per session and overall: prompt, billed,...
  uninstall  Remove filecache's hooks of HOSTS (default: every host) at...
  watch      Print files changed under ROOT (debounced; the store's folder...
  write      Create or replace PATH (atomically) and record it in the session."""


def _columns() -> int:
    """The terminal's width as click finds it (``COLUMNS``, then the terminal, then 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def main() -> None:
    """Run the ``filecache`` command."""
    args = sys.argv[1:]
    if args == ["--version"]:
        sys.stdout.write(f"filecache, version {VERSION}\n")
        return
    if args in (["-h"], ["--help"]) and _columns() >= 80:
        sys.stdout.write(HELP + "\n")
        return
    if args[:1] and args[0] in ONE_CALL:
        from filecache.store.sqlite_store import defer_checkpoints

        defer_checkpoints()  # the process ends at once: ``_exit`` skips the store's checkpoint
    if args[:1] == ["read"]:  # the most frequent call: answered without click when it can be
        from filecache.cli_read import fast_read

        code = fast_read(args)
        if code is not None:
            _exit(code)
    from filecache.cli import main as cli

    try:
        cli(prog_name="filecache")
    except SystemExit as exc:
        _exit(exc.code)


def _exit(code: str | int | None) -> None:
    """End the process with ``code`` (as ``sys.exit`` would): through ``os._exit`` when a store
    left its connection open (``sqlite_store.defer_checkpoints``), once the output is out."""
    store = sys.modules.get("filecache.store.sqlite_store")
    if store is None or not store.left_open():
        sys.exit(code)
    if code is not None and not isinstance(code, int):
        sys.stderr.write(f"{code}\n")  # as sys.exit prints a message
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: the status still says how the call went
    os._exit(code or 0)
