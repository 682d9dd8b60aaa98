"""Replay a recorded session (docs/design.md, "Session trace format"): recorded, plain, filecache.

The trace's file tools are executed twice on two copies of ``files/``: once plain (the baseline:
the same ``Session`` tools with every read fresh and whole: same content format, same
confirmations and error texts, no FileRef, diff or outline) and once through one
``filecache.Session`` (reads in ``read_mode``; by default as the agent's own tool reads: an
outline for a whole-file read of a large file only for an agent whose viewer abbreviates one,
as SWE-agent's does; ``trace_format.agent_read_mode``). Other tools keep their recorded output;
after each, ``Session.rehash`` looks for files it changed (bash-aware). A ``bash`` read that
``replay_shell`` can answer (its recorded result holds what the command prints on the files)
is answered by ``bash_reads`` in the filecache run and keeps its recorded result in the plain
run and in every peer's (the shell's own output); a ``bash`` command made only of edits replay
can redo is redone on both copies. The recorded transcript itself is the third run.

With ``cap`` (the default), a read answer larger than the recorded one (the agent's own tool's;
a content answer may exceed it by ``HEADER_SLACK``) is sent as recorded instead and the session
forgets it, as a host integration falls back to the host's output: never worse than the
recording, answer by answer.

With a ``window``, the filecache run is pruned before every request: the full history is kept
and passed to ``prune_messages`` each time, and the session's sticky projections (in its store)
make every earlier pruned result render to the same bytes, so the request as sent is the
pruned history. ``replay_check.ModelView`` rebuilds the model's view from each request as sent
to count stale views, dangling refs and recall.

Invariants:
- Prompt tokens are counted once per distinct message text (``TokenMemo``); a request's size is
  a sum of message counts, never a re-tokenization.
- One request is sent before each assistant message and holds every message before it.
- A file tool that fails answers ``str(exc)`` of its ``FileCacheError`` in both runs; the copies
  are compared after every write and edit and at the end, and any difference is reported.
- A file tool call that the trace marks unknown (``unknown.calls``, written by ``filecache
  import`` when the log does not show its files; ``trace_format``) is not executed: its recorded
  output stands in every run, and ``SessionReplay.skipped`` names it.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from filecache.cache import FileCache, ReadResult, Session, WriteResult
from filecache.core.kinds import Tool
from filecache.core.results import Kind
from filecache.errors import FileCacheError, RequestError
from filecache.figures import RequestTally, RunTally, prices_for, save_tally, session_headline
from filecache.fsio import STORE_DIR, locate
from filecache.prune.pruner import TokenMemo, prune_messages
from filecache.prune.pruning import PrunePolicy
from filecache.replay.gateway_shape import host_calls
from filecache.replay.replay_check import (
    AGENT_VIEW,
    FileCall,
    ModelView,
    RecordedView,
    dangling_refs,
    disk_lines,
    tag_of,
    verified_lines,
)
from filecache.replay.replay_grounding import (
    EditTarget,
    GroundingMeter,
    Lines,
    edit_target,
    grounded,
    shown_lines,
)
from filecache.replay.replay_host import load_trace
from filecache.replay.replay_metrics import (
    MESSAGE_OVERHEAD,
    READ_KINDS,
    RUNS,
    CostMeter,
    Measure,
    PruneSummary,
    SessionReplay,
    message_text,
)
from filecache.replay.replay_peers import Dangling, PeerRun
from filecache.replay.replay_shell import (
    redo_shell_edit,
    serve_shell_step,
    shell_commands,
    shell_read_paths,
)
from filecache.replay.trace_format import TRACE_FORMAT, agent_read_mode, edit_pairs, unknown_calls
from filecache.stats import read_baseline
from filecache.store.store import Store
from filecache.tools import EDIT_FILE, READ_FILE, WRITE_FILE

__all__ = ["FILE_TOOLS", "READ_MODES", "TRACE_FORMAT", "replay_session", "run_file_tool"]

FILE_TOOLS = ("read_file", "write_file", "edit_file")
READ_MODES = ("agent", "auto", "full")

Message = dict[str, Any]


def _tool_calls(messages: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """File tool calls by id; arguments that are not a JSON object leave the call as recorded."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            if fn.get("name") not in FILE_TOOLS or not call.get("id"):
                continue
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (TypeError, json.JSONDecodeError):
                continue
            if isinstance(args, dict):
                calls[str(call["id"])] = (str(fn["name"]), args)
    return calls


def _str_arg(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise RequestError(f"argument {name!r} must be a string, got {value!r}")
    return value


def _int_arg(args: Mapping[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise RequestError(f"argument {name!r} must be an integer, got {value!r}")


def run_file_tool(
    session: Session, name: str, args: Mapping[str, Any], call_id: str, *, mode: str | None
) -> ReadResult | WriteResult:
    """One file tool call of a trace. ``mode=None`` is the plain baseline (also the importers'
    check): every read fresh content in the same format (no FileRef, diff or outline); writes
    and edits are the same tools, so error texts and confirmations match by construction.

    Raises:
        FileCacheError: the tool failed, or its arguments are malformed (``RequestError``).
    """
    path = _str_arg(args, "path")
    result: ReadResult | WriteResult
    if name == "read_file":
        offset, limit = _int_arg(args, "offset"), _int_arg(args, "limit")
        result = session.read(
            path, offset=offset, limit=limit, mode=mode or "full", fresh=mode is None,
            call_id=call_id,
        )  # fmt: skip
    elif name == "write_file":
        result = session.write(path, _str_arg(args, "content"), call_id=call_id)
    elif "edits" in args:  # several replacements in one call (Claude Code's MultiEdit)
        pairs, replace_all = edit_pairs(args)
        result = session.edit(path, edits=pairs, replace_all=replace_all, call_id=call_id)
    else:
        old, new = _str_arg(args, "old_string"), _str_arg(args, "new_string")
        replace_all = bool(args.get("replace_all", False))
        result = session.edit(path, old, new, replace_all=replace_all, call_id=call_id)
    return result


def _attempt(
    session: Session, name: str, args: Mapping[str, Any], call_id: str, mode: str | None
) -> tuple[str, str, str | None]:
    """``(text, kind, error)``: a failed tool answers its error text."""
    try:
        result = run_file_tool(session, name, args, call_id, mode=mode)
        return result.text, result.kind, None
    except FileCacheError as exc:
        return str(exc), "error", str(exc)


def _snapshot(root: Path, path: str) -> tuple[str, tuple[str, ...]] | None:
    try:
        real = locate(root, path).real
        data = real.read_bytes() if real.is_file() else None
    except (FileCacheError, OSError):
        return None
    return None if data is None else (tag_of(data), disk_lines(data))


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and STORE_DIR not in p.relative_to(root).parts
    }


class _Keys:
    """Message keys and token counts, each distinct text counted once."""

    def __init__(self, count: TokenMemo) -> None:
        self.count = count
        self._texts: dict[int, tuple[Mapping[str, Any], str]] = {}

    def text(self, message: Mapping[str, Any]) -> str:
        held = self._texts.get(id(message))
        if held is not None and held[0] is message:
            return held[1]
        text = message_text(message)
        self._texts[id(message)] = (message, text)
        return text

    def keyed(self, message: Mapping[str, Any]) -> tuple[object, int]:
        text = self.text(message)
        return (message.get("role"), text), self.count(text) + MESSAGE_OVERHEAD


class _Checker:
    """Feeds the model simulator request by request: stale views, dangling refs, recall."""

    def __init__(
        self,
        calls: Mapping[str, FileCall],
        later_paths: Sequence[set[str]],
        dangling: Callable[[Sequence[tuple[str, str]], Mapping[str, FileCall]], dict[str, str]]
        | None = None,
    ) -> None:
        self.calls = calls
        self.dangling_of = dangling or dangling_refs  # a peer run names its own stubs' bases
        self.unpruned = ModelView(calls)
        self.later_paths = later_paths  # by message index: paths touched at or after it
        self.fed = 0
        self.problems: dict[str, str] = {}
        self.dangling: dict[str, str] = {}
        self.current: dict[str, tuple[str, tuple[str, ...]] | None] = {}
        self.recall_sum = 0.0
        self.recall_pairs = 0
        self.recorded: RecordedView | None = None  # what the recording showed, when given
        self.all_sum = 0.0  # recall over every line the recording showed (outlines: hidden)
        self.all_pairs = 0
        self.all_lines = [0, 0, 0]  # summed over pairs: the file's lines, recorded, held
        self._last: tuple[ModelView | None, set[str], list[tuple[str, str]]] = (None, set(), [])

    def request(
        self, index: int, history: Sequence[Message], sent: Sequence[Message], pruned: set[str]
    ) -> None:
        # A pruned edit confirmation matters too: it may be all that says where the edit landed.
        affected = {
            self.calls[c].path
            for c in pruned
            if c in self.calls and self.calls[c].tool in (READ_FILE.name, EDIT_FILE.name)
        }
        # A write or edit whose arguments, as sent, are not what the model wrote (its input
        # was cleared): the model no longer knows what it wrote.
        inputs_gone = _changed_inputs(sent, self.calls)
        affected |= {self.calls[c].path for c in inputs_gone}
        new: dict[str, str | None] = {}
        for message in history[self.fed : index]:
            cid = str(message.get("tool_call_id") or "")
            if message.get("role") != "tool" or cid not in self.calls:
                continue
            new[cid] = self.unpruned.feed(cid, str(message.get("content") or ""))
            self.current[self.calls[cid].path] = self.calls[cid].after
        self.fed = index
        results = [
            (str(m.get("tool_call_id")), str(m.get("content") or ""))
            for m in sent
            if m.get("role") == "tool"
        ]
        as_sent: ModelView | None = None
        if affected:
            as_sent = ModelView(self.calls, affected)
            for cid, text in results:
                problem = as_sent.feed(cid, text, input_intact=cid not in inputs_gone)
                if cid in new and self.calls[cid].path in affected:
                    new[cid] = problem
        for cid, problem in new.items():
            if problem is not None:
                self.problems.setdefault(cid, problem)
        self._last = (as_sent, affected, results)
        for cid, why in self.dangling_of(results, self.calls).items():
            self.dangling.setdefault(cid, f"{cid}: {why} in the request before message {index}")
        for path in self.later_paths[index]:
            state = self.current.get(path)
            if state is None:
                continue
            tag, lines = state
            shown = self.unpruned.held(path, tag, lines)
            held = shown
            if as_sent is not None and path in affected:
                held = as_sent.held(path, tag, lines)
            if self.recorded is not None:
                recorded = self.recorded.current(path, lines)
                view = as_sent if as_sent is not None and path in affected else self.unpruned
                known = view.held_any(path, lines)  # by content, as the recording's lines are
                if recorded:
                    self.all_sum += len(known & recorded) / len(recorded)
                    self.all_pairs += 1
                    self.all_lines[0] += len(lines)
                    self.all_lines[1] += len(recorded)
                    self.all_lines[2] += len(known & recorded)
            if not shown:
                continue
            self.recall_sum += len(held & shown) / len(shown)
            self.recall_pairs += 1

    def sources(self, path: str) -> list[Lines]:
        """What the last request showed of ``path``: the model's copies rebuilt from it, and
        each tool result's lines as sent (``replay_grounding.shown_lines``)."""
        as_sent, affected, results = self._last
        view = as_sent if as_sent is not None and path in affected else self.unpruned
        out = [
            {n: text.rstrip("\n") for n, text in copy.lines.items()}
            for copy in view.copies.get(path, {}).values()
        ]
        out += [
            shown_lines(self.calls[cid], text)
            for cid, text in results
            if cid in self.calls and self.calls[cid].path == path
        ]
        return out


def _peer_sources(peer: PeerRun, path: str) -> list[Lines]:
    """The lines each tool result of a peer's last request shows of ``path``, as sent (a
    gateway's checked FileRef or edit echo as the lines it names: ``PeerRun.shown``)."""
    return [
        shown_lines(peer.calls[cid], str(m.get("content") or ""))
        for m in peer.shown
        if (cid := str(m.get("tool_call_id") or "")) in peer.calls and peer.calls[cid].path == path
    ]


def _edit_sites(
    messages: Sequence[Mapping[str, Any]], calls: Mapping[str, tuple[str, dict[str, Any]]]
) -> dict[int, list[str]]:
    """By the index of the assistant message that makes them: the edit calls replayed."""
    out: dict[int, list[str]] = {}
    for i, message in enumerate(messages):
        for call in message.get("tool_calls") or ():
            cid = str(call.get("id"))
            if calls.get(cid, ("",))[0] == EDIT_FILE.name:
                out.setdefault(i, []).append(cid)
    return out


def _changed_inputs(sent: Sequence[Message], calls: Mapping[str, FileCall]) -> set[str]:
    """Write and edit calls whose arguments in the request as sent differ from the call's."""
    out: set[str] = set()
    for message in sent:
        for call in message.get("tool_calls") or ():
            cid = str(call.get("id"))
            known = calls.get(cid)
            if known is None or known.tool not in (WRITE_FILE.name, EDIT_FILE.name):
                continue
            raw = (call.get("function") or {}).get("arguments")
            try:
                given = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                given = None
            if given != dict(known.args):
                out.add(cid)
    return out


def _later_paths(
    messages: Sequence[Mapping[str, Any]],
    calls: Mapping[str, tuple[str, dict[str, Any]]],
    shell_paths: Mapping[str, str],
) -> list[set[str]]:
    """By message index: the paths a file tool call or a shell read touches at or after it."""
    out: list[set[str]] = [set() for _ in range(len(messages) + 1)]
    for i in range(len(messages) - 1, -1, -1):
        out[i] = set(out[i + 1])
        for call in messages[i].get("tool_calls") or ():
            found = calls.get(str(call.get("id")))
            if found is not None and isinstance(found[1].get("path"), str):
                out[i].add(found[1]["path"])
            if str(call.get("id")) in shell_paths:
                out[i].add(shell_paths[str(call.get("id"))])
    return out


def replay_session(
    trace_dir: Path,
    *,
    tokenizer: str = "o200k",
    window: int | None = None,
    cache_aware: bool = True,
    read_mode: str = "agent",
    store: str | Path | Store | None = None,
    policy: PrunePolicy | None = None,
    peers: Sequence[str] = (),
    trigger: int | None = None,
    cap: bool = True,
    model: str | None = None,
) -> SessionReplay:
    """Replay the trace in ``trace_dir``; see the module docstring.

    Args:
        trace_dir: a ``filecache-trace/1`` session directory.
        tokenizer: how tokens are counted (``o200k``, ``cl100k``, ``estimate``).
        window: the context window to prune for; None: no pruning (delta reads only).
        cache_aware: the pruner's prompt-cache cost gate.
        read_mode: filecache's read mode: ``agent`` (the default) answers whole-file reads as
            the agent's own tool does (``trace_format.agent_read_mode``: ``auto`` for an agent
            whose viewer abbreviates a large file, SWE-agent's; else ``full``), ``auto``
            (outlines for large whole files), ``full`` (never an outline).
        store: where the filecache run's session is kept (default: in memory); the session is
            named after the directory and replaced if it exists.
        policy: a whole pruning policy (overrides ``window`` and ``cache_aware``).
        peers: other tools' policies to run beside filecache over the plain run
            (``peer_policies.POLICIES`` but ``filecache``); their results are in ``policies``.
        trigger: Anthropic's clear_tool_uses trigger in tokens (default: 30% of the window,
            or 100,000 without one).
        cap: a read answer (outline, content, diff, FileRef) larger than the agent's own
            tool's recorded answer is replaced by that answer, and the session forgets it (as
            a host integration falls back to the host's output): never worse than the
            recording, answer by answer. False: filecache's answers as they are.
        model: whose published prices the headline's cost is in (``figures.PRICES``).

    Raises:
        TranscriptError: the directory is not a readable ``filecache-trace/1`` session.
    """
    prices_for(model)  # an unknown model fails before the work
    if read_mode not in READ_MODES:
        raise RequestError(f"read_mode must be one of {', '.join(READ_MODES)}, not {read_mode!r}")
    trace_dir = Path(trace_dir).resolve()  # the same figures however the path is written
    name = trace_dir.name
    trace = load_trace(trace_dir)
    if read_mode == "agent":
        read_mode = agent_read_mode(trace)
    messages: list[Message] = trace["messages"]
    calls = _tool_calls(messages)
    shell = shell_commands(messages)
    skipped = {k: v for k, v in unknown_calls(trace).items() if k in calls or k in shell}
    calls = {k: v for k, v in calls.items() if k not in skipped}  # kept as recorded
    shell = {k: v for k, v in shell.items() if k not in skipped}
    if policy is None and window:
        policy = PrunePolicy(context_window=window, cache_aware=cache_aware)
    with tempfile.TemporaryDirectory(prefix="filecache-replay-") as tmp:
        plain_root, fc_root = Path(tmp, "plain").resolve(), Path(tmp, "filecache").resolve()
        for root in (plain_root, fc_root):
            root.mkdir()  # load_trace made sure the trace has files/
            shutil.copytree(trace_dir / "files", root, symlinks=True, dirs_exist_ok=True)
        with (
            FileCache(fc_root, store=store or ":memory:", tokenizer=tokenizer) as cache,
            FileCache(plain_root, store=":memory:", tokenizer=tokenizer) as plain_cache,
        ):
            cache.engine.store.delete_session(name)
            cache.engine.secrets.seal_as(
                f"replay of {name}"
            )  # not the temporary root: the same bytes
            shell_paths = shell_read_paths(shell, fc_root, trace.get("cwd"))
            later = _later_paths(messages, calls, shell_paths)
            session = cache.session(name)  # stored as NAME#<root hash> off the store's home root
            run = _Run(
                session, plain_cache.session("plain"), calls, policy, later, read_mode,
            )  # fmt: skip
            peer_window = policy.context_window if policy is not None else window
            run.add_peers(peers, peer_window, trigger)
            for peer in run.peers:  # a Claude Code trace: its requests as Claude Code sent them
                if peer.gateway is not None and (found := host_calls(trace)):
                    peer.gateway.host_shape(found, trace.get("cwd"))
            run.cap = cap
            run.shell, run.cwd = shell, trace.get("cwd")
            run.originals = trace_dir / "files"
            run.edit_sites = _edit_sites(messages, calls)
            for message in messages:
                run.step(message, fc_root, plain_root)
            tokenizer_used = cache.engine.counts.tokens.encoding
            store = cache.engine.store
            save_tally(store, session.id, run.tally())  # what 'filecache stats' reads
            headline = session_headline(store, session.id, model)
            reads = [e for e in store.events(session.id) if e.tool == Tool.READ]
            ledger = (
                sum(e.tokens for e in reads),
                sum(read_baseline(e.kind, e.tokens, e.tokens_full) for e in reads),
            )
            plain_tree, fc_tree = _tree(plain_root), _tree(fc_root)
    for rel in sorted(plain_tree.keys() | fc_tree.keys()):
        if plain_tree.get(rel) != fc_tree.get(rel):
            run.mismatches.append(f"end: {rel} differs between the runs")
    result = run.result(name, str(trace.get("source", "")), tokenizer_used, len(messages))
    skipped |= run.shell_kept
    return dataclasses.replace(result, skipped=skipped, ledger_reads=ledger, headline=headline)


HEADER_SLACK = 32  # tokens a content answer may exceed the agent's own view by (its header)


def _slack(kind: str) -> int:
    """How much larger than the agent's own view an answer may be before the cap sends that
    view instead: a content answer the size of its header (the version tag later FileRefs
    and diffs build on: capping it to save a few tokens would cost them), any other none."""
    return HEADER_SLACK if kind in (Kind.FULL, Kind.PARTIAL) else 0


class _Run:
    """The state of one replay while its messages are stepped through."""

    def __init__(
        self,
        session: Session,
        plain: Session,
        calls: Mapping[str, tuple[str, dict[str, Any]]],
        policy: PrunePolicy | None,
        later_paths: Sequence[set[str]],
        read_mode: str,
    ) -> None:
        self.session, self.plain, self.calls, self.policy = session, plain, calls, policy
        self.read_mode = read_mode
        self.memo = TokenMemo(session.engine.counts.tokens)
        self.keys = _Keys(self.memo)
        self.index = 0
        self.recorded: list[tuple[object, int]] = []
        self.plain_keyed: list[tuple[object, int]] = []
        self.history: list[Message] = []
        self.plain_history: list[Message] = []
        self.meters = {run: CostMeter() for run in RUNS}
        self.file_calls: dict[str, FileCall] = {}
        self.records: list[dict[str, Any]] = []
        self.mismatches: list[str] = []
        self.tool_tokens = {run: 0 for run in RUNS}
        self.file_tokens = {run: 0 for run in RUNS}
        self.checker = _Checker(self.file_calls, later_paths)
        self.recorded_view = RecordedView()  # one for every run: what the recording showed
        self.checker.recorded = self.recorded_view
        self.passes = self.dropped = 0
        self.final_tiers: dict[str, str] = {}
        self.inputs_cleared: set[str] = set()  # writes and edits whose input was cleared
        self.reclaimed_final = 0
        self.later_paths = later_paths
        self.peers: list[PeerRun] = []
        self.cap = True  # an answer larger than the recorded one is replaced by it
        self.capped: list[str] = []
        self.edit_sites: Mapping[int, Sequence[str]] = {}  # by message index
        self.recorded_shown: dict[str, list[Lines]] = {}  # per path: what the recording showed
        self.grounding = {"recorded": GroundingMeter(), "filecache": GroundingMeter()}
        self.peer_grounding: dict[str, GroundingMeter] = {}

    def add_peers(self, names: Sequence[str], window: int | None, trigger: int | None) -> None:
        for name in names:
            self.peers.append(
                PeerRun(
                    name, window=window, trigger=trigger, count=self.memo, keyed=self.keys.keyed,
                    checker=self._peer_checker,
                )
            )  # fmt: skip
            self.peer_grounding[name] = GroundingMeter()
        self.shell: Mapping[str, str] = {}  # bash calls by id (replay_shell answers the reads)
        self.cwd: str | None = None
        self.shell_kept: dict[str, str] = {}
        self.shell_edits = 0
        self.originals: Path | None = None  # the trace's files/ (git checkout FILE)

    def _peer_checker(self, calls: Mapping[str, FileCall], dangling: Dangling) -> _Checker:
        checker = _Checker(calls, self.later_paths, dangling)
        checker.recorded = self.recorded_view
        return checker

    def step(self, message: Message, fc_root: Path, plain_root: Path) -> None:
        if message.get("role") == "assistant":
            self._request()
        self.recorded.append(self.keys.keyed(message))
        cid = str(message.get("tool_call_id") or "")
        if message.get("role") == "tool" and cid in self.shell and self._shell_read(message, cid):
            self.index += 1
            return
        if message.get("role") != "tool" or cid not in self.calls:
            self.plain_keyed.append(self.recorded[-1])
            self.history.append(message)
            self.plain_history.append(message)
            for peer in self.peers:
                peer.add(message, message, None)
            if message.get("role") == "tool":
                for run in self.tool_tokens:
                    self.tool_tokens[run] += self.recorded[-1][1] - MESSAGE_OVERHEAD
                if cid in self.shell:  # sed -i, a heredoc...: redone on both copies
                    self.shell_edits += redo_shell_edit(
                        self.shell[cid], (fc_root, plain_root), self.cwd, self.originals
                    )
                self.session.rehash(cid or None)
            self.index += 1
            return
        name, args = self.calls[cid]
        path = str(args.get("path", ""))
        before = _snapshot(fc_root, path) if name != "read_file" else None
        plain_text, plain_kind, plain_error = _attempt(self.plain, name, args, cid, None)
        fc_text, kind, fc_error = _attempt(self.session, name, args, cid, self.read_mode)
        after = _snapshot(fc_root, path)
        recorded_text = str(message.get("content") or "")
        call = FileCall(cid, name, path, args, kind, fc_text, before, after)
        capped = (
            self.cap and name == "read_file" and fc_error is None and after is not None
            and recorded_text.strip() != ""  # an empty recording shows no view to fall back to
            and self.memo(fc_text) > self.recorded[-1][1] - MESSAGE_OVERHEAD + _slack(kind)
        )  # fmt: skip
        if capped and after is not None:  # the agent's own view is smaller: it stands
            self.session.forget([cid])  # no later answer relies on what was not sent
            inner = verified_lines(recorded_text, after[1])
            call = FileCall(cid, name, path, args, AGENT_VIEW, recorded_text, None, after, inner)
            fc_text = recorded_text
            self.capped.append(cid)
        self.file_calls[cid] = call
        self.recorded_view.feed(FileCall(cid, name, path, args, kind, "", before, after),
                                recorded_text)  # fmt: skip
        shown = FileCall(cid, name, path, args, "", recorded_text, before, after)
        self.recorded_shown.setdefault(path, []).append(shown_lines(shown, recorded_text))
        plain_msg, fc_msg = {**message, "content": plain_text}, {**message, "content": fc_text}
        self.plain_keyed.append(self.keys.keyed(plain_msg))
        self.history.append(fc_msg)
        self.plain_history.append(plain_msg)
        for peer in self.peers:
            plain_call = FileCall(cid, name, path, args, plain_kind, plain_text, before, after)
            peer.add(message, plain_msg, plain_call)
        tokens = {
            "recorded": self.recorded[-1][1] - MESSAGE_OVERHEAD,
            "plain": self.memo(plain_text),
            "filecache": self.memo(fc_text),
        }
        for run, n in tokens.items():
            self.tool_tokens[run] += n
            self.file_tokens[run] += n
        self.records.append(
            {"call_id": cid, "tool": name, "path": path, "kind": kind,
             "plain_tokens": tokens["plain"], "filecache_tokens": tokens["filecache"],
             "recorded_tokens": tokens["recorded"], "error": fc_error, "capped": bool(capped)}
        )  # fmt: skip
        if (fc_error is None) != (plain_error is None):
            self.mismatches.append(f"{cid}: failed in one run only")
        if name != "read_file" and _snapshot(plain_root, path) != after:
            self.mismatches.append(f"{cid}: {path} differs after {name}")
        self.index += 1

    def _shell_read(self, message: Message, cid: str) -> bool:
        """A bash read answered through the cache (``replay_shell``); False: not one.

        The recorded result is the plain run's (it is the shell's output) and every peer's:
        their models see it as recorded, and their simulators learn its lines (``inner``)."""
        recorded = str(message.get("content") or "")
        root = self.session.engine.root
        served = serve_shell_step(self.session, self.shell[cid], recorded, root, self.cwd, cid)
        if served is None or isinstance(served, str):
            if served is not None:
                self.shell_kept[cid] = served
            return False
        answer, fc_text = served.answer, served.text
        after = _snapshot(root, answer.path)
        plain_kind = "full" if served.whole else "partial"
        plain_call = FileCall(
            cid, "read_file", answer.path, served.args, plain_kind, recorded, None, after,
            inner=served.output,
        )  # fmt: skip
        self.file_calls[cid] = FileCall(
            cid, "read_file", answer.path, served.args, answer.kind, fc_text, None, after,
            inner=answer.text,
        )  # fmt: skip
        recorded_tokens = self.recorded[-1][1] - MESSAGE_OVERHEAD
        if self.cap and self.memo(fc_text) > recorded_tokens + _slack(answer.kind):
            self.session.forget([cid])  # the shell's own output is smaller: it stands
            self.file_calls[cid], fc_text = plain_call, recorded
            self.capped.append(cid)
        fc_msg = {**message, "content": fc_text}
        self.plain_keyed.append(self.recorded[-1])
        self.history.append(fc_msg)
        self.plain_history.append(message)
        self.recorded_view.feed(plain_call, recorded)
        self.recorded_shown.setdefault(answer.path, []).append(shown_lines(plain_call, recorded))
        for peer in self.peers:
            peer.add(message, message, plain_call, shell=True)
        recorded_tokens = self.recorded[-1][1] - MESSAGE_OVERHEAD
        tokens = {"recorded": recorded_tokens, "plain": recorded_tokens,
                  "filecache": self.memo(fc_text)}  # fmt: skip
        for run, n in tokens.items():
            self.tool_tokens[run] += n
            self.file_tokens[run] += n
        self.records.append(
            {"call_id": cid, "tool": "read_file", "path": answer.path, "kind": answer.kind,
             "plain_tokens": tokens["plain"], "filecache_tokens": tokens["filecache"],
             "recorded_tokens": tokens["recorded"], "error": None, "shell": self.shell[cid],
             "capped": bool(self.capped and self.capped[-1] == cid)}
        )  # fmt: skip
        return True

    def _request(self) -> None:
        self.meters["recorded"].add(list(self.recorded))
        self.meters["plain"].add(list(self.plain_keyed))
        sent: Sequence[Message] = self.history
        pruned: set[str] = set()
        if self.policy is not None:
            result = prune_messages(
                self.history, session=self.session, policy=self.policy, format="openai",
                count=self.memo,
            )  # fmt: skip
            sent = result.messages
            plan = result.plan
            pruned = set(plan.replacements)
            self.passes += bool(plan.actions)
            self.dropped += len(plan.dropped_by_gate)
            for action in plan.actions:
                if action.target == "input":
                    self.inputs_cleared.add(action.call_id)
                else:
                    self.final_tiers[action.call_id] = action.tier
        self.meters["filecache"].add([self.keys.keyed(m) for m in sent])
        targets = self._edit_targets()
        for peer in self.peers:
            peer.request(self.index)
        self.checker.request(self.index, self.history, sent, pruned)
        self._ground(targets, pruned)
        if pruned:
            originals = {str(m.get("tool_call_id")): m for m in self.history}
            now = {str(m.get("tool_call_id")): m for m in sent if m.get("role") == "tool"}
            self.reclaimed_final = sum(
                self.memo(self.keys.text(originals[c])) - self.memo(self.keys.text(now[c]))
                for c in pruned
                if c in now and c in originals
            )

    def _edit_targets(self) -> list[EditTarget]:
        """The edits the coming assistant message makes, on the files as they are now."""
        out = []
        for cid in self.edit_sites.get(self.index, ()):
            args = self.calls[cid][1]
            state = _snapshot(self.session.engine.root, str(args.get("path", "")))
            target = edit_target(cid, args, state[1], self.memo) if state is not None else None
            if target is not None:
                out.append(target)
        return out

    def _ground(self, targets: Sequence[EditTarget], pruned: set[str]) -> None:
        """Whether each run's request shows each edit's old text; then charge the re-reads."""
        for target in targets:
            seen = grounded(target, self.recorded_shown.get(target.path, ()))
            self.grounding["recorded"].edit(target, seen, seen)
            here = grounded(target, self.checker.sources(target.path))
            self.grounding["filecache"].edit(target, here, seen)
            for peer in self.peers:
                there = grounded(target, _peer_sources(peer, target.path))
                self.peer_grounding[peer.name].edit(target, there, seen)
        self.grounding["recorded"].request(())
        self.grounding["filecache"].request(pruned)
        for peer in self.peers:
            self.peer_grounding[peer.name].request(peer.replaced)

    def result(self, name: str, source: str, tokenizer: str, messages: int) -> SessionReplay:
        costs = {run: meter.cost() for run, meter in self.meters.items()}

        def measure(attr: str) -> Measure:
            return Measure(*(getattr(costs[run], attr) for run in self.meters))

        reads = Counter({kind: 0 for kind in READ_KINDS})
        reads.update(c["kind"] for c in self.records if c["tool"] == "read_file")
        checker = self.checker
        window = self.policy.context_window if self.policy else None
        cache_aware = self.policy.cache_aware if self.policy else True
        problems = [*checker.problems.values(), *checker.dangling.values()]
        return SessionReplay(
            name=name,
            source=source,
            tokenizer=tokenizer,
            sessions=1,
            messages=messages,
            requests=costs["plain"].requests,
            prompt_tokens=measure("tokens"),
            billed=measure("billed"),
            peak_request=measure("peak"),
            final_request=measure("final"),
            tool_output_tokens=Measure(*self.tool_tokens.values()),
            file_tool_tokens=Measure(*self.file_tokens.values()),
            reads=dict(reads),
            file_calls={tool: sum(c["tool"] == tool for c in self.records) for tool in FILE_TOOLS},
            pruning=PruneSummary(
                window,
                cache_aware,
                self.passes,
                dict(Counter(self.final_tiers.values())),
                self.reclaimed_final,
                self.dropped,
                len(self.inputs_cleared),
            ),  # fmt: skip
            stale_views=len(checker.problems),
            dangling_refs=len(checker.dangling),
            recall=checker.recall_sum / checker.recall_pairs if checker.recall_pairs else 1.0,
            recall_pairs=checker.recall_pairs,
            recall_all=checker.all_sum / checker.all_pairs if checker.all_pairs else 1.0,
            recall_all_pairs=checker.all_pairs,
            lines_in_use=(checker.all_lines[0], checker.all_lines[1], checker.all_lines[2]),
            problems=tuple(problems),
            files_identical=not self.mismatches,
            mismatches=tuple(self.mismatches),
            series={run: cost.sizes for run, cost in costs.items()},
            billed_series={run: cost.bills for run, cost in costs.items()},
            calls=tuple(self.records),
            plain_messages=tuple(self.plain_history),
            filecache_messages=tuple(self.history),
            policies={
                peer.name: dataclasses.replace(
                    peer.result(), grounding=self.peer_grounding[peer.name].result()
                )
                for peer in self.peers
            },
            capped=len(self.capped),
            grounding={run: meter.result() for run, meter in self.grounding.items()},
            cached={run: cost.cached for run, cost in costs.items()},
        )

    def tally(self) -> RequestTally:
        """The filecache run's requests against the plain run's (``figures.RequestTally``)."""
        fc, plain = self.meters["filecache"].cost(), self.meters["plain"].cost()
        return RequestTally(
            RunTally(fc.requests, fc.tokens, fc.cached),
            RunTally(plain.requests, plain.tokens, plain.cached),
        )
