"""The resident hook server and its thin client, as real processes.

Every call runs the hook command as ``filecache install`` writes it (``python -I -S
.../hosts/hook_client.py claude-code``) with a Claude Code payload on stdin, in a throwaway HOME
whose socket folder is the test's own (``hook_servers.private_runtime``). What is checked is the
answer the host would read on stdout, compared with the same call run in-process
(``FILECACHE_HOOK_SERVER=0``) where the two must agree, and which servers are alive.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts.config_files import CLIENT
from filecache.adapters.hosts.hook_client import MAGIC, SUN_PATH_MAX, socket_folder
from hook_servers import private_runtime, servers

HOOK = [sys.executable, "-I", "-S", str(CLIENT), "claude-code"]  # as filecache install writes it
HOOK_M = [sys.executable, "-I", "-m", "filecache.adapters.hosts", "claude-code"]  # earlier installs
TESTS = Path(__file__).resolve().parents[2]
TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 41))


class World:
    """A user (HOME, caches, socket folder), a project and one Claude Code context in it, with
    the transcript Claude Code would have written so far."""

    def __init__(self, base: Path, env: dict[str, str]) -> None:
        self.base, self.env = base, env
        self.project = base / "project"
        self.project.mkdir()
        self.session = str(uuid.uuid4())
        self.transcript = base / f"{self.session}.jsonl"
        self.parent: str | None = None
        self._add("user", {"role": "user", "content": "work on the project"})

    def _add(self, kind: str, message: dict[str, Any]) -> None:
        entry = {"parentUuid": self.parent, "isSidechain": False, "type": kind,
                 "message": message, "uuid": str(uuid.uuid4()), "sessionId": self.session,
                 "cwd": str(self.project), "version": "2.1.328"}  # fmt: skip
        self.parent = entry["uuid"]
        with self.transcript.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")

    def read_payload(self, name: str, call: str) -> bytes:
        """The PostToolUse payload of a Read of ``name`` (the call is in the transcript, its
        result not yet: as Claude Code has it when the hook runs)."""
        path = self.project / name
        text = path.read_text()
        use = {"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": str(path)}}
        self._add("assistant", {"id": f"msg_{call}", "role": "assistant", "content": [use]})
        total = text.count("\n") + 1
        return json.dumps({
            "session_id": self.session, "transcript_path": str(self.transcript),
            "cwd": str(self.project), "hook_event_name": "PostToolUse", "tool_name": "Read",
            "tool_input": {"file_path": str(path)}, "tool_use_id": call,
            "tool_response": {"type": "text", "file": {"filePath": str(path), "content": text,
                              "numLines": total, "startLine": 1, "totalLines": total}},
        }).encode()  # fmt: skip

    def result(self, call: str, shown: str) -> None:
        """The result the model got for ``call`` (what the hook answered, or the content)."""
        block = {"tool_use_id": call, "type": "tool_result", "content": shown}
        self._add("user", {"role": "user", "content": [block]})

    def hook(self, payload: bytes, command: list[str] = HOOK, **env: str) -> bytes:
        done = subprocess.run(command, input=payload, env={**self.env, **env}, cwd=self.project,
                              capture_output=True, check=True, timeout=120)  # fmt: skip
        assert done.stderr == b"", done.stderr
        return done.stdout

    def read(self, name: str, call: str, **env: str) -> bytes:
        """A Read through the hook, its result then written to the transcript."""
        out = self.hook(self.read_payload(name, call), **env)
        self.result(call, shown_text(out) or (self.project / name).read_text())
        return out

    @property
    def log(self) -> str:
        path = self.base / "cache" / "filecache" / "hooks.log"
        return path.read_text() if path.exists() else ""


def shown_text(answer: bytes) -> str:
    if not answer:
        return ""
    out = json.loads(answer)["hookSpecificOutput"]["updatedToolOutput"]
    return str(out["file"]["content"])


def refers_to(answer: bytes) -> str | None:
    """The call id a FileRef answer names (None: not a FileRef)."""
    text = shown_text(answer)
    marker = "unchanged since your result "
    if marker not in text:
        return None
    return text.split(marker, 1)[1].split()[0]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    with private_runtime(env):
        yield World(tmp_path, env)


def pids(world: World, env: dict[str, str] | None = None) -> list[int]:
    return sorted(int(s["pid"]) for s in servers(env or world.env))


def test_client_and_server_speak_the_same_frames() -> None:
    from filecache.adapters.hosts import hook_client, hook_server

    assert hook_server.MAGIC == hook_client.MAGIC
    assert hook_server.MAX_FIELD == hook_client.MAX_FIELD


def test_reads_through_the_server_answer_as_in_process(world: World) -> None:
    (world.project / "a.py").write_text(TEXT)
    assert world.read("a.py", "toolu_1") == b""  # content: Claude Code's own output stands
    served = world.read("a.py", "toolu_2")
    assert refers_to(served) == "toolu_1"
    (server,) = servers(world.env)
    assert server["calls"] == 2
    earlier = world.hook(world.read_payload("a.py", "toolu_m"), HOOK_M)  # the same client
    assert refers_to(earlier) == "toolu_1" and servers(world.env)[0]["calls"] == 3
    alone = world.hook(world.read_payload("a.py", "toolu_3"), FILECACHE_HOOK_SERVER="0")
    # The first short answer carried the instructions on a line of its own; the store says so
    # to the in-process hook too, which answers the FileRef alone.
    ref, note = shown_text(served).split("\n")
    assert note.startswith("[filecache] note (said once): ")
    assert shown_text(alone) == ref and "\n" not in shown_text(earlier)
    assert pids(world) == [server["pid"]]  # the in-process call left the server alone
    assert world.log == ""


def test_racing_hooks_start_one_server(world: World) -> None:
    for i in range(6):
        (world.project / f"f{i}.py").write_text(TEXT)
    payloads = [world.read_payload(f"f{i}.py", f"toolu_p{i}") for i in range(6)]
    procs = [
        subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=world.env, cwd=world.project)
        for _ in payloads
    ]  # fmt: skip
    for proc, payload in zip(procs, payloads, strict=True):
        proc.stdin.write(payload)  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
    outs = [(proc.stdout.read(), proc.stderr.read()) for proc in procs]  # type: ignore[union-attr]
    assert all(proc.wait() == 0 for proc in procs)
    for proc in procs:
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert outs == [(b"", b"")] * 6  # first reads: content, Claude Code's own
    (server,) = servers(world.env)
    assert server["calls"] == 6  # every call went to the one server (none ran in-process)
    assert world.log == ""


def test_an_environment_change_is_never_served_by_the_old_server(world: World) -> None:
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    assert refers_to(world.read("a.py", "toolu_2")) == "toolu_1"
    (old,) = pids(world)
    # A limit that makes a.py too large for filecache: Claude Code's own output must stand.
    small = {"FILECACHE_MAX_FILE_BYTES": "100"}
    assert world.read("a.py", "toolu_3", **small) == b""
    assert old in pids(world) and len(pids(world)) == 2  # a second server, of the new identity
    assert refers_to(world.read("a.py", "toolu_4")) == "toolu_1"  # the old one: still right
    assert world.log == ""


def test_a_key_change_on_disk_makes_the_server_step_aside(world: World) -> None:
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    (old,) = pids(world)
    key = Path(world.env["XDG_CONFIG_HOME"]) / "filecache" / "key"
    assert key.exists()  # the server made it (or read it) before it started
    key.unlink()  # the user rotates the key: what the server loaded is no longer the disk's
    served = world.read("a.py", "toolu_2")
    assert refers_to(served) == "toolu_1"
    for _ in range(600):  # the stale server exits once it has refused the call
        if old not in pids(world):
            break
        time.sleep(0.05)
    assert old not in pids(world)
    assert refers_to(world.read("a.py", "toolu_3")) in ("toolu_1", "toolu_2")
    (new,) = pids(world)
    assert new != old


def _installed_copy(base: Path) -> tuple[list[str], Path]:
    """filecache installed as a wheel installs it, in a virtualenv of its own: the hook command
    of that install and the copy's package folder (to change it as an upgrade would)."""
    import shutil
    import sysconfig

    import xxhash

    site = base / "site"
    package = site / "filecache"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(TESTS.parent / "filecache", package, ignore=ignore)
    shutil.copytree(TESTS.parent / "adapters", package / "adapters", ignore=ignore)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    deps = Path(xxhash.__file__).resolve().parents[1]  # where the dependencies are installed
    (Path(purelib) / "filecache_copy.pth").write_text(f"{site}\n{deps}\n")
    assert sysconfig.get_paths()["purelib"] != purelib
    hook = [str(python), "-I", "-S", str(package / "adapters" / "hosts" / "hook_client.py")]
    return [*hook, "claude-code"], package


def test_an_upgraded_install_is_never_served_by_the_old_server(world: World) -> None:
    hook, package = _installed_copy(world.base)
    (world.project / "a.py").write_text(TEXT)
    assert world.hook(world.read_payload("a.py", "toolu_1"), hook) == b""
    world.result("toolu_1", TEXT)
    (old,) = servers(world.env)
    assert old["python"].startswith(str(world.base / "venv"))
    # The upgrade: the wording of a FileRef changes in the installed code.
    render = package / "core" / "render.py"
    text = render.read_text()
    assert "{path} unchanged since your {which} " in text
    render.write_text(text.replace("{path} unchanged since your", "{path} UPGRADED since your"))
    answer = world.hook(world.read_payload("a.py", "toolu_2"), hook)
    assert "a.py UPGRADED since your result toolu_1" in shown_text(answer)  # the new code answered
    _gone_pid(world, old["pid"])
    answer = world.hook(world.read_payload("a.py", "toolu_3"), hook)
    assert "a.py UPGRADED since your result toolu_1" in shown_text(answer)
    (new,) = servers(world.env)
    assert new["pid"] != old["pid"] and new["calls"] == 1
    assert world.log == ""


def _gone_pid(world: World, pid: int) -> None:
    for _ in range(600):  # attempts: the stale server exits once its calls are answered
        if pid not in pids(world):
            return
        time.sleep(0.05)
    raise AssertionError(f"server {pid} is still answering")


def _paused_server(world: World, call: str, *more: str) -> subprocess.Popen[bytes]:
    """The real server on the socket the client will use, stopped after committing ``call``."""
    where = subprocess.run(
        [sys.executable, "-I", "-c", "from filecache.adapters.hosts import hook_client as c; "
         "i = c.identity(); print(i, c.socket_folder(ident=i))"],
        env=world.env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    ident, folder = where
    server = subprocess.Popen(
        [sys.executable, "-I", str(TESTS / "hook_server_paused.py"), "--socket",
         os.path.join(folder, f"{ident}.sock"), "--identity", ident, "--pause-on", call,
         *more],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=world.env, cwd="/",
    )  # fmt: skip
    assert server.stdout is not None
    assert server.stdout.readline() == b"ready\n"
    return server


@pytest.mark.parametrize("first", [True, False], ids=["first-read", "re-read"])
def test_server_killed_after_commit_before_reply(world: World, first: bool) -> None:
    (world.project / "a.py").write_text(TEXT)
    if not first:
        world.read("a.py", "toolu_1", FILECACHE_HOOK_SERVER="0")
    server = _paused_server(world, "toolu_x")
    client = subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=world.env, cwd=world.project)  # fmt: skip
    out, err = b"", b""
    try:
        assert client.stdin is not None and server.stdout is not None
        client.stdin.write(world.read_payload("a.py", "toolu_x"))
        client.stdin.close()
        assert server.stdout.readline() == b"committed toolu_x\n"  # in the store, not answered
        server.send_signal(signal.SIGKILL)
        server.wait()
        out, err = client.stdout.read(), client.stderr.read()  # type: ignore[union-attr]
        client.wait()
    finally:
        server.kill()
        client.kill()
        for pipe in (server.stdin, server.stdout, client.stdout, client.stderr):
            if pipe is not None:
                pipe.close()
    assert client.returncode == 0 and err == b""
    # The client ran the call itself, with the same id: answered once, as if the server's
    # commit had never been (never "unchanged since toolu_x": the model has no toolu_x yet).
    if first:
        assert out == b""  # content: Claude Code's own output, which the model now holds
    else:
        assert refers_to(out) == "toolu_1"
    world.result("toolu_x", shown_text(out) or TEXT)
    assert pids(world) == []  # it did not wait for a new server: in-process
    again = world.read("a.py", "toolu_y")
    assert refers_to(again) == ("toolu_x" if first else "toolu_1")
    (world.project / "a.py").write_text(TEXT.replace("line 7:", "line seven:"))
    changed = shown_text(world.read("a.py", "toolu_z"))
    assert "changed since your result" in changed and "+line seven:" in changed


@pytest.mark.parametrize("short", [True, False], ids=["fileref", "diff"])
def test_an_answer_the_client_never_took_leaves_no_fact(world: World, short: bool) -> None:
    """The host killed the hook (its timeout) while the server was still at work: the host's
    own output stood, so the FileRef or diff the server then answered, and the instructions it
    carried, are forgotten (issue 31, 2)."""
    from filecache.core.render import host_instructions

    hint = host_instructions("Claude Code")
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1", FILECACHE_HOOK_SERVER="0")
    if not short:
        (world.project / "a.py").write_text(TEXT.replace("line 7:", "line seven:"))
    server = _paused_server(world, "toolu_x")
    client = subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=world.env, cwd=world.project)  # fmt: skip
    try:
        assert client.stdin is not None and server.stdout is not None
        client.stdin.write(world.read_payload("a.py", "toolu_x"))
        client.stdin.close()
        assert server.stdout.readline() == b"committed toolu_x\n"
        client.kill()  # the host gave up on the hook: its own output stands
        client.wait()
        assert server.stdin is not None
        server.stdin.close()  # the server goes on, and answers no one
        assert server.stdout.readline() == b"abandoned toolu_x\n"
    finally:
        server.kill()
        server.wait()
        client.kill()
        for pipe in (server.stdout, client.stdout, client.stderr):
            if pipe is not None:
                pipe.close()
    world.result("toolu_x", (world.project / "a.py").read_text())  # what the model got
    again = shown_text(world.read("a.py", "toolu_y", FILECACHE_HOOK_SERVER="0"))
    assert "unchanged since your result" in again
    assert hint in again  # toolu_x never carried them to the model


def test_a_socket_folder_others_may_enter_is_refused(world: World) -> None:
    folder = Path(world.env["XDG_RUNTIME_DIR"]) / "filecache"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    assert refers_to(world.read("a.py", "toolu_2")) == "toolu_1"  # in-process, still right
    assert pids(world) == [] and list(folder.iterdir()) == []
    assert "mode 755; only its owner may enter it" in world.log


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a folder to another user")
def test_a_socket_folder_of_another_user_is_refused(world: World) -> None:
    folder = Path(world.env["XDG_RUNTIME_DIR"]) / "filecache"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    assert refers_to(world.read("a.py", "toolu_2")) == "toolu_1"
    assert "owned by uid 65534, not by this user" in world.log
    os.chown(folder, 0, 0)


def test_a_socket_folder_that_is_a_link_is_refused(world: World, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (Path(world.env["XDG_RUNTIME_DIR"]) / "filecache").symlink_to(elsewhere)
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    assert refers_to(world.read("a.py", "toolu_2")) == "toolu_1"
    assert list(elsewhere.iterdir()) == [] and "not a folder" in world.log


def test_a_socket_path_too_long_for_af_unix_falls_back_to_a_shorter_folder(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    short = Path("/tmp") / f"fc-short-{uuid.uuid4().hex[:8]}"
    env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(deep), "XDG_CACHE_HOME": str(short)}
    try:
        folder = socket_folder(env, "x" * 24)
        assert folder == str(short / "filecache" / "run")
        assert len(os.path.join(folder, "x" * 24 + ".sock")) <= SUN_PATH_MAX
        assert (os.stat(folder).st_mode & 0o777) == 0o700
    finally:
        import shutil

        shutil.rmtree(short, ignore_errors=True)


HOSTILE = [
    b"",
    b"not json at all",
    b"[1, 2, 3]",
    b"\xff\xfe\x00garbage",
    b'{"hook_event_name": "PostToolUse", "session_id": "s", "cwd": "relative/dir", '
    b'"tool_name": "Read", "tool_use_id": "t", "tool_input": {"file_path": "a.py"}}',
    b"[" * 100_000 + b"]" * 100_000,
    json.dumps({"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Read",
                "tool_use_id": "t" * 10_000, "tool_input": {"file_path": "/etc/passwd"},
                "tool_response": {"type": "text", "file": {"content": "x" * 3_000_000}}}).encode(),
]  # fmt: skip


def test_hostile_payloads_answer_as_in_process_and_the_server_survives(world: World) -> None:
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    (pid,) = pids(world)
    odd_id = {"hook_event_name": "SessionStart", "session_id": "../../etc\n\x00",
              "cwd": str(world.project), "source": "startup"}  # fmt: skip
    for payload in [*HOSTILE, json.dumps(odd_id).encode()]:
        served = world.hook(payload)
        alone = world.hook(payload, FILECACHE_HOOK_SERVER="0")
        assert served == alone, payload[:80]
    assert pids(world) == [pid]
    assert refers_to(world.read("a.py", "toolu_2")) == "toolu_1"


def test_hostile_frames_are_hung_up_on_and_the_server_survives(world: World) -> None:
    import socket as sockets

    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    (info,) = servers(world.env)
    frames = [
        b"GET / HTTP/1.1\r\n\r\n",
        MAGIC + (99).to_bytes(4, "big"),
        MAGIC + (7).to_bytes(4, "big") + (2**32 - 1).to_bytes(4, "big"),
        MAGIC + (7).to_bytes(4, "big") + (4).to_bytes(4, "big") + b"ca",  # cut short
        MAGIC
        + (7).to_bytes(4, "big")
        + b"".join(
            len(f).to_bytes(4, "big") + f
            for f in [b"call", b"not-the-identity", b"claude-code", b"/", b"", b"", b"{}"]
        ),  # fmt: skip
    ]
    answers = []
    for frame in frames:
        with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as conn:
            conn.connect(info["socket"])
            conn.sendall(frame)
            conn.shutdown(sockets.SHUT_WR)
            try:
                answers.append(conn.recv(16))
            except ConnectionResetError:  # hung up on with the rest unread
                answers.append(b"")
    assert answers == [b"", b"", b"F", b"", b"F"]
    assert pids(world) == [info["pid"]]
    assert refers_to(world.read("a.py", "toolu_2")) == "toolu_1"


def test_stop_and_sigterm_end_the_server_cleanly(world: World) -> None:
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    (info,) = servers(world.env)
    stop = subprocess.run([sys.executable, "-m", "filecache", "hook", "--stop"], env=world.env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert stop.stdout == f"stopped 1 hook server(s) (pid {info['pid']})\n"
    _gone(info["socket"])
    world.read("a.py", "toolu_2")  # starts a new one
    (info,) = servers(world.env)
    os.kill(info["pid"], signal.SIGTERM)
    _gone(info["socket"])
    status = subprocess.run([sys.executable, "-m", "filecache", "hook", "--status"],
                            env=world.env, capture_output=True, text=True, check=True)  # fmt: skip
    assert status.stdout == "no hook server is running\n"


def test_uninstall_stops_the_servers(world: World) -> None:
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    (info,) = servers(world.env)
    done = subprocess.run(
        [sys.executable, "-m", "filecache", "install", "claude-code", "--uninstall"],
        env=world.env, cwd=world.project, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.rstrip().endswith("; stopped 1 resident hook server(s)"), done.stdout
    _gone(info["socket"])


def test_an_idle_server_exits(world: World) -> None:
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1", FILECACHE_HOOK_SERVER_IDLE="0.2")
    (info,) = servers({**world.env, "FILECACHE_HOOK_SERVER_IDLE": "0.2"})
    _gone(info["socket"])


def _gone(socket_path: str) -> None:
    for _ in range(600):  # attempts, not a time limit: the server unlinks it as it ends
        if not os.path.exists(socket_path):
            return
        time.sleep(0.05)
    raise AssertionError(f"{socket_path} is still there")


def test_a_relative_store_is_the_calling_folders_not_the_servers(world: World) -> None:
    # The server's own working folder is "/": a relative store resolved there would be one file
    # for every project (or none). A process per call resolves it in the hook's folder.
    name = f"fc-state-{uuid.uuid4().hex[:8]}"
    (world.project / "pyproject.toml").write_text(f'[tool.filecache]\nstore = "{name}/cache.db"\n')
    (world.project / "a.py").write_text(TEXT)
    try:
        world.read("a.py", "toolu_1")
        assert refers_to(world.read("a.py", "toolu_2")) == "toolu_1"
        assert servers(world.env)[0]["calls"] == 2
        assert (world.project / name / "cache.db").exists()
        assert not Path("/", name).exists()
        alone = world.hook(world.read_payload("a.py", "toolu_3"), FILECACHE_HOOK_SERVER="0")
        assert refers_to(alone) == "toolu_1"  # the same store as the server's calls
    finally:
        import shutil

        shutil.rmtree(Path("/", name), ignore_errors=True)
    assert world.log == ""


def test_a_client_that_cannot_import_filecache_says_so_in_the_log_not_to_the_host(
    world: World, tmp_path: Path
) -> None:
    # The hook command outlives its package (uninstalled beside it, an interpreter that no
    # longer has it): the client starts no server and cannot run the call; the host must get
    # exit status 0, nothing on stdout or stderr, and the log one line.
    alone = tmp_path / "left" / "hook_client.py"
    alone.parent.mkdir()
    alone.write_bytes(CLIENT.read_bytes())
    python = getattr(sys, "_base_executable", sys.executable)
    bare = subprocess.run([python, "-I", "-c", "import filecache"], capture_output=True)
    if bare.returncode == 0:
        pytest.skip("the base interpreter has filecache installed")
    (world.project / "a.py").write_text(TEXT)
    done = subprocess.run([python, "-I", "-S", str(alone), "claude-code"],
                          input=world.read_payload("a.py", "toolu_1"), env=world.env,
                          cwd=world.project, capture_output=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert "cannot import filecache" in world.log
    assert pids(world) == []


def test_two_projects_at_once_keep_their_own_stores(world: World, tmp_path: Path) -> None:
    # One server, two projects, calls in flight together: each call must use its own folder's
    # relative store and answer from its own project's history.
    (tmp_path / "b").mkdir()
    other = World(tmp_path / "b", world.env)
    for each in (world, other):
        (each.project / "pyproject.toml").write_text('[tool.filecache]\nstore = "own.db"\n')
        (each.project / "a.py").write_text(TEXT.replace("fox", f"fox of {each.base.name}"))
        each.read("a.py", "toolu_1")
    for round_ in range(3):
        calls = [(each, f"toolu_{each.base.name}_{round_}") for each in (world, other)]
        procs = []
        for each, call in calls:
            proc = subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    env=world.env, cwd=each.project)  # fmt: skip
            assert proc.stdin is not None
            proc.stdin.write(each.read_payload("a.py", call))
            proc.stdin.close()
            procs.append(proc)
        for (each, call), proc in zip(calls, procs, strict=True):
            assert proc.stdout is not None
            out = proc.stdout.read()
            proc.stdout.close()
            assert proc.wait() == 0
            assert refers_to(out) == "toolu_1", (each.base.name, out[:200])
            each.result(call, shown_text(out))
    assert (world.project / "own.db").exists() and (other.project / "own.db").exists()
    assert len(pids(world)) == 1 and world.log == ""


def test_a_user_install_is_found_by_the_server_and_in_process(world: World) -> None:
    # ``pip install --user``: filecache is in the user's site-packages, which ``-I`` leaves off
    # sys.path. The hook, there, must still serve (from a server, and in-process).
    import shutil

    import xxhash

    python = getattr(sys, "_base_executable", sys.executable)
    if (
        subprocess.run([python, "-I", "-c", "import filecache"], capture_output=True).returncode
        == 0
    ):
        pytest.skip("the base interpreter has filecache installed")
    env = {**world.env, "PYTHONUSERBASE": str(world.base / "userbase")}
    where = "import site; print(site.getusersitepackages())"
    user_site = subprocess.run([python, "-I", "-S", "-c", where], env=env, capture_output=True,
                               text=True, check=True).stdout.strip()  # fmt: skip
    package = Path(user_site) / "filecache"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(TESTS.parent / "filecache", package, ignore=ignore)
    shutil.copytree(TESTS.parent / "adapters", package / "adapters", ignore=ignore)
    deps = Path(xxhash.__file__).resolve().parents[1]
    (Path(user_site) / "filecache_deps.pth").write_text(f"{deps}\n")
    hook = [
        python,
        "-I",
        "-S",
        str(package / "adapters" / "hosts" / "hook_client.py"),
        "claude-code",
    ]
    world.env = env
    (world.project / "a.py").write_text(TEXT)
    assert world.hook(world.read_payload("a.py", "toolu_1"), hook) == b""
    world.result("toolu_1", TEXT)
    assert refers_to(world.hook(world.read_payload("a.py", "toolu_2"), hook)) == "toolu_1"
    (server,) = servers(env)
    assert server["calls"] == 2
    alone = world.hook(world.read_payload("a.py", "toolu_3"), hook, FILECACHE_HOOK_SERVER="0")
    assert refers_to(alone) == "toolu_1"
    assert world.log == ""


def test_libpq_variables_are_part_of_the_identity() -> None:
    # A postgresql:// store reads PGHOST, PGDATABASE, PGPASSFILE...: two terminals with other
    # values must not share a server (it would answer from the first one's database).
    from filecache.adapters.hosts.hook_client import identity

    base = {"HOME": "/home/u", "FILECACHE_STORE": "postgresql:///filecache"}
    assert identity({**base, "PGHOST": "/run/a"}) != identity({**base, "PGHOST": "/run/b"})
    assert identity({**base, "PGDATABASE": "one"}) != identity(base)
    assert identity({**base, "PATH": "/elsewhere"}) == identity(base)


needs_unshare = pytest.mark.skipif(
    subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0
    if shutil.which("unshare")
    else True,
    reason="needs unshare -m (root, or user namespaces)",
)


@needs_unshare
def test_a_peer_in_another_mount_namespace_is_not_answered_by_this_server(world: World) -> None:
    """A sandbox sharing HOME, the venv and the socket folder sees other files under the same
    paths: it gets a server of its own identity, and this server tells it to answer itself
    even when it forges this server's identity (issue 31, 3)."""
    (world.project / "a.py").write_text(TEXT)
    world.read("a.py", "toolu_1")
    (ours,) = servers(world.env)
    sandboxed = subprocess.run(
        ["unshare", "-m", sys.executable, "-I", "-c",
         "from filecache.adapters.hosts import hook_client as c; print(c.identity())"],
        env=world.env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert sandboxed != ours["identity"]
    probe = (
        "import sys; from filecache.adapters.hosts import hook_client as c\n"
        "sock = c._connect(sys.argv[1])\n"
        "req = c.encode_request('call', sys.argv[2], 'claude-code', sys.argv[3], {}, [],"
        " sys.stdin.buffer.read())\n"
        "print(repr(c._exchange(sock, req, 30.0)))\n"
    )
    payload = world.read_payload("a.py", "toolu_2")
    done = subprocess.run(
        ["unshare", "-m", sys.executable, "-I", "-c", probe, ours["socket"], ours["identity"],
         str(world.project)],
        input=payload, env=world.env, capture_output=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == b"None"  # "F": run it in your own process
    assert servers(world.env)[0]["calls"] == ours["calls"]


def test_a_busy_server_still_answers_status_and_stop(world: World) -> None:
    """Every call thread busy: ``ping`` and ``stop`` are still answered, so ``hook --status``
    lists the server and ``--stop`` stops it (issue 31, 10)."""
    from filecache.adapters.hosts.hook_client import stop_servers

    (world.project / "a.py").write_text(TEXT)
    server = _paused_server(world, "toolu_x", "--max-calls", "1")
    client = subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=world.env, cwd=world.project)  # fmt: skip
    try:
        assert client.stdin is not None and server.stdout is not None
        client.stdin.write(world.read_payload("a.py", "toolu_x"))
        client.stdin.close()
        assert server.stdout.readline() == b"committed toolu_x\n"  # its one call thread: busy
        (listed,) = servers(world.env)
        assert listed["pid"] == server.pid
        assert stop_servers(world.env) == [server.pid]
        assert server.stdin is not None
        server.stdin.close()  # the call in flight ends; then the server does
        assert server.wait(timeout=120) == 0
        client.wait(timeout=120)
    finally:
        server.kill()
        client.kill()
        for pipe in (server.stdout, client.stdout, client.stderr):
            if pipe is not None:
                pipe.close()


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_transcript_that_is_no_regular_file_is_refused_at_once(
    world: World, tmp_path: Path, kind: str
) -> None:
    """A FIFO ``transcript_path`` would block a thread forever and ``/dev/zero`` never ends:
    refused at once, the call answered as with no transcript (issue 31, 10)."""
    (world.project / "a.py").write_text(TEXT)
    if kind == "fifo":
        where = tmp_path / "transcript.fifo"
        os.mkfifo(where)
    else:
        where = Path("/dev/zero") if kind == "device" else tmp_path
    payload = json.loads(world.read_payload("a.py", "toolu_1"))
    payload["transcript_path"] = str(where)
    for env in ({"FILECACHE_HOOK_SERVER": "0"}, {}):
        assert world.hook(json.dumps(payload).encode(), **env) == b""  # content: its own
    assert world.log == ""


def test_client_and_server_see_the_same_view() -> None:
    from filecache.adapters.hosts import hook_client, hook_server

    assert hook_client.view() == hook_server._view() != ""
    assert hook_client.view(os.getpid()) == hook_server._view(os.getpid())
