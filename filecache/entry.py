"""The ``filecache`` command's entry point (``[project.scripts]``): ``--version`` and ``--help``
answered without importing click or the library, so they start within 1.5x of ``python -c
pass`` (``bench/bench_coldstart.py``); ``read`` without click (``filecache.cli_read.fast_read``)
when it can be; every other command line goes to ``filecache.cli.main``.

``HELP`` is click's own top-level help at 80 columns (``tests/cli/test_cli_entry.py`` renders
it and compares; after adding a command, paste what that test prints); on a narrower terminal
click renders it. ``VERSION`` is the distribution's (the test compares it with the metadata).
"""

from __future__ import annotations

import os
import sys

__all__ = ["HELP", "VERSION", "main"]

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
  run        Run HOST (claude, codex, opencode, gemini) with ARGS through...
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
    if args[:1] == ["read"]:  # the most frequent call: answered without click when it can be
        from filecache.cli_read import fast_read

        code = fast_read(args)
        if code is not None:
            sys.exit(code)
    from filecache.cli import main as cli

    cli(prog_name="filecache")
