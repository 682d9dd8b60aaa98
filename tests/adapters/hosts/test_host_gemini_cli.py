"""filecache inside the real Gemini CLI: the pinned binary, driven against a scripted model.

Set up as a user does it (``filecache install gemini-cli`` in a throwaway HOME and project),
then ``gemini -p`` runs against ``gemini_server.ScriptedGemini`` on 127.0.0.1 (its
``GOOGLE_GEMINI_BASE_URL``). Every assertion about what the model saw reads the requests Gemini
CLI sent to the model server, never filecache's own records.

The binary: ``FILECACHE_TEST_GEMINI`` (``.ci/run`` installs @google/gemini-cli at the version
pinned there and sets it). Without it the tests are skipped; under ``CI`` they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts.gemini_cli import NOTE
from gemini_server import (
    Script,
    ScriptedGemini,
    call,
    function_calls,
    function_responses,
    response_text,
    text,
)
from hook_servers import private_runtime, servers
from host_leftovers_kit import throwaway_install
from test_secrets import store_bytes

pytestmark = pytest.mark.hosts

GEMINI = os.environ.get("FILECACHE_TEST_GEMINI", "")  # read before conftest clears FILECACHE_*
if not GEMINI or not os.access(GEMINI, os.X_OK):
    message = (
        f"FILECACHE_TEST_GEMINI={GEMINI!r} is not an executable gemini binary; "
        "install it as .ci/run does (install_more_hosts) and point the variable at it"
    )
    if os.environ.get("CI"):
        pytest.fail(f"under CI the Gemini CLI binary must be installed: {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)

SECRET = "STRIPE_KEY=sk_live_5f3a9c1e7d2b8a4f6e0c9d1b"
# Nothing leaves the machine: no usage statistics, telemetry or update check; the API key
# (not a Google login) is the auth, so no Code Assist or experiments server is asked.
SETTINGS = {
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}},
}


def lines(tag: str, n: int = 60) -> str:
    return "".join(
        f"{tag} line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(n)
    )


@dataclass
class Gemini:
    home: Path
    project: Path
    env: dict[str, str]

    def path(self, name: str) -> str:
        return str(self.project / name)

    def run(self, model: ScriptedGemini, *args: str) -> dict[str, Any]:
        env = {**self.env, "GOOGLE_GEMINI_BASE_URL": model.base_url}
        done = subprocess.run(
            [GEMINI, *args, "--output-format", "json"], cwd=self.project, env=env,
            capture_output=True, text=True, timeout=180, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
        out: dict[str, Any] = json.loads(done.stdout)
        assert not out.get("error"), out
        return out

    def hook_log(self) -> str:
        log = self.home / ".cache" / "filecache" / "hooks.log"
        return log.read_text() if log.exists() else ""


@pytest.fixture
def gemini(tmp_path: Path) -> Iterator[Gemini]:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".gemini").mkdir(parents=True)
    project.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    env = {
        "PATH": f"{Path(GEMINI).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "GEMINI_API_KEY": "test-key",
        "GEMINI_CLI_NO_RELAUNCH": "1",  # one node process, not a second one it spawns
        "GEMINI_CLI_TRUST_WORKSPACE": "true",  # headless: the throwaway project is trusted
        "GEMINI_TELEMETRY_ENABLED": "false",
        "NO_COLOR": "1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    installed = subprocess.run(
        [sys.executable, "-m", "filecache", "install", "gemini-cli"], cwd=project, env=env,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "installed filecache hooks for Gemini CLI" in installed.stdout, installed
    with private_runtime(env):  # the hooks' resident server: started by them, stopped here
        yield Gemini(home, project, env)
        assert servers(env), "the hooks ran without their resident server"


def results_seen(model: ScriptedGemini) -> dict[str, tuple[str, set[str]]]:
    """Every function result the model was sent, by call id: its text and the ids of every
    call and result in the first request that carried it."""
    seen: dict[str, tuple[str, set[str]]] = {}
    for body in model.requests:
        ids = set(function_calls(body)) | set(function_responses(body))
        for call_id, response in function_responses(body).items():
            seen.setdefault(call_id, (response_text(response), ids))
    return seen


def test_reads_and_edits_as_the_model_sees_them(gemini: Gemini) -> None:
    a = gemini.path("a.py")
    (gemini.project / "a.py").write_text(lines("a.py"))
    (gemini.project / "b.py").write_text(lines("b.py"))
    (gemini.project / ".env").write_text(SECRET + "\n")
    (gemini.project / ".env.local").write_text(SECRET + "\n")  # .env: Gemini CLI refuses it

    def change_outside(body: dict[str, Any]) -> list[dict[str, Any]]:
        path = gemini.project / "a.py"  # the user edits a.py in an editor between two turns
        path.write_text(path.read_text().replace("a.py line 40:", "a.py LINE FORTY:"))
        return [call("read_file", {"file_path": a}, "r4")]

    script = Script([
        [call("read_file", {"file_path": "a.py"}, "r1")],
        [call("read_file", {"file_path": a}, "r2")],
        [call("replace", {"file_path": a, "old_string": "a.py line 7:",
                          "new_string": "a.py line seven:",
                          "instruction": "rename line 7"}, "e1")],
        [call("read_file", {"file_path": a}, "r3")],
        change_outside,
        [call("read_file", {"file_path": a, "start_line": 10, "end_line": 14}, "r5")],
        [call("run_shell_command", {"command": "cat b.py"}, "b1")],
        [call("run_shell_command", {"command": "cat b.py"}, "b2")],
        [call("read_file", {"file_path": gemini.path(".env.local")}, "s1")],
        [call("read_file", {"file_path": gemini.path(".env.local")}, "s2")],
        [call("read_file", {"file_path": gemini.path(".env")}, "s3")],
        [call("run_shell_command", {"command": "cat .env"}, "s4")],
        [text("done")],
    ])  # fmt: skip
    with ScriptedGemini(script) as model:
        session = gemini.run(model, "-p", "read the files", "--yolo")["session_id"]
    seen = results_seen(model)

    first, _ = seen["r1"]
    assert "a.py line 59:" in first and "[filecache]" not in first  # Gemini CLI's own content
    again, ids = seen["r2"]
    assert again.startswith("[filecache] a.py unchanged since your result r1 ")
    assert "r1" in ids and "a.py line 3:" not in again
    assert again.endswith("\n" + NOTE)  # said once, with the first short answer
    assert "edited" not in seen["e1"][0].lower() or "error" not in seen["e1"][0].lower()
    after_edit, ids = seen["r3"]
    assert "[filecache] a.py unchanged since your result" in after_edit
    named = after_edit.split("your result ", 1)[1].split()[0]
    assert named in ids and "a.py line 3:" not in after_edit and NOTE not in after_edit
    diff, ids = seen["r4"]  # changed outside: a diff from the version the model holds
    assert "[filecache] a.py changed since your result" in diff
    assert "+a.py LINE FORTY:" in diff and "-a.py line 40:" in diff and "a.py line 3:" not in diff
    assert diff.split("your result ", 1)[1].split()[0] in ids
    assert "fresh=true" not in diff  # Gemini CLI's read_file has no such flag
    _assert_diff_applies(first, diff)
    assert seen["r5"][0].startswith("[filecache] a.py unchanged since your result r4 ")
    assert "b.py line 59:" in seen["b1"][0]  # a shell read: Gemini CLI's own output first
    assert seen["b2"][0].startswith("[filecache] b.py unchanged since your result b1 ")
    assert SECRET in seen["s1"][0] and SECRET in seen["s2"][0]  # Gemini CLI's own answer
    assert "Path not in workspace" in seen["s3"][0] and SECRET in seen["s4"][0]
    db = gemini.project / ".filecache" / "cache.db"
    assert SECRET.encode() not in store_bytes(db)
    assert SECRET.split("=")[1].encode() not in store_bytes(db)
    assert gemini.hook_log() == ""
    stats = subprocess.run(
        [sys.executable, "-m", "filecache", "stats", "--json"], cwd=gemini.project,
        env=gemini.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    (listed,) = json.loads(stats.stdout)["sessions"]  # the Gemini CLI session, as the hook saw it
    assert listed["session_id"].startswith(f"gemini-cli:{session}@") and listed["saved"] > 0


def _assert_diff_applies(first: str, diff: str) -> None:
    """The diff, applied with GNU patch to what the model held (the content of r1 after its
    own edit), gives the file on disk."""
    import tempfile

    patch = shutil.which("patch")
    if patch is None:
        pytest.skip("GNU patch is not installed")
    held = first.replace("a.py line 7:", "a.py line seven:")
    body = diff.split("\n", 1)[1]
    body = body[: body.index("\n(Apply")] + "\n" if "\n(Apply" in body else body
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder, "a.py")
        target.write_text(held)
        done = subprocess.run([patch, "-s", str(target)], input=body, text=True,
                              capture_output=True, check=False)  # fmt: skip
        assert done.returncode == 0, (done.stdout, done.stderr, body)
        assert target.read_text() == held.replace("a.py line 40:", "a.py LINE FORTY:")


def test_a_subagent_never_gets_a_fileref_to_the_main_context(gemini: Gemini) -> None:
    """Gemini CLI hands a subagent's calls to the hooks with the main session's id and file;
    the subagent holds none of the main context's results, so it gets content."""
    a = gemini.path("a.py")
    (gemini.project / "a.py").write_text(lines("a.py"))
    state = {"main": 0, "sub": 0}
    main_turns = [
        [call("read_file", {"file_path": a}, "m1")],
        [call("invoke_agent", {"agent_name": "codebase_investigator", "prompt": "read a.py"},
              "m2")],
        [call("read_file", {"file_path": a}, "m3")],
        [text("done")],
    ]  # fmt: skip

    def respond(body: dict[str, Any]) -> list[dict[str, Any]]:
        offered = {d["name"] for t in body.get("tools") or [] for d in t["functionDeclarations"]}
        if "invoke_agent" in offered:  # the main agent's loop
            state["main"] += 1
            return main_turns[min(state["main"], len(main_turns)) - 1]
        state["sub"] += 1  # the subagent's loop (it offers complete_task)
        if state["sub"] == 1:
            return [call("read_file", {"file_path": a}, "s1")]
        return [call("complete_task", {"result": "read it"}, f"s{state['sub']}")]

    with ScriptedGemini(Script([]).side_or(respond)) as model:
        gemini.run(model, "-p", "investigate", "--yolo")
    seen = results_seen(model)
    assert "a.py line 59:" in seen["m1"][0]
    assert "a.py line 59:" in seen["s1"][0] and "[filecache]" not in seen["s1"][0]
    assert seen["m3"][0].startswith("[filecache] a.py unchanged since your result m1 ")
    assert gemini.hook_log() == ""


@pytest.mark.parametrize("removed", ["package", "virtualenv"])
def test_hooks_left_by_a_removed_filecache_leave_gemini_as_plain(
    tmp_path: Path, removed: str
) -> None:
    """``pip uninstall`` (or removing the virtualenv) with the hooks still installed: Gemini
    CLI works as plain, its requests to the model equal those of a world without filecache."""
    python, package = throwaway_install(tmp_path / "install")

    def world(name: str, install: bool) -> list[Any]:
        base = tmp_path / name
        home, project = base / "home", base / "project"
        (home / ".gemini").mkdir(parents=True)
        project.mkdir()
        (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
        (project / "notes.txt").write_text(lines("notes"))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "XDG_CACHE_HOME": str(home / ".cache"), "GEMINI_API_KEY": "test-key",
               "GEMINI_CLI_NO_RELAUNCH": "1", "GEMINI_CLI_TRUST_WORKSPACE": "true",
               "NO_COLOR": "1"}  # fmt: skip
        if install:
            done = subprocess.run(
                [str(python), "-m", "filecache", "install", "gemini-cli"], cwd=project, env=env,
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0 and "installed" in done.stdout, done
            if removed == "package":
                shutil.rmtree(package)  # what pip uninstall leaves: the interpreter
            else:
                shutil.rmtree(tmp_path / "install")
        notes = str(project / "notes.txt")
        script = Script([
            [call("read_file", {"file_path": notes}, "r1")],
            [call("read_file", {"file_path": notes}, "r2")],
            [call("run_shell_command", {"command": "cat notes.txt"}, "b1")],
            [text("done")],
        ])  # fmt: skip
        with private_runtime(env), ScriptedGemini(script) as model:
            Gemini(home, project, env).run(model, "-p", "read the notes twice", "--yolo")
        assert not (project / ".filecache").exists()  # nothing of filecache ran
        sent = json.dumps([b["contents"] for b in model.main_requests()])
        sent = re.sub(r"Process Group PGID: \d+", "Process Group PGID: X", sent)  # a shell's pid
        return json.loads(sent.replace(str(base), "WORLD"))

    left = world("left", install=True)
    assert left == world("plain", install=False)
