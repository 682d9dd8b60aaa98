"""The gateway's HTTP behaviour, through ``filecache gateway`` in a subprocess and a real HTTP
upstream on 127.0.0.1 (``raw_upstream``) that records the exact bytes it received.

What is checked: requests and answers pass through unchanged where nothing is rewritten (other
paths, methods, errors, bodies it cannot parse, 10 MB bodies), headers (auth through, hop-by-hop
out), streams relayed chunk by chunk, failures (an upstream that dies mid-answer, the gateway
killed mid-answer, an unreachable upstream), the bind (loopback, or a token), and that no key
reaches the log or the store.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_run import base_env, foreground, log_and_store_bytes
from raw_upstream import RawUpstream, Reply, Seen

pytest.importorskip("aiohttp", reason="the gateway extra: pip install -e '.[gateway]'")

KEY = "sk-ant-api03-TESTKEY-9f8e7d6c5b4a"
SSE = [b"event: message_start\ndata: {\"n\": 1}\n\n", b"event: ping\ndata: {\"n\": 2}\n\n",
       b"event: message_stop\ndata: {\"n\": 3}\n\n"]  # fmt: skip


_OPEN: list[http.client.HTTPConnection] = []


@pytest.fixture(autouse=True)
def _close_connections() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def _request(
    url: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> http.client.HTTPResponse:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    _OPEN.append(conn)
    conn.request(method, path, body=body, headers=headers or {})
    return conn.getresponse()


def _messages(text: str = "hi", **extra: object) -> bytes:
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": text}]}
    return json.dumps(body | extra).encode()


def test_other_paths_and_methods_go_through_unchanged(tmp_path: Path) -> None:
    reply = Reply(200, (("Content-Type", "application/json"), ("x-request-id", "req_1")),
                  b'{"data": []}')  # fmt: skip
    with RawUpstream(lambda seen: reply) as up, foreground(tmp_path, "--upstream", up.url) as gw:
        got = _request(gw.url, "GET", "/v1/models?limit=5", headers={"x-api-key": KEY})
        assert got.status == 200 and got.read() == b'{"data": []}'
        assert got.getheader("x-request-id") == "req_1"
        count = _request(gw.url, "POST", "/v1/messages/count_tokens", _messages(),
                         {"x-api-key": KEY, "content-type": "application/json"})  # fmt: skip
        assert count.status == 200 and count.read() == b'{"data": []}'
        deleted = _request(gw.url, "DELETE", "/v1/files/f1", headers={"authorization": "Bearer t"})
        assert deleted.status == 200
        deleted.read()
    first, second, third = up.seen
    assert (first.method, first.path, first.body) == ("GET", "/v1/models?limit=5", b"")
    assert first.headers["x-api-key"] == KEY
    assert (second.method, second.path, second.body) == (
        "POST", "/v1/messages/count_tokens", _messages()
    )  # fmt: skip
    assert (third.method, third.path, third.headers["authorization"]) == (
        "DELETE", "/v1/files/f1", "Bearer t"
    )  # fmt: skip


def test_headers_auth_through_hop_by_hop_out(tmp_path: Path) -> None:
    with RawUpstream() as up, foreground(tmp_path, "--upstream", up.url) as gw:
        sent = {
            "x-api-key": KEY,
            "authorization": "Bearer oauth-token-1",
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "tools-2024",
            "openai-organization": "org-1",
            "content-type": "application/json",
            "user-agent": "claude-cli/2.1",
            "connection": "keep-alive, x-hop",
            "x-hop": "dropped",
            "keep-alive": "timeout=5",
            "te": "trailers",
            "proxy-authorization": "Basic xyz",
        }
        got = _request(gw.url, "POST", "/v1/messages", _messages(), sent)
        assert got.status == 200
        got.read()
    (seen,) = up.seen
    for name in ("x-api-key", "authorization", "anthropic-version", "anthropic-beta",
                 "openai-organization", "content-type", "user-agent"):  # fmt: skip
        assert seen.headers[name] == sent[name], name
    for name in ("x-hop", "keep-alive", "te", "proxy-authorization"):
        assert name not in seen.headers, name
    assert seen.headers["host"] == up.url.removeprefix("http://")
    assert seen.headers["content-length"] == str(len(seen.body))
    assert seen.headers["accept-encoding"] == "identity"  # http.client's own, as it sent it
    assert "accept" not in seen.headers  # nothing the client did not send


def test_upstream_errors_pass_through_unchanged(tmp_path: Path) -> None:
    statuses = [400, 401, 429, 500, 529]
    headers = (("Content-Type", "application/json"), ("retry-after", "7"),
               ("x-should-retry", "true"), ("request-id", "req_err"))  # fmt: skip

    def body(status: int) -> bytes:
        return json.dumps(
            {"type": "error", "error": {"type": "x", "message": f"no {status}"}}
        ).encode()

    def reply(seen: Seen) -> Reply:
        status = statuses[(len(up.seen) - 1) // 2]  # two requests a status
        return Reply(status, headers, body(status))

    with RawUpstream(reply) as up, foreground(tmp_path, "--upstream", up.url) as gw:
        for status in statuses:
            for method, path in (("POST", "/v1/messages"), ("GET", "/v1/models")):
                got = _request(gw.url, method, path, _messages() if method == "POST" else None)
                assert got.status == status
                assert got.read() == body(status)
                for name, value in headers:
                    assert got.getheader(name) == value


UNPARSEABLE = [b'{"model": "m", "messages": [ not json', b"\xff\xfe\x00binary", b"", b"[1, 2, 3]",
               b'{"messages": "a string", "tools": 7}']  # fmt: skip


def test_a_body_it_cannot_parse_is_forwarded_byte_identical(tmp_path: Path) -> None:
    with RawUpstream() as up, foreground(tmp_path, "--upstream", up.url) as gw:
        for path in ("/v1/messages", "/v1/chat/completions", "/v1/responses"):
            for body in UNPARSEABLE:
                got = _request(gw.url, "POST", path, body, {"content-type": "application/json"})
                assert got.status == 200
                got.read()
    expected = [(path, body) for path in ("/v1/messages", "/v1/chat/completions", "/v1/responses")
                for body in UNPARSEABLE]  # fmt: skip
    assert [(seen.path, seen.body) for seen in up.seen] == expected


def test_ten_megabyte_bodies(tmp_path: Path) -> None:
    line = "line {}: the quick brown fox jumps over the lazy dog\n"
    big_text = "".join(line.format(i) for i in range(200_000))
    body = _messages(big_text)
    assert len(body) > 10_000_000
    answer = b"x" * 11_000_000
    with (
        RawUpstream(lambda seen: Reply(200, (("Content-Type", "text/plain"),), answer)) as up,
        foreground(tmp_path, "--upstream", up.url) as gw,
    ):
        got = _request(gw.url, "POST", "/v1/messages", body, {"content-type": "application/json"})
        assert got.status == 200 and got.read() == answer
        raw = b"\x00" * 10_500_000  # and one it cannot parse
        got = _request(gw.url, "POST", "/v1/chat/completions", raw)
        assert got.status == 200 and got.read() == answer
    assert up.seen[0].body == body and up.seen[1].body == raw


def _streaming(gates: list[threading.Event | None], break_after: int | None = None) -> Reply:
    return Reply(200, (("Content-Type", "text/event-stream"),), chunks=SSE, gates=gates,
                 break_after=break_after)  # fmt: skip


def test_a_stream_is_relayed_chunk_by_chunk(tmp_path: Path) -> None:
    """The second event does not exist until the client got the first through the gateway: a
    buffering gateway would hang here (the socket timeout is the hang guard)."""
    second, third = threading.Event(), threading.Event()
    reply = _streaming([None, second, third])
    with RawUpstream(lambda seen: reply) as up, foreground(tmp_path, "--upstream", up.url) as gw:
        got = _request(gw.url, "POST", "/v1/messages", _messages(stream=True))
        assert got.status == 200 and got.getheader("content-type") == "text/event-stream"
        assert got.readline() == b"event: message_start\n"
        second.set()
        assert got.readline() == b'data: {"n": 1}\n'
        got.readline()
        assert got.readline() == b"event: ping\n"
        third.set()
        assert got.read() == b'data: {"n": 2}\n\n' + SSE[2]


def test_an_upstream_that_dies_mid_stream_is_a_connection_error(tmp_path: Path) -> None:
    reply = _streaming([None, None, None], break_after=1)
    with RawUpstream(lambda seen: reply) as up, foreground(tmp_path, "--upstream", up.url) as gw:
        got = _request(gw.url, "POST", "/v1/messages", _messages(stream=True))
        assert got.status == 200
        with pytest.raises((http.client.IncompleteRead, ConnectionError)):
            got.read()


def test_killing_the_gateway_mid_stream_is_a_connection_error(tmp_path: Path) -> None:
    rest = threading.Event()
    reply = _streaming([None, rest, None])
    with RawUpstream(lambda seen: reply) as up, foreground(tmp_path, "--upstream", up.url) as gw:
        got = _request(gw.url, "POST", "/v1/messages", _messages(stream=True))
        assert got.readline() == b"event: message_start\n"
        gw.proc.kill()
        gw.proc.wait(60)
        rest.set()
        with pytest.raises((http.client.IncompleteRead, ConnectionError)):
            got.read()


def test_an_unreachable_upstream_is_a_clear_502(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with foreground(tmp_path, "--upstream", dead) as gw:
        got = _request(gw.url, "POST", "/v1/messages", _messages(), {"x-api-key": KEY})
        assert got.status == 502
        error = json.loads(got.read())
        assert error["type"] == "error" and error["error"]["type"] == "api_error"
        assert "unreachable" in error["error"]["message"] and dead[7:] in error["error"]["message"]
        chat = _request(gw.url, "POST", "/v1/chat/completions", b"{}")
        assert chat.status == 502 and "unreachable" in json.loads(chat.read())["error"]["message"]


def _other_address() -> str | None:
    """An address of this machine that is not loopback (no packet is sent), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_it_binds_loopback_only_unless_told(tmp_path: Path) -> None:
    with RawUpstream() as up, foreground(tmp_path, "--upstream", up.url) as gw:
        assert gw.url.startswith("http://127.0.0.1:")
        other = _other_address()
        if other is not None:
            with pytest.raises(OSError):
                socket.create_connection((other, gw.port), timeout=10).close()
    refused = subprocess.run(
        [sys.executable, "-m", "filecache", "gateway", "--host", "0.0.0.0", "--port", "0"],
        env=base_env(tmp_path / "home"), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2 and "--token" in refused.stderr and not refused.stdout


def test_beyond_loopback_every_request_needs_the_token(tmp_path: Path) -> None:
    token = "gw-token-51b0c2"
    with (
        RawUpstream() as up,
        foreground(tmp_path, "--host", "0.0.0.0", "--token", token, "--upstream", up.url) as gw,
    ):
        url = f"http://127.0.0.1:{gw.port}"
        for path in ("/v1/messages", "/v1/models", "/_filecache/health", f"/t/wrong{token}/v1"):
            got = _request(url, "POST", path, _messages())
            assert got.status == 401, path
            got.read()
        assert not up.seen
        by_header = _request(url, "POST", "/v1/messages", _messages(), {"x-filecache-token": token})
        assert by_header.status == 200
        by_header.read()
        by_path = _request(url, "POST", f"/t/{token}/v1/messages", _messages())
        assert by_path.status == 200
        by_path.read()
    assert [s.path for s in up.seen] == ["/v1/messages", "/v1/messages"]
    assert all("x-filecache-token" not in s.headers for s in up.seen)
    assert token.encode() not in log_and_store_bytes(gw.log)


def test_no_key_and_no_denied_file_reaches_the_log_or_the_store(tmp_path: Path) -> None:
    secret = "STRIPE_KEY=sk_live_GATEWAY_5f3a9c1e7d2b"
    env_read = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "read .env"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_e1", "name": "Read",
                 "input": {"file_path": str(tmp_path / ".env")}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_e1",
                 "content": f"     1\u2192{secret}\n"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_e2", "name": "Read",
                 "input": {"file_path": str(tmp_path / ".env")}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_e2",
                 "content": f"     1\u2192{secret}\n"}]},
        ],
    }  # fmt: skip
    store = tmp_path / "gw-store" / "gateway.db"
    store.parent.mkdir()
    with (
        RawUpstream() as up,
        foreground(tmp_path, "--upstream", up.url, "--store", str(store)) as gw,
    ):
        headers = {"x-api-key": KEY, "authorization": f"Bearer {KEY}"}
        for _ in range(2):
            got = _request(gw.url, "POST", "/v1/messages", json.dumps(env_read).encode(), headers)
            assert got.status == 200
            got.read()
    assert len(up.seen) == 2 and all(s.headers["x-api-key"] == KEY for s in up.seen)
    held = log_and_store_bytes(gw.log, store.parent)
    assert KEY.encode() not in held
    assert secret.encode() not in held and b"sk_live_GATEWAY" not in held


def _raw(url: str, data: bytes) -> bytes:
    """Send ``data`` as it is (no HTTP client would write it) and read the answer to its end."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(data)
        out = b""
        while chunk := conn.recv(65536):
            out += chunk
    return out


def test_a_malformed_request_leaves_no_key_and_no_token_in_the_log(tmp_path: Path) -> None:
    """aiohttp's parser logs the line it refuses (a header with a control character, a path with
    a byte URLs may not hold), and that line holds what the client sent: a key, the token."""
    token = "gw-token-7ac41e"
    key = KEY.encode()
    malformed = [
        b"POST /v1/messages HTTP/1.1\r\nHost: a\r\nx-api-key: " + key + b"\x01\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        b"POST /t/" + token.encode() + b"/v1/messages?k=\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
        b"POST /v1/messages HTTP/1.1\r\nHost: a\r\nauthorization: Bearer " + key + b"\r\n"
        b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
    ]
    with (
        RawUpstream() as up,
        foreground(tmp_path, "--token", token, "--upstream", up.url) as gw,
    ):
        for data in malformed:
            assert _raw(gw.url, data).startswith(b"HTTP/1.0 400 "), data
        good = _request(gw.url, "POST", f"/t/{token}/v1/messages", _messages())
        assert good.status == 200  # the gateway still serves
        good.read()
    assert len(up.seen) == 1
    logged = log_and_store_bytes(gw.log)
    assert key not in logged and token.encode() not in logged and b"sk-ant" not in logged


def test_an_upstream_url_with_a_password_is_named_by_its_host_only(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = f"http://proxyuser:pw-5e1d9b@127.0.0.1:{port}"
    with foreground(tmp_path, "--upstream", dead) as gw:
        got = _request(gw.url, "POST", "/v1/messages", _messages())
        assert got.status == 502
        message = json.loads(got.read())["error"]["message"]
    assert f"the upstream 127.0.0.1:{port} is unreachable" in message
    assert b"pw-5e1d9b" not in log_and_store_bytes(gw.log) and "proxyuser" not in message
