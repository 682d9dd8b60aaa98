"""Codex CLI host, without the binary: install (merging, idempotence, uninstall, trust hashes),
patch parsing and rollout reading. The binary itself is driven in
tests/adapters/hosts/test_host_codex.py."""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path

import pytest
from filecache.adapters.hosts import codex_install
from filecache.adapters.hosts.codex_install import hook_key, install, is_ours, trust_hash
from filecache.adapters.hosts.codex_patch import FileOp, parse_patch
from filecache.adapters.hosts.codex_rollout import read_rollout, truncated
from filecache.adapters.hosts.config_files import CLIENT, HookParts, hook_parts

from filecache.errors import ConfigError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway HOME without CODEX_HOME: Codex's folder is HOME/.codex."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


def _hooks(folder: Path) -> dict:
    return json.loads((folder / "hooks.json").read_text())


def _state(home: Path) -> dict:
    return tomllib.loads((home / ".codex" / "config.toml").read_text())["hooks"]["state"]


# -- trust hashes: pinned to what Codex 0.169 itself reports (app-server ``hooks/list``) --------

CODEX_HASHES = [
    # (event, matcher, handler, currentHash as codex 0.169.0 listed it)
    ("PostToolUse", "Bash", {"type": "command", "command": "true"},
     "sha256:024bce210e0ab627853e2fef2785255eeedfe064efb6b3f11d2000d124878d9c"),
    ("PostToolUse", "Bash|apply_patch",
     {"type": "command", "timeout": 30,
      "command": "/usr/bin/python3 /tmp/codexlab/dump_hook.py -m filecache.adapters.hosts codex"},
     "sha256:6b62d731cc16699c964dc9e395d7c337800f216c0ba6155c9bc397722e35073f"),
    ("PreCompact", None,
     {"type": "command", "timeout": 30,
      "command": "/usr/bin/python3 /tmp/codexlab/dump_hook.py -m filecache.adapters.hosts codex"},
     "sha256:547af718eca0209b9bff561afab4a44255f4d47568338b227354f0d187bd0eba"),
    ("SessionStart", None,
     {"type": "command", "timeout": 30,
      "command": "/usr/bin/python3 /tmp/codexlab/dump_hook.py -m filecache.adapters.hosts codex"},
     "sha256:3628370992d24f68251cf10747a12b2e73f15ee9c2f752b50ae34c40508de105"),
]  # fmt: skip


@pytest.mark.parametrize(("event", "matcher", "handler", "expected"), CODEX_HASHES)
def test_trust_hash_is_codexs(
    event: str, matcher: str | None, handler: dict, expected: str
) -> None:
    assert trust_hash(event, matcher, handler) == expected


def test_trust_hash_changes_with_every_part_of_the_handler() -> None:
    base = {"type": "command", "command": "x", "timeout": 30}
    seen = {
        trust_hash("PostToolUse", "Bash", base),
        trust_hash("PreToolUse", "Bash", base),
        trust_hash("PostToolUse", "Bash|apply_patch", base),
        trust_hash("PostToolUse", None, base),
        trust_hash("PostToolUse", "Bash", {**base, "command": "y"}),
        trust_hash("PostToolUse", "Bash", {**base, "timeout": 31}),
        trust_hash("PostToolUse", "Bash", {**base, "async": True}),
        trust_hash("PostToolUse", "Bash", {**base, "statusMessage": "m"}),
    }
    assert len(seen) == 8
    # Defaults as Codex normalizes them: no timeout is 600; a timeout of 0 is 1.
    assert trust_hash("Stop", None, {"command": "x"}) == trust_hash(
        "Stop", None, {"command": "x", "timeout": 600}
    )
    assert trust_hash("Stop", None, {"command": "x", "timeout": 0}) == trust_hash(
        "Stop", None, {"command": "x", "timeout": 1}
    )


# -- install ------------------------------------------------------------------------------


def test_install_writes_our_hooks_and_exactly_their_trust(home: Path, project: Path) -> None:
    line = install(scope=None, uninstall=False, cwd=project)
    folder = home / ".codex"
    assert line == (
        f"installed filecache hooks for Codex CLI in {folder / 'hooks.json'}, "
        f"trusted in {folder / 'config.toml'}"
    )
    hooks = _hooks(folder)["hooks"]
    assert set(hooks) == set(codex_install.EVENTS)
    expected_state = {}
    for event, groups in hooks.items():
        assert len(groups) == 1
        (handler,) = groups[0]["hooks"]
        assert hook_parts(handler["command"]) == HookParts(
            "codex", sys.executable, str(CLIENT), guarded=True
        )
        assert os.path.isabs(sys.executable)
        assert groups[0].get("matcher") == codex_install.EVENTS[event]
        key = hook_key(folder / "hooks.json", event, 0, 0)
        expected_state[key] = {
            "enabled": True,
            "trusted_hash": trust_hash(event, groups[0].get("matcher"), handler),
        }
    assert _state(home) == expected_state
    config = tomllib.loads((folder / "config.toml").read_text())
    assert set(config) == {"hooks"}  # nothing else: no project trust, no settings


def test_install_is_idempotent(home: Path, project: Path) -> None:
    install(scope=None, uninstall=False, cwd=project)
    files = {p: p.read_bytes() for p in (home / ".codex").iterdir()}
    line = install(scope=None, uninstall=False, cwd=project)
    assert line.startswith("filecache hooks for Codex CLI already installed in ")
    assert {p: p.read_bytes() for p in (home / ".codex").iterdir()} == files


USER_HOOKS = {
    "hooks": {
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify", "timeout": 5}]}],
    },
    "x-note": "kept",
}
USER_CONFIG = """# my settings
model = "gpt-5.5"  # the default

[projects."/work/p"]
trust_level = "trusted"

[hooks.state."{hooks}:post_tool_use:0:0"]
enabled = true
trusted_hash = "{audit}"
"""


def _user_setup(home: Path) -> tuple[Path, str]:
    folder = home / ".codex"
    folder.mkdir()
    (folder / "hooks.json").write_text(json.dumps(USER_HOOKS))
    audit = trust_hash("PostToolUse", "Bash", {"command": "audit"})
    config = USER_CONFIG.format(hooks=folder / "hooks.json", audit=audit)
    (folder / "config.toml").write_text(config)
    return folder, config


def test_install_merges_with_the_users_hooks_and_config(home: Path, project: Path) -> None:
    folder, config = _user_setup(home)
    install(scope=None, uninstall=False, cwd=project)
    hooks = _hooks(folder)
    assert hooks["x-note"] == "kept"
    post = hooks["hooks"]["PostToolUse"]
    assert post[0] == USER_HOOKS["hooks"]["PostToolUse"][0]  # the user's group keeps index 0
    assert is_ours(post[1]["hooks"][0])
    assert hooks["hooks"]["Stop"] == USER_HOOKS["hooks"]["Stop"]
    text = (folder / "config.toml").read_text()
    assert text.startswith(config.rstrip("\n"))  # comments and layout survive
    state = _state(home)
    audit_key = hook_key(folder / "hooks.json", "PostToolUse", 0, 0)
    ours_key = hook_key(folder / "hooks.json", "PostToolUse", 1, 0)
    audit = trust_hash("PostToolUse", "Bash", {"command": "audit"})
    assert state[audit_key]["trusted_hash"] == audit
    assert state[ours_key]["trusted_hash"] == trust_hash(
        "PostToolUse", "Bash|apply_patch", post[1]["hooks"][0]
    )
    assert len(state) == 1 + len(codex_install.EVENTS)


def test_uninstall_restores_the_users_files(home: Path, project: Path) -> None:
    folder, config = _user_setup(home)
    install(scope=None, uninstall=False, cwd=project)
    line = install(scope=None, uninstall=True, cwd=project)
    assert line.startswith("removed filecache hooks for Codex CLI in ")
    assert _hooks(folder) == USER_HOOKS
    assert (folder / "config.toml").read_text() == config
    again = install(scope=None, uninstall=True, cwd=project)
    assert again.startswith("found no filecache hooks")
    assert (folder / "config.toml").read_text() == config


def test_uninstall_moves_the_trust_of_groups_that_followed_ours(home: Path, project: Path) -> None:
    folder = home / ".codex"
    install(scope=None, uninstall=False, cwd=project)
    hooks = _hooks(folder)
    later = {"matcher": "Bash", "hooks": [{"type": "command", "command": "later"}]}
    hooks["hooks"]["PostToolUse"].append(later)
    (folder / "hooks.json").write_text(json.dumps(hooks))
    later_hash = trust_hash("PostToolUse", "Bash", later["hooks"][0])
    with open(folder / "config.toml", "a") as out:
        key = hook_key(folder / "hooks.json", "PostToolUse", 1, 0)
        out.write(f'\n[hooks.state."{key}"]\nenabled = true\ntrusted_hash = "{later_hash}"\n')
    install(scope=None, uninstall=True, cwd=project)
    assert _hooks(folder)["hooks"] == {"PostToolUse": [later]}
    assert _state(home) == {
        hook_key(folder / "hooks.json", "PostToolUse", 0, 0): {
            "enabled": True,
            "trusted_hash": later_hash,
        }
    }


def test_reinstall_from_another_interpreter_replaces_ours(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(scope=None, uninstall=False, cwd=project)
    monkeypatch.setattr(sys, "executable", "/opt/other venv/bin/python3")
    install(scope=None, uninstall=False, cwd=project)
    hooks = _hooks(home / ".codex")["hooks"]
    for groups in hooks.values():
        assert len(groups) == 1
        parts = hook_parts(groups[0]["hooks"][0]["command"])
        assert parts is not None and parts.interpreter == "/opt/other venv/bin/python3"
    state = _state(home)
    assert len(state) == len(codex_install.EVENTS)
    for event, groups in hooks.items():
        key = hook_key(home / ".codex" / "hooks.json", event, 0, 0)
        assert state[key]["trusted_hash"] == trust_hash(
            event, groups[0].get("matcher"), groups[0]["hooks"][0]
        )


def test_codex_home_is_honoured_and_resolved(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real-codex"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "link"))
    line = install(scope=None, uninstall=False, cwd=project)
    assert str(real / "hooks.json") in line
    state = tomllib.loads((real / "config.toml").read_text())["hooks"]["state"]
    assert all(key.startswith(f"{real / 'hooks.json'}:") for key in state)


def test_project_scope(home: Path, project: Path) -> None:
    line = install(scope="project", uninstall=False, cwd=project)
    assert line.endswith("; Codex loads them once you trust this project")
    assert (project / ".codex" / "hooks.json").is_file()
    state = _state(home)
    assert all(key.startswith(f"{project / '.codex' / 'hooks.json'}:") for key in state)
    assert "projects" not in tomllib.loads((home / ".codex" / "config.toml").read_text())
    with open(home / ".codex" / "config.toml", "a") as out:
        out.write(f'\n[projects."{project}"]\ntrust_level = "trusted"\n')
    assert install(scope="project", uninstall=False, cwd=project).startswith("filecache hooks")
    install(scope="project", uninstall=True, cwd=project)
    assert _hooks(project / ".codex") == {"hooks": {}}
    assert "hooks" not in tomllib.loads((home / ".codex" / "config.toml").read_text())


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("hooks.json", "{not json"),
        ("hooks.json", '{"hooks": []}'),
        ("hooks.json", '{"hooks": {"PostToolUse": {}}}'),
        ("config.toml", "model = "),
        # Valid TOML that a [hooks.state."K"] table cannot be added to (an inline table):
        ("config.toml", "hooks = { state = {} }\n"),
    ],
)
def test_a_file_install_cannot_merge_into_is_refused_untouched(
    home: Path, project: Path, name: str, text: str
) -> None:
    folder = home / ".codex"
    folder.mkdir()
    (folder / name).write_text(text)
    with pytest.raises(ConfigError) as err:
        install(scope=None, uninstall=False, cwd=project)
    assert str(folder / name) in str(err.value) or "hooks." in str(err.value)
    assert sorted(p.name for p in folder.iterdir()) == [name]
    assert (folder / name).read_text() == text


# -- patches ------------------------------------------------------------------------------

PATCH = """*** Begin Patch
*** Add File: docs/new.md
+# New
+
+text
*** Delete File: old.txt
*** Update File: src/app.py
@@ def main():
-    return 1
+    return 2
@@
 x = 1
-y = 2
+y = 3
+z = 4
*** End of File
*** Update File: a.txt
*** Move to: b.txt
@@
-a
+b
*** End Patch
"""


def test_parse_patch() -> None:
    assert parse_patch(PATCH) == [
        FileOp("add", "docs/new.md", content="# New\n\ntext\n"),
        FileOp("delete", "old.txt"),
        FileOp(
            "update",
            "src/app.py",
            edits=(
                ("    return 1\n", "    return 2\n"),
                ("x = 1\ny = 2\n", "x = 1\ny = 3\nz = 4\n"),
            ),
        ),
        FileOp("update", "a.txt", edits=(("a\n", "b\n"),), move_to="b.txt"),
    ]


def test_parse_patch_first_chunk_without_header_and_heredoc() -> None:
    text = (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: f\n k\n-a\n+b\n*** End Patch\nEOF\n"
    )
    assert parse_patch(text) == [FileOp("update", "f", edits=(("k\na\n", "k\nb\n"),))]


def test_parse_patch_insertion_only_chunk_is_not_exact() -> None:
    text = "*** Begin Patch\n*** Update File: f\n@@\n+new line\n*** End Patch\n"
    assert parse_patch(text) == [FileOp("update", "f", edits=(), exact=False)]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "*** Update File: f\n-a\n+b\n",  # no Begin/End
        "*** Begin Patch\n*** Frobnicate File: f\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: f\n?what\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: \n-a\n+b\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: f\n k\n*** End Patch\n",  # changes nothing
        "*** End Patch\n*** Begin Patch\n",
    ],
)
def test_parse_patch_refuses_what_it_cannot_read(text: str) -> None:
    assert parse_patch(text) is None


# -- rollouts -----------------------------------------------------------------------------


SPACED = False  # json.dumps' own separators (not what Codex writes): the decoding path


def _line(kind: str, payload: dict) -> str:
    line = {"timestamp": "t", "ordinal": 1, "type": kind, "payload": payload}
    return json.dumps(line) if SPACED else json.dumps(line, separators=(",", ":"))


def _call(cid: str, cmd: str, **extra: str) -> str:
    arguments = json.dumps({"cmd": cmd, **extra})
    return _line("response_item", {"type": "function_call", "call_id": cid, "name": "exec_command",
                                   "arguments": arguments})  # fmt: skip


def _out(cid: str, text: str, kind: str = "function_call_output") -> str:
    return _line("response_item", {"type": kind, "call_id": cid, "output": text})


def _done(cid: str, code: int, cwd: str) -> str:
    item = {"type": "CommandExecution", "id": cid, "exit_code": code, "cwd": cwd,
            "status": "completed" if code == 0 else "failed"}  # fmt: skip
    return _line("event_msg", {"type": "item_completed", "item": item})


@pytest.fixture(params=["compact", "spaced"])
def line_shape(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Rollout lines as Codex writes them (matched on bytes) and spaced (decoded)."""
    monkeypatch.setattr(sys.modules[__name__], "SPACED", request.param == "spaced")
    return str(request.param)


def test_rollout_held_pending_truncated_and_ended(tmp_path: Path, line_shape: str) -> None:
    lines = [
        _line("session_meta", {"id": "s"}),
        _call("c1", "cat a"), _done("c1", 0, "file:///p%20q"), _out("c1", "Output:\na\n"),
        _call("c2", "cat big"), _out("c2", "Output:\nWarning: truncated output (original …)"),
        _call("c5", "cat big"), _out("c5", "line 380 the quick br…30224 tokens truncated…"),
        _line("response_item", {"type": "custom_tool_call", "call_id": "c3", "name": "apply_patch",
                                "input": "…"}),
        _out("c3", "Exit code: 0", "custom_tool_call_output"),
        _call("c4", "cat b", workdir="src"), _done("c4", 1, "file:///p%20q/src"),
        '{"type": "response_item", "payload": {"type": "function_call_out',  # being written
    ]  # fmt: skip
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    found = read_rollout(path, ["c1", "c4"])
    assert found is not None
    assert found.held == {"c1", "c3"}
    assert found.pending == {"c4"}
    assert found.present == {"c1", "c3", "c4"}
    assert found.ended["c1"].exit_code == 0 and found.ended["c1"].cwd == "/p q"
    assert found.ended["c4"].exit_code == 1
    assert set(found.ended) == {"c1", "c4"}  # only the calls asked about


def test_rollout_compaction_and_rollback_drop_what_came_before(
    tmp_path: Path, line_shape: str
) -> None:
    kept = {"type": "function_call_output", "call_id": "k", "output": "x"}
    lines = [
        _call("c1", "cat a"), _out("c1", "a"),
        _line("compacted", {"message": "sum", "replacement_history": [kept]}),
        _call("c2", "cat a"), _out("c2", "a"),
    ]  # fmt: skip
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    found = read_rollout(path)
    assert found is not None and found.held == {"k", "c2"} and found.compactions == 1
    with open(path, "a") as out:
        out.write(_line("event_msg", {"type": "thread_rolled_back", "num_turns": 1}) + "\n")
        out.write(_call("c3", "cat a") + "\n")
    found = read_rollout(path)
    assert found is not None and found.held == set() and found.pending == {"c3"}


def test_rollout_missing_is_none(tmp_path: Path) -> None:
    assert read_rollout(tmp_path / "nope.jsonl") is None


def test_truncation_marks() -> None:
    assert truncated("Warning: truncated output (original token count: 40224)\nTotal output")
    assert truncated("line 380 the quick br…30224 tokens truncated…s over the lazy dog")
    assert not truncated("line 1\nline 2\n")


# -- the hook, on payloads shaped as Codex 0.169 sends them (a real store and files) --------


class Hook:
    """One Codex session in ``root``: appends rollout lines as Codex does, calls the hook."""

    def __init__(self, root: Path, rollout: Path) -> None:
        self.root, self.rollout = root, rollout
        rollout.write_text(_line("session_meta", {"id": "sess-1"}) + "\n")

    def _append(self, *lines: str) -> None:
        with open(self.rollout, "a") as out:
            out.write("".join(line + "\n" for line in lines))

    def payload(self, event: str, **fields: object) -> bytes:
        base = {"session_id": "sess-1", "turn_id": "t1", "transcript_path": str(self.rollout),
                "cwd": str(self.root), "hook_event_name": event, "model": "gpt-5.5",
                "permission_mode": "bypassPermissions"}  # fmt: skip
        return json.dumps({**base, **fields}).encode()

    def bash(self, cid: str, cmd: str, output: str, code: int = 0) -> bytes:
        from filecache.adapters.hosts.codex import run_hook

        self._append(_call(cid, cmd), _done(cid, code, f"file://{self.root}"))
        answer = run_hook([], self.payload("PostToolUse", tool_name="Bash",
                                           tool_input={"command": cmd}, tool_response=output,
                                           tool_use_id=cid))  # fmt: skip
        self._append(_out(cid, output))
        return answer


@pytest.fixture
def hook(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hook:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return Hook(root, tmp_path / "rollout.jsonl")


def _reason(answer: bytes) -> str:
    decoded = json.loads(answer)
    assert decoded["decision"] == "block"
    return str(decoded["reason"])


def test_hook_serves_a_reread_and_leaves_a_failed_one(
    hook: Hook, notes: str, tmp_path: Path
) -> None:
    assert hook.bash("c1", "cat notes.txt", notes) == b""
    assert "unchanged since your result c1" in _reason(hook.bash("c2", "cat notes.txt", notes))
    # The same read, but the command failed (exit 1) in Codex: its output stands.
    assert hook.bash("c3", "cat notes.txt", "cat: notes.txt: Permission denied\n", code=1) == b""
    assert not (tmp_path / "cache" / "filecache" / "hooks.log").exists()


def test_hook_without_a_rollout_serves_nothing(hook: Hook, notes: str) -> None:
    from filecache.adapters.hosts.codex import run_hook

    assert hook.bash("c1", "cat notes.txt", notes) == b""
    payload = json.loads(hook.payload("PostToolUse", tool_name="Bash", tool_use_id="c2",
                                      tool_input={"command": "cat notes.txt"},
                                      tool_response=notes))  # fmt: skip
    payload["transcript_path"] = None
    assert run_hook([], json.dumps(payload).encode()) == b""


def test_hook_precompact_forgets_and_the_first_short_answer_instructs(
    hook: Hook, notes: str
) -> None:
    from filecache.adapters.hosts.codex import run_hook

    from filecache.core.render import shell_instructions

    # Nothing at session start: the instructions ride with the first short answer only.
    for source in ("startup", "resume", "clear", "compact"):
        assert run_hook([], hook.payload("SessionStart", source=source)) == b""
    hook.bash("c1", "cat notes.txt", notes)
    first = _reason(hook.bash("c2", "cat notes.txt", notes))
    assert "since your result c1" in first and first.endswith("\n" + shell_instructions() + "\n")
    assert shell_instructions() not in _reason(hook.bash("c3", "cat notes.txt", notes))
    assert run_hook([], hook.payload("PreCompact", trigger="auto")) == b""
    assert hook.bash("c4", "cat notes.txt", notes) == b""  # content again (Codex's own)
    again = _reason(hook.bash("c5", "cat notes.txt", notes))
    assert "since your result c4" in again and again.count(shell_instructions()) == 1
    # A small range: the FileRef plus the instructions would be longer, so Codex's own stands.
    hook.bash("c6", "cat notes.txt", notes)
    assert run_hook([], hook.payload("PreCompact", trigger="auto")) == b""
    assert hook.bash("c7", "cat notes.txt", notes) == b""
    two = "".join(notes.splitlines(keepends=True)[:2])
    assert hook.bash("c8", "head -n 2 notes.txt", two) == b""
    assert shell_instructions() in _reason(hook.bash("c9", "cat notes.txt", notes))
    assert "since your result" in _reason(hook.bash("c10", "head -n 2 notes.txt", two))


@pytest.mark.parametrize(
    ("payload", "logged"),
    [
        (b"", 1),
        (b"not json", 1),
        (b"[]", 0),
        (b'{"hook_event_name": "PostToolUse"}', 0),
        (b'{"hook_event_name": "PostToolUse", "session_id": "s", "cwd": "relative"}', 0),
    ],
)
def test_hook_on_bad_input_answers_nothing(
    payload: bytes, logged: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filecache.adapters.hosts.codex import run_hook

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert run_hook([], payload) == b""
    log = tmp_path / "cache" / "filecache" / "hooks.log"
    assert (len(log.read_text().splitlines()) if log.exists() else 0) == logged


def test_the_full_read_command_is_never_served() -> None:
    """The hint tells a shell reader to run FULL_READ_COMMAND for the whole file: it works only
    while filecache leaves that command to the shell."""
    from filecache.core.render import FULL_READ_COMMAND
    from filecache.shell.shell_parse import parse_shell_read

    assert parse_shell_read(FULL_READ_COMMAND.replace("PATH", "notes.txt")) is None


def test_a_call_in_a_subfolder_keeps_the_repositorys_deny_list_and_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex runs a call with ``workdir`` app/: the hook's cwd is app/, but the settings (the
    project's deny-list) and the store are the repository's (issue 31, 8)."""
    from filecache.adapters.hosts.registry import run_hook
    from test_secrets import store_bytes

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "pyproject.toml").write_text('[tool.filecache]\ndeny = [".env*", "*.secret"]\n')
    app = repo / "app"
    app.mkdir()
    secret = "TOKEN=the-projects-own-secret-9f8e7d"
    for i, name in enumerate(["x.secret", "plain.txt"]):
        patch = f"*** Begin Patch\n*** Add File: {name}\n+{secret if i == 0 else 'hello'}\n"
        patch += "*** End Patch\n"
        (app / name).write_text((secret if i == 0 else "hello") + "\n")
        payload = {
            "session_id": "s1", "transcript_path": "", "cwd": str(app),
            "hook_event_name": "PostToolUse", "tool_name": "apply_patch",
            "tool_use_id": f"call_{i}", "tool_input": {"command": patch},
            "tool_response": "Exit code: 0\nOutput:\nSuccess.\n",
        }  # fmt: skip
        assert run_hook("codex", [], json.dumps(payload).encode()) == b""
    assert not (app / ".filecache").exists()  # no second store in the subfolder
    db = repo / ".filecache" / "cache.db"
    assert db.exists() and secret.encode() not in store_bytes(db)


def test_an_empty_git_folder_above_is_no_repository(tmp_path: Path) -> None:
    """Codex's sandbox leaves an empty ``.git`` as a mount point in writable folders (``/tmp``):
    it made ``/tmp`` the root of every project below it. A repository's ``.git`` holds ``HEAD``
    or is a gitfile (a worktree, a submodule)."""
    from filecache.adapters.hosts.base import project_root

    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / ".git").mkdir()
    assert project_root(project) == project
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert project_root(project) == tmp_path
    worktree = tmp_path / "other" / "wt"
    (worktree / "sub").mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    assert project_root(worktree / "sub") == worktree
