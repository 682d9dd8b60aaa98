"""Other tools' pruning policies inside a replay: one ``PeerRun`` per policy, fed by ``_Run``.

A peer run is the recorded transcript (what the user's agent sent with its own tools) with a
policy editing every request before it is sent (``peer_policies``); with
``claude-code-dedup``, a read of an unchanged path and range answers Claude Code's stub
instead of its recorded content. Prompt tokens and billed equivalents are metered on that.

The recorded reads are in the agent's own format, which the model simulator cannot rebuild
lines from, so stale views, dangling stubs and recall are counted on a shadow of the same
run: every recorded file tool result replaced by the plain run's answer to the same call
(the same lines, in filecache's content format), with the same results cleared, trimmed or
stubbed as in the request as sent. A bash read that replay serves (``replay_shell``) is in
both as recorded: the shell's output, whose lines the simulator learns as in the filecache
run (the peers' Read dedup does not apply to it). Where the recording showed an abbreviated
view of a large file, the shadow shows all of it: generous to the peer. The simulator is
``replay._Checker``, the one filecache's run is checked with, given by ``replay.py``.

Invariants:
- A run never changes the messages it is given; what it sends is built per request from its
  history and its policy's replacements (the same replacement text is the same message object
  every time, so a text is tokenized once).
- A stub is dangling in a request where the read it stands for is missing or not as answered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from filecache.core.kinds import Kind
from filecache.prune.peer_policies import (
    ReadDedup,
    RequestPolicy,
    make_request_policy,
    parse_policy,
)
from filecache.replay.policy_runs import PolicyRun
from filecache.replay.replay_check import FileCall
from filecache.replay.replay_gateway import GatewayRun, is_gateway_policy
from filecache.replay.replay_metrics import CostMeter
from filecache.tools import READ_FILE

__all__ = ["Checker", "PeerRun"]

Message = dict[str, Any]
Dangling = Callable[[Sequence[tuple[str, str]], Mapping[str, FileCall]], dict[str, str]]


class Checker(Protocol):
    """What ``replay._Checker`` offers: fed once per request, it counts as it goes."""

    problems: dict[str, str]
    dangling: dict[str, str]
    recall_sum: float
    recall_pairs: int
    all_sum: float
    all_pairs: int

    def request(
        self, index: int, history: Sequence[Message], sent: Sequence[Message], pruned: set[str]
    ) -> None: ...


class PeerRun:
    """One policy's run of a replay.

    Args:
        name: a policy name other than ``filecache`` (``peer_policies.parse_policy``).
        window: the model's context in tokens, for the policies that scale with it.
        trigger: Anthropic's trigger in tokens, outright.
        count: the replay's token counter (memoised).
        keyed: a message's cache key and tokens, as the replay meters them.
        checker: makes the model simulator for this run's calls and dangling rule.
    """

    def __init__(
        self,
        name: str,
        *,
        window: int | None,
        trigger: int | None,
        count: Callable[[str], int],
        keyed: Callable[[Mapping[str, Any]], tuple[object, int]],
        checker: Callable[[Mapping[str, FileCall], Dangling], Checker],
    ) -> None:
        self.name = name
        self.gateway = GatewayRun(name, window) if is_gateway_policy(name) else None
        dedup, request_policy = (False, None) if self.gateway else parse_policy(name)
        self.dedup = ReadDedup() if dedup else None
        self.policy: RequestPolicy | None = (
            make_request_policy(request_policy, window=window, trigger=trigger, count=count)
            if request_policy is not None
            else self.gateway
        )
        self._sent_now: dict[str, str] = {}  # what the current request sent instead
        self.keyed = keyed
        self.calls: dict[str, FileCall] = {}
        self.bases: dict[str, str] = {}  # stub call id -> the read it stands for
        self.history: list[Message] = []
        self.shadow: list[Message] = []
        self.meter = CostMeter()
        self.checker = checker(self.calls, self._dangling)
        self.changed: set[str] = set()
        self.passes = 0
        self.shown_changed = 0
        self._replaced: dict[tuple[str, str], Message] = {}
        self.sent: list[Message] = []  # the last request as sent
        self.shown: list[Message] = []  # the same, a checked gateway reference as what it names
        self.replaced: set[str] = set()  # the results its policy changed in it

    def add(
        self, message: Message, plain: Message, call: FileCall | None, *, shell: bool = False
    ) -> None:
        """The next recorded message; ``plain``: the plain run's (the same but for a file tool
        result); ``call``: the plain run's file tool call, if it is one; ``shell``: the call is
        a bash read (recorded output; no Read tool of the peer's, so no dedup stub)."""
        dedup = None if shell else self.dedup  # a bash read: no Read tool, so no dedup stub
        if call is not None and dedup is not None and call.tool == READ_FILE.name:
            version = call.after[0] if call.after is not None and call.kind != Kind.ERROR else None
            text, base = dedup.answer(call.call_id, call.args, version, call.text)
            if base is not None:
                call = dataclasses.replace(call, kind="unchanged", text=text)
                self.bases[call.call_id] = base
                message, plain = {**message, "content": text}, {**plain, "content": text}
        if call is not None:
            self.calls[call.call_id] = call
        self.history.append(message)
        self.shadow.append(plain)

    def request(self, index: int) -> None:
        """The request before message ``index``: edit, meter, check."""
        replacements: dict[str, str] = {}
        if self.policy is not None:
            tokens = [self.keyed(m)[1] for m in self.history]
            replacements = self.policy.edit(self.history, tokens)
        self._sent_now = replacements
        sent = [self._sent(m, replacements) for m in self.history]
        held = replacements
        if self.gateway is not None:  # a checked FileRef or diff: the model holds those lines
            held = {
                c: t for c, t in replacements.items() if not self.gateway.holds(c, replacements)
            }
        shadow = [self._sent(m, held) for m in self.shadow]
        new = set(replacements) - self.changed
        if new:
            self.passes += 1
            self.changed |= new
        self.shown_changed = len(replacements) + sum(
            1 for cid in self.bases if cid not in replacements
        )
        self.meter.add([self.keyed(m) for m in sent])
        self.sent, self.replaced = sent, set(replacements)
        self.shown = sent if held is replacements else [self._sent(m, held) for m in self.history]
        self.checker.request(index, self.shadow, shadow, set(held))

    def _sent(self, message: Message, replacements: Mapping[str, str]) -> Message:
        cid = str(message.get("tool_call_id") or "")
        if message.get("role") != "tool" or cid not in replacements:
            return message
        key = (cid, replacements[cid])
        held = self._replaced.get(key)
        if held is None:
            held = self._replaced[key] = {**message, "content": replacements[cid]}
        return held

    def _dangling(
        self, results: Sequence[tuple[str, str]], calls: Mapping[str, FileCall]
    ) -> dict[str, str]:
        if self.gateway is not None:
            return self.gateway.dangling(results, self._sent_now)
        sent = dict(results)
        out: dict[str, str] = {}
        for cid, text in results:
            base = self.bases.get(cid)
            if base is None or text != calls[cid].text:
                continue
            if base not in sent:
                out[cid] = f"the read {base} its stub stands for is missing"
            elif sent[base] != calls[base].text:
                out[cid] = f"the read {base} its stub stands for was cleared"
        return out

    def result(self) -> PolicyRun:
        cost = self.meter.cost()
        checker = self.checker
        pairs = checker.recall_pairs
        problems = (*checker.problems.values(), *checker.dangling.values())
        stale = len(checker.problems)
        if self.gateway is not None:
            problems += tuple(self.gateway.problems.values())
            stale += len(self.gateway.problems)
            self.gateway.close()
        return PolicyRun(
            name=self.name,
            requests=cost.requests,
            prompt_tokens=cost.tokens,
            billed=cost.billed,
            cached=cost.cached,
            peak=cost.peak,
            passes=self.passes,
            results=self.shown_changed,
            stale=stale,
            dangling=len(checker.dangling),
            recall=checker.recall_sum / pairs if pairs else 1.0,
            recall_pairs=pairs,
            problems=tuple(f"{self.name}: {p}" for p in problems),
            series=cost.sizes,
            billed_series=cost.bills,
            recall_all=checker.all_sum / checker.all_pairs if checker.all_pairs else 1.0,
            recall_all_pairs=checker.all_pairs,
        )
