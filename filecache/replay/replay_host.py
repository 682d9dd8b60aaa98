"""Replaying a recorded host session (Claude Code...) through the host integration's own code.

``replay.replay_session`` re-executes a trace's file tools through a library ``Session``. A host
integration (``filecache.adapters.hosts``) answers differently: after the host ran its own tool,
with the host's output as the fallback. Its replay lives beside the integration (it speaks the
host's protocol; ``filecache.replay`` never imports ``adapters``), and uses what is here:

- ``HostRun``: two runs of one trace, ``recorded`` (as the host sent it) and ``filecache`` (each
  result the integration replaced, replaced), metered as ``replay`` meters (prompt tokens of a
  request before every assistant message, billed equivalents under prompt caching) and checked
  with ``replay_check`` (a model that rebuilds files only from the request as sent: 0 stale
  views, 0 dangling refs). The host's own tools are the baseline, so the ``plain`` run is the
  recorded one.
- ``HOST_REPLAYS``: which host replays exist, by host name, filled by whoever may import the
  integrations (the CLI: ``register_host_replay``); ``trace_host`` says which host recorded a
  trace (by its ``source``).

Invariants: a request's size is the sum of its messages' tokens (each distinct text counted
once) plus ``MESSAGE_OVERHEAD`` each; the checks see only the messages as sent and the disk.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from filecache.core.tokens import TokenCounter
from filecache.errors import TranscriptError
from filecache.prune.codecs import openai_chat
from filecache.prune.pruner import TokenMemo
from filecache.replay.host_registry import (
    HOST_REPLAYS,
    HostReplay,
    host_replay,
    register_host_replay,
)
from filecache.replay.replay_check import FileCall, ModelView, dangling_refs
from filecache.replay.replay_metrics import (
    MESSAGE_OVERHEAD,
    READ_KINDS,
    CostMeter,
    Measure,
    PruneSummary,
    SessionReplay,
    message_text,
)
from filecache.replay.trace_format import TRACE_FORMAT

__all__ = [
    "HOST_REPLAYS",
    "HOST_SOURCES",
    "HostReplay",
    "HostRun",
    "host_replay",
    "load_trace",
    "register_host_replay",
    "trace_host",
]

HOST_SOURCES = {"claude-code": ("claude-code ", "claude_code")}
"""Host name -> (how the ``source`` of a trace its importer wrote starts, the trace's key for
the calls as the host's hook receives them)."""

Message = dict[str, Any]

TRACE_ROLES = ("system", "developer", "user", "assistant", "tool")
"""The roles of a trace's messages (OpenAI chat completions')."""


def load_trace(trace_dir: Path) -> dict[str, Any]:
    """``transcript.json`` of a ``filecache-trace/1`` directory (which must hold ``files/``).

    Raises:
        TranscriptError: not a readable trace, or no ``files/`` folder beside it.
    """
    path = Path(trace_dir) / "transcript.json"
    try:
        trace = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TranscriptError(f"{trace_dir}: no transcript.json; is this a session trace?") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TranscriptError(f"{path}: cannot read the trace ({exc})") from exc
    if not isinstance(trace, dict) or trace.get("format") != TRACE_FORMAT:
        found = trace.get("format") if isinstance(trace, dict) else type(trace).__name__
        raise TranscriptError(f"{path}: format is {found!r}, expected {TRACE_FORMAT!r}")
    messages = trace.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise TranscriptError(f"{path}: 'messages' must be a list of message objects")
    _check_messages(path, messages)
    if not (Path(trace_dir) / "files").is_dir():
        # Without it every file tool would fail in the replay, which would still look like one.
        raise TranscriptError(
            f"{trace_dir}: no files/ folder; a trace holds the files as they were before the "
            "session in files/ (an empty one for a session that starts from nothing)"
        )
    return trace


def _check_messages(path: Path, messages: list[Any]) -> None:
    """Each message as the trace format has it (docs/design.md, "Session trace format"): a role;
    content a string, null or a list of text blocks; an assistant's ``tool_calls`` a list of
    calls with ids; a ``tool`` message's ``tool_call_id`` naming an earlier call. The chat
    parser pruning uses checks the shapes, so both refuse a message in the same words.

    Raises:
        TranscriptError: naming the file and the message's index.
    """
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in TRACE_ROLES:
            raise TranscriptError(
                f"{path}: message {index}: role must be one of {', '.join(TRACE_ROLES)}, "
                f"got {role!r}"
            )
    try:
        openai_chat.parse(messages)
    except TranscriptError as exc:
        raise TranscriptError(f"{path}: {exc}") from None


def trace_host(trace_dir: Path) -> str | None:
    """The host whose log the trace was imported from (by its ``source``), when the trace
    holds that host's hook calls (an older import does not: it replays as any trace); else
    None."""
    try:
        trace = load_trace(trace_dir)
    except TranscriptError:
        return None
    source = str(trace.get("source") or "")
    return next(
        (
            host
            for host, (start, key) in HOST_SOURCES.items()
            if source.startswith(start) and isinstance(trace.get(key), dict)
        ),
        None,
    )


class HostRun:
    """The recorded and the filecache run of one host trace, message by message.

    ``context(text)``: text the integration adds to the model's context once (the filecache
    run only). ``message(m, text, call)``: the next message of the trace; ``text`` is what the
    filecache run's model sees instead of a tool result's recorded content (None: as recorded),
    ``call`` the file tool call for the checks (reads, edits, writes; None: not one).
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.memo = TokenMemo(counter)
        self.recorded: list[tuple[object, int]] = []
        self.filecache: list[tuple[object, int]] = []
        self.meters = {"recorded": CostMeter(), "filecache": CostMeter()}
        self.history: list[Message] = []
        self.calls: dict[str, FileCall] = {}
        self.view = ModelView(self.calls)
        self.fed = 0
        self.stale: dict[str, str] = {}
        self.dangling: dict[str, str] = {}
        self.tool_tokens = {"recorded": 0, "filecache": 0}
        self.file_tokens = {"recorded": 0, "filecache": 0}
        self.records: list[dict[str, Any]] = []
        self.messages = 0

    def _keyed(self, message: Mapping[str, Any]) -> tuple[object, int]:
        text = message_text(message)
        return (message.get("role"), text), self.memo(text) + MESSAGE_OVERHEAD

    def context(self, text: str) -> None:
        message = {"role": "user", "content": text}
        self.filecache.append(self._keyed(message))
        self.history.append(message)

    def message(
        self, message: Message, text: str | None = None, call: FileCall | None = None
    ) -> None:
        if message.get("role") == "assistant":
            self._request()
        self.messages += 1
        recorded = self._keyed(message)
        self.recorded.append(recorded)
        sent = message if text is None else {**message, "content": text}
        keyed = recorded if text is None else self._keyed(sent)
        self.filecache.append(keyed)
        self.history.append(sent)
        if message.get("role") != "tool":
            return
        tokens = {
            "recorded": recorded[1] - MESSAGE_OVERHEAD,
            "filecache": keyed[1] - MESSAGE_OVERHEAD,
        }
        for run, n in tokens.items():
            self.tool_tokens[run] += n
        if call is None:
            return
        self.calls[call.call_id] = call
        for run, n in tokens.items():
            self.file_tokens[run] += n
        self.records.append(
            {"call_id": call.call_id, "tool": call.tool, "path": call.path, "kind": call.kind,
             "plain_tokens": tokens["recorded"], "filecache_tokens": tokens["filecache"],
             "recorded_tokens": tokens["recorded"], "error": None, "capped": False}
        )  # fmt: skip

    def _request(self) -> None:
        self.meters["recorded"].add(list(self.recorded))
        self.meters["filecache"].add(list(self.filecache))
        for message in self.history[self.fed :]:
            cid = str(message.get("tool_call_id") or "")
            if message.get("role") == "tool" and cid in self.calls:
                problem = self.view.feed(cid, str(message.get("content") or ""))
                if problem is not None:
                    self.stale.setdefault(cid, problem)
        self.fed = len(self.history)
        results = [
            (str(m.get("tool_call_id")), str(m.get("content") or ""))
            for m in self.history
            if m.get("role") == "tool"
        ]
        for cid, why in dangling_refs(results, self.calls).items():
            self.dangling.setdefault(
                cid, f"{cid}: {why} in request {len(self.meters['recorded'].sizes)}"
            )

    def result(
        self,
        name: str,
        source: str,
        tokenizer: str,
        *,
        skipped: Mapping[str, str] | None = None,
        ledger_reads: tuple[int, int] = (0, 0),
        mismatches: Sequence[str] = (),
    ) -> SessionReplay:
        """What the replay measured (``plain`` is the recorded run: the host's own tools)."""
        rec, fc = self.meters["recorded"].cost(), self.meters["filecache"].cost()

        def measure(attr: str) -> Measure:
            r, f = getattr(rec, attr), getattr(fc, attr)
            return Measure(r, r, f)

        reads = Counter({kind: 0 for kind in READ_KINDS})
        reads.update(_read_kind(c["kind"]) for c in self.records if c["tool"] == "read_file")
        problems = (*self.stale.values(), *self.dangling.values())
        return SessionReplay(
            name=name,
            source=source,
            tokenizer=tokenizer,
            sessions=1,
            messages=self.messages,
            requests=rec.requests,
            prompt_tokens=measure("tokens"),
            billed=measure("billed"),
            peak_request=measure("peak"),
            final_request=measure("final"),
            tool_output_tokens=Measure(
                self.tool_tokens["recorded"],
                self.tool_tokens["recorded"],
                self.tool_tokens["filecache"],
            ),  # fmt: skip
            file_tool_tokens=Measure(
                self.file_tokens["recorded"],
                self.file_tokens["recorded"],
                self.file_tokens["filecache"],
            ),  # fmt: skip
            reads=dict(reads),
            file_calls={
                tool: sum(c["tool"] == tool for c in self.records)
                for tool in ("read_file", "write_file", "edit_file")
            },
            pruning=PruneSummary(None, True),
            stale_views=len(self.stale),
            dangling_refs=len(self.dangling),
            recall=1.0,
            recall_pairs=0,
            problems=problems,
            files_identical=not mismatches,
            mismatches=tuple(mismatches),
            skipped=dict(skipped or {}),
            series={"recorded": rec.sizes, "plain": rec.sizes, "filecache": fc.sizes},
            calls=tuple(self.records),
            plain_messages=(),
            filecache_messages=tuple(self.history),
            ledger_reads=ledger_reads,
        )


def _read_kind(kind: str) -> str:
    """A host read's kind as ``reads`` counts it: the host's own content is full/partial."""
    return "full" if kind == "agent" else kind
