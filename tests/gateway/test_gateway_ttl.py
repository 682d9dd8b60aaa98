"""The cost gate and the provider's cache time to live: a conversation idle longer than the
cache lives has lost its cached prefix, so a cut that would have broken it costs nothing more
(explicit request times, no sleeps; real SQLite stores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from filecache.gateway import Api, GatewayPolicy, open_memory, rewrite_payload
from filecache.gateway.transform import cache_ttl

OLD = [
    f"    old_{i} = compute({i}, 'some text to make it longer and longer')" for i in range(1, 1500)
]
NEW = [
    f"    new_{i} = other({i}, 'a different text, a different file now')" for i in range(1, 1500)
]


def _turn(cid: str, name: str, args: dict[str, Any], text: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": name,
                                           "input": args}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid,
                                      "content": text}]},
    ]  # fmt: skip


def _arrows(lines: list[str]) -> str:
    return "\n".join(f"{n:>6}→{t}" for n, t in enumerate(lines, 1))


def _conversation() -> list[dict[str, Any]]:
    """A whole read early, a long talk after it (no tool results to cut), then the file
    changed by a shell command and read again: the first read is superseded, and cutting it
    rewrites the cache of everything after it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "work"}]
    messages += _turn("t1", "Read", {"file_path": "/p/a.py"}, _arrows(OLD))
    for k in range(2, 30):
        messages += [
            {"role": "assistant", "content": "thinking aloud " * 300 + str(k)},
            {"role": "user", "content": "go on " * 400 + str(k)},
        ]
    messages += _turn("t98", "Bash", {"command": "sed -i s/old/new/ a.py"}, "")
    messages += _turn("t99", "Read", {"file_path": "/p/a.py"}, _arrows(NEW))
    return messages


def _request(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": "m", "system": "Working directory: /p", "messages": messages,
        "metadata": {"user_id": "user_a_account_b_session_ttl12345"}, **extra,
    }  # fmt: skip


def _pruned(store: str, gap: float, **extra: Any) -> int:
    messages = _conversation()
    memory = open_memory(store)
    try:
        rewrite_payload(Api.ANTHROPIC_MESSAGES, _request(messages[:-2], **extra), memory=memory,
                        now=1_000.0)  # fmt: skip
        _, rewrite = rewrite_payload(
            Api.ANTHROPIC_MESSAGES, _request(messages, **extra), memory=memory, now=1_000.0 + gap
        )
    finally:
        memory.close()
    return rewrite.counts.pruned


def test_a_cut_the_gate_declines_on_a_warm_cache_is_made_once_the_cache_expired() -> None:
    assert _pruned(":memory:", 60) == 0  # within 5 minutes: the cut would rewrite the cache
    assert _pruned(":memory:", 301) == 1  # expired: the prompt is written anew anyway


def test_an_hour_long_cache_keeps_the_cut_declined() -> None:
    one_hour = {"cache_control": {"type": "ephemeral", "ttl": "1h"}}
    assert _pruned(":memory:", 301, **one_hour) == 0
    assert _pruned(":memory:", 3_601, **one_hour) == 1


def test_a_policy_ttl_overrides_the_requests() -> None:
    messages = _conversation()
    memory = open_memory(":memory:")
    policy = GatewayPolicy(cache_ttl=30.0)
    rewrite_payload(Api.ANTHROPIC_MESSAGES, _request(messages[:-2]), memory=memory,
                    policy=policy, now=0.0)  # fmt: skip
    _, rewrite = rewrite_payload(
        Api.ANTHROPIC_MESSAGES, _request(messages), memory=memory, policy=policy, now=31.0
    )
    memory.close()
    assert rewrite.counts.pruned == 1


def test_the_last_request_time_is_shared_through_the_store(tmp_path: Path) -> None:
    """A replica that meets the conversation first reads its last request's time from the
    store: the first replica's request at t=1000, the second's at t=1060 (warm)."""
    store = str(tmp_path / "gateway.db")
    messages = _conversation()
    first = open_memory(store)
    rewrite_payload(Api.ANTHROPIC_MESSAGES, _request(messages[:-2]), memory=first, now=1_000.0)
    first.close()
    second = open_memory(store)
    _, rewrite = rewrite_payload(
        Api.ANTHROPIC_MESSAGES, _request(messages), memory=second, now=1_060.0
    )
    second.close()
    assert rewrite.counts.pruned == 0
    assert _pruned(store, 0) == 0  # and a later gap counts from the latest request
    third = open_memory(store)
    _, rewrite = rewrite_payload(
        Api.ANTHROPIC_MESSAGES, _request(messages), memory=third, now=1_000.0 + 1_000
    )
    third.close()
    assert rewrite.counts.pruned == 1


@pytest.mark.parametrize(
    ("api", "payload", "ttl"),
    [
        (Api.ANTHROPIC_MESSAGES, {"messages": []}, 300),
        (Api.ANTHROPIC_MESSAGES, {"system": [{"type": "text", "text": "s",
                                              "cache_control": {"type": "ephemeral",
                                                                "ttl": "1h"}}]}, 3_600),
        (Api.ANTHROPIC_MESSAGES, {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "5m"}}]}]},
         300),
        (Api.OPENAI_CHAT, {}, 600),
        (Api.OPENAI_RESPONSES, {"prompt_cache_retention": "24h"}, 86_400),
    ],
)  # fmt: skip
def test_cache_ttl_of_a_request(api: Api, payload: dict[str, Any], ttl: float) -> None:
    assert cache_ttl(api, payload) == ttl
