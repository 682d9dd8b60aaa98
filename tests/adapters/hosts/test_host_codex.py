"""filecache inside the real Codex CLI: set up by ``filecache install codex`` in a throwaway HOME
and project, driven by a scripted Responses API on 127.0.0.1. Every assertion about what the
model saw reads the requests Codex sent (``server.outputs()``), never filecache's own records.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from codex_driver import CODEX_VERSION, CodexWorld, codex_binary
from conftest import NOTES
from responses_server import ScriptedResponses, exec_call, message, patch_call
from test_secrets import store_bytes

from filecache.core.render import shell_instructions

pytestmark = pytest.mark.hosts

BINARY = codex_binary()
# 120 lines: a FileRef with the instructions (the first short answer) is shorter than it.
APP = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(1, 41))
NOTE = "\n" + shell_instructions()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[CodexWorld]:
    world = CodexWorld(tmp_path, BINARY)
    (world.project / "notes.txt").write_text(NOTES)
    (world.project / "src").mkdir()
    (world.project / "src" / "app.py").write_text(APP)
    done = world.filecache("install", "codex")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("installed filecache hooks for Codex CLI in "), done.stdout
    yield world
    world.close()
    # No hook failed internally in any scenario (a failure would leave Codex's output alone
    # and pass the short-answer asserts for the wrong reason only where they do not check).
    assert not world.hook_log.exists(), world.hook_log.read_text()


def _run(
    world: CodexWorld, *turns: Any, extra: tuple[str, ...] = (), **kw: Any
) -> tuple[ScriptedResponses, dict[str, str]]:
    server = ScriptedResponses([*turns, [message("done")]], **kw).start()
    try:
        run = world.exec(server, "go", *extra)
    finally:
        server.stop()
    assert run.returncode == 0, run.stderr[-2000:]
    return server, server.outputs()


def _short(output: str, content: str) -> bool:
    """A short answer (the instructions the first one carries left out)."""
    output = output.replace(NOTE, "")
    return len(output) * 4 < len(content) and "[filecache]" in output


def test_the_binary_is_the_pinned_version() -> None:
    done = subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == f"codex-cli {CODEX_VERSION}"


def test_unchanged_reread_is_a_fileref_naming_the_first_call(world: CodexWorld) -> None:
    server, out = _run(world, [exec_call("call_a1", "cat notes.txt")],
                       [exec_call("call_a2", "cat notes.txt")])  # fmt: skip
    # Nothing rides in every request from the start: the first short answer says what the
    # answers mean, on its last line.
    assert not any(shell_instructions() in json.dumps(body) for body in server.requests[:2])
    assert out["call_a1"].endswith("Output:\n" + NOTES)  # the first read: Codex's own output
    assert _short(out["call_a2"], NOTES)
    assert out["call_a2"].endswith(NOTE + "\n") and out["call_a2"].count(NOTE) == 1
    assert "notes.txt unchanged since your result call_a1" in out["call_a2"]
    assert out["call_a2"].startswith("Process exited with code 0\nOutput:\n")
    assert "line 30" not in out["call_a2"]


def test_ranged_sed_reread_is_short(world: CodexWorld) -> None:
    _, out = _run(
        world,
        [exec_call("call_s1", "sed -n '10,30p' notes.txt")],
        [exec_call("call_s2", "sed -n '10,30p' notes.txt")],
        [exec_call("call_s3", "sed -n '12,20p' notes.txt")],
        [exec_call("call_s4", "sed -n '25,40p' notes.txt")],
    )
    wanted = "".join(NOTES.splitlines(keepends=True)[9:30])
    assert out["call_s1"].endswith("Output:\n" + wanted)
    for cid in ("call_s2", "call_s3"):
        assert _short(out[cid], wanted), out[cid]
        assert "unchanged since your result call_s1" in out[cid]
    assert NOTE in out["call_s2"] and NOTE not in out["call_s3"]  # said once
    # Lines 31-40 were never shown: Codex's own output stands, whole.
    assert out["call_s4"].endswith("".join(NOTES.splitlines(keepends=True)[24:40]))


def test_read_after_the_models_own_patch_is_short(world: CodexWorld) -> None:
    patch = (
        "*** Begin Patch\n*** Update File: src/app.py\n@@ def f7(x):\n-    return x + 7\n"
        "+    return x * 7\n*** End Patch\n"
    )
    _, out = _run(
        world,
        [exec_call("call_p1", "cat src/app.py")],
        [patch_call("call_p2", patch)],
        [exec_call("call_p3", "cat src/app.py")],
    )
    assert "Success. Updated the following files:" in out["call_p2"]  # Codex's own answer
    new = (world.project / "src" / "app.py").read_text()
    assert new == APP.replace("return x + 7\n", "return x * 7\n")
    assert _short(out["call_p3"], new), out["call_p3"]
    assert "src/app.py unchanged since your result" in out["call_p3"]


def test_change_outside_is_a_diff(world: CodexWorld) -> None:
    notes = world.project / "notes.txt"

    def edit_then_reread(body: dict[str, Any]) -> list[dict[str, Any]]:
        notes.write_text(NOTES.replace("line 30: the quick", "line 30: THE SLOW"))
        return [exec_call("call_d2", "cat notes.txt")]

    _, out = _run(
        world,
        [exec_call("call_d1", "cat notes.txt")],
        edit_then_reread,
        [exec_call("call_d3", "cat -- notes.txt")],  # the recovery the hint names
    )
    assert out["call_d2"].endswith(NOTE + "\n")  # the first short answer of the context
    diff = out["call_d2"].replace(NOTE, "")
    assert len(diff) * 4 < len(NOTES), diff
    assert "-line 30: the quick brown fox" in diff
    assert "+line 30: THE SLOW brown fox" in diff
    assert "@@" in diff and "line 10:" not in diff
    assert diff.endswith("`cat -- PATH` prints the whole file.)\n")
    assert out["call_d3"].endswith("Output:\n" + notes.read_text())


def test_dotenv_is_left_alone_and_nothing_of_it_is_stored(world: CodexWorld) -> None:
    secret = "FILECACHE_CODEX_SECRET_9f3b2c71"
    (world.project / ".env").write_text(f"API_TOKEN={secret}\n")
    (world.project / "settings.txt").symlink_to(".env")  # a link under another name
    os.link(world.project / ".env", world.project / "copy.txt")  # the same inode, another name
    reads = ["cat .env", "cat .env", "cat .e*", "cat .en?", "head -n 1 .env", "sed -n '1p' .env",
             "cat settings.txt", "cat settings.txt", "cat copy.txt", "cat copy.txt"]  # fmt: skip
    turns = [[exec_call(f"call_e{i}", cmd)] for i, cmd in enumerate(reads)]
    _, out = _run(world, [exec_call("call_n", "cat notes.txt")], *turns)
    for i in range(len(reads)):
        assert out[f"call_e{i}"].endswith(f"Output:\nAPI_TOKEN={secret}\n")  # Codex's, whole
    assert world.store.exists()  # the store is there (notes.txt went through it) ...
    assert secret.encode() not in store_bytes(world.store)  # ... without the secret
    for path in world.project.joinpath(".filecache").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_project_cannot_shadow_the_hook(world: CodexWorld) -> None:
    """The hook runs in the project's folder; ``python -I`` keeps that folder off sys.path, so
    a repository's own ``filecache`` package is never what runs."""
    fake = world.project / "filecache" / "adapters" / "hosts"
    fake.mkdir(parents=True)
    for folder in (fake, fake.parent, fake.parent.parent):
        (folder / "__init__.py").write_text("")
    (fake / "__main__.py").write_text('print(\'{"decision": "block", "reason": "PLANTED"}\')\n')
    _, out = _run(world, [exec_call("call_h1", "cat notes.txt")],
                  [exec_call("call_h2", "cat notes.txt")])  # fmt: skip
    assert "PLANTED" not in out["call_h1"] + out["call_h2"]
    assert "unchanged since your result call_h1" in out["call_h2"]


def _in_src(call_id: str, cmd: str) -> dict[str, Any]:
    call = exec_call(call_id, cmd)
    call["arguments"] = json.dumps({"cmd": cmd, "workdir": "src"})
    return call


def test_a_workdir_is_its_own_root(world: CodexWorld) -> None:
    """Codex hands a hook the call's workdir as ``cwd``: the same command there reads another
    file, and never gets a FileRef to the root's."""
    (world.project / "src" / "notes.txt").write_text("the other notes\n" * 40)
    _, out = _run(
        world,
        [exec_call("call_w1", "cat notes.txt")],
        [_in_src("call_w2", "cat notes.txt")],
        [_in_src("call_w3", "cat notes.txt")],
        [exec_call("call_w4", "cat notes.txt")],
    )
    assert out["call_w2"].endswith("Output:\n" + "the other notes\n" * 40)
    assert "notes.txt unchanged since your result call_w2" in out["call_w3"]
    assert "notes.txt unchanged since your result call_w1" in out["call_w4"]


def test_failed_commands_are_left_alone(world: CodexWorld) -> None:
    _, out = _run(
        world,
        [exec_call("call_f1", "cat notes.txt")],
        [exec_call("call_f2", "cat missing.txt")],
        [exec_call("call_f3", "cat notes.txt; false")],
        [exec_call("call_f4", "cat notes.txt notes.txt")],
    )
    assert "No such file or directory" in out["call_f2"]
    assert out["call_f3"].endswith("Output:\n" + NOTES)
    assert "[filecache]" not in out["call_f2"] + out["call_f3"]
    assert out["call_f4"].endswith("Output:\n" + NOTES + NOTES)  # served as content, exact


def test_output_codex_truncated_backs_no_fileref(world: CodexWorld) -> None:
    big = "".join(f"line {i} the quick brown fox jumps over the lazy dog\n" for i in range(3000))
    (world.project / "big.txt").write_text(big)
    _, out = _run(
        world, [exec_call("call_b1", "cat big.txt")], [exec_call("call_b2", "cat big.txt")]
    )
    assert "tokens truncated" in out["call_b1"]  # the model never saw the middle ...
    assert "unchanged since" not in out["call_b2"]  # ... so nothing may say it holds it


def test_parallel_calls_in_one_turn(world: CodexWorld) -> None:
    _, out = _run(
        world,
        [exec_call("call_q1", "cat notes.txt"), exec_call("call_q2", "cat src/app.py")],
        [exec_call("call_q3", "cat notes.txt"), exec_call("call_q4", "cat src/app.py")],
    )
    assert "notes.txt unchanged since your result call_q1" in out["call_q3"]
    assert "src/app.py unchanged since your result call_q2" in out["call_q4"]
    assert out["call_q3"].count(NOTE) + out["call_q4"].count(NOTE) == 1


def test_compaction_makes_content_come_again(world: CodexWorld) -> None:
    server, out = _run(
        world,
        [exec_call("call_c1", "cat notes.txt")],
        [exec_call("call_c2", "cat notes.txt")],
        input_tokens=50_000,  # over the limit: Codex compacts after each response
        extra=("-c", "model_auto_compact_token_limit=20000"),
    )
    assert server.compactions >= 1
    # The compaction dropped call_c1's output from what the model is sent ...
    last = server.requests[-1]["input"]
    assert not any(i.get("call_id") == "call_c1" for i in last if "output" in i)
    # ... so the re-read is the content, not a FileRef to a result the model lost.
    assert out["call_c2"].endswith("Output:\n" + NOTES)


def test_resumed_session_keeps_its_filerefs(world: CodexWorld) -> None:
    first, out1 = _run(world, [exec_call("call_r1", "cat notes.txt")])
    thread = _thread_id(world)
    server = ScriptedResponses([[exec_call("call_r2", "cat notes.txt")], [message("done")]]).start()
    try:
        run = world.exec(server, "again", resume=thread)
    finally:
        server.stop()
    assert run.returncode == 0, run.stderr[-2000:]
    out = server.outputs()
    assert out["call_r1"].endswith("Output:\n" + NOTES)  # the resumed model holds it ...
    assert "unchanged since your result call_r1" in out["call_r2"]  # ... so this is short


def _thread_id(world: CodexWorld) -> str:
    rollouts = sorted((world.codex_home / "sessions").rglob("rollout-*.jsonl"))
    assert len(rollouts) == 1
    return json.loads(rollouts[0].read_text().splitlines()[0])["payload"]["id"]


def test_codex_lists_our_hooks_as_trusted(world: CodexWorld) -> None:
    """Codex's own view (app-server ``hooks/list``): every hook of ours is trusted, with the
    hash install recorded, and nothing else is."""
    proc = subprocess.Popen(
        [BINARY, "app-server"], cwd=world.project, env=world.env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for message_ in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"clientInfo": {"name": "filecache-tests", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
             "params": {"cwds": [str(world.project)]}},
        ):  # fmt: skip
            proc.stdin.write(json.dumps(message_) + "\n")
            proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            assert line, "codex app-server closed without answering hooks/list"
            answer = json.loads(line)
            if answer.get("id") == 2:
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()
    (listed,) = answer["result"]["data"]
    hooks = listed["hooks"]
    assert {h["eventName"] for h in hooks} == {
        "postToolUse", "preCompact", "postCompact", "sessionStart"
    }  # fmt: skip
    assert all(h["trustStatus"] == "trusted" and h["enabled"] for h in hooks), hooks
    assert all(h["command"].endswith("/hosts/hook_client.py codex") for h in hooks)


@pytest.fixture
def bare_world(tmp_path: Path) -> Iterator[CodexWorld]:
    world = CodexWorld(tmp_path, BINARY)
    yield world
    world.close()


def test_project_scope_install_works_once_the_project_is_trusted(bare_world: CodexWorld) -> None:
    world = bare_world
    (world.project / "notes.txt").write_text(NOTES)
    done = world.filecache("install", "codex", "--project")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("; Codex loads them once you trust this project")
    _, out = _run(world, [exec_call("call_u1", "cat notes.txt")],
                  [exec_call("call_u2", "cat notes.txt")])  # fmt: skip
    assert "[filecache]" not in out["call_u2"]  # an untrusted project's hooks do not run
    with open(world.codex_home / "config.toml", "a") as config:
        config.write(f'\n[projects."{world.project}"]\ntrust_level = "trusted"\n')
    _, out = _run(world, [exec_call("call_t1", "cat notes.txt")],
                  [exec_call("call_t2", "cat notes.txt")])  # fmt: skip
    assert "unchanged since your result call_t1" in out["call_t2"]
    assert not world.hook_log.exists()


def _trust_project(world: CodexWorld) -> None:
    config = world.codex_home / "config.toml"
    entry = f'\n[projects."{world.project.resolve()}"]\ntrust_level = "trusted"\n'
    config.write_text(config.read_text() + entry)


def _installed_at(world: CodexWorld) -> list[str]:
    out = []
    for scope, path in (("user", world.codex_home), ("project", world.project / ".codex")):
        hooks = path / "hooks.json"
        if hooks.exists() and "hook_client.py codex" in hooks.read_text():
            out.append(scope)
    return out


@pytest.mark.parametrize("second", ["--project", "--user"])
def test_installed_at_both_scopes_one_instance_answers(world: CodexWorld, second: str) -> None:
    """Codex runs the user's and a trusted project's hooks side by side (before, the model got
    every answer twice): an install at one scope removes ours at the other, so one answer
    reaches the model, once."""
    _trust_project(world)
    if second == "--user":  # the world's user install first moves to the project
        assert (
            "removed filecache's hooks" in world.filecache("install", "codex", "--project").stdout
        )
    done = world.filecache("install", "codex", second)
    assert done.returncode == 0, done.stderr
    assert "removed filecache's hooks for Codex CLI at --" in done.stdout, done.stdout
    assert _installed_at(world) == [second.removeprefix("--")]
    _, out = _run(world, [exec_call("call_b1", "cat notes.txt")],
                  [exec_call("call_b2", "cat notes.txt")])  # fmt: skip
    assert out["call_b2"].count(NOTE) == 1, out["call_b2"]
    assert out["call_b2"].replace(NOTE, "").count("unchanged since your result") == 1
    assert out["call_b2"].startswith("Process exited with code 0\nOutput:\n[filecache] notes.txt")


def test_a_store_that_cannot_be_written_is_said_once(
    world: CodexWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex's hook output carries ``systemMessage`` for the user (its TUI shows it as the
    hook's warning; ``codex exec --json`` prints no hook output): once per session, and the
    model gets Codex's own output."""
    (world.home / "a-file").write_text("not a folder")
    env = CodexWorld.env.fget  # type: ignore[attr-defined]
    broken = {"FILECACHE_STORE": str(world.home / "a-file" / "cache.db")}
    monkeypatch.setattr(CodexWorld, "env", property(lambda self: {**env(self), **broken}))
    said = world.home / ".cache" / "filecache" / "notices"
    server, out = _run(world, [exec_call("call_a1", "cat notes.txt")],
                       [exec_call("call_a2", "cat notes.txt")])  # fmt: skip
    assert out["call_a1"].endswith("Output:\n" + NOTES) and out["call_a2"].endswith(NOTES)
    assert "[filecache]" not in json.dumps(server.requests)
    assert len(list(said.iterdir())) == 1  # said once, for this session
    assert "StoreError" in world.hook_log.read_text()
    world.hook_log.unlink()  # the fixture checks that nothing else failed
