"""Claude Code's ``http`` hooks to ``hook_http``'s server: who may drive it, and the real binary.

The server listens on 127.0.0.1, open to every local user and every web page: it answers only a
peer whose socket is this user's (``/proc/net/tcp``), with ``Host: 127.0.0.1:PORT``, no
``Origin`` and the ``X-Filecache-Hook`` header. The end-to-end tests run the pinned Claude Code
(``FILECACHE_TEST_CLAUDE``) with an http PostToolUse hook and read what the model was sent.
"""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import Script, ScriptedModel, result_text, text, tool_results, tool_use
from filecache.adapters.hosts.hook_http import (
    HEADER,
    HookHTTPServer,
    _Handler,
    http_hook,
    listening,
    status,
)
from hook_servers import private_runtime
from host_leftovers_kit import without_reminders

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


# -- as `filecache install claude-code --http` writes it, in the real binary --------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def need_claude() -> str:
    if CLAUDE and os.access(CLAUDE, os.X_OK):
        return CLAUDE
    if os.environ.get("CI"):
        pytest.fail("under CI the Claude Code binary must be installed", pytrace=False)
    pytest.skip("FILECACHE_TEST_CLAUDE is not an executable claude binary")


class Installed:
    """A user (HOME) with a project holding ``notes.txt``, filecache installed there with
    ``install claude-code`` (``--http-port PORT`` when ``port``), and a private hook socket
    folder (``env``, set by ``private_runtime``)."""

    def __init__(self, base: Path, port: int | None, env: dict[str, str]) -> None:
        self.base, self.home, self.project = base, base / "home", base / "project"
        (self.home / ".claude").mkdir(parents=True)
        self.project.mkdir()
        (self.project / "notes.txt").write_text(NOTES)
        self.notes = str(self.project / "notes.txt")
        env.update({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
                    "ANTHROPIC_API_KEY": "sk-test", "XDG_CACHE_HOME": str(self.home / ".cache"),
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                    "DISABLE_TELEMETRY": "1"})  # fmt: skip
        self.env = env
        if port is not None:
            done = subprocess.run(
                [sys.executable, "-m", "filecache", "install", "claude-code", "--http-port",
                 str(port)], cwd=self.project, env=env, capture_output=True, text=True,
                timeout=120,
            )  # fmt: skip
            assert done.returncode == 0 and "by http hooks" in done.stdout, done

    def claude(self, turns: list[Any]) -> list[dict[str, Any]]:
        """One ``claude -p`` session on ``turns``: the agent loop's requests."""
        with ScriptedModel(Script([*turns, [text("done")]])) as model:
            env = {**self.env, "ANTHROPIC_BASE_URL": model.base_url}
            done = subprocess.run(
                [need_claude(), "-p", "read the notes", "--allowedTools", "Read,Edit,Bash",
                 "--output-format", "json"],
                cwd=self.project, env=env, capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
            assert not json.loads(done.stdout).get("is_error"), done.stdout
            return model.main_requests()


def tool_use_ids(body: dict[str, Any]) -> set[str]:
    return {block["id"] for message in body.get("messages", [])
            if isinstance(message.get("content"), list)
            for block in message["content"] if block.get("type") == "tool_use"}  # fmt: skip


def wait_for_server(port: int) -> dict[str, object]:
    for _ in range(1200):
        found = status(port)
        if found is not None:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no http hook server on {port} after 60 s")


@pytest.mark.hosts
def test_installed_with_http_a_reread_is_a_fileref_and_a_killed_server_leaves_claude_alone(
    tmp_path: Path,
) -> None:
    need_claude()
    port = free_port()
    env: dict[str, str] = {}
    with private_runtime(env):
        user = Installed(tmp_path, port, env)
        # A first session: its SessionStart hook (a command hook) starts the http server.
        user.claude([])
        pid = wait_for_server(port)["pid"]
        assert isinstance(pid, int)

        def kill_the_server(body: dict[str, Any]) -> list[Any]:
            os.kill(pid, signal.SIGKILL)  # the server this test's session started
            while status(port) is not None or listening(port):
                time.sleep(0.05)
            return [tool_use("Read", {"file_path": user.notes}, "toolu_k3")]

        requests = user.claude([[tool_use("Read", {"file_path": user.notes}, "toolu_k1")],
                                [tool_use("Read", {"file_path": user.notes}, "toolu_k2")],
                                kill_the_server])  # fmt: skip
        seen = {call: result_text(block) for body in requests
                for call, block in tool_results(body).items()}  # fmt: skip
        assert "line 59: the quick" in seen["toolu_k1"]
        assert "[filecache] notes.txt unchanged since your result toolu_k1" in seen["toolu_k2"]
        assert "line 59" not in seen["toolu_k2"]
        (carrier,) = [body for body in requests if "toolu_k2" in tool_results(body)][:1]
        assert "toolu_k1" in tool_use_ids(carrier)  # the FileRef names a result the request has
        # The server is dead: the re-read is Claude Code's own content, served by nobody.
        assert "line 59: the quick" in seen["toolu_k3"] and "[filecache]" not in seen["toolu_k3"]
        plain = Installed(tmp_path / "plain", None, {})
        own = plain.claude([[tool_use("Read", {"file_path": plain.notes}, "toolu_k3")]])
        assert seen["toolu_k3"] == result_text(tool_results(own[-1])["toolu_k3"]).replace(
            str(plain.base), str(tmp_path)
        )

        # The next session's SessionStart starts it again (the first turn waits until it
        # listens), and its re-reads are served.
        def once_it_listens(body: dict[str, Any]) -> list[Any]:
            assert wait_for_server(port)["pid"] != pid
            return [tool_use("Read", {"file_path": user.notes}, "toolu_k4")]

        again = user.claude(
            [once_it_listens, [tool_use("Read", {"file_path": user.notes}, "toolu_k5")]]
        )
        last = result_text(tool_results(again[-1])["toolu_k5"])
        assert "[filecache] notes.txt unchanged since your result toolu_k4" in last


@pytest.mark.hosts
def test_with_the_http_server_down_every_tool_result_is_plain_claude_codes(
    tmp_path: Path,
) -> None:
    """Installed with --http, the server never running (``FILECACHE_HOOK_SERVER=0``: nothing
    starts it): the requests Claude Code sends equal those of a user without filecache."""
    need_claude()

    def session(user: Installed) -> list[Any]:
        turns = [
            [tool_use("Read", {"file_path": user.notes}, "toolu_p1")],
            [tool_use("Read", {"file_path": user.notes}, "toolu_p2")],
            [tool_use("Bash", {"command": "cat notes.txt", "description": "x"}, "toolu_p3")],
            [
                tool_use(
                    "Edit",
                    {"file_path": user.notes, "old_string": "line 7:", "new_string": "line seven:"},
                    "toolu_p4",
                )
            ],  # fmt: skip
            [tool_use("Bash", {"command": "false", "description": "x"}, "toolu_p5")],
            [tool_use("Read", {"file_path": user.notes}, "toolu_p6")],
        ]
        requests = user.claude(turns)
        text_of = json.dumps([without_reminders(body["messages"]) for body in requests])
        return json.loads(text_of.replace(str(user.base), "WORLD"))

    port = free_port()
    env_down: dict[str, str] = {"FILECACHE_HOOK_SERVER": "0"}
    with private_runtime(env_down):
        down = Installed(tmp_path / "down", port, env_down)
        got = session(down)
        assert not listening(port)  # nothing was started
        hooks = json.loads((down.project / ".claude" / "settings.json").read_text())["hooks"]
        assert hooks["PostToolUse"][0]["hooks"][0]["type"] == "http"  # not vacuous
    env_plain: dict[str, str] = {}
    with private_runtime(env_plain):
        want = session(Installed(tmp_path / "plain", None, env_plain))
    assert len(got) == len(want) == 7
    assert got == want


# -- one write per response, Nagle off ----------------------------------------------------------


class _Keeping(HookHTTPServer):
    """The server, keeping the sockets it accepts (to read their options)."""

    accepted: list[socket.socket]

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()
        self.accepted.append(conn)
        return conn, address


def test_each_response_leaves_in_one_segment_with_nagle_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code keeps its connection to the server open between calls. A response written
    in two parts (the headers, then the body) waited with Nagle's algorithm for the client's
    delayed ACK of the first: 40 ms per call. The client here delays its ACKs too
    (``TCP_QUICKACK`` off), and finds each whole response readable as soon as any of it is."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    server = _Keeping(("127.0.0.1", 0), _Handler)
    server.accepted = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    request = (f"GET /status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{HEADER}: status\r\n"
               "\r\n").encode()  # fmt: skip
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            for _ in range(5):  # one connection, as Claude Code keeps it
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
                client.sendall(request)
                assert select.select([client], [], [], 30)[0]
                ready = struct.unpack("i", fcntl.ioctl(client, termios.FIONREAD, b"\0" * 4))[0]
                response = client.recv(1 << 16)
                while b"\r\n\r\n" not in response:
                    response += client.recv(1 << 16)
                head, _, body = response.partition(b"\r\n\r\n")
                length = int(re.search(rb"Content-Length: (\d+)", head)[1])  # type: ignore[index]
                while len(body) < length:
                    body += client.recv(1 << 16)
                assert json.loads(body)["port"] == port
                assert ready == len(head) + 4 + length  # the body came with the headers
            (accepted,) = server.accepted
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        server.shutdown()
        server.server_close()
