"""Other tools' pruning policies, as their public documentation and source describe them.

``filecache replay --policy NAME`` and ``--compare`` run these over the plain run (the same
tools, no FileRef, diff or outline), so a user can see them beside filecache on their own
sessions. Each is cited in ``docs/pruning.md``:

- ``anthropic-clear-tool-uses``: Anthropic's server-side context editing,
  ``clear_tool_uses_20250919``. Applied to every request from the full client history
  (stateless): when the request's input tokens exceed ``trigger`` (default 100,000), every tool
  result but the newest ``keep`` (3) tool uses is replaced by a placeholder, unless that
  clears fewer than ``clear_at_least`` tokens (default: no minimum).
- ``openclaw``: OpenClaw's session pruning (``context-pruning/pruner.ts``). Characters, with
  the window as ``tokens x 4`` characters; the newest ``keepLastAssistants`` (3) assistant
  messages and every result after the first of them are protected. At ``softTrimRatio`` (0.3)
  every prunable result over 4,000 characters keeps its first 1,500 and last 1,500; then at
  ``hardClearRatio`` (0.5), when the prunable results hold at least 50,000 characters, they
  are cleared oldest first until the ratio is under 0.5. Sticky here (a result once trimmed or
  cleared stays so), as the issue that asked for this comparison specifies.
- ``opencode``: opencode's ``SessionCompaction.prune``, run when a turn ends (before the next
  user message): walking back from the end, the last 2 user turns are skipped, the newest
  40,000 estimated tokens (characters / 4) of tool output are kept, and the older results are
  marked compacted if more than 20,000 tokens are collected; the walk stops at a result
  already compacted. Compacted results render as its placeholder.
- ``claude-code-dedup``: Claude Code's Read dedup, a tool-level answer: a read of the same path
  with the same offset and limit, the file unchanged since that read (here: the same bytes,
  which is kinder than its mtime check), answers a stub instead of the content.

Pure: messages (OpenAI chat, as replay keeps them) and a token count per message in, the texts
to send in place of some tool results out. The wording each tool shows its model is its own,
kept here verbatim; filecache's own wording lives in ``render.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "ANTHROPIC_PLACEHOLDER", "CLAUDE_CODE_STUB", "OPENCLAW_PLACEHOLDER", "OPENCODE_PLACEHOLDER",
    "PEER_POLICIES", "POLICIES", "AnthropicClearToolUses", "OpenClaw", "OpenCode", "ReadDedup",
    "RequestPolicy", "make_request_policy", "parse_policy",
]  # fmt: skip

# Anthropic does not publish the text its server puts in place of a cleared result; this is
# the default of LangChain's ClearToolUsesEdit, which "mirrors Anthropic's
# clear_tool_uses_20250919 behavior".
ANTHROPIC_PLACEHOLDER = "[cleared]"
OPENCLAW_PLACEHOLDER = "[Old tool result content cleared]"  # hardClear.placeholder default
OPENCODE_PLACEHOLDER = "[Old tool result content cleared]"  # message-v2.ts toModelMessages
CLAUDE_CODE_STUB = (
    "Wasted call \u2014 file unchanged since your last Read. Refer to that earlier tool_result "
    "instead."
)

PEER_POLICIES = ("anthropic-clear-tool-uses", "openclaw", "opencode", "claude-code-dedup")
POLICIES = ("filecache", "none", *PEER_POLICIES)
_REQUEST_POLICIES = ("anthropic-clear-tool-uses", "openclaw", "opencode")

Message = Mapping[str, Any]


class RequestPolicy(Protocol):
    """A policy that edits a request before it is sent: call id -> the text to send instead."""

    def edit(self, messages: Sequence[Message], tokens: Sequence[int]) -> dict[str, str]: ...


def _content(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _results(messages: Sequence[Message]) -> list[tuple[int, str]]:
    """(message index, call id) of every tool result, oldest first."""
    return [
        (i, str(m.get("tool_call_id")))
        for i, m in enumerate(messages)
        if m.get("role") == "tool" and m.get("tool_call_id")
    ]


@dataclass
class AnthropicClearToolUses:
    """``clear_tool_uses_20250919``: trigger in input tokens, keep in tool uses."""

    trigger: int = 100_000
    keep: int = 3
    clear_at_least: int = 0
    count: Callable[[str], int] = len

    def edit(self, messages: Sequence[Message], tokens: Sequence[int]) -> dict[str, str]:
        if sum(tokens) <= self.trigger:
            return {}
        results = _results(messages)
        old = results[: max(0, len(results) - self.keep)]
        cleared = {cid: ANTHROPIC_PLACEHOLDER for _, cid in old}
        placeholder = self.count(ANTHROPIC_PLACEHOLDER)
        reclaimed = sum(max(0, self.count(_content(messages[i])) - placeholder) for i, _ in old)
        if not cleared or reclaimed < self.clear_at_least:
            return {}
        return cleared


def _message_chars(message: Message, text: str | None = None) -> int:
    """OpenClaw's ``estimateMessageChars``: text, plus each tool call's arguments as JSON."""
    role = message.get("role")
    if role == "system":
        return 0  # the system prompt is not one of the session's messages there
    chars = len(_content(message) if text is None else text)
    if role == "assistant":
        for call in message.get("tool_calls") or ():
            raw = (call.get("function") or {}).get("arguments") or "{}"
            try:
                chars += len(json.dumps(json.loads(raw), separators=(",", ":")))
            except (TypeError, ValueError):
                chars += 128
    return chars


@dataclass
class OpenClaw:
    """OpenClaw's session pruning (soft-trim, then hard-clear), sticky."""

    window: int = 200_000  # OpenClaw's default context window, in tokens
    soft_trim_ratio: float = 0.3
    hard_clear_ratio: float = 0.5
    keep_last_assistants: int = 3
    min_prunable_chars: int = 50_000
    max_chars: int = 4_000
    head_chars: int = 1_500
    tail_chars: int = 1_500
    projected: dict[str, str] = field(default_factory=dict)

    def soft_trim(self, text: str) -> str | None:
        if len(text) <= self.max_chars or self.head_chars + self.tail_chars >= len(text):
            return None
        head, tail = text[: self.head_chars], text[len(text) - self.tail_chars :]
        note = (
            f"\n\n[Tool result trimmed: kept first {self.head_chars} chars and last "
            f"{self.tail_chars} chars of {len(text)} chars.]"
        )
        return f"{head}\n...\n{tail}{note}"

    def edit(self, messages: Sequence[Message], tokens: Sequence[int]) -> dict[str, str]:
        char_window = self.window * 4
        cutoff = _assistant_cutoff(messages, self.keep_last_assistants)
        if cutoff is None:
            return dict(self.projected)
        first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
        start = len(messages) if first_user is None else first_user
        texts = [self.projected.get(str(m.get("tool_call_id")), _content(m)) for m in messages]
        total = sum(_message_chars(m, t) for m, t in zip(messages, texts, strict=True))
        if total / char_window < self.soft_trim_ratio:
            return dict(self.projected)
        prunable = [i for i in range(start, cutoff) if messages[i].get("role") == "tool"]
        for i in prunable:
            trimmed = self.soft_trim(texts[i])
            if trimmed is not None:
                total += len(trimmed) - len(texts[i])
                texts[i] = trimmed
                self.projected[str(messages[i].get("tool_call_id"))] = trimmed
        if total / char_window >= self.hard_clear_ratio:
            if sum(len(texts[i]) for i in prunable) >= self.min_prunable_chars:
                for i in prunable:
                    if total / char_window < self.hard_clear_ratio:
                        break
                    total += len(OPENCLAW_PLACEHOLDER) - len(texts[i])
                    texts[i] = OPENCLAW_PLACEHOLDER
                    self.projected[str(messages[i].get("tool_call_id"))] = OPENCLAW_PLACEHOLDER
        return dict(self.projected)


def _assistant_cutoff(messages: Sequence[Message], keep: int) -> int | None:
    """Index of the ``keep``-th newest assistant message (results from there on are
    protected); None when there are not that many."""
    if keep <= 0:
        return len(messages)
    remaining = keep
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            remaining -= 1
            if remaining == 0:
                return i
    return None


def _opencode_estimate(text: str) -> int:
    return max(0, round(len(text) / 4))  # util/token.ts: Math.round(chars / 4)


@dataclass
class OpenCode:
    """opencode's prune of old tool output, run when a user turn ends."""

    protect: int = 40_000
    minimum: int = 20_000
    protected_tools: tuple[str, ...] = ("skill",)
    compacted: set[str] = field(default_factory=set)
    users_seen: int = 0

    def edit(self, messages: Sequence[Message], tokens: Sequence[int]) -> dict[str, str]:
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        for user in users[max(1, self.users_seen) :]:  # a turn ended: prune as it was then
            self.prune(messages[:user])
        self.users_seen = max(self.users_seen, len(users))
        return {cid: OPENCODE_PLACEHOLDER for cid in self.compacted}

    def prune(self, messages: Sequence[Message]) -> None:
        names = {
            str(c.get("id")): str((c.get("function") or {}).get("name", ""))
            for m in messages
            for c in m.get("tool_calls") or ()
        }
        total = pruned = 0
        to_prune: list[str] = []
        turns = 0
        for message in reversed(messages):
            if message.get("role") == "user":
                turns += 1
            if turns < 2 or message.get("role") != "tool":
                continue
            cid = str(message.get("tool_call_id"))
            if names.get(cid) in self.protected_tools:
                continue
            if cid in self.compacted:
                break
            estimate = _opencode_estimate(_content(message))
            total += estimate
            if total <= self.protect:
                continue
            pruned += estimate
            to_prune.append(cid)
        if pruned > self.minimum:
            self.compacted.update(to_prune)


@dataclass
class ReadDedup:
    """Claude Code's Read dedup: the same path and range, unchanged -> its stub."""

    seen: dict[tuple[str, object, object], tuple[str, str]] = field(default_factory=dict)

    def answer(
        self, call_id: str, args: Mapping[str, Any], version: str | None, text: str
    ) -> tuple[str, str | None]:
        """``(text to answer, base call id)``: the stub and the read it stands for, or the
        content and None. ``version``: the file's bytes after the read (None: it failed)."""
        if version is None:
            return text, None
        key = (str(args.get("path")), args.get("offset"), args.get("limit"))
        known = self.seen.get(key)
        if known is not None and known[0] == version:
            return CLAUDE_CODE_STUB, known[1]
        self.seen[key] = (version, call_id)
        return text, None


def parse_policy(name: str) -> tuple[bool, str | None]:
    """``(dedup, request policy name)`` of a policy name other than ``filecache``: one of
    ``POLICIES``, or ``claude-code-dedup+NAME`` for the dedup with a request policy.

    Raises:
        ValueError: an unknown name.
    """
    dedup, _, rest = name.partition("+")
    if name == "none":
        return False, None
    if name == "claude-code-dedup":
        return True, None
    if dedup == "claude-code-dedup" and rest in _REQUEST_POLICIES:
        return True, rest
    if name in _REQUEST_POLICIES:
        return False, name
    known = ", ".join(POLICIES)
    raise ValueError(f"unknown policy {name!r}; choose one of {known} (or claude-code-dedup+NAME)")


def make_request_policy(
    name: str, *, window: int | None, trigger: int | None, count: Callable[[str], int]
) -> RequestPolicy:
    """A fresh request policy by name. ``window``: the model's context in tokens (OpenClaw's
    ratios, and Anthropic's trigger at 30% of it); ``trigger``: Anthropic's trigger outright."""
    if name == "anthropic-clear-tool-uses":
        if trigger is None:
            trigger = math.floor(0.3 * window) if window else 100_000
        return AnthropicClearToolUses(trigger=trigger, count=count)
    if name == "openclaw":
        return OpenClaw(window=window or 200_000)
    if name == "opencode":
        return OpenCode()
    raise ValueError(f"{name!r} is not a request policy")
