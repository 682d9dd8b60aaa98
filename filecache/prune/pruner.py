"""Pruning at the edges: parse, plan, archive, record projections, forget, render.

``prune_messages`` is what adapters and the CLI call before a request. It keeps the pure
planner (``pruning.py``) pure: the store (archive of every original, sticky projections), the
session (its ledger, its outlines, ``forget`` for ref safety) and token counting live here.

Invariants:
- The input is never mutated; the output has the input's shape (a bare list, or the same
  wrapper object with its other keys).
- Every result a plan changes is archived first (the original text, once) and its projection
  recorded, so the next pass renders the same bytes; then ``Session.forget`` drops every fact
  that relied on it, so no FileRef or diff can point at content the model no longer has.
- A result of a denied file (``settings.deny``: a file tool's path, its resolved target in the
  ledger, a version the session read as secret, a word of another tool's arguments such as
  ``cat .env``, or a text that holds a line of a denied file: one of the root's, found by
  ``SecretIndex.reveals``, or one of the transcript's denied results, so ``cat .e*`` and a
  link's name are caught) is never stored: the planner clears it instead of outlining or
  truncating it (the placeholder has no content), and the archive keeps ``NOT_ARCHIVED`` with
  the text's keyed hash (``hashing.keyed_digest``) instead of the text, so ``filecache archive
  show`` says it was not stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from filecache.core.hashing import keyed_digest, short_version, version_of
from filecache.core.json_input import check_json, json_strings
from filecache.core.render import MARKERS
from filecache.core.tokens import TokenCounter, TokenMemo
from filecache.errors import FileCacheError
from filecache.fsio import locate
from filecache.ledger import Ledger
from filecache.outline.outline import build_outline, language_for_path, render_outline
from filecache.prune.codecs.base import ToolCall, Transcript, renders_inputs
from filecache.prune.file_tools import file_access
from filecache.prune.input_pruning import INPUT_SUFFIX
from filecache.prune.pruning import (
    PrunePlan,
    PrunePolicy,
    ResultInfo,
    apply_plan,
    plan_prune,
    tier_of,
)
from filecache.prune.sdk_messages import convert
from filecache.prune.transcript import needs_convert, parse_transcript, unwrap
from filecache.secrecy import MIN_LINE, SecretIndex, Secrets, secret_key
from filecache.settings import DEFAULT_DENY, Settings, deny_pattern
from filecache.store.seal import default_seal
from filecache.store.store import Store

__all__ = [
    "NOT_ARCHIVED",
    "PruneEngine",
    "PruneReport",
    "PruneResult",
    "PrunedPart",
    "PruneSession",
    "TokenMemo",
    "denied_results",
    "prune_messages",
    "transcript_session_id",
]

_NUMBERED = ("\t", "→")  # cat -n style prefixes: filecache/SWE-agent (TAB), Claude Code (→)
_NUMBER = re.compile(r"^\s*\d+(?:\t|→)")  # a numbered read's line prefix
_WORDS = re.compile(r"[^\s'\"`;|&<>()]+")  # the words of a command line, for the deny-list

NOT_ARCHIVED = "[filecache: not archived: "
"""Starts what the archive keeps for a denied file's result instead of its text."""


class PruneCounts(Protocol):
    """What a prune pass uses of ``sources.Counts``: the exact counter."""

    @property
    def tokens(self) -> TokenCounter: ...


class PruneOutlines(Protocol):
    """What a prune pass uses of ``sources.Outlines``: a stored version's outline."""

    def outline_text(
        self,
        version: str,
        path: str,
        lines: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> str: ...


class PruneEngine(Protocol):
    """What a prune pass uses of a session's ``Engine`` (named here: pruning sits below it)."""

    @property
    def root(self) -> Path: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> Store: ...
    @property
    def secrets(self) -> Secrets: ...
    @property
    def counts(self) -> PruneCounts: ...
    @property
    def outlines(self) -> PruneOutlines: ...


class PruneSession(Protocol):
    """What a prune pass uses of a ``filecache.Session``: its id, its engine, its lock (held for
    the whole pass), its ledger, and ``forget``."""

    @property
    def id(self) -> str: ...
    @property
    def engine(self) -> PruneEngine: ...
    @property
    def lock(self) -> contextlib.AbstractContextManager[None]: ...
    def ledger(self) -> Ledger: ...
    def forget(self, call_ids: Iterable[str]) -> None: ...


@dataclass(frozen=True)
class PrunedPart:
    """A tool result (or a call's input) the output shows changed against the input as given.

    ``this_pass``: changed by this pass's plan; False: a sticky projection of an earlier pass
    (the same bytes again, for the prompt cache)."""

    call_id: str
    tier: str
    tokens_before: int
    tokens_after: int
    this_pass: bool
    target: str = "result"


@dataclass(frozen=True)
class PruneReport:
    """The output against the input as given (the baseline): every part it changed, this
    pass's and the sticky ones, with prompt tokens in and out (the pass's counter)."""

    tool_results: int
    parts: tuple[PrunedPart, ...]
    prompt_tokens_in: int
    prompt_tokens_out: int

    @property
    def reclaimed(self) -> int:
        return self.prompt_tokens_in - self.prompt_tokens_out

    def to_json(self) -> dict[str, Any]:
        results = [p for p in self.parts if p.target == "result"]
        return {
            "baseline": "the input as given",
            "prompt_tokens_in": self.prompt_tokens_in,
            "prompt_tokens_out": self.prompt_tokens_out,
            "reclaimed_total": self.reclaimed,
            "tool_results": self.tool_results,
            "results_changed": len(results),
            "changed": [dataclasses.asdict(p) for p in self.parts],
        }

    def describe(self) -> str:
        """One line for a person: what the output changed against the input."""
        results = [p for p in self.parts if p.target == "result"]
        new = sum(p.this_pass for p in results)
        share = self.reclaimed / self.prompt_tokens_in if self.prompt_tokens_in else 0.0
        return (
            f"{len(results)} of {self.tool_results} tool results changed ({new} by this pass, "
            f"{len(results) - new} kept as earlier passes left them); prompt "
            f"{self.prompt_tokens_in:,} -> {self.prompt_tokens_out:,} tokens "
            f"({-100 * share:+.1f}% against the input as given)"
        )


@dataclass(frozen=True)
class PruneResult:
    """A pruned message list (in the input's shape), the plan, the format it was in, and what
    the output changed against the input (``report``)."""

    messages: Any
    plan: PrunePlan
    format: str
    report: PruneReport | None = None


def transcript_session_id(transcript: Transcript) -> str:
    """A stable id for a conversation without a session: its first call id and opening text."""
    first = transcript.calls()[0].id if transcript.calls() else ""
    opening = "\n".join(m.text for m in transcript.messages[:2])
    return "transcript-" + version_of((first + "\n" + opening).encode("utf-8"))[5:21]


def _strip_numbers(text: str) -> str | None:
    """The source text of a ``cat -n`` style read result, else None.

    Up to two leading lines that are not numbered (a header such as filecache's, or SWE-agent's
    "Here's the result of running `cat -n`...") are skipped.
    """
    source: list[str] = []
    first = None
    skipped = 0
    for line in text.split("\n"):
        number, rest = _numbered(line)
        if number is None:
            if first is None and skipped < 2:
                skipped += 1
                continue
            if not line or line.startswith("\\ No newline"):
                continue
            return None
        first = number if first is None else first
        source.append(rest)
    return "\n".join(source) + "\n" if first is not None else None


def _numbered(line: str) -> tuple[int | None, str]:
    if line.strip().isdigit():  # an empty line numbered without its TAB (SWE-agent's viewer)
        return int(line), ""
    for mark in _NUMBERED:
        head, sep, rest = line.partition(mark)
        if sep and head.strip().isdigit():
            return int(head), rest
    return None, line


def outline_callback(session: PruneSession | None) -> Callable[[ResultInfo], str | None]:
    """Outlines for old file reads: of the stored version when the session knows it, else of
    the source recovered from the result's own numbered lines (whole-file reads only)."""

    def outline_for(info: ResultInfo) -> str | None:
        if info.path is None:
            return None
        budget = max(info.tokens // 5, 50)  # the middle tier: a fifth of the result
        if session is not None and info.version is not None:
            try:
                return session.engine.outlines.outline_text(info.version, info.path, None, budget)
            except Exception:  # noqa: BLE001 - no blob any more: fall back to the text
                pass
        if info.start != 1:
            return None
        source = _strip_numbers(info.text)
        if source is None:
            return None
        outline = build_outline(source.encode("utf-8"), language_for_path(info.path))
        if not outline.definitions:
            return None
        return render_outline(outline, info.path, budget)

    return outline_for


def _words(call: ToolCall) -> Iterator[str]:
    """The words of a call's arguments, for the deny-list: of each string the parsed arguments
    hold, then of the raw text (a custom tool's free-form input). In the raw JSON a quote, tab
    or newline is an escape (``cat \\"a.pem\\"``), so its words are not the command's."""
    for text in json_strings(dict(call.arguments)):
        yield from _WORDS.findall(text)
    yield from _WORDS.findall(call.raw_arguments)


def denied_results(
    transcript: Transcript,
    ledger: Ledger | None,
    deny: tuple[str, ...],
    secret: Callable[[str], bool] = lambda version: False,
    root: Path | None = None,
    reveals: Callable[[str], str | None] | None = None,
) -> dict[str, str]:
    """call id -> the denied path, for every result whose content must never be stored.

    With ``root``, a file tool's path is also resolved there, so a link to a denied file
    (``config.txt -> .env``) counts as denied. ``reveals`` (``FileCache.reveals``) names the
    denied file whose lines a text holds; the lines of the results found denied by name are
    looked for in the others too (``secrecy.MIN_LINE`` characters or more).
    """

    match = deny_pattern(deny).match  # is_denied(name, deny): match(name.lower())
    resolved: dict[str, bool] = {}  # path -> denied by a name it resolves to (once per path)

    def denied(path: str) -> bool:
        if match(path.lower()):
            return True
        if root is None or not deny:
            return False
        hit = resolved.get(path)
        if hit is None:
            hit = False
            with contextlib.suppress(FileCacheError):
                loc = locate(root, path)
                hit = any(match(name.lower()) for name in (loc.rel, *loc.aliases))
            resolved[path] = hit
        return hit

    found: dict[str, str] = {}
    calls = transcript.calls_by_id()
    for result in transcript.results():
        cid = result.call_id
        record = ledger.calls.get(cid) if ledger is not None else None
        if record is not None and record.path is not None:
            if match(record.path.lower()) or (record.version and secret(record.version)):
                found[cid] = record.path
                continue
        call = calls.get(cid)
        if call is None:
            continue
        access = file_access(call)
        if access is not None:
            if denied(access.path):
                found[cid] = access.path
            continue
        word = next((w for w in _words(call) if match(w.lower())), None)
        if word is not None:  # e.g. bash `cat .env`: its output may be the secret
            found[cid] = word
    texts = {r.call_id: r.text for r in transcript.results()}
    learned: dict[str, str] = {}
    for cid, path in found.items():
        for line in texts[cid].split("\n"):  # a file's lines (secrecy.secret_lines says why)
            line = _NUMBER.sub("", line, count=1).strip()
            if len(line) >= MIN_LINE and not line.startswith(MARKERS):
                learned.setdefault(line, path)
    for cid, text in texts.items():
        if cid in found:
            continue
        hit = reveals(text) if reveals is not None else None
        if hit is None:
            hit = next((path for line, path in learned.items() if line in text), None)
        if hit is not None:  # printed a denied file without naming it (`cat .e*`, a link)
            found[cid] = hit
    return found


def _archived(text: str, denied_path: str | None, key: Callable[[], bytes]) -> str:
    """What the archive keeps of a result: its text, or for a denied file a marker (with the
    text's keyed hash: an xxh3 of a short ``.env`` gives it back by guessing)."""
    if denied_path is None:
        return text
    return (
        f"{NOT_ARCHIVED}{denied_path} is on the deny-list, so this result was not stored; "
        f"read the file again (text {short_version(keyed_digest(text, key()))})]"
    )


def prune_messages(
    messages: Any,
    *,
    session: PruneSession | None = None,
    store: Store | None = None,
    policy: PrunePolicy | None = None,
    format: str | None = None,
    count: Callable[[str], int] | None = None,
    session_id: str | None = None,
    deny: tuple[str, ...] = DEFAULT_DENY,
    root: Path | None = None,
) -> PruneResult:
    """Prune a message list (bare, or wrapped as ``{"messages": [...]}``/``{"input": [...]}``).

    Args:
        messages: OpenAI chat, OpenAI Responses or Anthropic messages; SDK objects with
            ``model_dump()``, LangChain messages or a pydantic-ai ``ModelMessage`` list are
            converted (``filecache.prune.sdk_messages``) and come back in their own kind.
        session: the filecache session whose tools answered the reads (ledger, outlines,
            ``forget``); without one the write→read map comes from the transcript.
        store: where originals are archived and projections kept (default: the session's).
        policy: when and how hard (``PrunePolicy`` defaults).
        format: ``openai`` | ``responses`` | ``anthropic``; detected when None.
        count: a token counter (default: the session's, or exact o200k), memoised.
        session_id: the id to archive under without a session (default: derived from the
            transcript, stable across its requests).
        deny: the deny-list without a session (a session uses its settings' list).
        root: without a session, the (resolved) root the transcript's paths are relative to:
            a link to a denied file is then denied too.
    """
    envelope = unwrap(messages)
    # SDK objects, LangChain, pydantic-ai (sdk_messages); plain dicts go straight to parsing,
    # which refuses hostile nesting first (as it is refused here before any conversion)
    converted = None
    if needs_convert(envelope.messages):
        check_json([m for m in envelope.messages if isinstance(m, (dict, list))], "messages")
        converted = convert(envelope.messages)
    if converted is not None:
        if converted.back is not None and converted.back_inputs is None:
            policy = dataclasses.replace(policy or PrunePolicy(), inputs=False)
        inner = prune_messages(
            converted.messages, session=session, store=store, policy=policy,
            format=format or converted.format, count=count, session_id=session_id,
        )  # fmt: skip
        out = inner.messages
        if converted.back is not None:
            out = converted.back(inner.plan.replacements, out)
            if inner.plan.inputs and converted.back_inputs is not None:
                out = converted.back_inputs(inner.plan.inputs, out)
        return PruneResult(envelope.wrap(out), inner.plan, inner.format, inner.report)
    transcript = parse_transcript(envelope.messages, format)
    policy = policy or PrunePolicy()
    store = store if store is not None else (session.engine.store if session else None)
    sid = session.id if session is not None else (session_id or transcript_session_id(transcript))
    if count is None:
        count = TokenMemo(session.engine.counts.tokens if session else TokenCounter())
    texts = {r.call_id: r.text for r in transcript.results()}
    arguments = {c.id: c.raw_arguments for c in transcript.calls()}
    # The session's answers wait while a pass plans and forgets: no FileRef can be answered
    # from a result between the snapshot that decides to clear it and the forget.
    with session.lock if session is not None else contextlib.nullcontext():
        ledger = session.ledger() if session is not None else None
        if session is not None:
            engine = session.engine
            secrets = engine.secrets
            secret = denied_results(
                transcript, ledger, engine.settings.deny, secrets.secret, engine.root,
                secrets.reveals,
            )  # fmt: skip
            key: Callable[[], bytes] = functools.partial(getattr, secrets, "key")
        else:
            index = SecretIndex(root, deny) if root is not None else None
            secret = denied_results(
                transcript, None, deny, root=root, reveals=index.reveals if index else None
            )
            key = functools.partial(secret_key, os.environ.get("FILECACHE_KEY_FILE"), root)
        prior = store.projections(sid) if store is not None else {}
        prior_inputs = {
            cid.removesuffix(INPUT_SUFFIX): value
            for cid, value in prior.items()
            if cid.endswith(INPUT_SUFFIX)
        }
        seal = default_seal()  # the key every FileCache of this process seals with
        if store is not None and prior:
            # Only this conversation's: a derived (or reused) session id can be shared by
            # another one with the same opening and call ids; its projections must not
            # replace our results. And only those a process with our key stored (a store
            # shipped with a repository, or a co-tenant's rows, cannot put text in a result).
            prior = {
                cid: (tier, text)
                for cid, (tier, text) in prior.items()
                if cid in texts
                and (
                    texts[cid] == text
                    or store.archive_get(cid, sid) == _archived(texts[cid], secret.get(cid), key)
                )
                and seal.check_tag(store, "projection", f"{sid}\0{cid}", tier, text)
            }
            # The same for the inputs replaced before: the call's arguments as archived.
            prior_inputs = {
                cid: (tier, text)
                for cid, (tier, text) in prior_inputs.items()
                if cid in arguments
                and (
                    arguments[cid] == text
                    or store.archive_get(cid + INPUT_SUFFIX, sid) == arguments[cid]
                )
                and seal.check_tag(store, "projection", f"{sid}\0{cid}{INPUT_SUFFIX}", tier, text)
            }
        plan = plan_prune(
            transcript, ledger, policy, count, outline_for=outline_callback(session), prior=prior,
            secret=frozenset(secret), prior_inputs=prior_inputs,
            inputs=store is not None and renders_inputs(transcript.format),
        )  # fmt: skip
        for action in plan.actions:
            if store is not None:
                key_id = action.call_id + (INPUT_SUFFIX if action.target == "input" else "")
                original = arguments if action.target == "input" else texts
                archived = _archived(original[action.call_id], secret.get(action.call_id), key)
                store.archive_put(sid, key_id, archived)
                store.projection_put(
                    sid, key_id, action.tier, action.text,
                    action.tokens_before, action.tokens_after,
                )  # fmt: skip
                seal.put_tag(store, "projection", f"{sid}\0{key_id}", action.tier, action.text)
        if session is not None and (plan.replacements or plan.inputs):
            # Every result the request shows changed, new or sticky (a projection from an earlier
            # pass or process), and writes/edits too: the arguments say what the model wrote, but
            # where an edit landed may only be in its confirmation. Without them: content again.
            # A write or edit whose input was replaced: the model no longer holds what it wrote.
            session.forget({*plan.replacements, *plan.inputs})
    report = _report(plan, texts, arguments, count, len(texts))
    return PruneResult(envelope.wrap(apply_plan(transcript, plan)), plan, transcript.format, report)


def _report(
    plan: PrunePlan,
    texts: Mapping[str, str],
    arguments: Mapping[str, str],
    count: Callable[[str], int],
    tool_results: int,
) -> PruneReport:
    """``PruneReport`` of a plan: its replacements (new and sticky) against the originals."""
    new = {(a.call_id, a.target) for a in plan.actions}
    parts = [
        PrunedPart(cid, tier_of(text), count(texts[cid]), count(text), (cid, "result") in new)
        for cid, text in plan.replacements.items()
        if cid in texts
    ]
    parts += [
        PrunedPart(
            cid, "input", count(arguments[cid]), count(text), (cid, "input") in new, "input"
        )  # fmt: skip
        for cid, text in plan.inputs.items()
        if cid in arguments
    ]
    out = plan.prompt_tokens - plan.reclaimed  # the planner's: its input had the sticky ones
    sticky = sum(p.tokens_before - p.tokens_after for p in parts if not p.this_pass)
    return PruneReport(tool_results, tuple(parts), out + sticky + plan.reclaimed, out)
