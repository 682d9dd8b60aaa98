"""What the gateway saved, per conversation: each request it forwarded, counted for the figures.

Every request whose message list the transform parsed (rewritten or forwarded unchanged, as a
request that saved nothing) is added to its conversation's ``RequestTally``
(``filecache.figures.record_request``) under the session id ``gateway:<conversation key>``, the
one the gateway's memory already keeps its cuts under: the filecache side is the request as
sent upstream, the baseline the request as the host sent it. So ``filecache stats`` reports
the gateway's conversations with the same headline as every other surface (prompt, billed,
cost at the prices of the model the requests name, ``figures.model_prices``).

Invariants:
- ``RequestForms`` is computed after the rewrite, off the request's path (the server calls
  ``record_rewrite`` once the answer is relayed; the LiteLLM callback once the hook returned):
  per message a digest of its role and text and its tokens, counted as
  ``figures.keyed_request`` counts them, with the transform's own memoised counter. A message
  the rewrite did not change is counted once for both sides.
- ``record_rewrite`` never raises: a failure (a read-only store, a broken connection) is one
  log line naming the exception's type, and the request has long gone out as it was.
- Stored per conversation: the tally (digests and counts) and ``SessionMeta`` (the model the
  request names, a fixed host label, the API, and ``side``: no request of it so far carried a
  tool result, so it is one of the host's side requests, a title, a summary, a quota check,
  which ``stats`` reports on one line). Never a header, a key, or text.
- A request retried as it was (the same messages) is counted once (``RequestTally.add``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import xxhash

from filecache.figures import (
    MESSAGE_OVERHEAD,
    SessionMeta,
    load_session_meta,
    message_text,
    record_request,
    save_session_meta,
)
from filecache.gateway.memory import GatewayMemory
from filecache.prune.codecs.base import Message, Transcript

__all__ = [
    "HOST_AGENTS", "CountedForms", "RequestForms", "host_label", "record_rewrite", "session_of",
]  # fmt: skip

log = logging.getLogger("filecache.gateway")

HOST_AGENTS: tuple[tuple[str, str], ...] = (
    ("claude-cli", "Claude Code"),
    ("claude-code", "Claude Code"),
    ("codex", "Codex"),
    ("opencode", "opencode"),
    ("kilo", "Kilo"),
    ("aider", "Aider"),
    ("litellm", "LiteLLM"),
)
"""A part of a ``User-Agent`` → the program's label; only the label is ever stored."""

Keyed = list[tuple[object, int]]


def session_of(conversation: str) -> str:
    """The session id a conversation's figures are kept under (the memory's own)."""
    return f"gateway:{conversation}"


def host_label(user_agent: str | None) -> str:
    """The label of the program a ``User-Agent`` names (``HOST_AGENTS``), else ""."""
    agent = (user_agent or "").lower()
    for part, label in HOST_AGENTS:
        if part in agent:
            return label
    return ""


@dataclass(frozen=True)
class RequestForms:
    """A request as the host sent it (``transcript``) and as it went upstream (``sent``: the
    rewritten message list, or None when it went as it came; ``changed``: the indices of the
    messages the rewrite replaced). ``parse``: the codec's parse of one message; ``count``:
    the transform's token counter."""

    transcript: Transcript
    sent: Sequence[Any] | None
    changed: Collection[int]
    parse: Callable[[int, object], Message]
    count: Callable[[str], int]
    model: str = ""
    api: str = ""

    def keyed(self) -> tuple[Keyed, Keyed]:
        """(the request as sent, as given) in ``RequestTally.add``'s form."""
        messages = self.transcript.messages
        given: Keyed = [self._keyed(m) for m in messages]
        if self.sent is None or not self.changed:
            return given, given
        sent = list(given)
        for position, message in enumerate(messages):
            if message.index in self.changed:
                parsed = self.parse(message.index, self.sent[message.index])
                sent[position] = self._keyed(parsed)
        return sent, given

    @property
    def carries_results(self) -> bool:
        """Whether the request carried a tool result (else it is a side request so far)."""
        return bool(self.transcript.results())

    def counted(self) -> CountedForms:
        """What ``record_rewrite`` needs of this request, without its text (to keep while the
        request's outcome is not known: digests and counts only)."""
        sent, given = self.keyed()
        return CountedForms(sent, given, self.model, self.api, self.carries_results)

    def _keyed(self, message: Message) -> tuple[object, int]:
        text = message_text(message)
        key = xxhash.xxh3_64_hexdigest(f"{message.role}\x1f{text}".encode("utf-8", "surrogatepass"))
        return key, self.count(text) + MESSAGE_OVERHEAD


@dataclass(frozen=True)
class CountedForms:
    """``RequestForms.counted``: the request as sent and as given in ``RequestTally.add``'s
    form, its model and API, and whether it carried a tool result. No text."""

    sent: Keyed
    given: Keyed
    model: str
    api: str
    carries_results: bool

    def keyed(self) -> tuple[Keyed, Keyed]:
        return self.sent, self.given


def record_rewrite(
    memory: GatewayMemory | None,
    conversation: str | None,
    forms: RequestForms | CountedForms | None,
    *,
    host: str = "",
    now: float | None = None,
) -> bool:
    """Count one forwarded request for its conversation (module docstring); True when it was
    added (False: nothing to count, the same request again, or a failure, logged)."""
    store = memory.store if memory is not None else None
    if memory is None or store is None or not conversation or forms is None:
        return False
    try:
        sent, given = forms.keyed()
        session = session_of(conversation)
        added = record_request(store, session, sent, given)
        held = memory.conversation(conversation)
        if held.meta is None:  # first seen by this process: what another one saved of it
            held.meta = load_session_meta(store, session)
        before = held.meta if isinstance(held.meta, SessionMeta) else None
        side = not forms.carries_results and (before is None or before.side)
        meta = SessionMeta(forms.model[:200], host, forms.api, side)
        if held.meta != meta:
            save_session_meta(store, session, meta)
            held.meta = meta
        held.touch(time.time() if now is None else now)  # the row ``stats`` lists
        return added
    except Exception as exc:  # never hurt the host: the request went out; one line, no content
        log.warning("request not counted for the figures (%s)", type(exc).__name__)
        return False
