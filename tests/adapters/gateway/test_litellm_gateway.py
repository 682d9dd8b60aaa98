"""filecache's callback inside a real LiteLLM proxy (``filecache.adapters.litellm_gateway``).

Two proxy replicas (``litellm --config``, two gunicorn workers each) share one PostgreSQL store
and forward to a scripted Anthropic upstream on 127.0.0.1 (``anthropic_server``). Requests are
sent to them by hand (``/v1/messages``, streamed and not, alternating replicas;
``/chat/completions``; ``/v1/responses``) and by the real Claude Code (``ANTHROPIC_BASE_URL`` at
a replica, as Claude Code's LLM-gateway docs say). Every assertion reads what the upstream received
(``litellm_checks``): pairing intact, no reference to a result the request lacks, an unchanged
re-read as a FileRef, a changed file as a diff that applies, each result's bytes the same in
every request whichever replica rewrote it; and no API key in the store or the proxies' logs.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import (
    Block,
    Script,
    ScriptedModel,
    result_text,
    text,
    tool_results,
    tool_use,
)
from litellm_checks import apply_diff, dangling, numbered_lines, pairing, references
from litellm_proxy import MASTER_KEY, UPSTREAM_KEY, LiteLLMProxy, config_text, need_proxy

need_proxy()

pytestmark = [pytest.mark.pg, pytest.mark.xdist_group("litellm")]

CLAUDE = os.environ.get("FILECACHE_TEST_CLAUDE", "")  # read before conftest clears FILECACHE_*


def lines(tag: str, n: int = 60) -> list[str]:
    return [f"{tag} line {i}: the quick brown fox jumps over the lazy dog" for i in range(1, n + 1)]


class Switch:
    """The upstream's responder, set per test (the upstream and the proxies live per module)."""

    def __init__(self) -> None:
        self.responder: Any = lambda body: [text("ok")]

    def __call__(self, body: dict[str, Any]) -> list[Block]:
        blocks: list[Block] = self.responder(body)
        return blocks


@pytest.fixture(scope="module")
def store(pg_server: str) -> Iterator[str]:
    """A database of the module's own: the replicas' shared gateway store."""
    import psycopg

    name = "fc_litellm_" + secrets.token_hex(4)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield pg_server.rpartition("/")[0] + "/" + name
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def switch() -> Switch:
    return Switch()


@pytest.fixture(scope="module")
def upstream(switch: Switch) -> Iterator[ScriptedModel]:
    with ScriptedModel(switch) as model:
        yield model


@pytest.fixture(scope="module")
def replicas(
    tmp_path_factory: pytest.TempPathFactory, store: str, upstream: ScriptedModel
) -> Iterator[tuple[LiteLLMProxy, LiteLLMProxy]]:
    base = tmp_path_factory.mktemp("litellm")
    config = config_text(upstream.base_url)
    env = {"FILECACHE_GATEWAY_STORE": store}
    with LiteLLMProxy(base / "a", config, env) as a, LiteLLMProxy(base / "b", config, env) as b:
        yield a, b


def post(proxy: LiteLLMProxy, path: str, body: dict[str, Any], bearer: bool = False) -> bytes:
    auth = {"Authorization": f"Bearer {MASTER_KEY}"} if bearer else {"x-api-key": MASTER_KEY}
    request = urllib.request.Request(
        proxy.base_url + path, data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json", "anthropic-version": "2023-06-01", **auth},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            data: bytes = response.read()
            return data
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{path}: HTTP {exc.code}: {exc.read()[:2000]!r}") from None


def claude_read(file_lines: list[str], start: int = 1) -> str:
    """A Read result as Claude Code 2.1 shows it (``N<TAB>line``)."""
    return "\n".join(f"{n}\t{t}" for n, t in enumerate(file_lines, start))


def test_v1_messages_across_two_replicas(
    replicas: tuple[LiteLLMProxy, LiteLLMProxy], upstream: ScriptedModel
) -> None:
    session = "user_7f_account_3c_session_" + secrets.token_hex(8)
    before = lines("a.py")
    after = [t.replace("a.py line 7:", "a.py line seven:") for t in before]
    turns = [
        (tool_use("Read", {"file_path": "/p/a.py"}, "toolu_a1"), claude_read(before)),
        (tool_use("Bash", {"command": "cat a.py"}, "toolu_c1"), "\n".join(before) + "\n"),
        (tool_use("Edit", {"file_path": "/p/a.py", "old_string": "a.py line 7:",
                           "new_string": "a.py line seven:"}, "toolu_e1"),
         "The file /p/a.py has been updated successfully."),
        (tool_use("Read", {"file_path": "/p/a.py"}, "toolu_a2"), claude_read(after)),
        (tool_use("Read", {"file_path": "/p/a.py", "offset": 20, "limit": 10}, "toolu_a3"),
         claude_read(after[19:29], 20)),
    ]  # fmt: skip
    system = [
        {"type": "text", "text": "Working directory: /p", "cache_control": {"type": "ephemeral"}}
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "tidy a.py"}]
    for k, (call, result) in enumerate(turns):
        messages.append({"role": "assistant", "content": [call]})
        block = {"type": "tool_result", "tool_use_id": call["id"], "content": result}
        messages.append({"role": "user", "content": [block]})
        body = {"model": "claude-sonnet-4-5", "max_tokens": 512, "system": system,
                "metadata": {"user_id": session}, "messages": messages,
                "stream": k % 2 == 1}  # fmt: skip
        answer = post(replicas[k % 2], "/v1/messages", body)
        assert (b"message_stop" if k % 2 else b'"stop_reason"') in answer

    got = [b for b in upstream.requests if b.get("metadata", {}).get("user_id") == session]
    assert len(got) == len(turns)
    sent_as: dict[str, str] = {}
    for body in got:
        assert body["system"] == system and body["model"] == "claude-sonnet-4-5"
        assert pairing(body) == [] and dangling(body) == []
        for call, block in tool_results(body).items():  # the same bytes whichever replica
            assert sent_as.setdefault(call, result_text(block)) == result_text(block), call
    last = got[-1]
    refs = {ref.call: ref for ref in references(last)}
    assert refs["toolu_c1"].base == "toolu_a1" and not refs["toolu_c1"].changed
    diff = refs["toolu_a2"]
    assert diff.changed and diff.base == "toolu_a1"
    base = numbered_lines(result_text(tool_results(last)["toolu_a1"]))
    assert apply_diff(diff, base) == after


def test_chat_completions_through_the_proxy(
    replicas: tuple[LiteLLMProxy, LiteLLMProxy], upstream: ScriptedModel
) -> None:
    content = "".join(f"{t}\n" for t in lines("b.py"))
    key = secrets.token_hex(8)

    def call(n: int) -> dict[str, Any]:
        arguments = json.dumps({"command": "cat b.py"})
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{key}_{n}", "type": "function",
             "function": {"name": "bash", "arguments": arguments}}]}  # fmt: skip

    messages = [
        {"role": "system", "content": "Working directory: /p"},
        {"role": "user", "content": f"look at b.py ({key})"},
        call(1), {"role": "tool", "tool_call_id": f"call_{key}_1", "content": content},
        call(2), {"role": "tool", "tool_call_id": f"call_{key}_2", "content": content},
    ]  # fmt: skip
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}}}}]  # fmt: skip
    body = {"model": "claude-sonnet-4-5", "messages": messages, "tools": tools}
    answer = json.loads(post(replicas[0], "/chat/completions", body, bearer=True))
    assert answer["choices"][0]["message"]["content"] == "ok"

    got = [b for b in upstream.requests if f"call_{key}_1" in tool_results(b)]
    assert len(got) == 1 and pairing(got[0]) == [] and dangling(got[0]) == []
    results = tool_results(got[0])
    assert result_text(results[f"call_{key}_1"]).rstrip("\n") == content.rstrip("\n")
    (ref,) = references(got[0])
    assert (ref.call, ref.base, ref.changed) == (f"call_{key}_2", f"call_{key}_1", False)


def test_responses_through_the_proxy(
    replicas: tuple[LiteLLMProxy, LiteLLMProxy], upstream: ScriptedModel
) -> None:
    content = "".join(f"{t}\n" for t in lines("c.py"))
    key = secrets.token_hex(8)
    items: list[dict[str, Any]] = [{"role": "user", "content": f"look at c.py ({key})"}]
    for n in (1, 2):
        items.append({"type": "function_call", "call_id": f"call_{key}_{n}", "name": "shell",
                      "arguments": json.dumps({"command": ["cat", "/p/c.py"]})})  # fmt: skip
        items.append({"type": "function_call_output", "call_id": f"call_{key}_{n}",
                      "output": content})  # fmt: skip
    tools = [{"type": "function", "name": "shell", "parameters": {
        "type": "object", "properties": {"command": {"type": "array"}}}}]  # fmt: skip
    body = {"model": "claude-sonnet-4-5", "instructions": "Working directory: /p",
            "input": items, "tools": tools}  # fmt: skip
    answer = json.loads(post(replicas[1], "/v1/responses", body, bearer=True))
    assert answer["status"] == "completed"

    got = [b for b in upstream.requests if f"call_{key}_1" in tool_results(b)]
    assert len(got) == 1 and pairing(got[0]) == [] and dangling(got[0]) == []
    (ref,) = references(got[0])
    assert (ref.call, ref.base, ref.changed) == (f"call_{key}_2", f"call_{key}_1", False)


@pytest.mark.hosts
def test_claude_code_through_the_proxy(
    replicas: tuple[LiteLLMProxy, LiteLLMProxy],
    upstream: ScriptedModel,
    switch: Switch,
    tmp_path: Path,
) -> None:
    claude = _claude_binary()
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    for name in ("a.py", "b.py"):
        (project / name).write_text("".join(f"{t}\n" for t in lines(name)))
    a, b = str(project / "a.py"), str(project / "b.py")
    script = Script([
        [tool_use("Read", {"file_path": a}, "toolu_a1"),
         tool_use("Read", {"file_path": b}, "toolu_b1")],
        [tool_use("Bash", {"command": "cat a.py", "description": "Show a.py"}, "toolu_c1")],
        [tool_use("Edit", {"file_path": a, "old_string": "a.py line 7:",
                           "new_string": "a.py line seven:"}, "toolu_e1")],
        [tool_use("Read", {"file_path": a}, "toolu_a2")],
        [tool_use("Read", {"file_path": b, "offset": 10, "limit": 20}, "toolu_b2")],
        [tool_use("Bash", {"command": "cat b.py", "description": "Show b.py"}, "toolu_c2")],
        [text("done")],
    ])  # fmt: skip
    switch.responder = script
    seen_before = len(upstream.requests)
    env = {
        "PATH": f"{Path(claude).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "ANTHROPIC_BASE_URL": replicas[0].base_url,  # Claude Code's LLM-gateway setting
        "ANTHROPIC_AUTH_TOKEN": MASTER_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
    }
    try:
        done = subprocess.run(
            [claude, "-p", "tidy the two files", "--output-format", "json",
             "--allowedTools", "Read,Edit,Write,Bash"],
            cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        switch.responder = lambda body: [text("ok")]
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    out = json.loads(done.stdout)
    assert not out.get("is_error") and out.get("result") == "done", out
    assert script.answered == 7

    got = [b for b in upstream.requests[seen_before:] if b.get("tools")]
    assert len(got) >= 7
    sent_as: dict[str, str] = {}
    for body in got:
        assert pairing(body) == [] and dangling(body) == []
        for call, block in tool_results(body).items():
            assert sent_as.setdefault(call, result_text(block)) == result_text(block), call
    last = got[-1]
    refs = {ref.call: ref for ref in references(last)}
    assert refs["toolu_c1"].base == "toolu_a1" and not refs["toolu_c1"].changed, refs
    diff = refs["toolu_a2"]
    assert diff.changed and diff.base == "toolu_a1", refs
    base = numbered_lines(result_text(tool_results(last)["toolu_a1"]))
    now = (project / "a.py").read_text().splitlines()
    assert apply_diff(diff, base) == now + [""]  # Claude Code numbers the empty last line too
    assert (refs["toolu_b2"].base, refs["toolu_b2"].changed) == ("toolu_b1", False), refs
    # cat b.py after the ranged re-read: the transform leaves it as content for now (a later
    # full re-read after a ranged one that became a FileRef); a reference would be checked above.
    assert "toolu_c2" not in refs or refs["toolu_c2"].base == "toolu_b1"


def _tally(store: str, session_hex: str) -> Any:
    """The stored tally of the conversation whose Claude Code session id is ``session_hex``."""
    from filecache.figures import load_tally
    from filecache.store.opening import open_store

    opened = open_store(Path("."), store)
    try:
        ids = [s.session_id for s in opened.sessions() if f"session:{session_hex}:" in s.session_id]
        return load_tally(opened, ids[0]) if ids else None
    finally:
        opened.close()


def test_only_requests_that_succeeded_upstream_are_counted(
    replicas: tuple[LiteLLMProxy, LiteLLMProxy], store: str, switch: Switch
) -> None:
    """A request the upstream refuses (a bad request, a refused key) is rewritten but never
    counted for ``filecache stats`` (LiteLLM's failure hook); one it answered is (its success
    hook), streamed or not, whichever replica took it."""
    from anthropic_server import Refuse

    session_hex = secrets.token_hex(8)
    refusals = {"toolu_r2": Refuse(400, "invalid_request_error"),
                "toolu_r3": Refuse(401, "authentication_error")}  # fmt: skip

    def respond(body: dict[str, Any]) -> list[Block]:
        last = list(tool_results(body))[-1:]
        if last and last[0] in refusals:
            raise refusals[last[0]]
        return [text("ok")]

    switch.responder = respond
    content = claude_read(lines("r.py"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read r.py again and again"}]
    statuses = []
    try:
        for n in range(1, 6):
            messages.append({"role": "assistant", "content": [
                tool_use("Read", {"file_path": "/p/r.py"}, f"toolu_r{n}")]})  # fmt: skip
            result = {"type": "tool_result", "tool_use_id": f"toolu_r{n}", "content": content}
            messages.append({"role": "user", "content": [result]})
            body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": n % 2 == 0,
                    "metadata": {"user_id": f"user_1_account_2_session_{session_hex}"},
                    "messages": messages}  # fmt: skip
            try:
                post(replicas[n % 2], "/v1/messages", body)
                statuses.append(200)
            except AssertionError as exc:  # post's message: "…: HTTP <code>: …"
                statuses.append(int(str(exc).split("HTTP ")[1].split(":")[0]))
    finally:
        switch.responder = lambda body: [text("ok")]
    assert statuses[0] == statuses[3] == statuses[4] == 200 and 200 not in statuses[1:3]
    for _attempt in range(600):  # the last success counted: every word on the others is in
        tally = _tally(store, session_hex)
        if tally is not None and tally.filecache.requests >= 3:
            break
        time.sleep(0.1)
    assert tally is not None and tally.filecache.requests == 3, tally
    assert tally.filecache.tokens < tally.baseline.tokens  # the re-reads went as FileRefs


def test_no_key_reaches_the_store_or_a_log(
    replicas: tuple[LiteLLMProxy, LiteLLMProxy], store: str, upstream: ScriptedModel
) -> None:
    import psycopg

    session = "user_1_account_2_session_" + secrets.token_hex(8)
    before = claude_read(lines("k.py"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read k.py twice"}]
    for n in (1, 2):
        messages.append({"role": "assistant", "content": [
            tool_use("Read", {"file_path": "/p/k.py"}, f"toolu_k{n}")]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_k{n}", "content": before}]})  # fmt: skip
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "metadata": {"user_id": session},
            "messages": messages}  # fmt: skip
    for proxy in replicas:
        post(proxy, "/v1/messages", body)
    stored: list[str] = []
    with psycopg.connect(store) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
        assert tables, "the callback never opened the shared store"
        for (table,) in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                stored += [bytes(v).decode("latin-1") if isinstance(v, bytes | memoryview)
                           else str(v) for v in row]  # fmt: skip
    everything = "\n".join(stored) + "\n".join(proxy.text() for proxy in replicas)
    for key in (MASTER_KEY, UPSTREAM_KEY, MASTER_KEY[-12:], UPSTREAM_KEY[-12:]):
        assert key not in everything
    for body in upstream.requests:
        assert MASTER_KEY not in json.dumps(body)


def _claude_binary() -> str:
    if not CLAUDE or not os.access(CLAUDE, os.X_OK):
        message = f"FILECACHE_TEST_CLAUDE={CLAUDE!r} is not an executable claude binary"
        if os.environ.get("CI"):
            pytest.fail(f"under CI the Claude Code binary must be installed: {message}")
        pytest.skip(message)
    return CLAUDE
