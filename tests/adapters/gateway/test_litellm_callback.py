"""``FilecacheCallback.async_pre_call_hook`` called as LiteLLM's proxy calls it, in this process
(the real ``CustomLogger`` class; the whole proxy is in ``test_litellm_gateway.py``).

- whatever fails in filecache (a store that refuses or never answers), the request goes on as it
  came: the same ``data`` object, its conversation untouched;
- it reads no key: ``user_api_key_dict`` is never touched, LiteLLM's own fields are left as they
  are, and no key reaches the store;
- two replicas on one PostgreSQL store agree: a result one of them pruned stays pruned, byte
  for byte, in every later request, whichever of them rewrote it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litellm_proxy import OFFLINE, need_proxy
from test_secrets import store_bytes

from filecache.gateway import GatewayPolicy

os.environ.update(OFFLINE)  # before litellm is imported: its cost map stays offline
need_proxy()

from filecache.adapters.litellm_gateway import FilecacheCallback  # noqa: E402

pytestmark = pytest.mark.slow  # importing LiteLLM costs seconds of CPU

KEY = "sk-litellm-caller-0c9d1b8a4f6e"


class Untouchable:
    """A ``user_api_key_dict`` that fails the test if anything reads it."""

    def __getattribute__(self, name: str) -> Any:
        raise AssertionError(f"the hook read user_api_key_dict.{name}")


def read(path: str, n: int, tag: str = "") -> str:
    return "\n".join(f"{k}\t{path} line {k}: lorem ipsum dolor sit amet {tag}" for k in range(1, n))


def turn(name: str, tool_input: dict[str, Any], call: str, result: str) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": call, "name": name, "input": tool_input}
    answer = {"type": "tool_result", "tool_use_id": call, "content": result}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [answer]}]


def anthropic_data(messages: list[dict[str, Any]], session: str = "abcdef0123") -> dict[str, Any]:
    """``data`` as LiteLLM hands it to the hook on /v1/messages: the body and its own fields."""
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": [{"type": "text", "text": "Working directory: /p"}],
        "metadata": {"user_id": f"user_1_account_2_session_{session}"},
        "messages": messages,
        "litellm_metadata": {"user_api_key": KEY},
        "secret_fields": {"raw_headers": {"authorization": f"Bearer {KEY}"}},
        "proxy_server_request": {"headers": {"x-api-key": KEY}, "body": {}},
        "litellm_call_id": "call-1",
    }


def rereads() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look at a.py"}]
    messages += turn("Read", {"file_path": "/p/a.py"}, "toolu_a1", read("a.py", 60))
    messages += turn("Read", {"file_path": "/p/a.py"}, "toolu_a2", read("a.py", 60))
    return messages


def hook(callback: FilecacheCallback, data: dict[str, Any], call_type: str) -> Any:
    return asyncio.run(
        callback.async_pre_call_hook(
            user_api_key_dict=Untouchable(), cache=None, data=data, call_type=call_type
        )
    )


def succeeded(callback: FilecacheCallback, call_id: str) -> None:
    """LiteLLM's word that the request went upstream and succeeded (``kwargs`` is LiteLLM's
    ``model_call_details``: its ``litellm_call_id`` among them)."""
    kwargs = {"litellm_call_id": call_id, "model": "claude-sonnet-4-5"}
    asyncio.run(callback.async_log_success_event(kwargs, object(), 0.0, 1.0))


def refused(callback: FilecacheCallback, data: dict[str, Any]) -> None:
    """LiteLLM's word that the request failed (the proxy's ``post_call_failure_hook``)."""
    error = RuntimeError("upstream said 429")
    assert asyncio.run(callback.async_post_call_failure_hook(data, error, Untouchable())) is None


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung store)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


@pytest.fixture
def refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed: connections are refused


@pytest.mark.parametrize("which", ["refused", "silent"])
def test_a_store_that_fails_leaves_the_request_as_it_came(
    which: str, request: pytest.FixtureRequest
) -> None:
    port = request.getfixturevalue(f"{which}_port")
    callback = FilecacheCallback(store=f"postgresql://u@127.0.0.1:{port}/db", timeout=3)
    try:
        for _ in range(2):  # the first request and one after the failure
            data = anthropic_data(rereads())
            before = copy.deepcopy(data)
            assert hook(callback, data, "anthropic_messages") is data
            assert data == before
        assert callback.counts["rewritten"] == 0 and sum(callback.counts.values()) == 2
        if which == "silent":  # the first request waits out the timeout, the next goes on at
            assert callback.counts == {"failed": 1, "skipped": 1}  # once: the thread is stuck
    finally:
        callback._process = None  # a hung thread is left to the interpreter's exit


def test_the_hook_rewrites_only_the_conversation_and_reads_no_key(tmp_path: Path) -> None:
    store = tmp_path / "gateway.db"
    callback = FilecacheCallback(store=str(store))
    data = anthropic_data(rereads())
    before = copy.deepcopy(data)
    kept = {key: value for key, value in data.items() if key != "messages"}
    assert hook(callback, data, "anthropic_messages") is data
    assert callback.counts == {"rewritten": 1}
    assert {key: value for key, value in data.items() if key != "messages"} == kept
    assert all(data[key] is value for key, value in kept.items())
    assert data["messages"][:-1] == before["messages"][:-1]
    ref = data["messages"][-1]["content"][0]["content"]
    assert ref.startswith("[filecache] /p/a.py unchanged since your result toolu_a1")
    callback.close()
    assert KEY.encode() not in store_bytes(store)


@pytest.mark.parametrize(
    "call_type", ["aembedding", "aimage_generation", "atext_completion", "pass_through_endpoint"]
)
def test_other_routes_pass_untouched(call_type: str, tmp_path: Path) -> None:
    callback = FilecacheCallback(store=str(tmp_path / "gateway.db"))
    data = anthropic_data(rereads())
    before = copy.deepcopy(data)
    assert hook(callback, data, call_type) is data
    assert data == before and callback._process is None  # not even a thread started


def test_chat_and_responses_shapes(tmp_path: Path) -> None:
    callback = FilecacheCallback(store=str(tmp_path / "gateway.db"))
    content = "".join(f"b.py line {k}: lorem ipsum dolor sit amet\n" for k in range(1, 61))
    chat: list[dict[str, Any]] = [
        {"role": "system", "content": "Working directory: /p"},
        {"role": "user", "content": "look at b.py"},
    ]
    for n in (1, 2):
        arguments = json.dumps({"command": "cat b.py"})
        chat.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function",
             "function": {"name": "bash", "arguments": arguments}}]})  # fmt: skip
        chat.append({"role": "tool", "tool_call_id": f"call_{n}", "content": content})
    data = {"model": "gpt-5", "messages": chat, "metadata": {"user_api_key_hash": KEY}}
    assert hook(callback, data, "acompletion") is data
    assert data["messages"][-1]["content"].startswith("[filecache] /p/b.py unchanged")
    assert data["metadata"] == {"user_api_key_hash": KEY}

    items: list[dict[str, Any]] = [{"role": "user", "content": "look at b.py"}]
    for n in (1, 2):
        items.append({"type": "function_call", "call_id": f"fc_{n}", "name": "shell",
                      "arguments": json.dumps({"command": ["cat", "/p/b.py"]})})  # fmt: skip
        items.append({"type": "function_call_output", "call_id": f"fc_{n}", "output": content})
    data = {"model": "gpt-5", "instructions": "Working directory: /p", "input": items}
    before = copy.deepcopy(data)
    assert hook(callback, data, "aresponses") is data
    assert data["instructions"] == before["instructions"]
    assert data["input"][:-1] == before["input"][:-1]
    assert data["input"][-1]["output"].startswith("[filecache] /p/b.py unchanged")


@pytest.mark.pg
def test_two_replicas_on_one_store_send_the_same_bytes(pg_url: str) -> None:
    """Requests alternate between two callbacks (as two proxy replicas would) at a small window:
    once a result is pruned, every later request carries the same pruned bytes, whichever
    replica rewrote it."""
    policy = GatewayPolicy(context_window=4000)
    replicas = [FilecacheCallback(store=pg_url, policy=policy) for _ in range(2)]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the tests"}]
    sent: dict[str, str] = {}
    original: dict[str, str] = {}
    try:
        for i in range(10):
            path = f"/p/f{i}.py"
            output = "\n".join(f"test {i} line {k} FAILED assertion" for k in range(40))
            for call, result in ((f"toolu_r{i}", read(path, 80, str(i))), (f"toolu_t{i}", output)):
                original[call] = result
            messages += turn("Read", {"file_path": path}, f"toolu_r{i}", original[f"toolu_r{i}"])
            messages += turn("Bash", {"command": f"pytest -k t{i}"}, f"toolu_t{i}", output)
            data = anthropic_data(copy.deepcopy(messages), session="replicas0123")
            hook(replicas[i % 2], data, "anthropic_messages")
            for message in data["messages"]:
                for block in message["content"] if isinstance(message["content"], list) else []:
                    if block["type"] == "tool_result":
                        call, now = block["tool_use_id"], block["content"]
                        if sent.get(call, original[call]) != original[call]:
                            assert now == sent[call], call  # pruned: the same bytes from then on
                        sent[call] = now
        assert sum(replica.counts["rewritten"] for replica in replicas) >= 8
        assert sum(sent[call] != original[call] for call in original) >= 5  # pruned
    finally:
        for replica in replicas:
            replica.close()


def test_each_request_is_counted_for_stats_on_the_shared_store(tmp_path: Path) -> None:
    """What the proxy saved, per conversation, in ``filecache stats`` of its store: equal to
    the requests LiteLLM sent against the ones the clients gave, counted independently."""
    from filecache.core.tokens import fast_estimate_text
    from filecache.figures import RequestTally, keyed_request
    from filecache.prune.transcript import parse_transcript
    from filecache.stats import collect_stats
    from filecache.store.opening import open_store

    store = tmp_path / "gateway.db"
    callback = FilecacheCallback(store=str(store))
    want = RequestTally()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look at a.py"}]
    steps = [turn("Read", {"file_path": "/p/a.py"}, f"toolu_r{k}", read("a.py", 60))
             for k in range(4)]  # fmt: skip
    for k, step in enumerate([[], *steps, []]):  # the last one again: a retry, counted once
        messages = [*messages, *step]
        data = anthropic_data(copy.deepcopy(messages))
        data["litellm_call_id"] = f"call-{k}"
        data["proxy_server_request"]["headers"]["User-Agent"] = "claude-cli/2.1.332 (external)"
        given = parse_transcript(copy.deepcopy(data["messages"]), "anthropic")
        assert hook(callback, data, "anthropic_messages") is data
        sent = parse_transcript(data["messages"], "anthropic")
        succeeded(callback, f"call-{k}")
        want.add(keyed_request(sent, fast_estimate_text), keyed_request(given, fast_estimate_text))
    callback.close()  # the counts queued behind the hooks are written first
    with open_store(tmp_path, str(store)) as opened:
        (one,) = collect_stats(opened).sessions
    assert one.session_id.startswith("gateway:session:abcdef0123:")
    assert one.label.startswith("gateway (Claude Code) conversation abcdef0123")
    assert one.headline is not None and one.headline.tally is not None
    assert one.headline.tally.filecache == want.filecache and want.filecache.requests == 5
    assert one.headline.tally.baseline == want.baseline
    assert want.filecache.tokens < want.baseline.tokens
    assert one.headline.prices.model == "claude-sonnet-4-5"
    assert KEY.encode() not in store_bytes(store)


def test_only_requests_litellm_says_succeeded_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request refused after the hook (a rate limit, an upstream error) is never counted; one
    LiteLLM never settles is forgotten past the bound; a word on a request the hook never
    saw (or saw unparsed) changes nothing."""
    import filecache.adapters.litellm_gateway as module

    from filecache.figures import load_tally
    from filecache.store.opening import open_store

    store = tmp_path / "gateway.db"
    callback = FilecacheCallback(store=str(store))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look at a.py"}]
    outcome = {1: "refused", 2: "ok", 3: "refused", 4: "never", 5: "ok"}
    for k, what in outcome.items():
        messages = [*messages, *turn("Read", {"file_path": "/p/a.py"}, f"toolu_{k}",
                                     read("a.py", 60))]  # fmt: skip
        data = anthropic_data(copy.deepcopy(messages))
        data["litellm_call_id"] = f"call-{k}"
        assert hook(callback, data, "anthropic_messages") is data
        if what == "ok":
            succeeded(callback, f"call-{k}")
        elif what == "refused":
            refused(callback, data)
            succeeded(callback, f"call-{k}")  # a late word on it: already forgotten
    succeeded(callback, "call-unknown")
    assert callback.counts["counted"] == 2 and callback.counts["refused"] == 2
    (waiting,) = callback._pending.values()  # call-4: digests and counts, no text of it
    assert "lorem ipsum" not in repr(waiting.counted.result(timeout=60))
    monkeypatch.setattr(module, "PENDING_MAX", 1)  # call-4 waits; one more pushes it out
    data = anthropic_data(copy.deepcopy(messages))
    data["litellm_call_id"] = "call-6"
    hook(callback, data, "anthropic_messages")
    assert callback.counts["expired"] == 1
    succeeded(callback, "call-4")
    assert callback.counts["counted"] == 2
    callback.close()
    with open_store(tmp_path, str(store)) as opened:
        (session,) = opened.sessions()
        tally = load_tally(opened, session.session_id)
    assert tally is not None and tally.filecache.requests == 2
