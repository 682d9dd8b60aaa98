"""How the ``filecache`` command words the library's errors: in its own flags.

The library's messages are written for agents calling its tools, so they name tool arguments
(``pass replace_all=true``, ``read ... (fresh=true)``, ``store=':memory:'``); those stay as they
are. Printed by the CLI, where a user types ``--replace-all``, ``--fresh`` and ``--store``, each
such phrase is replaced by the command's own (``cli_message``). Pure: text in, text out.

Invariant: only the phrases below change, each matched as a whole (never a part of a path or a
name); a message without one is printed as it is. ``tests/cli/test_cli_messages.py`` makes
every error below through the CLI, so a library message reworded away from its phrase fails
there instead of reaching a user in the tool's words.
"""

from __future__ import annotations

import re

__all__ = ["cli_message"]

_SETTING_HINT = (
    "raise max_file_bytes (FILECACHE_MAX_FILE_BYTES=BYTES in the environment, or "
    "max_file_bytes = BYTES under [tool.filecache] in the root's pyproject.toml)"
)

# (commands it applies to, None: every one; the phrase; what the CLI says instead), in order.
# Each phrase is anchored on the words around it, so a path that holds one is left alone.
_READ, _OUTLINE, _EDITS = frozenset({"read"}), frozenset({"outline"}), frozenset({"edit", "write"})
_PHRASES: tuple[tuple[frozenset[str] | None, str, str], ...] = (
    # store errors (store.sqlite_store, store.store): each command opening one takes --store
    (
        None,
        r"pass store=':memory:' or set FILECACHE_STORE to a writable path",
        "pass --store with a writable path or :memory: (or set FILECACHE_STORE)",
    ),
    # a file over the size limit (fsio): where the setting is set
    (None, r"(?<=, or )raise max_file_bytes$", _SETTING_HINT),
    # edits (core.edits)
    (_EDITS, r"(?<=: )old_string and new_string(?= are the same;)", "--old and --new"),
    (_EDITS, r"(?<=: )old_string(?= not found;| occurs \d+ times;| is empty;)", "--old"),
    (_EDITS, r"(?<=; )pass replace_all=true(?= or include more)", "pass --replace-all"),
    (_EDITS, r"(?<=; )use write to(?= create or replace a file$)", "use 'filecache write' to"),
    (_EDITS, r"\(read it with fresh=true to see it\)$", "('filecache read --fresh' shows it)"),
    (_EDITS, r"(?<=; read the file again )\(fresh=true\)", "('filecache read --fresh')"),
    # reads (core.planner, outline.outline, core.text)
    (
        _READ,
        r"^pass symbol alone, without offset/limit or mode='outline'$",
        "pass --symbol alone, without --offset/--limit or --mode outline",
    ),
    (_READ, r"(?<=; )use mode='outline'(?= to list definitions$)", "use --mode outline"),
    (
        _OUTLINE,
        r"(?<=; )use mode='outline' to list definitions$",
        "run 'filecache outline' without --symbol to list definitions",
    ),
    (_READ, r"(?<=: )offset(?= must be 1 or more| \d+ is past the end;)", "--offset"),
    (_READ, r"(?<=: )limit(?= must be 1 or more)", "--limit"),
    (_READ, r"(?<=read fewer lines )\(a smaller limit\)$", "(a smaller --limit)"),
    (_READ, r"(?<= with )offset/limit(?=$|,)", "--offset/--limit"),
    (None, r"(?<= with )offset/limit(?=$|,)", "'filecache read --offset/--limit'"),
)

_COMPILED = tuple((commands, re.compile(pattern), new) for commands, pattern, new in _PHRASES)


def cli_message(message: str, command: str | None) -> str:
    """``message`` (a ``FileCacheError``'s) with the tool arguments it names replaced by the
    flags of ``command`` (``read``, ``edit``, ...; None: one outside any command)."""
    for commands, pattern, new in _COMPILED:
        if commands is None or command in commands:
            message = pattern.sub(new, message)
    return message
