"""The gateway's figures (``filecache.gateway.tally``): each forwarded request counted for its
conversation, as ``filecache.figures`` counts a request, from the transform's own parse."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from filecache.core.tokens import fast_estimate_text
from filecache.figures import (
    PRICES,
    Headline,
    Pair,
    RequestTally,
    keyed_request,
    load_session_meta,
    load_tally,
    model_prices,
    prices_for,
    sum_headlines,
)
from filecache.gateway import GatewayPolicy, open_memory, record_rewrite, rewrite_request
from filecache.gateway.tally import host_label, session_of
from filecache.prune.transcript import parse_transcript
from filecache.stats import collect_stats, format_stats, session_label

LINES = [f"    value_{i} = compute({i}, 'the quick brown fox')" for i in range(1, 121)]


def arrows(lines: list[str]) -> str:
    return "\n".join(f"{n:>6}→{t}" for n, t in enumerate(lines, 1))


def turn(cid: str, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": cid, "name": name, "input": args}
    answer = {"type": "tool_result", "tool_use_id": cid, "content": result}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [answer]}]


def body(messages: list[dict[str, Any]], model: str = "claude-haiku-4-5") -> bytes:
    return json.dumps({
        "model": model, "max_tokens": 64, "system": "Working directory: /p",
        "metadata": {"user_id": "user_ab_account_cd_session_77aa88bb-cc"}, "messages": messages,
    }, ensure_ascii=False).encode()  # fmt: skip


def requests() -> list[bytes]:
    """Requests of one conversation: reads of several files, re-reads, long command outputs
    (enough that a small window prunes), each request the one before plus a turn."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the tests"}]
    out = [body(messages)]
    for k in range(12):
        path = f"/p/m{k % 4}.py"
        if k % 3 == 2:
            step = turn(
                f"toolu_{k}",
                "Bash",
                {"command": "pytest -q"},
                "\n".join(f"FAILED test_{k}_{i} - AssertionError" for i in range(150)),
            )
        else:
            step = turn(f"toolu_{k}", "Read", {"file_path": path}, arrows(LINES))
        messages = [*messages, *step]
        out.append(body(messages))
    return out


def keyed(payload: bytes) -> list[tuple[object, int]]:
    transcript = parse_transcript(json.loads(payload)["messages"], "anthropic")
    return keyed_request(transcript, fast_estimate_text)


def pattern(a: list[tuple[object, int]], b: list[tuple[object, int]]) -> list[bool]:
    return [x[0] == y[0] for x, y in zip(a, b, strict=True)]


def test_the_forms_count_what_was_sent_and_what_was_given(tmp_path: Path) -> None:
    memory = open_memory(str(tmp_path / "gateway.db"))
    policy = GatewayPolicy(context_window=6_000)
    try:
        rewritten = 0
        for payload in requests():
            rewrite = rewrite_request("anthropic-messages", payload, memory=memory, policy=policy)
            assert rewrite.forms is not None and rewrite.conversation
            sent, given = rewrite.forms.keyed()
            want_sent, want_given = keyed(rewrite.body), keyed(payload)
            assert [t for _, t in sent] == [t for _, t in want_sent]
            assert [t for _, t in given] == [t for _, t in want_given]
            # A message counts as the same on both sides exactly when it went as it came.
            assert pattern(sent, given) == pattern(want_sent, want_given)
            rewritten += rewrite.changed
        assert rewritten >= 3 and rewrite.counts.pruned and rewrite.counts.file_refs
    finally:
        memory.close()


def test_each_request_is_counted_once_with_its_model_and_host(tmp_path: Path) -> None:
    memory = open_memory(str(tmp_path / "gateway.db"))
    try:
        want = RequestTally()
        sent_list = requests()[:6]
        for payload in [*sent_list, sent_list[-1]]:  # the last one retried
            rewrite = rewrite_request("anthropic-messages", payload, memory=memory)
            added = record_rewrite(memory, rewrite.conversation, rewrite.forms,
                                   host=host_label("claude-cli/2.1.332"))  # fmt: skip
            assert added == want.add(keyed(rewrite.body), keyed(payload))
        assert memory.store is not None and rewrite.conversation is not None
        session = session_of(rewrite.conversation)
        got = load_tally(memory.store, session)
        assert got is not None
        assert (got.filecache, got.baseline) == (want.filecache, want.baseline)
        assert got.filecache.requests == 6 and got.filecache.tokens < got.baseline.tokens
        meta = load_session_meta(memory.store, session)
        assert meta is not None and (meta.model, meta.host) == ("claude-haiku-4-5", "Claude Code")
        report = collect_stats(memory.store)
        (one,) = report.sessions
        assert one.headline is not None and one.headline.prices.model == "claude-haiku-4-5"
        assert one.label == session_label(session, meta)
        assert "gateway (Claude Code) conversation 77aa88bb-cc" in format_stats(report)
        # An explicit model prices every session at its prices.
        chosen = collect_stats(memory.store, model="claude-opus-5").sessions[0].headline
        assert chosen is not None and chosen.prices.model == "claude-opus-5"
        assert memory.gc(keep_days=0, now=10**12) == 1
        assert load_tally(memory.store, session) is None
        assert load_session_meta(memory.store, session) is None
    finally:
        memory.close()


def test_a_store_that_fails_is_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(str(tmp_path / "gateway.db"))
    payload = requests()[3]
    rewrite = rewrite_request("anthropic-messages", payload, memory=memory)
    assert memory.store is not None
    memory.store.close()  # closed under it: every call fails
    with caplog.at_level(logging.INFO, logger="filecache.gateway"):
        assert record_rewrite(memory, rewrite.conversation, rewrite.forms) is False
    (line,) = [r for r in caplog.records if "not counted" in r.getMessage()]
    assert line.exc_info is None and "value_1" not in line.getMessage()
    assert record_rewrite(None, rewrite.conversation, rewrite.forms) is False


def test_model_prices_and_mixed_sums() -> None:
    assert model_prices("claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4-5"]
    assert model_prices("anthropic/claude-haiku-4-5") == PRICES["claude-haiku-4-5"]
    assert model_prices("claude-sonnet-5-5") == PRICES["claude-sonnet-5-5"]
    assert model_prices("gpt-5.6-terra") == PRICES["gpt-5.6-terra"]  # not gpt-5.6's
    assert model_prices("claude-sonnet-4-5-preview") is None
    assert model_prices("my-local-model") is None and model_prices("") is None
    tally = RequestTally()
    tally.add([("a", 1000), ("b", 500)], [("a", 1000), ("c", 2000)])
    cheap, dear = PRICES["claude-haiku-4-5"], PRICES["claude-opus-5"]
    parts = [Headline("x", cheap, Pair(0, 0), 0, tally), Headline("y", dear, Pair(0, 0), 0, tally)]
    total = sum_headlines(parts, prices=prices_for())
    assert total.cost is not None and parts[0].cost is not None and parts[1].cost is not None
    assert total.cost == parts[0].cost + parts[1].cost
    assert "claude-haiku-4-5, claude-opus-5" in total.sentence()
    one = sum_headlines(parts[:1], prices=prices_for())  # one model: priced at its prices
    assert one.prices == cheap and one.cost == parts[0].cost and one.costs is None


def test_session_labels() -> None:
    assert session_label("gateway:session:abc12345:ff00") == (
        "gateway conversation abc12345 (gateway:session:abc12345:ff00)"
    )
    assert session_label("gateway:prefix:openai-chat:d1g3st:ff00").startswith(
        "gateway conversation d1g3st "
    )
    assert host_label("opencode/1.18.33 ai-sdk/5") == "opencode" and host_label(None) == ""


def _chat_body() -> tuple[bytes, str]:
    view = "Here's the result of running `cat -n` on /testbed/a.py:\n" + "\n".join(
        f"{n:6d}\t{t}" for n, t in enumerate(LINES, 1)
    )
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"},
                                      {"role": "user", "content": "fix"}]  # fmt: skip
    for cid in ("call_1", "call_2"):
        call = {
            "id": cid,
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": "a.py"})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": cid, "content": view})
    payload = {"model": "gpt-5.6-terra", "messages": messages, "prompt_cache_key": "conv-1"}
    return json.dumps(payload).encode(), "openai"  # fmt: skip


def _responses_body() -> tuple[bytes, str]:
    output = "".join(f"{t}\n" for t in LINES)
    framed = ("Chunk ID: 9f\nWall time: 0.0010 seconds\nProcess exited with code 0\n"
              f"Original token count: 900\nOutput:\n{output}")  # fmt: skip
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<environment_context><cwd>/w</cwd></environment_context>"}
    ]}]  # fmt: skip
    for cid, cmd in (("call_a", "cat notes.txt"), ("call_b", "cat /w/notes.txt")):
        items.append({"type": "function_call", "call_id": cid, "name": "exec_command",
                      "arguments": json.dumps({"cmd": cmd})})  # fmt: skip
        items.append({"type": "function_call_output", "call_id": cid, "output": framed})
    return json.dumps({"model": "gpt-5", "input": items, "prompt_cache_key": "c"}).encode(), (
        "responses"
    )


@pytest.mark.parametrize(
    ("api", "make"), [("openai-chat", _chat_body), ("openai-responses", _responses_body)]
)
def test_the_forms_of_the_openai_shapes(api: str, make: Any) -> None:
    payload, fmt = make()
    rewrite = rewrite_request(api, payload)
    assert rewrite.changed and rewrite.forms is not None
    sent, given = rewrite.forms.keyed()
    key = "messages" if fmt == "openai" else "input"
    want_sent, want_given = (
        keyed_request(parse_transcript(json.loads(b)[key], fmt), fast_estimate_text)
        for b in (rewrite.body, payload)
    )
    assert [t for _, t in sent] == [t for _, t in want_sent]
    assert [t for _, t in given] == [t for _, t in want_given]
    assert pattern(sent, given) == pattern(want_sent, want_given)
    assert sum(t for _, t in sent) < sum(t for _, t in given)


def side_body(prompt: str, session: str = "77aa88bb-cc") -> bytes:
    """A host's side request in its conversation's session: no tools, no tool result (Claude
    Code's title and quota requests)."""
    return json.dumps({
        "model": "claude-haiku-4-5", "max_tokens": 32, "system": "Write a 5-10 word title.",
        "metadata": {"user_id": f"user_ab_account_cd_session_{session}"},
        "messages": [{"role": "user", "content": prompt}],
    }).encode()  # fmt: skip


def test_side_requests_are_one_labelled_row_and_stats_one_row_per_conversation(
    tmp_path: Path,
) -> None:
    """Titles, quota checks and summaries (conversations none of whose requests carried a tool
    result) are summed into one labelled row; ``overall`` still counts every request; a
    conversation whose first request had no tool result is not side once one has one."""
    memory = open_memory(str(tmp_path / "gateway.db"))
    host = host_label("claude-cli/2.1.332")
    try:
        sides = [
            side_body("quota"),
            side_body("a title for: fix the tests"),
            side_body("title", "9f"),
        ]
        for payload in [*requests()[:6], *sides, sides[0]]:
            rewrite = rewrite_request("anthropic-messages", payload, memory=memory)
            record_rewrite(memory, rewrite.conversation, rewrite.forms, host=host)
        assert memory.store is not None
        report = collect_stats(memory.store)
        (main,) = report.sessions  # its first request had no tool result: not side
        assert main.meta is not None and not main.meta.side
        assert main.headline is not None and main.headline.tally is not None
        assert main.headline.tally.filecache.requests == 6
        side = report.side
        assert side is not None and side.sessions == 3
        assert side.headline is not None and side.headline.tally is not None
        assert side.headline.tally.filecache.requests == 3  # the quota check retried: once
        assert side.headline.tally.filecache == side.headline.tally.baseline  # 0% by nature
        overall = report.overall.headline
        assert overall is not None and overall.tally is not None
        assert overall.tally.filecache.requests == 9 and report.overall.sessions == 4
        text = format_stats(report)
        rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
        assert len(rows) == 4, text  # the head, overall, the conversation, the side requests
        assert "gateway (Claude Code) conversation 77aa88bb-cc" in rows[2]
        assert rows[3].startswith(
            "| side requests: 3 conversations without a tool result (3 requests: titles,"
        ), text
        data = report.to_json()
        assert data["side_requests"]["sessions"] == 3 and len(data["sessions"]) == 1
        # Asked for by its id, a side conversation is shown as itself.
        quota = session_of(rewrite_request("anthropic-messages", sides[0]).conversation or "")
        (alone,) = collect_stats(memory.store, quota).sessions
        assert alone.session_id == quota and alone.meta is not None and alone.meta.side
    finally:
        memory.close()


def test_a_conversation_is_side_only_while_no_request_carried_a_tool_result(
    tmp_path: Path,
) -> None:
    """The flag survives a new process (another gateway worker, a restart): read from the store
    when this process has not seen the conversation."""
    store = str(tmp_path / "gateway.db")
    first, *rest = requests()[:3]
    seen = []
    for payloads in ([first], rest, [first]):  # each batch in a fresh memory (a new process)
        memory = open_memory(store)
        try:
            for payload in payloads:
                rewrite = rewrite_request("anthropic-messages", payload, memory=memory)
                record_rewrite(memory, rewrite.conversation, rewrite.forms)
            assert memory.store is not None and rewrite.conversation is not None
            meta = load_session_meta(memory.store, session_of(rewrite.conversation))
            assert meta is not None
            seen.append(meta.side)
        finally:
            memory.close()
    assert seen == [True, False, False]
