"""Replay a recorded session (DESIGN "Session trace format") plain and through filecache.

The trace's file tools are executed twice on two copies of ``files/``: once plain (the baseline:
the same ``Session`` tools with every read fresh: same content format, same confirmations and
error texts, no FileRef, diff or outline) and once through one ``filecache.Session``. The two
message lists differ only in the file tools' tool messages; other tools keep their recorded output.

Invariants:
- Prompt tokens are counted per message once (``TokenCounter.count_many`` over distinct
  messages); a request's size is a sum of message counts, never a re-tokenization.
- One request is sent before each assistant message and holds every message before it.
- Billed equivalents: per request, the longest message prefix it shares with the previous request
  is a cache read (0.1×), the rest a cache write (1.25×).
- A file tool that fails answers ``str(exc)`` of its ``FileCacheError`` in both runs; the copies
  are compared after every write and edit and at the end, and any difference is reported.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .cache import FileCache, ReadResult, Session, WriteResult
from .errors import FileCacheError, RequestError, TranscriptError
from .fsio import STORE_DIR, locate
from .tokens import TokenCounter

__all__ = [
    "CACHE_READ", "CACHE_WRITE", "TRACE_FORMAT", "CallReplay", "Compared", "PromptCost",
    "SessionReplay", "combine", "format_table", "message_text", "prompt_cost", "replay_session"
]  # fmt: skip

TRACE_FORMAT = "filecache-trace/1"
FILE_TOOLS = ("read_file", "write_file", "edit_file")
CACHE_READ = 0.1  # price of a cached prompt token, relative to an uncached one
CACHE_WRITE = 1.25  # price of a token written to the prompt cache
MESSAGE_OVERHEAD = 3  # tokens a chat message costs beyond its text (role, separators)
READ_KINDS = ("full", "partial", "unchanged", "diff", "error")


@dataclass(frozen=True)
class Compared:
    """One measure in both runs."""

    plain: float
    filecache: float

    @property
    def saved_pct(self) -> float:
        """Percent of ``plain`` that filecache saved (negative when it cost more)."""
        return 100.0 * (self.plain - self.filecache) / self.plain if self.plain else 0.0

    def to_json(self) -> dict[str, Any]:
        plain, fc = (x if isinstance(x, int) else round(x, 1) for x in (self.plain, self.filecache))
        return {"plain": plain, "filecache": fc, "saved_pct": round(self.saved_pct, 2)}


@dataclass(frozen=True)
class CallReplay:
    """One file tool call as replayed: its answer's kind and tokens in both runs."""

    call_id: str
    tool: str
    path: str
    kind: str  # filecache's kind (full/partial/unchanged/diff/written/edited) or "error"
    plain_tokens: int
    filecache_tokens: int
    error: str | None = None  # filecache's error text
    plain_error: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class PromptCost:
    """The prompt side of a list of requests."""

    requests: int
    tokens: int
    peak: int
    billed: float


@dataclass(frozen=True)
class SessionReplay:
    """What replaying one session (or, from ``combine``, several) through filecache saved.

    Attributes:
        name: the session directory's name (``"total"`` for a combination).
        source: the trace's ``source``.
        tokenizer: the encoding counted with (``estimate`` when no BPE was available).
        messages: messages in the transcript.
        requests: requests replayed (one before each assistant message).
        prompt_tokens: cumulative prompt tokens over all requests.
        file_tool_tokens: tokens of the file tools' outputs.
        peak_request: the largest request's prompt tokens.
        billed: billed equivalents under prompt caching.
        reads: filecache's reads by kind (``error`` for failed reads).
        file_calls: file tool calls by tool (``read_file``, ``write_file``, ``edit_file``).
        files_identical: the copies matched after every write/edit and at the end.
        mismatches: what differed between the copies (empty when ``files_identical``).
        calls: every file tool call, in order.
        plain_messages / filecache_messages: the two replayed message lists.
    """

    name: str
    source: str
    tokenizer: str
    messages: int
    requests: int
    prompt_tokens: Compared
    file_tool_tokens: Compared
    peak_request: Compared
    billed: Compared
    reads: Mapping[str, int]
    file_calls: Mapping[str, int]
    files_identical: bool
    mismatches: tuple[str, ...]
    calls: tuple[CallReplay, ...] = ()
    plain_messages: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)
    filecache_messages: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)

    def to_json(self, *, calls: bool = True) -> dict[str, Any]:
        """Every measure as JSON; ``calls`` adds the per-call records (not the messages)."""
        out: dict[str, Any] = {}
        for f in fields(self)[:13]:  # up to ``mismatches``
            value = getattr(self, f.name)
            if isinstance(value, Compared):
                value = value.to_json()
            out[f.name] = list(value) if isinstance(value, tuple) else value
        if calls:
            out["calls"] = [
                {k: v for k, v in vars(c).items() if k != "plain_error"} for c in self.calls
            ]
        return out


# -- prompt arithmetic (pure) ------------------------------------------------------------------


def prompt_cost(
    requests: Sequence[Sequence[tuple[object, int]]],
    *,
    cache_read: float = CACHE_READ,
    cache_write: float = CACHE_WRITE,
) -> PromptCost:
    """Tokens and billed equivalents of ``requests``, each a list of ``(message key, tokens)``.

    A request's longest prefix of messages equal (by key) to the previous request's is billed at
    ``cache_read``, the rest at ``cache_write``; the first request is all writes.
    """
    total = peak = 0
    billed = 0.0
    previous: Sequence[tuple[object, int]] = ()
    for request in requests:
        size = sum(tokens for _, tokens in request)
        cached = 0
        for (key, tokens), (prev_key, _) in zip(request, previous, strict=False):
            if key != prev_key:
                break
            cached += tokens
        billed += cached * cache_read + (size - cached) * cache_write
        total += size
        peak = max(peak, size)
        previous = request
    return PromptCost(len(requests), total, peak, billed)


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a chat message that its tokens are counted on: content plus tool calls."""
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    parts = [content if isinstance(content, str) else ""]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.extend((str(fn.get("name", "")), str(fn.get("arguments", ""))))
    return "\n".join(p for p in parts if p)


# -- the baseline tools -------------------------------------------------------------------------


# -- replay ------------------------------------------------------------------------------------


def _load_trace(trace_dir: Path) -> dict[str, Any]:
    path = trace_dir / "transcript.json"
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
    return trace


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


def _run_tool(
    session: Session, name: str, args: Mapping[str, Any], call_id: str, *, plain: bool
) -> tuple[str, str]:
    """``(text, kind)`` of one file tool call. ``plain`` is the baseline: every read is fresh
    content in the same format (no FileRef, no diff); writes and edits are the
    same tools, so error texts and confirmations match by construction."""
    path = _str_arg(args, "path")
    result: ReadResult | WriteResult
    if name == "read_file":
        offset, limit = _int_arg(args, "offset"), _int_arg(args, "limit")
        # mode="full" in both runs: the recorded agent acted on content, so an outline in its
        # place would change what it saw; replay measures delta reads, not outlines.
        result = session.read(
            path, offset=offset, limit=limit, mode="full", fresh=plain, call_id=call_id
        )
    elif name == "write_file":
        result = session.write(path, _str_arg(args, "content"), call_id=call_id)
    else:
        old, new = _str_arg(args, "old_string"), _str_arg(args, "new_string")
        replace_all = bool(args.get("replace_all", False))
        result = session.edit(path, old, new, replace_all=replace_all, call_id=call_id)
    return result.text, result.kind


def _replay_call(
    plain: Session, session: Session, name: str, args: Mapping[str, Any], call_id: str
) -> tuple[str, str, CallReplay]:
    """Run one file tool call in both runs: ``(plain text, filecache text, record)``."""
    try:
        plain_text, plain_error = _run_tool(plain, name, args, call_id, plain=True)[0], None
    except FileCacheError as exc:
        plain_text, plain_error = str(exc), str(exc)
    try:
        (fc_text, kind), fc_error = _run_tool(session, name, args, call_id, plain=False), None
    except FileCacheError as exc:
        fc_text, kind, fc_error = str(exc), "error", str(exc)
    count = session.cache.tokens.count
    path = str(args.get("path", ""))
    tokens = count(plain_text), count(fc_text)
    call = CallReplay(call_id, name, path, kind, *tokens, fc_error, plain_error)
    return plain_text, fc_text, call


def _bytes(root: Path, path: str) -> bytes | None:
    try:
        real = locate(root, path).real
        return real.read_bytes() if real.is_file() else None
    except (FileCacheError, OSError):
        return None


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and STORE_DIR not in p.relative_to(root).parts
    }


def replay_session(trace_dir: Path, *, tokenizer: str = "o200k") -> SessionReplay:
    """Replay the trace in ``trace_dir`` plain and through filecache; see the module docstring.

    Raises:
        TranscriptError: the directory is not a readable ``filecache-trace/1`` session.
    """
    trace_dir = Path(trace_dir)
    trace = _load_trace(trace_dir)
    messages: list[dict[str, Any]] = trace["messages"]
    calls = _tool_calls(messages)
    plain_msgs: list[dict[str, Any]] = []
    fc_msgs: list[dict[str, Any]] = []
    done: list[CallReplay] = []
    mismatches: list[str] = []
    with tempfile.TemporaryDirectory(prefix="filecache-replay-") as tmp:
        plain_root, fc_root = Path(tmp, "plain").resolve(), Path(tmp, "filecache").resolve()
        for root in (plain_root, fc_root):
            root.mkdir()
            if (trace_dir / "files").is_dir():
                shutil.copytree(trace_dir / "files", root, symlinks=True, dirs_exist_ok=True)
        with (
            FileCache(fc_root, store=":memory:", tokenizer=tokenizer) as cache,
            FileCache(plain_root, store=":memory:", tokenizer=tokenizer) as plain_cache,
        ):
            session = cache.session("replay")
            plain = plain_cache.session("plain")
            counter = cache.tokens
            for message in messages:
                call_id = str(message.get("tool_call_id") or "")
                if message.get("role") != "tool" or call_id not in calls:
                    plain_msgs.append(message)
                    fc_msgs.append(message)
                    continue
                name, args = calls[call_id]
                plain_text, fc_text, call = _replay_call(plain, session, name, args, call_id)
                plain_msgs.append({**message, "content": plain_text})
                fc_msgs.append({**message, "content": fc_text})
                done.append(call)
                if (call.error is None) != (call.plain_error is None):
                    mismatches.append(f"{call_id}: failed in one run only")
                changed = name != "read_file"
                if changed and _bytes(plain_root, call.path) != _bytes(fc_root, call.path):
                    mismatches.append(f"{call_id}: {call.path} differs after {name}")
            tokenizer_used = counter.encoding
            plain_tree, fc_tree = _tree(plain_root), _tree(fc_root)
        for rel in sorted(plain_tree.keys() | fc_tree.keys()):
            if plain_tree.get(rel) != fc_tree.get(rel):
                mismatches.append(f"end: {rel} differs between the runs")
    plain_cost, fc_cost = _prompt_costs(plain_msgs, fc_msgs, counter)
    reads = Counter({kind: 0 for kind in READ_KINDS})
    reads.update(c.kind for c in done if c.tool == "read_file")
    return SessionReplay(
        name=trace_dir.resolve().name,
        source=str(trace.get("source", "")),
        tokenizer=tokenizer_used,
        messages=len(messages),
        requests=plain_cost.requests,
        prompt_tokens=Compared(plain_cost.tokens, fc_cost.tokens),
        file_tool_tokens=Compared(
            sum(c.plain_tokens for c in done), sum(c.filecache_tokens for c in done)
        ),
        peak_request=Compared(plain_cost.peak, fc_cost.peak),
        billed=Compared(plain_cost.billed, fc_cost.billed),
        reads=dict(reads),
        file_calls={tool: sum(c.tool == tool for c in done) for tool in FILE_TOOLS},
        files_identical=not mismatches,
        mismatches=tuple(mismatches),
        calls=tuple(done),
        plain_messages=tuple(plain_msgs),
        filecache_messages=tuple(fc_msgs),
    )


def _prompt_costs(
    plain: Sequence[Mapping[str, Any]], fc: Sequence[Mapping[str, Any]], counter: TokenCounter
) -> tuple[PromptCost, PromptCost]:
    """Both runs' prompt costs, counting every distinct message text once."""
    plain_texts = [message_text(m) for m in plain]
    fc_texts = [message_text(m) for m in fc]
    distinct = list(dict.fromkeys(plain_texts + fc_texts))
    counts = dict(zip(distinct, counter.count_many(distinct), strict=True))

    def requests(
        msgs: Sequence[Mapping[str, Any]], texts: Sequence[str]
    ) -> list[list[tuple[object, int]]]:
        keyed: list[tuple[object, int]] = [
            ((m.get("role"), t), counts[t] + MESSAGE_OVERHEAD)
            for m, t in zip(msgs, texts, strict=True)
        ]
        return [keyed[:i] for i, m in enumerate(msgs) if m.get("role") == "assistant"]

    return prompt_cost(requests(plain, plain_texts)), prompt_cost(requests(fc, fc_texts))


def combine(replays: Sequence[SessionReplay], name: str = "total") -> SessionReplay:
    """Totals over several replays (peak request: the largest of any session)."""

    def total(attr: str) -> Compared:
        values = [getattr(r, attr) for r in replays]
        return Compared(sum(v.plain for v in values), sum(v.filecache for v in values))

    reads: Counter[str] = Counter()
    file_calls: Counter[str] = Counter()
    for r in replays:
        reads.update(r.reads)
        file_calls.update(r.file_calls)
    return SessionReplay(
        name=name,
        source="",
        tokenizer=",".join(sorted({r.tokenizer for r in replays})),
        messages=sum(r.messages for r in replays),
        requests=sum(r.requests for r in replays),
        prompt_tokens=total("prompt_tokens"),
        file_tool_tokens=total("file_tool_tokens"),
        peak_request=Compared(
            max((r.peak_request.plain for r in replays), default=0),
            max((r.peak_request.filecache for r in replays), default=0),
        ),
        billed=total("billed"),
        reads=dict(reads),
        file_calls=dict(file_calls),
        files_identical=all(r.files_identical for r in replays),
        mismatches=tuple(f"{r.name}: {m}" for r in replays for m in r.mismatches),
    )


def format_table(replays: Sequence[SessionReplay], totals: SessionReplay | None = None) -> str:
    """A markdown table: one row per session, then the totals row."""
    head = (
        "session|requests|prompt plain|prompt filecache|change|file tools plain"
        "|file tools filecache|reads f/p/u/d/err|peak plain|peak filecache|billed plain"
        "|billed filecache|change|files"
    ).split("|")
    rows = [head, ["---", *("---:" for _ in head[1:-1]), ":---:"]]
    for r in [*replays, *([totals] if totals is not None else [])]:
        bold = "**" if r is totals else ""
        reads = "/".join(str(r.reads.get(k, 0)) for k in READ_KINDS)
        rows.append(
            [
                f"{bold}{r.name}{bold}",
                f"{r.requests:,}",
                f"{r.prompt_tokens.plain:,.0f}",
                f"{r.prompt_tokens.filecache:,.0f}",
                f"{bold}{-r.prompt_tokens.saved_pct:+.1f}%{bold}",
                f"{r.file_tool_tokens.plain:,.0f}",
                f"{r.file_tool_tokens.filecache:,.0f}",
                reads,
                f"{r.peak_request.plain:,.0f}",
                f"{r.peak_request.filecache:,.0f}",
                f"{r.billed.plain:,.0f}",
                f"{r.billed.filecache:,.0f}",
                f"{bold}{-r.billed.saved_pct:+.1f}%{bold}",
                "same" if r.files_identical else "DIFFER",
            ]
        )
    return "\n".join("| " + " | ".join(row) + " |" for row in rows) + "\n"
