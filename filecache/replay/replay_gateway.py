"""The gateway's request transform as a replay policy (``filecache replay --gateway``).

``GatewayRun.edit`` is a ``peer_policies.RequestPolicy``: ``replay_peers.PeerRun`` hands it each
recorded request (every message before an assistant message, the trace's OpenAI chat list) and
sends what it returns, so prompt tokens, billed equivalents, recall and the model simulator's
stale views are counted as for the other policies. The request goes through
``gateway.rewrite_payload`` as an OpenAI Chat Completions request, with one memory (in memory)
per session, as the gateway would see the session's requests one after another.

The simulator does not read the gateway's FileRefs and diffs (it sees them as results gone: a
lower recall, never a higher one), so this module checks them itself, against the recorded
texts and independently of the transform's own parser: a FileRef's lines (numbered lines, or a
shell read's output rows counted from the line its command starts at, ``_shell_first``) equal
the named result's at the same line numbers, and cover every line the rewritten result showed;
a result whose lines it cannot place fails the check; a diff, applied with
``unidiff`` to the named result's lines, gives the rewritten result's lines; the named result
is in the request as recorded. A claim that fails is counted ``stale``; a named result that is
missing or not sent as recorded is ``dangling`` (``dangling``, used by ``PeerRun``).

Policies: ``gateway`` (the ``cost`` preset at the replay's window), ``gateway+context`` (the
``context`` preset), ``gateway-delta`` (FileRefs and diffs only, no pruning).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from filecache.core.render import gateway_bases
from filecache.gateway import Api, GatewayPolicy, open_memory, rewrite_payload
from filecache.gateway.edit_echo import is_echo
from filecache.replay.gateway_shape import HostCall, anthropic_request, rewritten_results
from filecache.replay.replay_metrics import CACHE_READ, CACHE_WRITE
from filecache.shell.shell_parse import NotServable, parse_shell_read, selection

__all__ = ["GATEWAY_POLICIES", "GatewayRun", "is_gateway_policy"]

GATEWAY_POLICIES = ("gateway", "gateway+context", "gateway-delta")
_NUMBERED = re.compile(r"^ *(\d+)(?:\t|→)(.*)$")
_SPAN = re.compile(r" \(lines? (\d+)(?:-(\d+))? (?:as shown there|now)\)")
_INNER = re.compile(r" since your results? \S+(?: and \S+)* \((.*)\): use that text;")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_CD = re.compile(r"^\s*cd\s+[^\s;&|]+\s*&&\s*")
_SED_FIRST = re.compile(r"(\d+)(?:,(?:\d+|\$|\+\d+))?p", re.ASCII)
_HEAD = re.compile(r"-n ?\d+|-\d+", re.ASCII)
_SHELL_TOOLS = frozenset({"Bash", "bash", "shell", "exec_command", "local_shell", "run_shell"})
_ECHO_LINE = re.compile(r"^\[filecache\] lines? (\d+)(?:-(\d+))?: this edit's new text, ")

Message = Mapping[str, Any]


def is_gateway_policy(name: str) -> bool:
    """Whether ``name`` is one of ``GATEWAY_POLICIES``."""
    return name in GATEWAY_POLICIES


def _numbered(text: str) -> dict[int, str]:
    """Line number -> text of every numbered line (``N→``, ``N<TAB>``)."""
    out: dict[int, str] = {}
    for row in text.split("\n"):
        found = _NUMBERED.match(row)
        if found is not None:
            out.setdefault(int(found[1]), found[2])
    return out


def _placed(text: str, command: str | None) -> dict[int, str] | None:
    """Line number -> text of every line a recorded result shows: a plain shell read's output
    rows counted from the line its command starts at (``_shell_first``), else its numbered
    lines (``N→``, ``N<TAB>``); None when its lines cannot be placed."""
    shell = _shell_first(command) if command is not None else None
    if shell is not None and not shell[1]:
        rows = text.split("\n")
        if rows and rows[-1] == "":
            rows.pop()
        return {shell[0] + k: row for k, row in enumerate(rows)}
    if command is not None and shell is None:
        return None
    return _numbered(text) or None


def _picked(placed: Mapping[int, str] | None, first: int, last: int) -> list[str] | None:
    """Lines ``first..last`` of ``placed``, or None if one is not there."""
    if placed is None:
        return None
    picked = [placed.get(n) for n in range(first, last + 1)]
    return None if any(p is None for p in picked) else [str(p) for p in picked]


def _shell_first(command: str) -> tuple[int, bool] | None:
    """(the file line a shell read's output starts at, whether it numbers its lines) for the
    shapes this check knows, written apart from the transform's parser: ``cd DIR &&`` prefixes,
    then ``cat [-n] F``, ``nl -ba F``, ``head [-n N|-N] F``, ``sed -n 'A,Bp' F`` / ``'Ap'``,
    ``tail -n +N F``, maybe piped into ``head``; other reads as the shell model
    (``shell_parse``, checked against real coreutils) places them; None for anything else."""
    while (cd := _CD.match(command)) is not None:
        command = command[cd.end() :]
    return _known_first(command) or _modelled_first(command)


def _modelled_first(command: str) -> tuple[int, bool] | None:
    """The first line a read ``shell_parse`` knows prints, when it does not depend on the
    file's length (two long files give the same)."""
    read = parse_shell_read(command)
    if read is None or read.grep is not None or len(read.paths) != 1:
        return None
    try:
        firsts = {next(iter(selection(read, [size])), (0, 0))[1] for size in (5000, 5001)}
    except NotServable:
        return None
    first = firsts.pop()
    return (first, bool(read.numbering)) if not firsts and first > 0 else None


def _known_first(command: str) -> tuple[int, bool] | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if "|" in words:
        cut = words.index("|")
        rest = " ".join(words[cut + 1 :])
        if not rest.startswith("head") or "|" in words[cut + 1 :]:
            return None
        if _HEAD.fullmatch(rest[4:].strip()) is None:
            return None
        words = words[:cut]
    if len(words) < 2 or any(w.startswith("-") for w in words[-1:]):
        return None
    tool, flags = words[0], " ".join(words[1:-1])
    if tool == "cat" and flags in ("", "-n"):
        return 1, flags == "-n"
    if tool == "nl" and flags == "-ba":
        return 1, True
    if tool == "head" and (flags == "" or _HEAD.fullmatch(flags)):
        return 1, False
    if tool == "sed" and len(words) == 4 and words[1] == "-n":
        found = _SED_FIRST.fullmatch(words[2])
        return (int(found[1]), False) if found is not None else None
    if tool == "tail" and flags.replace(" ", "").startswith("-n+"):
        tail = flags.replace(" ", "")[3:]
        return (int(tail), False) if tail.isascii() and tail.isdigit() else None
    return None


def _new_text(cid: str, messages: Sequence[Message]) -> str | None:
    """The new text of the edit call ``cid`` (its ``new_string``), from the trace's calls."""
    for message in messages:
        for call in message.get("tool_calls") or ():
            if call.get("id") != cid:
                continue
            try:
                args = json.loads((call.get("function") or {}).get("arguments") or "{}")
            except (TypeError, ValueError):
                return None
            for key in ("new_string", "newString", "new_str"):
                if isinstance(args, dict) and isinstance(args.get(key), str):
                    return str(args[key])
            return None
    return None


def _spans(text: str) -> list[tuple[int, int]]:
    return [(int(m[1]), int(m[2] or m[1])) for m in _RANGE.finditer(text)]


def _segments(head: str, bases: tuple[str, ...]) -> list[tuple[int, int, str | None]] | None:
    """(first, last, the result named or None for lines below) of a reference naming several
    results or some lines as content, in line order (``render.gateway_file_refs``'s head)."""
    found = _INNER.search(head)
    if found is None:
        return None
    named, _, rest = found[1].partition("; ")
    out: list[tuple[int, int, str | None]] = []
    spans, _, parts = named.partition(" as shown there")
    if parts.startswith(": "):
        for part in parts[2:].split(", "):
            where, _, base = part.rpartition(" in ")
            out += [(a, b, base) for a, b in _spans(where)]
    else:
        out += [(a, b, bases[0]) for a, b in _spans(spans)]
    if rest:
        out += [(a, b, None) for a, b in _spans(rest.split(" below", 1)[0])]
    out.sort()
    return out


def _applied(diff: str, base: Mapping[int, str], first: int) -> list[str] | None:
    """The base's lines from ``first`` on (one run), with the diff applied."""
    lines: list[str] = []
    while (line := base.get(first + len(lines))) is not None:
        lines.append(line)
    shift = 0
    try:
        patch = PatchSet(diff)[0]
    except (UnidiffParseError, IndexError):
        return None
    for hunk in patch:
        at = hunk.source_start - first + shift - (0 if hunk.source_length else -1)
        old = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_removed]
        new = [ln.value.rstrip("\n") for ln in hunk if ln.is_context or ln.is_added]
        if lines[at : at + len(old)] != old:
            return None
        lines[at : at + len(old)] = new
        shift += len(new) - len(old)
    return lines


class GatewayRun:
    """One session's requests through the gateway transform (a ``RequestPolicy``)."""

    def __init__(self, name: str, window: int | None) -> None:
        self.name = name
        self.memory = open_memory(":memory:")
        self.policy = GatewayPolicy(
            context_window=window or 200_000,
            prune_preset="context" if name == "gateway+context" else "cost",
            prune=name != "gateway-delta",
            cache_prices=(CACHE_READ, CACHE_WRITE),  # the prices the replay bills at
            cache_ttl=float("inf"),  # the replay bills every request's prefix as cached
        )
        self.bases: dict[str, tuple[str, ...]] = {}  # call id -> what its FileRef/diff names
        self.checked: dict[tuple[str, str], str | None] = {}  # (id, text) -> problem
        self.problems: dict[str, str] = {}
        self.file_refs: set[str] = set()
        self.diffs: set[str] = set()
        self.echoed: dict[tuple[str, str], str | None] = {}  # edit echoes checked -> problem
        self.host_calls: dict[str, HostCall] = {}  # empty: the trace's OpenAI chat requests
        self.cwd: str | None = None
        self.commands: dict[str, str] = {}  # call id -> the shell command of a shell call

    def host_shape(self, calls: Mapping[str, HostCall], cwd: str | None) -> None:
        """Send the requests as the host did (``gateway_shape``): Claude Code's Anthropic
        Messages requests, with its own tool calls (``calls``, from the trace)."""
        self.host_calls, self.cwd = dict(calls), cwd

    def edit(self, messages: Sequence[Message], tokens: Sequence[int]) -> dict[str, str]:
        """call id -> the text the gateway sends instead (``RequestPolicy``)."""
        recorded = {
            str(m.get("tool_call_id")): str(m.get("content") or "")
            for m in messages
            if m.get("role") == "tool"
        }
        for m in messages:
            for call in m.get("tool_calls") or () if m.get("role") == "assistant" else ():
                self._command(call)
        out = self._anthropic(messages) if self.host_calls else self._openai(messages)
        for cid, text in out.items():
            if is_echo(text):
                self._check_echo(cid, text, recorded, messages)
            else:
                self._check(cid, text, recorded)
        return out

    def _command(self, call: Mapping[str, Any]) -> None:
        """Remember a shell call's command line (the host's own input when the trace kept it)."""
        cid = str(call.get("id"))
        if cid in self.commands:
            return
        host = self.host_calls.get(cid)
        function = call.get("function") or {}
        name = host[0] if host else str(function.get("name"))
        if name not in _SHELL_TOOLS:
            return
        given: Any = host[1] if host else None
        if given is None:
            try:
                given = json.loads(function.get("arguments") or "{}")
            except (TypeError, ValueError):
                given = {}
        command = given.get("command", given.get("cmd")) if isinstance(given, Mapping) else None
        if isinstance(command, list) and len(command) == 3 and command[1] in ("-lc", "-c"):
            command = command[2]
        self.commands[cid] = command if isinstance(command, str) else ""

    def _lines(self, cid: str, recorded: Mapping[str, str]) -> dict[int, str] | None:
        return _placed(recorded[cid], self.commands.get(cid))

    def _check_echo(
        self, cid: str, text: str, recorded: Mapping[str, str], messages: Sequence[Message]
    ) -> None:
        """An edit's result sent with the rows of its own new text named (``edit_echo``): its
        numbered lines with the call's new text put at the lines named equal the recorded
        result's, line for line, and every other row is the recorded one."""
        key = (cid, text)
        if key in self.echoed:
            return
        self.echoed[key] = problem = self._echo_problem(cid, text, recorded, messages)
        if problem is not None:
            self.problems.setdefault(cid, problem)

    def _echo_problem(
        self, cid: str, text: str, recorded: Mapping[str, str], messages: Sequence[Message]
    ) -> str | None:
        new = _new_text(cid, messages)
        original = recorded.get(cid)
        if new is None or original is None:
            return f"{self.name}: {cid}: an edit echo without its call's new text"
        wanted = (new[:-1] if new.endswith("\n") else new).split("\n")
        rows, lines, span = [], {}, None
        for row in text.split("\n"):
            found = _ECHO_LINE.match(row)
            if found is not None and span is None:
                span = (int(found[1]), int(found[2] or found[1]))
                continue
            numbered = _NUMBERED.match(row)
            if numbered is not None:
                lines[int(numbered[1])] = numbered[2]
            else:
                rows.append(row)
        if span is None or span[1] - span[0] + 1 != len(wanted):
            return f"{self.name}: {cid}: its echo names lines its call's new text does not fill"
        lines.update({span[0] + k: line for k, line in enumerate(wanted)})
        theirs = [row for row in original.split("\n") if _NUMBERED.match(row) is None]
        if lines != _numbered(original) or rows != theirs:
            return f"{self.name}: {cid}: its echo does not give the recorded lines"
        return None

    def _openai(self, messages: Sequence[Message]) -> dict[str, str]:
        payload = {"model": "replay", "messages": list(messages)}
        new, rewrite = rewrite_payload(
            Api.OPENAI_CHAT, payload, memory=self.memory, policy=self.policy
        )
        if not rewrite.changed:
            return {}
        out: dict[str, str] = {}
        for old, sent in zip(messages, new["messages"], strict=True):
            if sent is old or sent.get("role") != "tool":
                continue
            text = sent["content"] if isinstance(sent.get("content"), str) else ""
            out[str(sent.get("tool_call_id"))] = text
        return out

    def _anthropic(self, messages: Sequence[Message]) -> dict[str, str]:
        payload = anthropic_request(messages, self.host_calls, self.cwd)
        new, rewrite = rewrite_payload(
            Api.ANTHROPIC_MESSAGES, payload, memory=self.memory, policy=self.policy
        )
        return rewritten_results(payload, new) if rewrite.changed else {}

    def _check(self, cid: str, text: str, recorded: Mapping[str, str]) -> None:
        found = text.find("[filecache] ")
        kind, bases = gateway_bases(text[found:]) if found >= 0 else ("", ())
        if not bases:
            return
        self.bases[cid] = bases
        (self.file_refs if kind == "unchanged" else self.diffs).add(cid)
        key = (cid, text)
        if key in self.checked:
            return
        problem = self._problem(cid, text[found:], kind, bases, recorded)
        self.checked[key] = problem
        if problem is not None:
            self.problems.setdefault(cid, problem)

    def _problem(
        self, cid: str, text: str, kind: str, bases: tuple[str, ...], recorded: Mapping[str, str]
    ) -> str | None:
        missing = [b for b in bases if b not in recorded]
        if missing:
            return f"{self.name}: {cid}: names {missing[0]}, which the request lacks"
        if len(bases) > 1 or " as read)" in text.split("\n", 1)[0]:
            return self._several(cid, text, bases, recorded)
        base = bases[0]
        span = _SPAN.search(text.split("\n", 1)[0])
        if span is None or base not in recorded:
            return f"{self.name}: {cid}: names {base}, which the request lacks"
        first, last = int(span[1]), int(span[2] or span[1])
        placed = self._lines(cid, recorded)
        mine = _picked(placed, first, last)
        if mine is None or placed is None or len(placed) != len(mine):
            return f"{self.name}: {cid}: its recorded lines {first}-{last} are not placed"
        base_lines = self._lines(base, recorded)
        if kind == "unchanged":
            if _picked(base_lines, first, last) != mine:
                return f"{self.name}: {cid}: lines {first}-{last} differ from {base}'s"
            return None
        body = text.split("\n", 1)[1].rsplit("\n(Apply this diff", 1)[0] + "\n"
        if base_lines is None or _applied(body, base_lines, first) != mine:
            return f"{self.name}: {cid}: the diff applied to {base} does not give its lines"
        return None

    def _several(
        self, cid: str, text: str, bases: tuple[str, ...], recorded: Mapping[str, str]
    ) -> str | None:
        """A FileRef naming several results, or results for some lines and the rest as
        content: every named line equals the named result's line of that number, and the lines
        below the head are the recorded result's own."""
        head, _, below = text.partition("\n")
        segments = _segments(head, bases)
        if segments is None:
            return f"{self.name}: {cid}: an unreadable reference"
        first, last = segments[0][0], segments[-1][1]
        placed = self._lines(cid, recorded)
        mine = _picked(placed, first, last)
        if mine is None or placed is None or len(placed) != len(mine):
            return f"{self.name}: {cid}: its recorded lines {first}-{last} are not placed"
        rows = below.split("\n")
        for a, b, base in segments:
            wanted = mine[a - first : b - first + 1]
            got: list[str] | list[str | None] | None
            if base is None:
                given, rows = rows[: b - a + 1], rows[b - a + 1 :]
                shown = _numbered("\n".join(given))
                got = [shown.get(n) for n in range(a, b + 1)] if shown else given
            else:
                theirs = self._lines(base, recorded)
                got = [theirs.get(n) for n in range(a, b + 1)] if theirs else None
            if got != wanted:
                return f"{self.name}: {cid}: lines {a}-{b} differ from what it names"
        return None

    def holds(self, cid: str, replaced: Mapping[str, str]) -> bool:
        """Whether the model holds what ``cid``'s recorded result showed though it was sent as
        a FileRef or diff: the claim checked out and the result it names is sent as recorded.
        (The replay's model simulator then sees the recorded text for it.)"""
        text = replaced.get(cid, "")
        if is_echo(text):
            return (cid, text) in self.echoed and self.echoed[(cid, text)] is None
        found = text.find("[filecache] ")
        bases = self.bases.get(cid)
        return (
            found >= 0
            and bases is not None
            and gateway_bases(text[found:])[1] == bases
            and (cid, text) in self.checked
            and self.checked[(cid, text)] is None
            and not any(base in replaced for base in bases)
        )

    def dangling(
        self, results: Sequence[tuple[str, str]], replaced: Mapping[str, str]
    ) -> dict[str, str]:
        """Results sent as a FileRef/diff whose named result is missing from the request, or
        not sent as recorded (``replaced``: what this request sent instead of the recording)."""
        present = {cid for cid, _ in results}
        out: dict[str, str] = {}
        for cid, _ in results:
            bases = self.bases.get(cid)
            if bases is None or gateway_bases(replaced.get(cid, ""))[1] != bases:
                continue
            for base in bases:
                if base not in present:
                    out[cid] = f"the result {base} its reference names is missing"
                elif base in replaced:
                    out[cid] = f"the result {base} its reference names was pruned"
        return out

    def close(self) -> None:
        self.memory.close()
