"""What a cut costs under prompt caching: a simulation of the requests after it.

Pure: token counts in, billed equivalents out. ``pruning._cost_gate`` asks, for each possible
cut, ``cut_net``: the billed tokens saved over the requests expected to remain, with the cut
made now against without it.

The model (every quantity in tokens, billed at ``read`` when a request's prefix is the
previous request's, else at ``write``):

- The session grows by ``growth`` tokens a request: what it added per assistant turn so far.
- It lasts ``turns`` more requests: as many as it has had (the median of a Gott/Lindy estimate,
  with nothing else known), unless the policy says (``PrunePolicy.turns_left``).
- Cutting now rewrites the cache from the cut on (``suffix - reclaimed`` at ``write`` instead
  of ``suffix`` at ``read``); every later request is ``reclaimed`` tokens smaller.
- Once the prompt passes ``limit`` (``hard_at`` of the window), the planner clears without
  asking, with or without this cut: from then on the two runs are the same (the forced pass
  rewrites the cache in both), so the saving counts only the requests before it. (Crediting the
  cut with the forced rewrite it would spare made deep cuts look profitable whenever the growth
  projected a pass over ``limit``, which the session often never reached: on the 12
  mini-swe-agent dev runs at 64k the gate billed +0.2% against the recording, -12.0% now.)

Invariant: with no limit reached in ``turns`` requests, ``cut_net`` is
``read * reclaimed * (turns + 1) - (write - read) * (suffix - reclaimed)``; with the limit
first passed (without the cut) in the ``k``-th request to come, the same with ``k - 1`` for
``turns``. Growth decides only ``k``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["SessionGrowth", "cut_net", "session_growth"]


@dataclass(frozen=True)
class SessionGrowth:
    """How a session has grown: its assistant turns so far and tokens added per turn."""

    turns: int
    per_turn: float

    @property
    def turns_left(self) -> int:
        return max(1, self.turns)


def session_growth(roles: Sequence[str], msg_tokens: Sequence[int]) -> SessionGrowth:
    """From the messages' roles and sizes: the turns so far and the tokens added per turn
    since the first request (the system prompt and the task are not growth)."""
    first = next((i for i, role in enumerate(roles) if role == "assistant"), len(roles))
    turns = sum(1 for role in roles if role == "assistant")
    grown = sum(msg_tokens[first:])
    return SessionGrowth(turns, grown / turns if turns else 0.0)


def cut_net(
    *,
    total: int,
    suffix: int,
    reclaimed: int,
    growth: float,
    turns: int,
    limit: float,
    read: float,
    write: float,
) -> float:
    """Billed tokens saved by cutting now (``reclaimed`` tokens, invalidating ``suffix``
    tokens from the cut on, of a ``total``-token prompt) over this request and ``turns`` more,
    against not cutting until the prompt passes ``limit``. Positive: the cut pays."""
    net = read * reclaimed - (write - read) * (suffix - reclaimed)  # this request
    size = float(total)  # the prompt without the cut: it passes the limit first
    for _ in range(turns):
        size += growth
        if size > limit:  # forced: the planner clears over hard_at, with or without the cut
            break
        net += read * reclaimed  # every later request is ``reclaimed`` tokens smaller
    return net
