"""Claude Code through ``filecache run claude``: the real binary, the real gateway, a scripted
Anthropic API on 127.0.0.1 as the upstream Claude Code would have used (its
``ANTHROPIC_BASE_URL``).

Every assertion about what the model saw reads the requests that upstream received
(``gateway_checks``), never filecache's records: an unchanged re-read arrives as a FileRef naming
a result of the same request that shows those lines; a file changed outside arrives as a diff
that applies to the earlier text; at a small window superseded results are pruned and stay the
same bytes; calls and results stay paired; no reference dangles in any request; the stream
arrives whole (Claude Code finishes the task). The API key and a ``.env`` the model read never
reach the gateway's log or store.

The binary: ``FILECACHE_TEST_CLAUDE`` (the version ``.ci/run`` pins); skipped without it,
failed under CI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import Script, ScriptedModel, is_main_loop, text, tool_use
from gateway_checks import (
    apply_diff,
    check_no_dangling,
    check_pairing,
    check_sticky,
    diff_body,
    dump,
    references,
    results,
    shown_lines,
)
from gateway_run import log_and_store_bytes, stop_and_wait, user_env
from raw_upstream import RawUpstream, Reply, Seen

pytestmark = pytest.mark.hosts
pytest.importorskip("aiohttp", reason="the gateway extra: pip install -e '.[gateway]'")

CLAUDE = os.environ.get("FILECACHE_TEST_CLAUDE", "")
if not CLAUDE or not os.access(CLAUDE, os.X_OK):
    message = f"no Claude Code binary (FILECACHE_TEST_CLAUDE={CLAUDE!r}); run .ci/run"
    if os.environ.get("CI"):
        pytest.fail(f"under CI the Claude Code binary must be installed: {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)

KEY = "sk-ant-api03-GATEWAYTEST-4e1f0a9b8c7d"
SECRET = "STRIPE_KEY=sk_live_gateway_e2e_5f3a9c1e7d2b"
TOOLS = "Read,Edit,Write,Bash"


def lines(tag: str, n: int = 120) -> str:
    return "".join(
        f"{tag} line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, n + 1)
    )


@dataclass
class World:
    project: Path
    env: dict[str, str]
    store: Path

    def path(self, name: str) -> str:
        return str(self.project / name)

    def run(self, model: ScriptedModel, *args: str, window: int | None = None) -> dict[str, Any]:
        env = {**self.env, "ANTHROPIC_BASE_URL": model.base_url}
        head = [sys.executable, "-m", "filecache", "run"]
        head += ["--window", str(window)] if window else []
        done = subprocess.run(
            [*head, "claude", *args, "--output-format", "json"], cwd=self.project, env=env,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
        assert "filecache:" not in done.stderr, done.stderr  # it went through the gateway
        out: dict[str, Any] = json.loads(done.stdout)
        assert not out.get("is_error"), out
        return out


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    project = tmp_path / "project"
    project.mkdir()
    with user_env(tmp_path) as env:
        store = tmp_path / "gateway-store" / "gateway.db"
        store.parent.mkdir(mode=0o700)
        env |= {
            "PATH": f"{Path(CLAUDE).parent}{os.pathsep}{env['PATH']}",
            "ANTHROPIC_API_KEY": KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "FILECACHE_GATEWAY_STORE": str(store),
        }
        yield World(project, env, store)


def _first_carrying(bodies: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return next(body for body in bodies if call_id in results(body))


def _checked(model: ScriptedModel, script: Script, out: dict[str, Any]) -> list[dict[str, Any]]:
    """The main loop's requests, after the checks every request must pass."""
    assert out["result"] == "done" and script.answered == len(script.turns)
    bodies = [body for body in model.requests if is_main_loop(body)]
    if os.environ.get("GW_DEBUG"):
        Path(os.environ["GW_DEBUG"]).write_text(json.dumps(bodies))
    assert bodies and all(body.get("stream") for body in bodies)  # streamed, and parsed whole
    for body in bodies:  # calls and results paired, no reference that dangles
        check_pairing(body)
        check_no_dangling(body)
    return bodies


def test_rereads_are_filerefs_and_changes_diffs(world: World) -> None:
    a_text, b_text = lines("a.py"), lines("b.py")
    (world.project / "a.py").write_text(a_text)
    (world.project / "b.py").write_text(b_text)
    (world.project / "d.py").write_text(lines("d.py"))
    (world.project / ".env").write_text(SECRET + "\n")
    a, b, d = world.path("a.py"), world.path("b.py"), world.path("d.py")
    a_new = a_text.replace("a.py line 40: the", "a.py line 40: a changed")

    def change_a(body: dict[str, Any]) -> list[dict[str, Any]]:
        (world.project / "a.py").write_text(a_new)  # the user edits a.py between two turns
        return [tool_use("Read", {"file_path": a}, "toolu_a3")]

    script = Script([
        [tool_use("Read", {"file_path": a}, "toolu_a1")],
        [tool_use("Read", {"file_path": b}, "toolu_b1")],
        [tool_use("Read", {"file_path": b, "offset": 10, "limit": 20}, "toolu_b2")],
        [tool_use("Read", {"file_path": d}, "toolu_d1")],
        [tool_use("Bash", {"command": "cat d.py", "description": "Show d.py"}, "toolu_d2")],
        change_a,
        [tool_use("Read", {"file_path": world.path(".env")}, "toolu_s1")],
        [tool_use("Bash", {"command": "cat .env", "description": "Show env"}, "toolu_s2")],
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        out = world.run(model, "-p", "work on the files", "--allowedTools", TOOLS)
    bodies = _checked(model, script, out)

    # An unchanged ranged re-read: a FileRef to a result of the same request that shows them.
    body = _first_carrying(bodies, "toolu_b2")
    ((path, kind, named, span),) = references(results(body)["toolu_b2"])
    assert kind == "unchanged" and path.endswith("b.py"), results(body)["toolu_b2"]
    shown: dict[int, str] = {}
    for base in named:
        shown |= shown_lines(results(body)[base])
    assert all(shown[n] == b_text.splitlines()[n - 1] for n in range(10, 30)), span
    # Bash cat of a file read before: a FileRef too.
    body = _first_carrying(bodies, "toolu_d2")
    ((_, kind, named, _),) = references(results(body)["toolu_d2"])
    assert kind == "unchanged" and named == ["toolu_d1"], results(body)["toolu_d2"]
    assert "d.py line 30:" not in results(body)["toolu_d2"]

    # Changed outside: a diff against the earlier text that gives the new text.
    body = _first_carrying(bodies, "toolu_a3")
    answer = results(body)["toolu_a3"]
    ((_, kind, (base,), _),) = references(answer)
    assert kind.startswith("changed"), answer
    old = shown_lines(results(body)[base])
    old_lines = [old[n] for n in sorted(old)]
    wanted = a_text.splitlines()
    assert old_lines[: len(wanted)] == wanted  # the base shows the whole earlier file
    new_lines = apply_diff(old_lines, diff_body(answer))
    assert new_lines[: len(wanted)] == a_new.splitlines()
    assert "a.py line 3:" not in answer

    # No key and no denied file's content in anything the gateway wrote.
    assert any(SECRET in text for text in results(bodies[-1]).values())  # Claude Code's own
    held = log_and_store_bytes(world.store.parent, Path(world.env["XDG_CACHE_HOME"]))
    assert KEY.encode() not in held
    assert SECRET.encode() not in held and b"sk_live_gateway_e2e" not in held
    log = (Path(world.env["XDG_CACHE_HOME"]) / "filecache" / "gateway.log").read_text()
    assert "refs=" in log and "a.py" not in log  # counts only: no path, no text

    # What it saved: the conversation in `filecache stats`, once the gateway has exited (it
    # writes the counts still queued before it does).
    stop_and_wait(world.env)
    done = subprocess.run(
        [sys.executable, "-m", "filecache", "stats", "--json"], cwd=world.project,
        env=world.env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert KEY not in done.stdout
    report = json.loads(done.stdout)
    (main,) = report["sessions"]  # one row per conversation: Claude Code's side requests apart
    assert main["headline"]["requests"] >= len(bodies), done.stdout
    assert main["label"].startswith("gateway (Claude Code) conversation ")
    assert main["headline"]["prompt_tokens"]["saved"] > 0
    side = [b for b in model.requests if not any(results(b).values()) and b not in bodies]
    # Claude Code's title and topic requests (none with -p here) are summed on one line
    assert (report["side_requests"] is None) == (not side), done.stdout


def test_superseded_results_are_pruned_at_a_small_window(world: World) -> None:
    a_text, c_text = lines("a.py"), lines("c.py", 200)
    (world.project / "a.py").write_text(a_text)
    (world.project / "c.py").write_text(c_text)
    a, c = world.path("a.py"), world.path("c.py")

    def rewrite_c(body: dict[str, Any]) -> list[dict[str, Any]]:
        (world.project / "c.py").write_text(lines("C.PY REWRITTEN", 200))  # no smaller diff
        return [tool_use("Read", {"file_path": c}, "toolu_c2")]

    script = Script([
        [tool_use("Read", {"file_path": c}, "toolu_c1")],
        [tool_use("Read", {"file_path": a}, "toolu_a1")],
        rewrite_c,
        [tool_use("Bash", {"command": "seq 1 400", "description": "Count"}, "toolu_q1")],
        [tool_use("Read", {"file_path": a, "offset": 5, "limit": 10}, "toolu_a2")],
        [tool_use("Read", {"file_path": c, "offset": 1, "limit": 10}, "toolu_c3")],
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        out = world.run(model, "-p", "work on the files", "--allowedTools", TOOLS, window=2000)
    bodies = _checked(model, script, out)
    pruned = check_sticky(bodies)  # and the same bytes in every later request
    assert "toolu_c1" in pruned, dump(bodies)  # c.py's first read, superseded by toolu_c2
    assert len(pruned["toolu_c1"]) < len(c_text) // 4
    later = [body for body in bodies if "toolu_c1" in results(body)]
    assert sum(results(body)["toolu_c1"] == pruned["toolu_c1"] for body in later) >= 2


def test_the_host_runs_plain_when_the_gateway_cannot_start(world: World) -> None:
    runtime = Path(world.env["XDG_RUNTIME_DIR"]) / "filecache"
    runtime.mkdir(mode=0o755)  # a folder others may enter: refused, so no gateway
    runtime.chmod(0o755)
    with ScriptedModel(Script([[text("hello")]])) as model:
        env = {**world.env, "ANTHROPIC_BASE_URL": model.base_url}
        done = subprocess.run(
            [sys.executable, "-m", "filecache", "run", "claude", "-p", "hi", "--output-format",
             "json"], cwd=world.project, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0 and json.loads(done.stdout)["result"] == "hello"
    (note,) = done.stderr.strip().splitlines()
    assert note.startswith("filecache: the gateway is not available") and "plain claude" in note
    assert model.requests  # straight to the upstream it was given


def test_after_compact_no_reference_reaches_into_the_compacted_part(world: World) -> None:
    a = world.path("a.py")
    (world.project / "a.py").write_text(lines("a.py"))
    script = Script([
        [tool_use("Read", {"file_path": a}, "toolu_k1")],
        [tool_use("Read", {"file_path": a, "offset": 5, "limit": 10}, "toolu_k2")],
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        out = world.run(model, "-p", "read a.py", "--allowedTools", TOOLS)
        session = out["session_id"]
        assert references(results(model.main_requests()[-1])["toolu_k2"])  # a FileRef to k1
        world.run(model, "-p", "/compact", "--resume", session)
        script.turns += [
            [tool_use("Read", {"file_path": a, "offset": 5, "limit": 10}, "toolu_k3")],
            [text("done")],
        ]
        before = len(model.requests)
        world.run(model, "-p", "read a.py again", "--resume", session, "--allowedTools", TOOLS)
    after = [body for body in model.requests[before:] if is_main_loop(body)]
    assert after
    for body in after:
        check_pairing(body)
        check_no_dangling(body)
        assert "toolu_k1" not in results(body)  # compacted away
    third = results(after[-1])["toolu_k3"]
    assert not references(third) and "a.py line 9:" in third  # content again


def _event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def test_killing_the_gateway_mid_stream_is_an_error_claude_code_reports(world: World) -> None:
    """The answer stops after its first words: the gateway is killed (SIGKILL) before the rest
    comes. Claude Code reports a connection error; the first words never pass for an answer."""
    start = {"id": "msg_k", "type": "message", "role": "assistant", "model": "m", "content": [],
             "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": 10, "output_tokens": 1}}  # fmt: skip
    chunks = [
        _event("message_start", message=start),
        _event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        _event("content_block_delta", index=0, delta={"type": "text_delta", "text": "PARTIAL "}),
        _event("content_block_delta", index=0, delta={"type": "text_delta", "text": "rest"}),
        _event("content_block_stop", index=0),
        _event(
            "message_delta",
            delta={"stop_reason": "end_turn", "stop_sequence": None},
            usage={"output_tokens": 3},
        ),  # fmt: skip
        _event("message_stop"),
    ]
    rest, started = threading.Event(), threading.Event()
    sse = (("Content-Type", "text/event-stream"),)

    def reply(seen: Seen) -> Reply:
        if "count_tokens" in seen.path:
            return Reply(200, body=b'{"input_tokens": 5}')
        if json.loads(seen.body or b"{}").get("tools"):
            started.set()
            return Reply(200, sse, chunks=chunks, gates=[None, None, None, rest])
        return Reply(200, sse, chunks=chunks)  # side requests: whole

    with RawUpstream(reply) as upstream:
        env = {**world.env, "ANTHROPIC_BASE_URL": upstream.url, "CLAUDE_CODE_MAX_RETRIES": "0"}
        host = subprocess.Popen(
            [sys.executable, "-m", "filecache", "run", "claude", "-p", "hi", "--output-format",
             "json"], cwd=world.project, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert started.wait(240), "Claude Code never sent its request"
            status = subprocess.run(
                [sys.executable, "-m", "filecache", "gateway", "--status", "--json"], env=env,
                capture_output=True, text=True, timeout=60, check=True,
            )  # fmt: skip
            (gateway,) = json.loads(status.stdout)
            os.kill(gateway["pid"], signal.SIGKILL)
            rest.set()
            out, err = host.communicate(timeout=300)
        finally:
            rest.set()
            if host.poll() is None:
                host.kill()
                host.communicate()
    assert host.returncode != 0, (out[-2000:], err[-2000:])
    result = json.loads(out)
    assert result["is_error"] and "PARTIAL" not in result["result"], result["result"]
    assert "connect" in result["result"].lower() or "connection" in json.dumps(result).lower()
