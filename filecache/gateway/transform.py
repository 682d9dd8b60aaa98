"""The request transform's contract (``rewrite_request``) and its pass-through floor.

Invariants (every implementation keeps them; the server and the LiteLLM callback rely on them):
- ``rewrite_request`` never raises: a body it cannot parse, an API it does not know, a store
  that fails, any internal error: the returned ``Rewrite`` carries the input ``body`` object
  itself (byte-identical) with ``changed`` False and ``passthrough`` naming the reason.
- It is a function of the request and the conversation's memory only: the same request with the
  same memory gives the same bytes. A rewrite of message k uses only messages <= k, except
  pruning decisions, which are remembered per conversation (sticky) so their bytes repeat.
- Headers are read for the conversation key only (never an auth header); nothing of them is
  stored or logged.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from filecache.core.kinds import Format
from filecache.core.render import gateway_file_ref
from filecache.core.tokens import TokenMemo, fast_estimate_text
from filecache.errors import TranscriptError
from filecache.gateway import wire
from filecache.gateway.delta import Delta, plan_delta
from filecache.gateway.memory import GatewayMemory, open_memory
from filecache.gateway.prefix import message_parser, parse_messages
from filecache.gateway.request_shape import (
    MESSAGES_KEY,
    conversation_key,
    untouched_outside,
)
from filecache.gateway.shown import request_texts, working_folder
from filecache.gateway.tally import RequestForms
from filecache.prune.codecs.base import (
    Transcript,
    render_inputs,
    render_transcript,
    renders_inputs,
)
from filecache.prune.message_blocks import replaced_body
from filecache.prune.pruning import PrunePlan, PrunePolicy, plan_prune
from filecache.prune.transcript import parse_transcript as _register_codecs  # noqa: F401

__all__ = [
    "API_PATHS",
    "Api",
    "GatewayMemory",
    "GatewayPolicy",
    "Rewrite",
    "RewriteCounts",
    "api_for_path",
    "open_memory",
    "rewrite_payload",
    "rewrite_request",
]


class Api(enum.StrEnum):
    """The request shapes the transform reads."""

    ANTHROPIC_MESSAGES = "anthropic-messages"
    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"
    GEMINI = "gemini"


API_PATHS: Mapping[str, Api] = {
    "/v1/messages": Api.ANTHROPIC_MESSAGES,
    "/v1/chat/completions": Api.OPENAI_CHAT,
    "/chat/completions": Api.OPENAI_CHAT,
    "/v1/responses": Api.OPENAI_RESPONSES,
    "/responses": Api.OPENAI_RESPONSES,
}
"""Request paths (without a query) whose POST body the transform reads; any other path is
forwarded untouched. Gemini's paths name the model (``GEMINI_PATH``)."""
GEMINI_PATH = re.compile(r"/v1(?:alpha|beta)?/models/[^/:]+:(?:stream)?[gG]enerateContent")
"""The Gemini API's ``generateContent`` and ``streamGenerateContent`` (``?alt=sse``) paths."""


def api_for_path(path: str) -> Api | None:
    """The API a request path speaks, or None (forward it untouched)."""
    bare = path.split("?", 1)[0].rstrip("/") or "/"
    found = API_PATHS.get(bare)
    if found is None and GEMINI_PATH.fullmatch(bare):
        return Api.GEMINI
    return found


@dataclass(frozen=True)
class GatewayPolicy:
    """What the transform may do. ``context_window`` in tokens; ``prune_preset`` a
    ``PrunePolicy`` preset name; ``delta`` FileRefs and diffs between results of one request;
    ``prune`` the pruning pass (it needs a memory with a store: its decisions are sticky)."""

    context_window: int = 200_000
    prune_preset: str = "cost"
    delta: bool = True
    prune: bool = True
    replan_tokens: int = 0
    """The pruning planner runs again once the tool results grew by this many tokens since it
    last ran for the conversation (in between, its sticky decisions apply as they are). 0: on
    every request (the least billed in the replays: a cut made later invalidates a longer
    suffix); 4,000 halves the transform's time at 150k-token requests
    (``bench/bench_gateway_transform.py``)."""
    min_turns_left: int | None = None
    """With ``horizon`` None: overrides the preset's ``PrunePolicy.min_turns_left`` (the
    requests the cost gate expects at least to come); None: the preset's."""
    horizon: int | None = 10
    """With a preset that gates cuts on cost (``cost``): the requests the gate expects to come.
    A cut is made only when it pays back the cache it rewrites within them (``prune_cost``),
    and the gate weighs a cut before every request (``prune_at`` 0: the preset's trigger at 5%
    of the window only delayed cuts until they invalidated more of the cache). None: the
    preset's estimate and trigger (as many requests again as so far, at least 20): its late
    cuts billed up to 18% more than the recording on a replayed session that ended sooner
    (``bench/bench_gateway_gate.py``, docs/gateway.md)."""
    horizon_share: float = 0.5
    """With ``horizon``: the gate expects at least this share of the conversation's turns so
    far to come (a session that has run long is likely to run on)."""
    cache_prices: tuple[float, float] | None = None
    """(cache read, cache write) per uncached input token for the cost gate; None: the API's
    provider's (Anthropic 0.1/1.25, OpenAI and Gemini 0.1/1.0)."""
    cache_ttl: float | None = None
    """Seconds the provider keeps a prompt cached after its last use; None: the request's own
    (``cache_ttl``: Anthropic 5 minutes, 1 hour when a ``cache_control`` asks ``"ttl": "1h"``;
    OpenAI 10 minutes, 24 hours with ``prompt_cache_retention: "24h"``). When the
    conversation's previous request is older than that, the cache has expired and this request
    writes the whole prompt anyway: the gate weighs a cut with no invalidation cost."""


@dataclass(frozen=True)
class RewriteCounts:
    """What one rewrite did, in tokens and results (for logs, stats and benchmarks)."""

    tokens_before: int = 0
    tokens_after: int = 0
    file_refs: int = 0
    diffs: int = 0
    pruned: int = 0
    untouched_blocks: int = 0


@dataclass(frozen=True)
class Rewrite:
    """The request to send. ``body`` is the input object itself when ``changed`` is False."""

    body: bytes
    changed: bool
    conversation: str | None = None
    passthrough: str = ""  # why nothing was rewritten ("" when something was)
    counts: RewriteCounts = field(default_factory=RewriteCounts)
    forms: RequestForms | None = field(default=None, compare=False, repr=False)
    """The request as given and as sent, for the figures (``tally.record_rewrite``; counted
    when asked, off the request's path); None when no message list was parsed."""


_FORMATS = {
    Api.ANTHROPIC_MESSAGES: Format.ANTHROPIC,
    Api.OPENAI_CHAT: Format.OPENAI,
    Api.OPENAI_RESPONSES: Format.RESPONSES,
    Api.GEMINI: Format.GEMINI,
}
_PRICES = {  # (cache read, cache write) relative to an uncached input token
    Api.ANTHROPIC_MESSAGES: (0.1, 1.25),
    Api.OPENAI_CHAT: (0.1, 1.0),
    Api.OPENAI_RESPONSES: (0.1, 1.0),
    Api.GEMINI: (0.1, 1.0),  # implicit caching: Gemini 3 reads at 10%, no write surcharge
}
_count = TokenMemo(fast_estimate_text, limit=65_536)
"""Estimated tokens (``fast_estimate_text``), memoised across requests."""


class _Passthrough(Exception):
    """Nothing to rewrite; the reason."""


def rewrite_request(
    api: Api | str,
    body: bytes,
    *,
    headers: Mapping[str, str] | None = None,
    memory: GatewayMemory | None = None,
    policy: GatewayPolicy | None = None,
    now: float | None = None,
) -> Rewrite:
    """The request to send upstream for ``body`` (see the module docstring); ``now``: the
    request's time (seconds since the epoch; None: the clock's)."""
    try:
        payload, fast = wire.loads(body)
    except (ValueError, TypeError, RecursionError):
        return Rewrite(body, False, None, "not a JSON body")
    if now is None:
        now = time.time()
    new, rewrite = _rewrite_payload(api, payload, headers, memory, policy, now, owned=True)
    if not rewrite.changed:
        return dataclasses.replace(rewrite, body=body)
    try:
        out = wire.dumps(new, fast)
        if fast and wire.lost_integers(out, body):  # a number beyond 64 bits: as json reads it
            payload, fast = wire.loads(body, exact=True)
            new, rewrite = _rewrite_payload(api, payload, headers, memory, policy, now, owned=True)
            if not rewrite.changed:
                return dataclasses.replace(rewrite, body=body)
            out = wire.dumps(new, fast)
    except (ValueError, TypeError, RecursionError):
        unsent = None
        if rewrite.forms is not None:  # it goes as it came: count it so
            unsent = dataclasses.replace(rewrite.forms, sent=None, changed=())
        return Rewrite(body, False, rewrite.conversation, "cannot serialize", rewrite.counts,
                       unsent)  # fmt: skip
    return dataclasses.replace(rewrite, body=out)


def rewrite_payload(
    api: Api | str,
    payload: Any,
    *,
    headers: Mapping[str, str] | None = None,
    memory: GatewayMemory | None = None,
    policy: GatewayPolicy | None = None,
    now: float | None = None,
) -> tuple[Any, Rewrite]:
    """``rewrite_request`` for a request already parsed (LiteLLM's callback has a dict): the
    payload to send (the input object itself when nothing changed; else a new dict with the
    same keys in the same order, sharing every value it did not change) and the ``Rewrite``,
    whose ``body`` is ``b""`` (serialize the payload yourself). Never raises."""
    return _rewrite_payload(api, payload, headers, memory, policy, now, owned=False)


def _rewrite_payload(
    api: Api | str,
    payload: Any,
    headers: Mapping[str, str] | None,
    memory: GatewayMemory | None,
    policy: GatewayPolicy | None,
    now: float | None,
    owned: bool,
) -> tuple[Any, Rewrite]:
    """``rewrite_payload``; ``owned``: nobody else holds ``payload`` (``rewrite_request``
    parsed it), so its messages may be kept for the next request's prefix reuse (a caller's
    payload may be changed in place after the call: its parse is not reused)."""
    try:
        when = time.time() if now is None else now
        chosen = policy or GatewayPolicy()
        return _rewrite(Api(api), payload, headers, memory, chosen, when, owned)
    except _Passthrough as why:
        return payload, Rewrite(b"", False, None, str(why))
    except Exception as exc:  # the invariant: never raise, pass the request through
        return payload, Rewrite(b"", False, None, f"internal error ({type(exc).__name__})")


def _rewrite(
    api: Api,
    payload: Any,
    headers: Mapping[str, str] | None,
    memory: GatewayMemory | None,
    policy: GatewayPolicy,
    now: float,
    owned: bool = False,
) -> tuple[Any, Rewrite]:
    if not isinstance(payload, dict):
        raise _Passthrough("not a JSON object")
    fmt = _FORMATS[api]
    key = MESSAGES_KEY[fmt]
    messages = payload.get(key)
    if not isinstance(messages, list) or not messages:
        raise _Passthrough(f"no {key} list")
    conversation = conversation_key(fmt, payload, messages, headers)
    try:  # deep nesting or a lone surrogate: the generic guard passes the request through
        parsed = parse_messages(fmt, conversation, messages, reuse=owned)
    except TranscriptError as exc:
        raise _Passthrough(f"cannot parse: {exc}") from None
    transcript = parsed.transcript
    untouched = untouched_outside(payload) + parsed.untouched
    model = payload.get("model")
    forms = RequestForms(
        transcript, None, (), message_parser(fmt), _count, model if isinstance(model, str) else "",
        api.value,
    )  # fmt: skip
    if not transcript.results():
        counts = RewriteCounts(untouched_blocks=untouched)
        return payload, Rewrite(b"", False, conversation, "no tool results", counts, forms)
    held = memory.conversation(conversation) if memory is not None else None
    remembered = held is not None and held.memory.store is not None
    previous = held.seen(now) if held is not None and remembered else None
    ttl = policy.cache_ttl if policy.cache_ttl is not None else cache_ttl(api, payload)
    expired = previous is not None and now - previous > ttl
    prior = held.projections() if held is not None and remembered else {}
    prior_inputs = held.inputs() if held is not None and remembered else {}
    cwd = working_folder(request_texts(payload, messages))
    results = transcript.results_by_id()
    secret = parsed.denied
    delta = Delta()
    if policy.delta:
        delta = plan_delta(
            transcript,
            cwd=cwd,
            unusable=frozenset(prior) | secret,
            memo=held if remembered else None,
        )
    planned = dict(delta.planned)
    for stub, base in delta.pins.items():  # the planner keeps what a stub relies on alive
        planned.setdefault(stub, gateway_file_ref("stub", 1, 1, base))
    replacements: dict[str, str] = dict(delta.sent)
    inputs: dict[str, str] = {}
    pruned = 0
    size = sum(_count(r.text) for r in results.values())
    plan = (
        policy.prune
        and held is not None
        and remembered
        and (held.planned_at is None or abs(size - held.planned_at) >= policy.replan_tokens)
    )
    if policy.prune and held is not None and remembered and not plan:
        calls = transcript.calls_by_id()
        replacements.update({c: t for c, (_, t) in prior.items() if c in results})
        inputs = {c: t for c, (_, t) in prior_inputs.items() if c in calls}
        pruned = sum(1 for c in prior if c in results)
    if plan and held is not None:
        held.planned_at = size
        found = _prune(
            api, transcript, planned, prior, prior_inputs, secret, parsed.thinking, policy, expired,
            frozenset(delta.echoes),
        )  # fmt: skip
        fresh = {
            a.call_id: (a.tier, a.text, a.tokens_before, a.tokens_after)
            for a in found.actions
            if a.target == "result" and not results[a.call_id].non_text_blocks
        }
        kept = {cid: text for cid, text in found.replacements.items()
                if not results[cid].non_text_blocks}  # fmt: skip
        replacements.update(kept)
        inputs = dict(found.inputs)
        fresh_inputs = {a.call_id: (a.tier, a.text) for a in found.actions if a.target == "input"}
        held.remember(fresh, fresh_inputs)
        pruned = len(kept)
    _keep_references_whole(replacements, delta, results, inputs)
    if not replacements and not inputs:
        counts = RewriteCounts(untouched_blocks=untouched)
        return payload, Rewrite(b"", False, conversation, "nothing to rewrite", counts, forms)
    rendered = _render(transcript, replacements) if replacements else messages
    if inputs:
        rendered = render_inputs(transcript, rendered, inputs)
    out = {k: (rendered if k == key else v) for k, v in payload.items()}
    before = size
    after = before - sum(_count(results[c].text) - _count(t) for c, t in replacements.items())
    counts = RewriteCounts(
        tokens_before=before,
        tokens_after=after,
        file_refs=sum(1 for c in replacements if delta.kinds.get(c) == "ref"),
        diffs=sum(1 for c in replacements if delta.kinds.get(c) == "diff"),
        pruned=pruned,
        untouched_blocks=untouched,
    )
    calls = transcript.calls_by_id()
    changed = {results[c].message_index for c in replacements}
    changed |= {calls[c].message_index for c in inputs if c in calls}
    sent = dataclasses.replace(forms, sent=rendered, changed=frozenset(changed))
    return out, Rewrite(b"", True, conversation, "", counts, sent)


def _prune(
    api: Api,
    transcript: Transcript,
    planned: Mapping[str, str],
    prior: Mapping[str, tuple[str, str]],
    prior_inputs: Mapping[str, tuple[str, str]],
    secret: frozenset[str],
    thinking: bool,
    policy: GatewayPolicy,
    expired: bool = False,
    keep_inputs: frozenset[str] = frozenset(),
) -> PrunePlan:
    """The pruning planner over the request as the delta step left it; ``expired``: the
    provider's cache of the conversation has expired, so this request writes the whole prompt
    whether it cuts or not (the gate sees no invalidation cost: the write price is the read
    price; every later request reads the cut prompt from the cache as usual); ``keep_inputs``:
    calls whose input a result relies on (``delta.echoes``), never pruned."""
    read, write = policy.cache_prices or _PRICES[api]
    if expired:
        write = read
    overrides: dict[str, object] = {}
    if policy.min_turns_left is not None:
        overrides["min_turns_left"] = policy.min_turns_left
    rules = PrunePolicy.preset(
        policy.prune_preset,
        context_window=policy.context_window,
        cache_read=read,
        cache_write=write,
        **overrides,
    )
    if rules.cache_aware and policy.horizon is not None:
        turns = max(policy.horizon, int(policy.horizon_share * _turns(transcript)))
        rules = dataclasses.replace(rules, prune_at=0.0, min_turns_left=turns, max_turns_left=turns)
    seen = _with_texts(transcript, planned)
    inputs_ok = renders_inputs(transcript.format) and not thinking
    return plan_prune(
        seen, None, rules, _count, prior=prior, prior_inputs=prior_inputs, secret=secret,
        inputs=inputs_ok, keep_inputs=keep_inputs,
    )  # fmt: skip


_TTL = {Api.ANTHROPIC_MESSAGES: 300.0, Api.OPENAI_CHAT: 600.0, Api.OPENAI_RESPONSES: 600.0,
        Api.GEMINI: 600.0}  # fmt: skip


def cache_ttl(api: Api, payload: Mapping[str, Any]) -> float:
    """Seconds the provider keeps this request's prompt cached after its last use: Anthropic 5
    minutes, or 1 hour when any ``cache_control`` asks ``"ttl": "1h"``; OpenAI 10 minutes of
    inactivity (its documented 5 to 10: the longer, so an expired cache is never assumed too
    early), or 24 hours with ``prompt_cache_retention: "24h"``; Gemini 10 minutes (its implicit
    cache's life is not documented: the longer guess, as for OpenAI)."""
    if api != Api.ANTHROPIC_MESSAGES:
        return 86_400.0 if payload.get("prompt_cache_retention") == "24h" else _TTL[api]
    for value in _cache_controls(payload):
        if value.get("ttl") == "1h":
            return 3_600.0
    return _TTL[api]


def _cache_controls(payload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every ``cache_control`` of the system blocks, tools and the last messages' blocks (a
    host marks its breakpoints there)."""
    found: list[Mapping[str, Any]] = []
    holders: list[Any] = [payload]  # the request's own (automatic caching)
    for key in ("system", "tools"):
        value = payload.get(key)
        if isinstance(value, list):
            holders += value
    messages = payload.get("messages")
    for message in messages[-4:] if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            holders += content
    for holder in holders:
        control = holder.get("cache_control") if isinstance(holder, dict) else None
        if isinstance(control, dict):
            found.append(control)
    return found


def _turns(transcript: Transcript) -> int:
    return sum(1 for m in transcript.messages if m.role == "assistant")


_BODY = {Format.ANTHROPIC: ("content", "text"), Format.OPENAI: ("content", "text"),
         Format.RESPONSES: ("output", "input_text")}  # fmt: skip


def _render(transcript: Transcript, replacements: Mapping[str, str]) -> list[Any]:
    """``codec.render`` with copies only along the path to each replaced body (a message, its
    content list, the result block), never a deep copy: the output shares every other object
    with the input, which is never changed."""
    if transcript.format not in _BODY:  # Gemini: the codec's render (a copy per content)
        return render_transcript(transcript, replacements)
    body, text_type = _BODY[Format(transcript.format)]
    out = list(transcript.raw)
    for message in transcript.messages:
        found = [r for r in message.results if r.call_id in replacements]
        if not found:
            continue
        copied = dict(out[message.index])
        for result in found:
            holder = copied
            if result.block_index is not None:
                content = copied["content"] = list(copied["content"])
                holder = content[result.block_index] = dict(content[result.block_index])
            given = holder.get(body)
            if isinstance(given, list):
                given = [dict(b) if isinstance(b, dict) else b for b in given]
            holder[body] = replaced_body(given, replacements[result.call_id], text_type)
        out[message.index] = copied
    return out


def _with_texts(transcript: Transcript, texts: Mapping[str, str]) -> Transcript:
    """The transcript as the planner should see it: those results' texts replaced."""
    if not texts:
        return transcript
    messages = []
    for message in transcript.messages:
        if any(r.call_id in texts for r in message.results):
            message = dataclasses.replace(
                message,
                results=tuple(
                    dataclasses.replace(r, text=texts[r.call_id]) if r.call_id in texts else r
                    for r in message.results
                ),
            )
        messages.append(message)
    return Transcript(tuple(messages), transcript.format, transcript.raw)


def _keep_references_whole(
    replacements: dict[str, str],
    delta: Delta,
    results: Mapping[str, object],
    inputs: Mapping[str, str] | None = None,
) -> None:
    """Drop every FileRef/diff whose base is not in the request as content (pruned, or gone),
    every edit echo whose call's input is not sent as written (``inputs``: replaced), and every
    prune of a result a live host stub relies on: content goes instead."""
    for cid in delta.echoes:
        if inputs and cid in inputs and replacements.get(cid) == delta.sent.get(cid):
            del replacements[cid]
    for cid, bases in delta.bases.items():
        if replacements.get(cid) != delta.sent.get(cid):
            continue  # pruned itself: no longer a reference
        if any(base not in results or base in replacements for base in bases):
            del replacements[cid]
    for stub, base in delta.pins.items():
        if stub not in replacements and base in replacements:
            del replacements[base]
