"""Claude Code's ``http`` hooks to ``hook_http``'s server: who may drive it, and the real binary.

The server listens on 127.0.0.1, open to every local user and every web page: it answers only a
peer whose socket is this user's (``/proc/net/tcp``), with ``Host: 127.0.0.1:PORT``, no
``Origin`` and the ``X-Filecache-Hook`` header. The end-to-end tests run the pinned Claude Code
(``FILECACHE_TEST_CLAUDE``) with an http PostToolUse hook and read what the model was sent.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from anthropic_server import Script, ScriptedModel, result_text, text, tool_results, tool_use
from filecache.adapters.hosts.hook_http import HEADER, HookHTTPServer, _Handler, http_hook

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="Linux only")

NOTES = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(60))


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HookHTTPServer]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    found = HookHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=found.serve_forever, daemon=True)
    thread.start()
    yield found
    found.shutdown()
    found.server_close()


def post(port: int, headers: dict[str, str], body: bytes, path: str = "/hook/claude-code") -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def prompt_event(tmp_path: Path) -> bytes:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    return json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s1",
                       "cwd": str(project), "transcript_path": str(tmp_path / "t.jsonl"),
                       "prompt": "x"}).encode()  # fmt: skip


def test_only_this_users_hook_requests_are_answered(server: HookHTTPServer, tmp_path: Path) -> None:
    port = server.server_address[1]
    body = prompt_event(tmp_path)
    good = {HEADER: "claude-code", "Host": f"127.0.0.1:{port}"}
    assert post(port, good, body) == 200
    assert post(port, {**good, "Host": f"evil.example:{port}"}, body) == 403  # DNS rebinding
    assert post(port, {**good, "Origin": "https://evil.example"}, body) == 403  # a web page
    assert post(port, {"Host": f"127.0.0.1:{port}"}, body) == 403  # no custom header
    assert post(port, {**good, HEADER: "codex"}, body) == 403  # not the path's host
    assert post(port, {**good, HEADER: "nope"}, body, "/hook/nope") == 403


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_another_local_user_is_refused(server: HookHTTPServer, tmp_path: Path) -> None:
    port = server.server_address[1]
    client = (
        "import http.client, sys\n"
        f"c = http.client.HTTPConnection('127.0.0.1', {port}, timeout=30)\n"
        f"c.request('POST', '/hook/claude-code', body=b'{{}}', headers={{'{HEADER}': "
        f"'claude-code', 'Host': '127.0.0.1:{port}'}})\n"
        "print(c.getresponse().status)\n"
    )
    python = shutil.which("python3", path="/usr/bin:/bin")  # the venv may be root's only
    if python is None:
        pytest.skip("no system python3 for the other user")
    done = subprocess.run([python, "-I", "-c", client], user=65534, capture_output=True,
                          text=True, timeout=60, cwd="/")  # fmt: skip
    assert done.stdout.strip() == "403", done.stderr


# -- the real binary --------------------------------------------------------------------------

CLAUDE = os.environ.get("FILECACHE_TEST_CLAUDE", "")


def run_claude(tmp_path: Path, port: int, turns: list[list[object]]) -> dict[str, str]:
    """``claude -p`` with an http PostToolUse hook to ``port``: the tool results sent."""
    if not CLAUDE or not os.access(CLAUDE, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail("under CI the Claude Code binary must be installed", pytrace=False)
        pytest.skip("FILECACHE_TEST_CLAUDE is not an executable claude binary")
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    project.mkdir(exist_ok=True)
    settings = {"hooks": {"PostToolUse": [{"matcher": "Read|Bash", "hooks": [http_hook(port)]}]}}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "ANTHROPIC_API_KEY": "sk-test", "XDG_CACHE_HOME": str(home / ".cache"),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_TELEMETRY": "1"}  # fmt: skip
    with ScriptedModel(Script([*turns, [text("done")]])) as model:
        env["ANTHROPIC_BASE_URL"] = model.base_url
        done = subprocess.run(
            [CLAUDE, "-p", "read notes", "--allowedTools", "Read,Bash", "--output-format", "json"],
            cwd=project, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        seen: dict[str, str] = {}
        for body in model.main_requests():
            for call, block in tool_results(body).items():
                seen[call] = result_text(block)
    return seen


@pytest.mark.hosts
def test_an_http_hook_answers_inside_claude_code_and_a_dead_server_leaves_it_alone(
    server: HookHTTPServer, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text(NOTES)
    notes = str(project / "notes.txt")
    port = server.server_address[1]
    first = [tool_use("Read", {"file_path": notes}, "toolu_h1")]
    seen = run_claude(tmp_path, port, [first, [tool_use("Read", {"file_path": notes}, "toolu_h2")]])
    assert "line 59: the quick" in seen["toolu_h1"]
    assert "[filecache] notes.txt unchanged since your result toolu_h1" in seen["toolu_h2"]
    assert "line 59" not in seen["toolu_h2"]
    server.shutdown()
    server.server_close()  # nothing listens: a failed http hook does not block Claude Code
    again = run_claude(tmp_path / "again", port,
                       [[tool_use("Read", {"file_path": notes}, "toolu_h3")],
                        [tool_use("Read", {"file_path": notes}, "toolu_h4")]])  # fmt: skip
    assert "line 59: the quick" in again["toolu_h4"] and "[filecache]" not in again["toolu_h4"]
