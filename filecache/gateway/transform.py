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

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "API_PATHS",
    "Api",
    "GatewayMemory",
    "GatewayPolicy",
    "Rewrite",
    "RewriteCounts",
    "api_for_path",
    "open_memory",
    "rewrite_request",
]


class Api(enum.StrEnum):
    """The request shapes the transform reads."""

    ANTHROPIC_MESSAGES = "anthropic-messages"
    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"


API_PATHS: Mapping[str, Api] = {
    "/v1/messages": Api.ANTHROPIC_MESSAGES,
    "/v1/chat/completions": Api.OPENAI_CHAT,
    "/chat/completions": Api.OPENAI_CHAT,
    "/v1/responses": Api.OPENAI_RESPONSES,
    "/responses": Api.OPENAI_RESPONSES,
}
"""Request paths (without a query) whose POST body the transform reads; any other path is
forwarded untouched."""


def api_for_path(path: str) -> Api | None:
    """The API a request path speaks, or None (forward it untouched)."""
    return API_PATHS.get(path.split("?", 1)[0].rstrip("/") or "/")


@dataclass(frozen=True)
class GatewayPolicy:
    """What the transform may do. ``context_window`` in tokens; ``prune_preset`` a
    ``PrunePolicy`` preset name; ``delta`` FileRefs and diffs between results of one request."""

    context_window: int = 200_000
    prune_preset: str = "cost"
    delta: bool = True
    prune: bool = True


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


class GatewayMemory:
    """Per-conversation memory (sticky pruning decisions). The pass-through floor keeps none."""

    def close(self) -> None:
        """Release the store."""


def open_memory(store: str | None = None) -> GatewayMemory:
    """The memory behind ``store`` (a path, ``:memory:`` or a ``postgresql://`` URL; None: the
    user's default gateway store)."""
    return GatewayMemory()


def rewrite_request(
    api: Api | str,
    body: bytes,
    *,
    headers: Mapping[str, str] | None = None,
    memory: GatewayMemory | None = None,
    policy: GatewayPolicy | None = None,
) -> Rewrite:
    """The request to send upstream for ``body`` (see the module docstring)."""
    return Rewrite(body, False, None, "not implemented yet: pass-through")
