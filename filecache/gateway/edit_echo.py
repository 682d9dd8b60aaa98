"""An edit's result that echoes the model's own new text: those lines named, not repeated (pure).

Hosts answer an edit with a snippet of the edited file around the change: Claude Code before
2.x ("The file P has been updated. Here's the result of running `cat -n` on a snippet of the
edited file:" and ``N→`` lines), SWE-agent's editor (``N<TAB>`` lines and a closing "Review the
changes" line). The snippet's middle is the call's own ``new_string``, which the request
already holds verbatim in the model's tool call. ``echo_of`` finds those rows and returns the
result with them replaced by one line naming them (``render.gateway_edit_echo``); the lines
around them (what the edit landed between) stay as the host showed them.

Invariants:
- A function of the call and its own result only: the same bytes in every request (prompt
  cache), never a reference to another result, so nothing it says can dangle while the call's
  input is sent as the model wrote it (the transform keeps the inputs of these calls from
  input pruning: ``plan_prune(keep_inputs=...)``).
- Exact: the rows named are, line for line, ``new_string``'s lines (its final newline aside),
  and they are consecutive numbered rows of one snippet; a row cut by the host (``... (line
  truncated``), a ``replace_all`` or multi-edit call, or anything not placed exactly leaves the
  result as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from filecache.core.render import GATEWAY_EDIT_ECHO, MARKER, gateway_edit_echo
from filecache.prune.codecs.base import ToolCall

__all__ = ["MIN_SAVED", "Echo", "echo_of", "is_echo"]

MIN_SAVED = 200
"""Characters an echo must save (fewer: the result stays as it is)."""
_NUMBERED = re.compile(r"^ *(\d+)(?:→|\t)(.*)$")
_SNIPPET = "Here's the result of running `cat -n` on a snippet of"
_CUT = "... (line truncated to 2000 chars)"
_NEW_KEYS = ("new_string", "newString", "new_str")


@dataclass(frozen=True)
class Echo:
    """The text to send, and the file lines ``first..last`` it names as the call's new text."""

    text: str
    first: int
    last: int


def is_echo(text: str) -> bool:
    """Whether a result's text carries an echo line (``render.gateway_edit_echo``)."""
    return f"\n{MARKER} line" in text and GATEWAY_EDIT_ECHO in text


def _new_text(call: ToolCall) -> str | None:
    args = call.arguments
    if args.get("replace_all") or args.get("replaceAll") or "edits" in args:
        return None
    for key in _NEW_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


def echo_of(call: ToolCall, text: str) -> Echo | None:
    """The result ``text`` of the edit ``call`` with the rows that show its new text named
    instead (module docstring), or None when it does not show them exactly or it saves less
    than ``MIN_SAVED`` characters."""
    new = _new_text(call)
    if new is None or len(new) < MIN_SAVED or _SNIPPET not in text.split("\n", 1)[0]:
        return None
    wanted = (new[:-1] if new.endswith("\n") else new).split("\n")
    rows = text.split("\n")
    numbers: list[int] = []
    texts: list[str] = []
    first_row = 1
    for row in rows[1:]:
        found = _NUMBERED.match(row)
        if found is None:
            break
        if numbers and int(found[1]) != numbers[-1] + 1:
            return None
        numbers.append(int(found[1]))
        texts.append(found[2])
    if len(texts) < len(wanted) or any(t.endswith(_CUT) for t in texts):
        return None
    k = _rows_at(texts, wanted)
    if k is None:
        return None
    at = first_row + k
    first, last = numbers[k], numbers[k + len(wanted) - 1]
    out = "\n".join([*rows[:at], gateway_edit_echo(first, last), *rows[at + len(wanted) :]])
    return Echo(out, first, last) if len(text) - len(out) >= MIN_SAVED else None


def _rows_at(texts: list[str], wanted: list[str]) -> int | None:
    """The first row from which ``texts`` holds ``wanted`` row for row, or None: one ``find``
    of the wanted rows between line ends in the rows between line ends (row-aligned by
    construction; linear in the snippet's size, not a comparison per row)."""
    rows = "\n" + "\n".join(texts) + "\n"
    at = rows.find("\n" + "\n".join(wanted) + "\n")
    return None if at < 0 else rows.count("\n", 0, at)
