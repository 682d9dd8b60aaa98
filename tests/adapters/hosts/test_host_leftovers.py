"""A hook never blocks or corrupts its host: hooks left behind by a removed filecache.

One user installs filecache's hooks for every host (Claude Code, Codex, opencode) from a
throwaway installation (a virtualenv holding a copy of the package, as a wheel lays it out:
``filecache/`` with ``adapters/`` as ``filecache/adapters/``), then removes the package (``pip
uninstall``: the interpreter stays, the script the hooks name is gone) or the whole virtualenv
(the interpreter is gone too). Each real host then runs a scripted session that re-reads a
file. It must work as plain: the requests it sends the model equal those of the same session in
a world that never had filecache (the world's folder written as ``WORLD``).

Before the guarded hook command (``config_files.GUARD``), Claude Code refused every prompt ("hook
error: can't open file .../hook_client.py") and Codex sent the Python error as the output of
every command the model ran.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import Script, ScriptedModel, text, tool_use
from codex_driver import MODEL as CODEX_MODEL
from codex_driver import codex_binary
from hook_servers import private_runtime
from host_leftovers_kit import throwaway_install, without_reminders
from opencode_run import OpencodeHome, need_opencode
from responses_server import ScriptedResponses, exec_call, message
from scripted_chat import Call, Step

pytestmark = pytest.mark.hosts

CLAUDE = os.environ.get("FILECACHE_TEST_CLAUDE", "")  # read before conftest clears FILECACHE_*
CODEX = codex_binary()
NOTES = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 81))
HOSTS = ("claude-code", "codex", "opencode")


def need_claude() -> str:
    if CLAUDE and os.access(CLAUDE, os.X_OK):
        return CLAUDE
    message = f"FILECACHE_TEST_CLAUDE={CLAUDE!r} is not an executable claude binary"
    if os.environ.get("CI"):
        pytest.fail(f"under CI the Claude Code binary must be installed: {message}")
    pytest.skip(message)


_VARYING = re.compile(r"(Wall time: )[0-9.]+( seconds)|(Chunk ID: )\w+")


def _stable(value: Any) -> Any:
    """Codex's request items without what differs between any two runs: item ids, a
    command's wall time and chunk id."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k != "id"}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    if isinstance(value, str):
        return _VARYING.sub(lambda m: "".join(g for g in m.groups() if g) + "X", value)
    return value


class World:
    """One user (HOME with every host's folders) and a project with ``notes.txt``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.opencode = OpencodeHome(base)  # HOME and XDG folders, opencode's plugin deps
        self.home, self.project = self.opencode.home, self.opencode.project
        (self.project / "notes.txt").write_text(NOTES)
        (self.home / ".codex").mkdir(parents=True)
        self.env = {
            **self.opencode.env,
            "CODEX_HOME": str(self.home / ".codex"),
            "SCRIPTED_API_KEY": "not-a-real-key",
            "ANTHROPIC_API_KEY": "sk-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
        }

    def normalized(self, value: Any) -> Any:
        return json.loads(json.dumps(value).replace(str(self.base), "WORLD"))

    def claude(self) -> list[Any]:
        notes = str(self.project / "notes.txt")
        script = Script(
            [
                [tool_use("Read", {"file_path": notes}, "toolu_r1")],
                [tool_use("Read", {"file_path": notes}, "toolu_r2")],
                [tool_use("Bash", {"command": "cat notes.txt", "description": "x"}, "toolu_b1")],
                [text("done")],
            ]
        )
        with ScriptedModel(script) as model:
            env = {**self.env, "ANTHROPIC_BASE_URL": model.base_url}
            done = subprocess.run(
                [need_claude(), "--output-format", "json", "--allowedTools",
                 "Read,Edit,Write,Bash", "-p", "read the notes twice"],
                cwd=self.project, env=env, capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
            assert not json.loads(done.stdout).get("is_error"), done.stdout
            return [without_reminders(self.normalized(body["messages"]))
                    for body in model.main_requests()]  # fmt: skip

    def codex(self) -> list[Any]:
        server = ScriptedResponses(
            [
                [exec_call("call_1", "cat notes.txt")],
                [exec_call("call_2", "cat notes.txt")],
                [exec_call("call_3", "ls")],
                [message("done")],
            ]  # fmt: skip
        ).start()
        try:
            provider = (
                f'model_providers.scripted={{name="scripted", base_url="{server.url}", '
                f'wire_api="responses", env_key="SCRIPTED_API_KEY"}}'
            )
            done = subprocess.run(
                [CODEX, "exec", "--skip-git-repo-check", "-m", CODEX_MODEL,
                 "-c", "model_provider=scripted", "-c", provider,
                 "-c", 'approval_policy="never"', "-c", 'sandbox_mode="workspace-write"',
                 "--json", "go"],
                cwd=self.project, env=self.env, capture_output=True, text=True,
                stdin=subprocess.DEVNULL, timeout=300,
            )  # fmt: skip
        finally:
            server.stop()
        assert done.returncode == 0, done.stderr[-2000:]
        return [_stable(self.normalized(body["input"])) for body in server.requests]

    def opencode_run(self) -> list[Any]:
        notes = str(self.project / "notes.txt")
        chat = self.opencode.run(
            [
                Step(calls=(Call("r1", "read", {"filePath": notes}),)),
                Step(calls=(Call("r2", "read", {"filePath": notes}),)),
                Step(text="done"),
            ]
        )
        return [self.normalized(body["messages"]) for body in chat.tool_requests()]

    def run(self, host: str) -> list[Any]:
        with private_runtime(self.env):
            if host == "claude-code":
                return self.claude()
            if host == "codex":
                return self.codex()
            return self.opencode_run()


@pytest.mark.parametrize("removed", ["package", "virtualenv"])
def test_hooks_left_by_a_removed_filecache_leave_every_host_as_plain(
    tmp_path: Path, removed: str
) -> None:
    need_claude(), need_opencode()
    python, package = throwaway_install(tmp_path / "install")
    left = World(tmp_path / "left")
    for host in HOSTS:
        done = subprocess.run(
            [str(python), "-m", "filecache", "install", host], cwd=left.project, env=left.env,
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0 and "installed" in done.stdout, done
    # The hooks work before the removal (so the comparison below is not vacuous).
    assert str(python) in (left.project / ".claude" / "settings.json").read_text()
    if removed == "package":
        shutil.rmtree(package)  # what pip uninstall leaves: the interpreter, not the package
    else:
        shutil.rmtree(tmp_path / "install")
    plain = World(tmp_path / "plain")
    for host in HOSTS:
        got, want = left.run(host), plain.run(host)
        if got != want:  # the first difference, readable
            pairs = itertools.zip_longest(got, want)
            first = next((a, b) for a, b in pairs if a != b)
            print(host, *(json.dumps(side, indent=1)[-3000:] for side in first), sep="\n")
        assert len(got) == len(want) and got == want, host
    assert not (left.project / ".filecache").exists()  # nothing ran
