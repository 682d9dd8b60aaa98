"""The headline, defined once: what filecache saved in a session, each figure with its baseline.

Every surface that reports a saving calls this module: ``filecache stats`` and its HTML page,
``filecache replay`` (its JSON ``headline`` and its first sentence), MCP ``cache_stats`` and
``filecache prune --json``. The figures of one session:

- **prompt**: the session's prompt tokens summed over its requests (one before each model call),
  against ``REQUESTS_BASELINE``: the same requests with every read answered plain and nothing
  pruned (so pruning is included);
- **billed**: the same requests under prompt caching, in uncached-token equivalents: a
  request's prefix equal to the previous request's is a cache read (``CACHE_READ``, 0.1x), the
  rest a cache write (``CACHE_WRITE``, 1.25x; the first request is all writes);
- **cost**: the same cache reads and writes in money at a model's published per-MTok prices
  (``PRICES``, dated; ``DEFAULT_MODEL`` unless chosen);
- **per answer**: the read answers' tokens against ``ANSWERS_BASELINE`` (the plain read of the
  same range in the same format; an outline counted as what it showed; a withdrawn answer as the
  plain read it left standing).

Where the requests come from: filecache sees a request where it prunes one (replay's filecache
run, ``filecache prune --session``; a host integration that sees requests may call
``record_request`` too). ``record_request`` adds it to the session's ``RequestTally``, kept in
the store's key-value table (namespace ``TALLY_NAMESPACE``, key: the session id). A session
none of whose requests was seen has per-answer figures only; its prompt, billed and cost figures
are None, and every surface says so instead of printing a number.

Invariants:
- Pure but for ``session_headline``, ``load_tally``, ``save_tally`` and ``record_request`` (the
  store's I/O); ``record_request`` holds the store lock ``figures:<session>`` around its
  read-modify-write, so two processes recording one session count each request once.
- A request equal (message by message) to the last one recorded is the same request seen again
  (a second prune of one request): it is not counted twice.
- Only digests of message keys are kept (never message text): a tally holds no content.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import xxhash

from filecache.core.kinds import Kind, Tool
from filecache.errors import RequestError, TranscriptError
from filecache.prune.codecs.base import Message, Transcript
from filecache.prune.transcript import parse_transcript, unwrap
from filecache.store.store import Store

__all__ = [
    "ANSWERS_BASELINE", "BILLED_BASIS", "CACHE_READ", "CACHE_WRITE", "DEFAULT_MODEL", "Headline",
    "MESSAGE_OVERHEAD", "MODEL_ENV", "PRICES", "PRICES_AS_OF", "PRICES_SOURCE", "Pair", "Prices",
    "REQUESTS_BASELINE", "RequestTally", "RunTally", "SESSION_NAMESPACE", "SessionMeta",
    "TALLY_NAMESPACE", "answer_pairs", "load_session_meta", "save_session_meta",
    "answers_of", "cached_prefix", "headline_of", "keyed_request", "load_tally", "message_text",
    "model_prices", "prices_for",
    "prune_headline", "read_baseline", "record_request", "save_tally", "session_headline",
    "sum_headlines",
]  # fmt: skip

MESSAGE_OVERHEAD = 3  # tokens a chat message costs beyond its text (role, separators)
CACHE_READ = 0.1  # price of a cached prompt token, relative to an uncached one
CACHE_WRITE = 1.25  # price of a token written to the prompt cache
TALLY_NAMESPACE = "figures-requests"
MODEL_ENV = "FILECACHE_MODEL"

REQUESTS_BASELINE = (
    "the same requests with every read answered plain (same range, same format) and nothing pruned"
)
ANSWERS_BASELINE = "plain reads (same range, same format; an outline counted as what it showed)"
BILLED_BASIS = (
    "a request's prefix shared with the previous request billed as a cache read (0.1x), the "
    "rest as a cache write (1.25x)"
)


@dataclass(frozen=True)
class Prices:
    """A model's published prices in USD per million tokens.

    ``cache_write`` is the price of a prompt token written to the cache (Anthropic: 1.25x the
    input price for the 5-minute cache; OpenAI caches without a surcharge: the input price).
    """

    model: str
    provider: str
    input: float
    cache_write: float
    cache_read: float
    output: float

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "provider": self.provider,
            "usd_per_mtok": {
                "input": self.input,
                "cache_write": self.cache_write,
                "cache_read": self.cache_read,
                "output": self.output,
            },
            "as_of": PRICES_AS_OF,
            "source": PRICES_SOURCE,
        }

    def describe(self) -> str:
        return (
            f"{self.model} ({self.provider}) at ${self.input:g} input, ${self.cache_write:g} "
            f"cache write, ${self.cache_read:g} cache read per million tokens (as of "
            f"{PRICES_AS_OF})"
        )


PRICES_AS_OF = "2026-12-07"
PRICES_SOURCE = (
    "the providers' published prices (platform.claude.com/docs/en/about-claude/pricing, "
    "developers.openai.com/api/docs/pricing) as LiteLLM 1.108.7's model cost map lists them"
)
PRICES: Mapping[str, Prices] = {
    p.model: p
    for p in (
        Prices("claude-opus-5-5", "anthropic", 4.0, 5.0, 0.2, 20.0),
        Prices("claude-sonnet-5-5", "anthropic", 2.0, 2.5, 0.1, 10.0),
        Prices("claude-haiku-5-5", "anthropic", 0.1, 0.125, 0.01, 0.5),
        Prices("claude-opus-5", "anthropic", 5.0, 6.25, 0.5, 25.0),
        Prices("claude-sonnet-5", "anthropic", 2.0, 2.5, 0.2, 10.0),
        Prices("claude-sonnet-4-5", "anthropic", 3.0, 3.75, 0.3, 15.0),
        Prices("claude-haiku-4-5", "anthropic", 1.0, 1.25, 0.1, 5.0),
        Prices("gpt-5.6", "openai", 4.0, 5.0, 0.4, 20.0),
        Prices("gpt-5.6-terra", "openai", 2.0, 2.5, 0.2, 12.0),
        Prices("gpt-5.6-luna", "openai", 0.2, 0.25, 0.02, 1.2),
        Prices("gpt-5.5", "openai", 5.0, 5.0, 0.5, 30.0),
        Prices("gpt-5.4-mini", "openai", 0.75, 0.75, 0.075, 4.5),
        Prices("gpt-5", "openai", 1.25, 1.25, 0.125, 10.0),
    )
}
DEFAULT_MODEL = "claude-sonnet-5-5"


def prices_for(model: str | None = None) -> Prices:
    """The prices of ``model`` (None: ``$FILECACHE_MODEL``, else ``DEFAULT_MODEL``).

    Raises:
        RequestError: a model the table does not have (the message lists those it has).
    """
    name = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
    found = PRICES.get(name)
    if found is None:
        raise RequestError(f"no published prices for model {name!r}; known: {', '.join(PRICES)}")
    return found


def model_prices(model: str | None) -> Prices | None:
    """The prices of the model a request names, or None when the table has none: the name as
    given, without a provider prefix (``anthropic/claude-sonnet-4-5``), or a dated snapshot of
    a listed model (``claude-sonnet-4-5-20250929``: the longest listed name it extends)."""
    if not model or not isinstance(model, str):
        return None
    name = model.strip().rsplit("/", 1)[-1]
    if name in PRICES:
        return PRICES[name]
    extended = [m for m in PRICES if name.startswith(m + "-") and name[len(m) + 1 :][:1].isdigit()]
    return PRICES[max(extended, key=len)] if extended else None


def read_baseline(kind: str, tokens: int, tokens_full: int) -> int:
    """What a read answer is counted against (``ANSWERS_BASELINE``)."""
    return tokens if kind == Kind.OUTLINE else tokens_full


_SAVING_KINDS = frozenset({Kind.UNCHANGED, Kind.DIFF, Kind.SYMBOL})


class LedgerRow(Protocol):
    """What ``answer_pairs`` reads of a ledger row: an ``Event`` or a ``ledger.CallRecord``."""

    @property
    def call_id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def tokens_full(self) -> int: ...
    @property
    def deps(self) -> tuple[str, ...]: ...


def answer_pairs(events: Iterable[LedgerRow]) -> dict[str, tuple[str, int, int]]:
    """Per read call id: (kind as counted, tokens the model got, baseline tokens).

    A read whose answer the caller withdrew (``Session.withdraw``: a host hook left the host's
    own output) counts as the plain read it showed, kind ``withdrawn``, with no saving."""
    events = list(events)
    withdrawn = {
        call for e in events if e.tool == Tool.FORGET and e.kind == Kind.WITHDRAWN
        for call in e.deps
    }  # fmt: skip
    out: dict[str, tuple[str, int, int]] = {}
    for e in events:
        if e.tool != Tool.READ:
            continue
        if e.call_id in withdrawn and e.kind in _SAVING_KINDS:
            out[e.call_id] = (Kind.WITHDRAWN, e.tokens_full, e.tokens_full)
        else:
            out[e.call_id] = (e.kind, e.tokens, read_baseline(e.kind, e.tokens, e.tokens_full))
    return out


@dataclass(frozen=True)
class Pair:
    """One quantity for the baseline and through filecache; ``saved_pct`` of the baseline."""

    baseline: float
    filecache: float

    @property
    def saved(self) -> float:
        return self.baseline - self.filecache

    @property
    def saved_pct(self) -> float:
        return 100.0 * self.saved / self.baseline if self.baseline else 0.0

    def __add__(self, other: Pair) -> Pair:
        return Pair(self.baseline + other.baseline, self.filecache + other.filecache)

    def to_json(self, digits: int = 1) -> dict[str, Any]:
        def num(x: float) -> float | int:
            return x if isinstance(x, int) else round(x, digits)

        return {
            "baseline": num(self.baseline),
            "filecache": num(self.filecache),
            "saved": num(self.saved),
            "saved_pct": round(self.saved_pct, 2),
        }


def answers_of(events: Iterable[LedgerRow]) -> Pair:
    """The per-answer figure of a session's events (``answer_pairs`` summed)."""
    pairs = answer_pairs(events).values()
    return Pair(sum(b for _, _, b in pairs), sum(t for _, t, _ in pairs))


@dataclass(frozen=True)
class RunTally:
    """One run's requests: prompt tokens, of them read from the cache and written to it."""

    requests: int = 0
    tokens: int = 0
    cached: int = 0

    @property
    def written(self) -> int:
        return self.tokens - self.cached

    @property
    def billed(self) -> float:
        return self.cached * CACHE_READ + self.written * CACHE_WRITE

    def cost(self, prices: Prices) -> float:
        """USD of these prompt tokens at ``prices`` (cache reads and writes)."""
        return (self.cached * prices.cache_read + self.written * prices.cache_write) / 1e6

    def __add__(self, other: RunTally) -> RunTally:
        return RunTally(
            self.requests + other.requests, self.tokens + other.tokens, self.cached + other.cached
        )


def _digest(key: object) -> str:
    return key if isinstance(key, str) else xxhash.xxh3_64_hexdigest(repr(key).encode())


def cached_prefix(request: Sequence[tuple[object, int]], previous: Sequence[object]) -> int:
    """Tokens of ``request`` (``(message key, tokens)`` pairs) in its longest prefix whose
    keys equal ``previous``'s: what a provider's prompt cache serves (``BILLED_BASIS``)."""
    cached = 0
    for (key, tokens), prev in zip(request, previous, strict=False):
        if key != prev:
            break
        cached += tokens
    return cached


@dataclass
class RequestTally:
    """A session's requests as filecache saw them: its run and the baseline's (mutable: one
    owner adds to it; ``record_request`` loads, adds and saves it under a lock).

    Each request is a list of ``(message key, tokens)``: keys compare messages between
    consecutive requests (the cached prefix); only digests of them are kept.
    """

    filecache: RunTally = field(default_factory=RunTally)
    baseline: RunTally = field(default_factory=RunTally)
    _last: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))

    def add(
        self, filecache: Sequence[tuple[object, int]], baseline: Sequence[tuple[object, int]]
    ) -> bool:
        """Count one request (filecache's and the baseline's form of it); False when it is the
        last one again."""
        fc_keys = [_digest(k) for k, _ in filecache]
        base_keys = [_digest(k) for k, _ in baseline]
        if self.filecache.requests and (fc_keys, base_keys) == self._last:
            return False
        fc = [(k, t) for k, (_, t) in zip(fc_keys, filecache, strict=True)]
        base = [(k, t) for k, (_, t) in zip(base_keys, baseline, strict=True)]
        self.filecache = self.filecache + RunTally(
            1, sum(t for _, t in fc), cached_prefix(fc, self._last[0])
        )
        self.baseline = self.baseline + RunTally(
            1, sum(t for _, t in base), cached_prefix(base, self._last[1])
        )
        self._last = (fc_keys, base_keys)
        return True

    def to_json(self) -> dict[str, Any]:
        return {
            "filecache": dataclasses.asdict(self.filecache),
            "baseline": dataclasses.asdict(self.baseline),
            "last": [self._last[0], self._last[1]],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestTally:
        last = data.get("last") or [[], []]
        return cls(
            RunTally(**data["filecache"]), RunTally(**data["baseline"]),
            ([str(k) for k in last[0]], [str(k) for k in last[1]]),
        )  # fmt: skip


def keyed_request(
    transcript: Transcript,
    count: Callable[[str], int],
    plain: Mapping[str, tuple[str, int, int]] | None = None,
) -> list[tuple[object, int]]:
    """A request as ``RequestTally.add`` takes it: per message, a key and its tokens (its text,
    tool calls and results, plus ``MESSAGE_OVERHEAD``).

    ``plain`` (``answer_pairs`` of the session): count each result it names at its baseline
    instead (the baseline's form of the request; such a message gets a key of its own)."""
    out: list[tuple[object, int]] = []
    for m in transcript.messages:
        text = message_text(m)
        tokens = count(text) + MESSAGE_OVERHEAD
        swapped = [plain[r.call_id] for r in m.results if plain and r.call_id in plain]
        extra = sum(base - sent for _, sent, base in swapped)
        out.append(((m.role, text, "plain") if extra else (m.role, text), tokens + extra))
    return out


def message_text(message: Message) -> str:
    """What ``keyed_request`` counts of one message: its text, its tool calls (name and
    arguments) and its results' texts, one per line."""
    parts = [message.text, *(f"{c.name}\n{c.raw_arguments}" for c in message.tool_calls)]
    parts += [r.text for r in message.results]
    return "\n".join(p for p in parts if p)


SESSION_NAMESPACE = "figures-session"
"""Key-value namespace of what a session's requests said about themselves (``SessionMeta``)."""


@dataclass(frozen=True)
class SessionMeta:
    """What a session's requests named: the model (its prices price the session's cost when
    the table has them), the program that sent them (a fixed label, never a header's text)
    and the API; ``side``: no request of it carried a tool result (a host's side request: a
    title, a summary, a quota check; ``stats`` shows these on one line). No content, no
    header."""

    model: str = ""
    host: str = ""
    api: str = ""
    side: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "host": self.host, "api": self.api, "side": self.side}


def load_session_meta(store: Store, session_id: str) -> SessionMeta | None:
    """The session's ``SessionMeta``, or None when none was saved (or it is not ours)."""
    raw = store.cache_get(SESSION_NAMESPACE, session_id)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        side = data.get("side") is True  # absent in rows from before it was recorded
        return SessionMeta(str(data["model"]), str(data["host"]), str(data["api"]), side)
    except (ValueError, TypeError, KeyError):
        return None


def save_session_meta(store: Store, session_id: str, meta: SessionMeta | None) -> None:
    """Replace the session's ``SessionMeta`` (None: forget it)."""
    value = "" if meta is None else json.dumps(meta.to_json(), separators=(",", ":"))
    store.cache_put(SESSION_NAMESPACE, session_id, value)


def load_tally(store: Store, session_id: str) -> RequestTally | None:
    """The session's recorded requests, or None when none was recorded (or the row is not
    one this module wrote)."""
    raw = store.cache_get(TALLY_NAMESPACE, session_id)
    if not raw:
        return None
    try:
        return RequestTally.from_json(json.loads(raw))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def save_tally(store: Store, session_id: str, tally: RequestTally | None) -> None:
    """Replace the session's recorded requests (None: forget them)."""
    value = "" if tally is None else json.dumps(tally.to_json(), separators=(",", ":"))
    store.cache_put(TALLY_NAMESPACE, session_id, value)


def record_request(
    store: Store,
    session_id: str,
    filecache: Sequence[tuple[object, int]],
    baseline: Sequence[tuple[object, int]],
) -> bool:
    """Add one request of the session to its stored tally (see ``RequestTally.add``)."""
    with store.lock(f"figures:{session_id}"):
        tally = load_tally(store, session_id) or RequestTally()
        added = tally.add(filecache, baseline)
        if added:
            save_tally(store, session_id, tally)
        return added


@dataclass(frozen=True)
class Headline:
    """The figures of one session (or, summed, several), each against its named baseline.

    ``prompt``/``billed``/``cost`` are None when no request of the session was seen.
    """

    session_id: str
    prices: Prices
    answers: Pair
    reads: int = 0
    tally: RequestTally | None = None
    sessions: int = 1
    costs: Pair | None = None
    """Set when summed over sessions priced at different models' prices (``sum_headlines``):
    the sum of their costs; ``prices`` is then the first one's, ``models`` names them all."""
    models: tuple[str, ...] = ()

    @property
    def requests(self) -> int:
        return self.tally.filecache.requests if self.tally is not None else 0

    @property
    def prompt(self) -> Pair | None:
        t = self.tally
        return None if t is None else Pair(t.baseline.tokens, t.filecache.tokens)

    @property
    def billed(self) -> Pair | None:
        t = self.tally
        return None if t is None else Pair(t.baseline.billed, t.filecache.billed)

    @property
    def cost(self) -> Pair | None:
        t = self.tally
        if t is None:
            return None
        if self.costs is not None:
            return self.costs
        return Pair(t.baseline.cost(self.prices), t.filecache.cost(self.prices))

    @property
    def priced_at(self) -> str:
        """Whose prices ``cost`` is at: one model's, or several (summed over sessions)."""
        if self.costs is not None:
            return "each session's model's prices (" + ", ".join(self.models) + ")"
        return f"{self.prices.model}'s prices"

    def sentence(self) -> str:
        """The first sentence of every report: the saving, in prompt, billed and money."""
        prompt, billed, cost = self.prompt, self.billed, self.cost
        answers = (
            f"per read answer it {_saved(self.answers.saved_pct)} "
            f"({self.answers.filecache:,.0f} tokens sent instead of {self.answers.baseline:,.0f})"
            if self.reads
            else "no read was answered through it"
        )
        if prompt is None or billed is None or cost is None:
            return (
                f"filecache: {answers[0].upper()}{answers[1:]}, against plain reads; no request "
                "was seen, so there is no prompt, billed or cost figure (filecache sees the "
                "requests it prunes)."
            )
        return (
            f"filecache {_saved(prompt.saved_pct)} of the prompt tokens "
            f"({prompt.filecache:,.0f} instead of {prompt.baseline:,.0f} over {self.requests:,} "
            f"request{'s' if self.requests != 1 else ''}, pruning included) and "
            f"{_share(billed.saved_pct)} the billed cost "
            f"with prompt caching: {_money(cost.filecache)} instead of {_money(cost.baseline)} "
            f"at {self.priced_at}; {answers}. Baseline: the same requests with "
            "plain reads and no pruning."
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "session_id": self.session_id,
            "sessions": self.sessions,
            "requests": self.requests,
            "requests_baseline": REQUESTS_BASELINE,
            "answers_baseline": ANSWERS_BASELINE,
            "billed_basis": BILLED_BASIS,
            "prompt_tokens": None if self.prompt is None else self.prompt.to_json(),
            "billed": None if self.billed is None else self.billed.to_json(),
            "cost_usd": None if self.cost is None else self.cost.to_json(digits=6),
            "per_answer": {"reads": self.reads, **self.answers.to_json()},
            "prices": self.prices.to_json(),
            **({"priced_at": list(self.models)} if self.costs is not None else {}),
            "sentence": self.sentence(),
        }
        if self.tally is not None:
            for run in ("filecache", "baseline"):
                r: RunTally = getattr(self.tally, run)
                out.setdefault("cache_tokens", {})[run] = {"read": r.cached, "written": r.written}
        return out


def _saved(pct: float) -> str:
    return f"saved {pct:.1f}%" if pct >= 0 else f"cost {-pct:.1f}% more"


def _share(pct: float) -> str:
    return f"{pct:.1f}% of" if pct >= 0 else f"added {-pct:.1f}% to"


def _money(usd: float) -> str:
    sign = "-" if usd < 0 else ""
    usd = abs(usd)
    return f"{sign}${usd:,.2f}" if usd >= 1 else f"{sign}${usd:.4f}"


def headline_of(
    session_id: str,
    events: Iterable[LedgerRow],
    tally: RequestTally | None,
    prices: Prices | None = None,
) -> Headline:
    """The headline of a session from its ledger events and its recorded requests."""
    pairs = answer_pairs(events)
    answers = Pair(sum(b for _, _, b in pairs.values()), sum(t for _, t, _ in pairs.values()))
    return Headline(session_id, prices or prices_for(), answers, len(pairs), tally)


def session_headline(store: Store, session_id: str, model: str | None = None) -> Headline:
    """The headline of a stored session (its events and its recorded requests)."""
    return headline_of(
        session_id, store.events(session_id), load_tally(store, session_id), prices_for(model)
    )


def sum_headlines(
    parts: Sequence[Headline], session_id: str = "overall", prices: Prices | None = None
) -> Headline:
    """The figures of several sessions together (sums; requests only of those that had any)."""
    prices = prices or (parts[0].prices if parts else prices_for())
    answers = sum((h.answers for h in parts), Pair(0, 0))
    tallies = [h.tally for h in parts if h.tally is not None]
    tally = None
    if tallies:
        tally = RequestTally(
            sum((t.filecache for t in tallies), RunTally()),
            sum((t.baseline for t in tallies), RunTally()),
        )
    priced = [h for h in parts if h.tally is not None]  # the parts that have a cost
    models = tuple(dict.fromkeys(m for h in priced for m in (h.models or (h.prices.model,))))
    costs = None
    if len(models) > 1:  # several models' prices: each part's cost, summed
        costs = sum((h.cost for h in priced if h.cost is not None), Pair(0.0, 0.0))
    elif models and models[0] != prices.model:  # every cost at another model's prices than asked
        prices = priced[0].prices
    return Headline(
        session_id, prices, answers, sum(h.reads for h in parts), tally,
        sum(h.sessions for h in parts), costs, models if costs is not None else (),
    )  # fmt: skip


def prune_headline(
    given: Any,
    pruned: Any,
    format: str,
    count: Callable[[str], int],
    store: Store | None,
    session_id: str | None,
    prices: Prices,
) -> Headline:
    """The headline of a prune: the request ``given`` (as the caller holds it) sent as
    ``pruned``. With a session (``store``, ``session_id``): the request is added to the
    session's tally (``record_request``; the session's reads counted plain in the baseline) and
    the session's figures returned; without one, this request's figures alone."""
    plain = answer_pairs(store.events(session_id)) if store and session_id else {}
    before: Transcript | None = None
    after: Transcript | None = None
    try:
        before = parse_transcript(unwrap(given).messages, format)
        after = parse_transcript(unwrap(pruned).messages, format)
    except TranscriptError:  # SDK objects (a library call): no request to count here
        before = after = None
    if store is not None and session_id is not None:
        if before is not None and after is not None:
            base = keyed_request(before, count, plain)
            record_request(store, session_id, keyed_request(after, count), base)
        return session_headline(store, session_id, prices.model)
    tally = RequestTally()
    if before is not None and after is not None:
        tally.add(keyed_request(after, count), keyed_request(before, count))
    return Headline("-", prices, Pair(0, 0), 0, tally)
