"""What the gateway saved, as ``filecache stats`` reports it: ``filecache gateway`` in a
subprocess in front of a scripted upstream (``raw_upstream``) that records the bytes it got.

The figures are checked against an independent count: the requests the test sent (the host's)
and the ones the upstream received, each parsed and counted with the transform's counter
(``fast_estimate_text``) as ``filecache.figures`` defines a request, fed to a fresh
``RequestTally`` in the order they went out.
"""

from __future__ import annotations

import http.client
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gateway_run import base_env, foreground
from raw_upstream import RawUpstream, Reply

from filecache.core.tokens import fast_estimate_text
from filecache.figures import PRICES, RequestTally, keyed_request
from filecache.prune.transcript import parse_transcript
from filecache.store.opening import open_store

pytest.importorskip("aiohttp", reason="the gateway extra: pip install -e '.[gateway]'")

KEY = "sk-ant-api03-FIGURESKEY-1a2b3c4d"
AGENT = "claude-cli/2.1.332 (external, cli)"
ANSWER = json.dumps(
    {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason":
     "end_turn", "content": [{"type": "text", "text": "ok"}],
     "usage": {"input_tokens": 1, "output_tokens": 1}}
).encode()  # fmt: skip
LINES = [f"    value_{i} = compute({i}, 'the quick brown fox jumps')" for i in range(1, 81)]


def arrows(lines: list[str]) -> str:
    return "\n".join(f"{n:>6}→{t}" for n, t in enumerate(lines, 1))


def turn(cid: str, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": cid, "name": name, "input": args}
    answer = {"type": "tool_result", "tool_use_id": cid, "content": result}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [answer]}]


def body(messages: list[dict[str, Any]]) -> bytes:
    return json.dumps({
        "model": "claude-sonnet-4-5-20250929", "max_tokens": 64,
        "system": [{"type": "text", "text": "Working directory: /p"}],
        "metadata": {"user_id": "user_ab_account_cd_session_5e6f7a8b-9c0d"},
        "messages": messages,
    }, ensure_ascii=False).encode()  # fmt: skip


def conversation() -> list[bytes]:
    """A Claude Code conversation, request by request: a question, a read, a re-read of the
    same file (a FileRef), an edit, a read of the edited file (a diff), and the last request
    retried as it was."""
    edited = list(LINES)
    edited[40] = "    value_41 = 'edited'"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look at a.py"}]
    out = [body(messages)]
    steps = [
        turn("toolu_1", "Read", {"file_path": "/p/a.py"}, arrows(LINES)),
        turn("toolu_2", "Read", {"file_path": "/p/a.py"}, arrows(LINES)),
        turn("toolu_3", "Edit", {"file_path": "/p/a.py", "old_string": "x", "new_string": "y"},
             "The file /p/a.py has been updated successfully."),
        turn("toolu_4", "Read", {"file_path": "/p/a.py"}, arrows(edited)),
    ]  # fmt: skip
    for step in steps:
        messages = [*messages, *step]
        out.append(body(messages))
    return [*out, out[-1]]


def post(url: str, payload: bytes) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        conn.request("POST", "/v1/messages", body=payload, headers={
            "x-api-key": KEY, "anthropic-version": "2023-06-01", "user-agent": AGENT,
            "content-type": "application/json",
        })  # fmt: skip
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def expected(sent: list[bytes], received: list[bytes]) -> RequestTally:
    """The tally counted independently of the gateway's own records."""
    tally = RequestTally()
    for given, got in zip(sent, received, strict=True):
        before = parse_transcript(json.loads(given)["messages"], "anthropic")
        after = parse_transcript(json.loads(got)["messages"], "anthropic")
        tally.add(
            keyed_request(after, fast_estimate_text), keyed_request(before, fast_estimate_text)
        )
    return tally


def stats_json(cwd: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "filecache", "stats", "--json", *args],
        cwd=cwd, env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_stats_shows_each_conversation_with_the_figures_of_its_requests(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = base_env(home)
    store = home / ".cache" / "filecache" / "gateway" / "gateway.db"  # the user's default one
    requests = conversation()
    with (
        RawUpstream(lambda seen: Reply(body=ANSWER)) as up,
        foreground(tmp_path, "--upstream", up.url, "--store", str(store), env=env) as gw,
    ):
        for payload in requests:
            assert post(gw.url, payload) == (200, ANSWER)
    received = [seen.body for seen in up.seen]
    assert received[2] != requests[2] and received[4] != requests[4]  # a FileRef, a diff
    assert received[0] == requests[0]  # no tool result yet: forwarded as it came
    want = expected(requests, received)
    assert want.filecache.requests == 5  # the retried request counted once

    folder = tmp_path / "elsewhere"
    folder.mkdir()
    report = stats_json(folder, env)  # no project store there: the gateway's conversations
    assert list(folder.iterdir()) == []  # and it made none
    (session,) = report["sessions"]
    assert session["session_id"].startswith("gateway:session:5e6f7a8b-9c0d:")
    assert session["label"].startswith("gateway (Claude Code) conversation 5e6f7a8b-9c0d")
    assert session["gateway"]["model"] == "claude-sonnet-4-5-20250929"
    headline = session["headline"]
    assert headline["requests"] == 5
    prompt, billed = headline["prompt_tokens"], headline["billed"]
    assert (prompt["baseline"], prompt["filecache"]) == (
        want.baseline.tokens, want.filecache.tokens
    )  # fmt: skip
    assert prompt["saved"] > 0
    assert billed["baseline"] == round(want.baseline.billed, 1)
    assert billed["filecache"] == round(want.filecache.billed, 1)
    prices = PRICES["claude-sonnet-4-5"]  # the request's dated snapshot, at its model's prices
    assert headline["prices"]["model"] == "claude-sonnet-4-5"
    assert headline["cost_usd"]["baseline"] == round(want.baseline.cost(prices), 6)
    assert headline["cost_usd"]["filecache"] == round(want.filecache.cost(prices), 6)
    assert report["overall"]["headline"]["prompt_tokens"] == prompt  # the total includes it
    assert KEY not in json.dumps(report)

    text = subprocess.run(
        [sys.executable, "-m", "filecache", "stats", "--store", str(store)], cwd=folder,
        env=env, capture_output=True, timeout=120, check=True,
    ).stdout.decode()  # fmt: skip
    assert "gateway (Claude Code) conversation 5e6f7a8b-9c0d" in text
    assert f"{prompt['saved_pct']:.1f}%" in text
    assert KEY.encode() not in store.read_bytes()
    # Left out on request, and a --store of its own lists only that store.
    assert stats_json(folder, env, "--no-gateway", "--store", str(store))["sessions"]
    other = tmp_path / "other.db"
    open_store(tmp_path, str(other)).close()
    assert stats_json(folder, env, "--store", str(other))["sessions"] == []
    with_gateway = stats_json(folder, env, "--store", str(other), "--gateway-store", str(store))
    assert [s["session_id"] for s in with_gateway["sessions"]] == [session["session_id"]]


def test_a_store_that_cannot_record_leaves_every_request_as_it_would_go(tmp_path: Path) -> None:
    """The tally's table is gone (a store that fails to record): each request goes out as a
    healthy gateway sends it, the host gets its answer, and the log says so in one line."""
    requests = conversation()
    sent: dict[str, list[bytes]] = {}
    for name in ("healthy", "broken"):
        folder = tmp_path / name
        folder.mkdir()
        store = folder / "gateway.db"
        with (
            RawUpstream(lambda seen: Reply(body=ANSWER)) as up,
            foreground(folder, "--upstream", up.url, "--store", str(store)) as gw,
        ):
            if name == "broken":
                with sqlite3.connect(store) as db:
                    db.execute("DROP TABLE cache")
            for payload in requests:
                assert post(gw.url, payload) == (200, ANSWER)
        sent[name] = [seen.body for seen in up.seen]
        log = (folder / "gateway.err").read_text()
        assert "Traceback" not in log
        if name == "broken":
            assert log.count("request not counted for the figures (StoreError)") == 6
    assert sent["broken"] == sent["healthy"]
    assert sent["healthy"][2] != requests[2]  # it did rewrite
