"""filecache inside the real Claude Code: the pinned binary, driven against a scripted model.

Set up as a user does it (``filecache install claude-code`` in a throwaway HOME and project),
then ``claude -p`` runs against ``anthropic_server.ScriptedModel`` on 127.0.0.1. Every assertion
about what the model saw reads the requests Claude Code sent to the model server, never
filecache's own records.

The binary: ``FILECACHE_TEST_CLAUDE`` (``.ci/run`` installs @anthropic-ai/claude-code at the
version pinned there and sets it). Without it the tests are skipped; under ``CI`` they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import Script, ScriptedModel, result_text, text, tool_results, tool_use
from anthropic_tls import Tunnel, openssl
from hook_servers import private_runtime, servers
from test_secrets import store_bytes

from filecache.core.render import host_instructions

pytestmark = pytest.mark.hosts

CLAUDE = os.environ.get("FILECACHE_TEST_CLAUDE", "")  # read before conftest clears FILECACHE_*
if not CLAUDE or not os.access(CLAUDE, os.X_OK):
    message = (
        f"FILECACHE_TEST_CLAUDE={CLAUDE!r} is not an executable claude binary; "
        "install it as .ci/run does (install_claude_code) and point the variable at it"
    )
    if os.environ.get("CI"):
        pytest.fail(f"under CI the Claude Code binary must be installed: {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)

REPO = Path(__file__).resolve().parents[3]
TOOLS = "Read,Edit,Write,Bash"
SECRET = "STRIPE_KEY=sk_live_5f3a9c1e7d2b8a4f6e0c9d1b"


def lines(tag: str, n: int = 60) -> str:
    return "".join(
        f"{tag} line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(n)
    )


@dataclass
class Claude:
    home: Path
    project: Path
    env: dict[str, str]

    def path(self, name: str) -> str:
        return str(self.project / name)

    def run(self, model: ScriptedModel, *args: str, tunnel: Tunnel | None = None) -> dict[str, Any]:
        """``claude -p``: against ``model`` at its own address, or as ``api.anthropic.com``
        through ``tunnel`` (``anthropic_tls``; ``tunnel`` relays to ``model``)."""
        env = {**self.env, **(tunnel.env if tunnel else {"ANTHROPIC_BASE_URL": model.base_url})}
        done = subprocess.run(
            [CLAUDE, *args, "--output-format", "json"], cwd=self.project, env=env,
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
        out: dict[str, Any] = json.loads(done.stdout)
        assert not out.get("is_error"), out
        return out

    def hook_log(self) -> str:
        log = self.home / ".cache" / "filecache" / "hooks.log"
        return log.read_text() if log.exists() else ""


@pytest.fixture
def claude(tmp_path: Path) -> Iterator[Claude]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {
        "PATH": f"{Path(CLAUDE).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "ANTHROPIC_API_KEY": "sk-test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    installed = subprocess.run(
        [sys.executable, "-m", "filecache", "install", "claude-code", "--command"], cwd=project,
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "installed filecache hooks for Claude Code" in installed.stdout, installed
    with private_runtime(env):  # the hooks' resident server: started by them, stopped here
        yield Claude(home, project, env)
        assert servers(env), "the hooks ran without their resident server"


def results_seen(model: ScriptedModel) -> dict[str, str]:
    """Every tool result the model was sent, by tool_use_id (the last text sent for each)."""
    seen: dict[str, str] = {}
    for body in model.requests:
        for call, block in tool_results(body).items():
            seen[call] = result_text(block)
    return seen


def test_reads_edits_bash_and_parallel_calls_as_the_model_sees_them(claude: Claude) -> None:
    a, b, c, d = (claude.path(n) for n in ("a.py", "b.py", "c.py", "d.py"))
    for name in ("a.py", "b.py", "c.py", "d.py"):
        (claude.project / name).write_text(lines(name))
    (claude.project / ".env").write_text(SECRET + "\n")

    def change_outside(body: dict[str, Any]) -> list[dict[str, Any]]:
        path = claude.project / "a.py"  # the user edits a.py in an editor between two turns
        path.write_text(path.read_text().replace("a.py line 40:", "a.py LINE FORTY:"))
        return [tool_use("Read", {"file_path": a}, "toolu_a4")]

    script = Script([
        [tool_use("Read", {"file_path": a}, "toolu_a1")],
        [tool_use("Read", {"file_path": a}, "toolu_a2")],
        [tool_use("Edit", {"file_path": a, "old_string": "a.py line 7:",
                           "new_string": "a.py line seven:"}, "toolu_e1")],
        [tool_use("Read", {"file_path": a}, "toolu_a3")],
        change_outside,
        [tool_use("Read", {"file_path": a, "offset": 10, "limit": 5}, "toolu_a5")],
        [tool_use("Bash", {"command": "cat b.py", "description": "Show b.py"}, "toolu_b1")],
        [tool_use("Bash", {"command": "cat b.py", "description": "Show b.py"}, "toolu_b2")],
        [tool_use("Read", {"file_path": c}, "toolu_p1"),
         tool_use("Read", {"file_path": d}, "toolu_p2")],
        [tool_use("Read", {"file_path": c}, "toolu_p3"),
         tool_use("Read", {"file_path": d}, "toolu_p4")],
        [tool_use("Read", {"file_path": claude.path(".env")}, "toolu_s1")],
        [tool_use("Bash", {"command": "cat .env", "description": "Show env"}, "toolu_s2")],
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        session = claude.run(model, "-p", "read the files", "--allowedTools", TOOLS)["session_id"]
    seen = results_seen(model)

    first = seen["toolu_a1"]
    assert "a.py line 59:" in first and "[filecache]" not in first  # Claude Code's own content
    assert "[filecache] a.py unchanged since your result toolu_a1" in seen["toolu_a2"]
    assert "a.py line 3:" not in seen["toolu_a2"]
    assert "[filecache] a.py unchanged since your result" in seen["toolu_a3"]  # after its Edit
    assert "a.py line 3:" not in seen["toolu_a3"]
    diff = seen["toolu_a4"]  # changed outside: a diff from the version the model holds
    assert "[filecache] a.py changed since your result" in diff
    assert "+a.py LINE FORTY:" in diff and "-a.py line 40:" in diff and "a.py line 3:" not in diff
    assert "fresh=true" not in diff  # Claude Code's Read has no such flag
    assert "unchanged since your result toolu_a4" in seen["toolu_a5"]  # a range it holds
    assert "b.py line 59:" in seen["toolu_b1"]
    assert "[filecache] b.py unchanged since your result toolu_b1" in seen["toolu_b2"]
    assert "b.py line 3:" not in seen["toolu_b2"]
    for first_id, again_id, name in (
        ("toolu_p1", "toolu_p3", "c.py"),
        ("toolu_p2", "toolu_p4", "d.py"),
    ):
        assert f"{name} line 59:" in seen[first_id]
        assert f"[filecache] {name} unchanged since your result {first_id}" in seen[again_id]
    assert SECRET in seen["toolu_s1"] and SECRET in seen["toolu_s2"]  # Claude Code's own answer
    assert SECRET.encode() not in store_bytes(claude.project / ".filecache" / "cache.db")
    assert SECRET.split("=")[1].encode() not in store_bytes(
        claude.project / ".filecache" / "cache.db"
    )
    assert claude.hook_log() == ""
    stats = subprocess.run(
        [sys.executable, "-m", "filecache", "stats", "--json"], cwd=claude.project,
        env=claude.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    (listed,) = json.loads(stats.stdout)["sessions"]  # the Claude Code session, as the hook saw it
    assert listed["session_id"].startswith(f"claude-code:{session}@") and listed["saved"] > 0


def test_after_compact_a_read_is_content_again(claude: Claude) -> None:
    a = claude.path("a.py")
    (claude.project / "a.py").write_text(lines("a.py"))
    script = Script([
        [tool_use("Read", {"file_path": a}, "toolu_c1")],
        [tool_use("Read", {"file_path": a}, "toolu_c2")],
        [text("read it")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        session = claude.run(model, "-p", "read a.py", "--allowedTools", TOOLS)["session_id"]
        assert "unchanged since your result toolu_c1" in results_seen(model)["toolu_c2"]
        claude.run(model, "-p", "/compact", "--resume", session)
        assert any("<summary>" in json.dumps(body) for body in model.requests)
        script.turns += [[tool_use("Read", {"file_path": a}, "toolu_c3")], [text("again")]]
        before = len(model.requests)
        claude.run(model, "-p", "read a.py again", "--resume", session, "--allowedTools", TOOLS)
    after = model.requests[before:]
    sent = [tool_results(body) for body in after]
    assert not any("toolu_c1" in r for r in sent)  # the old results are gone from the context
    third = result_text(next(r for r in reversed(sent) if "toolu_c3" in r)["toolu_c3"])
    assert "a.py line 59:" in third and "[filecache]" not in third
    assert claude.hook_log() == ""


def test_the_model_is_told_what_a_fileref_means_with_the_first_one(claude: Claude) -> None:
    hint = host_instructions("Claude Code")
    with ScriptedModel(Script([[text("hi")]])) as model:
        claude.run(model, "-p", "hello", "--allowedTools", TOOLS)
    assert not any(hint in json.dumps(body) for body in model.requests)  # nothing to pay for
    a = claude.path("a.py")
    (claude.project / "a.py").write_text(lines("a.py"))
    script = Script([
        [tool_use("Read", {"file_path": a}, "toolu_t1")],
        [tool_use("Read", {"file_path": a}, "toolu_t2")],
        [tool_use("Read", {"file_path": a}, "toolu_t3")],
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        claude.run(model, "-p", "read a.py", "--allowedTools", TOOLS)
    seen = results_seen(model)
    assert hint not in seen["toolu_t1"]
    carried = seen["toolu_t2"].split("\n")  # the FileRef on line 1, the instructions on line 2
    assert "[filecache] a.py unchanged since your result toolu_t1" in carried[0]
    assert carried[1].endswith(hint) and carried[1].lstrip().startswith("2")
    assert (
        "unchanged since your result toolu_t1" in seen["toolu_t3"] and hint not in seen["toolu_t3"]
    )
    assert claude.hook_log() == ""


def test_a_subagent_is_its_own_context(claude: Claude) -> None:
    a = claude.path("a.py")
    (claude.project / "a.py").write_text(lines("a.py"))
    agent = {"description": "Read a.py", "prompt": "read a.py", "subagent_type": "general-purpose",
             "run_in_background": False}  # fmt: skip
    script = Script([
        [tool_use("Read", {"file_path": a}, "toolu_m1")],
        [tool_use("Agent", agent, "toolu_agent")],
        [tool_use("Read", {"file_path": a}, "toolu_s1")],  # the subagent's turns
        [tool_use("Read", {"file_path": a}, "toolu_s2")],
        [text("a.py has 60 lines")],
        [tool_use("Read", {"file_path": a}, "toolu_m2")],  # the main agent again
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        claude.run(model, "-p", "read a.py", "--allowedTools", f"{TOOLS},Agent")
    seen = results_seen(model)
    assert "a.py line 59:" in seen["toolu_s1"]  # the subagent never saw toolu_m1
    assert "[filecache] a.py unchanged since your result toolu_s1" in seen["toolu_s2"]
    assert "[filecache] a.py unchanged since your result toolu_m1" in seen["toolu_m2"]
    assert claude.hook_log() == ""


def test_a_crlf_file_gets_filerefs_and_diffs_like_any_other(claude: Claude) -> None:
    """Claude Code's Read shows ``\\r\\n`` as ``\\n``: before, filecache took that for other
    text and never answered a CRLF file short. The diff comes in the lines the model holds."""
    w = claude.path("w.txt")
    path = claude.project / "w.txt"
    path.write_bytes(lines("w.txt").replace("\n", "\r\n").encode())

    def change_outside(body: dict[str, Any]) -> list[dict[str, Any]]:
        path.write_bytes(path.read_bytes().replace(b"w.txt line 40:", b"w.txt LINE FORTY:"))
        return [tool_use("Read", {"file_path": w}, "toolu_w3")]

    script = Script([
        [tool_use("Read", {"file_path": w}, "toolu_w1")],
        [tool_use("Read", {"file_path": w}, "toolu_w2")],
        change_outside,
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        claude.run(model, "-p", "read it", "--allowedTools", TOOLS)
    seen = results_seen(model)
    assert "w.txt line 59:" in seen["toolu_w1"] and "[filecache]" not in seen["toolu_w1"]
    assert "[filecache] w.txt unchanged since your result toolu_w1" in seen["toolu_w2"]
    assert "w.txt line 3:" not in seen["toolu_w2"]
    diff = seen["toolu_w3"]
    assert "[filecache] w.txt changed since your result toolu_w1" in diff, diff
    assert "-w.txt line 40:" in diff and "+w.txt LINE FORTY:" in diff and "\r" not in diff
    assert claude.hook_log() == ""


def test_a_bash_read_after_cd_is_the_subfolders_file(claude: Claude) -> None:
    """Claude Code's Bash keeps the folder a ``cd`` left it in: ``cat f.txt`` there prints
    ``sub/f.txt``, never a FileRef to the root's ``f.txt`` (issue 31, 1)."""
    (claude.project / "sub").mkdir()
    (claude.project / "f.txt").write_text(lines("root"))
    (claude.project / "sub" / "f.txt").write_text(lines("sub"))
    script = Script([
        [tool_use("Bash", {"command": "cat f.txt", "description": "Show"}, "toolu_c1")],
        [tool_use("Bash", {"command": "cd sub", "description": "Go"}, "toolu_cd")],
        [tool_use("Bash", {"command": "cat f.txt", "description": "Show"}, "toolu_c2")],
        [tool_use("Bash", {"command": "cat f.txt", "description": "Show"}, "toolu_c3")],
        [tool_use("Bash", {"command": "cat ../f.txt", "description": "Show"}, "toolu_c4")],
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        claude.run(model, "-p", "read the files", "--allowedTools", TOOLS)
    seen = results_seen(model)
    assert "root line 59:" in seen["toolu_c1"]
    assert "sub line 59:" in seen["toolu_c2"] and "[filecache]" not in seen["toolu_c2"]
    assert "[filecache] sub/f.txt unchanged since your result toolu_c2" in seen["toolu_c3"]
    assert "[filecache] f.txt unchanged since your result toolu_c1" in seen["toolu_c4"]
    assert claude.hook_log() == ""


CODE_MODE_FLAG = json.dumps({"env": {"CLAUDE_CODE_EXPERIMENTAL_CODE_MODE": "1"}})
"""Code Mode for one ``claude -p``: 2.1.332 takes it only from ``--settings`` there."""


def test_in_code_mode_a_scripts_reads_get_claude_codes_own_output(
    claude: Claude, tmp_path: Path
) -> None:
    """Code Mode for real (2.1.332, reached as the Anthropic API: ``anthropic_tls``): the
    model's one tool is ``REPL``, and each ``Read``, ``$`cat```, ``file().text()`` and
    ``edit`` of its script runs PostToolUse with an id Claude Code makes (``toolu_cc_...``).
    The script gets Claude Code's own output every time, a re-read and a read after a change
    included, never a FileRef or a diff; the user is told once."""
    if openssl() is None:
        if os.environ.get("CI"):
            pytest.fail("under CI openssl must be installed (anthropic_tls)", pytrace=False)
        pytest.skip("openssl is not installed (anthropic_tls)")
    a = claude.path("a.py")
    (claude.project / "a.py").write_text(lines("a.py"))
    first = f"""
const p = {json.dumps(a)};
const r1 = await Read({{file_path: p}});
const r2 = await Read({{file_path: p}});
({{r1: r1.file.content, r2: r2.file.content, s1: await $`cat a.py`.text(),
   f1: await file(p).text()}})
"""
    second = f"""
const q = {json.dumps(a)};
const r3 = await Read({{file_path: q}});
const s2 = await $`cat a.py`.text();
await edit(q, "a.py line 10:", "a.py LINE TEN:");
const r4 = await Read({{file_path: q}});
({{r3: r3.file.content, s2, r4: r4.file.content}})
"""

    def change_outside(body: dict[str, Any]) -> list[dict[str, Any]]:
        path = claude.project / "a.py"  # the user edits a.py between two turns
        path.write_text(path.read_text().replace("a.py line 40:", "a.py LINE FORTY:"))
        return [tool_use("REPL", {"code": second, "description": "Read again"}, "toolu_s2")]

    script = Script([
        [tool_use("REPL", {"code": first, "description": "Read a.py"}, "toolu_s1")],
        change_outside,
        [tool_use("Read", {"file_path": a}, "toolu_d1")],
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model, Tunnel(model, tmp_path / "tls") as tunnel:
        claude.run(model, "-p", "read a.py", "--settings", CODE_MODE_FLAG,
                   "--allowedTools", f"REPL,{TOOLS}", tunnel=tunnel)  # fmt: skip
    assert [t["name"] for t in model.main_requests()[0]["tools"]] == ["REPL"]
    seen = results_seen(model)
    last = "line 59: the quick brown fox jumps over the lazy dog"
    assert seen["toolu_s1"].count(f"a.py {last}") == 4  # r1, r2, s1, f1: each the whole file
    assert seen["toolu_s2"].count(f"a.py {last}") == 3  # r3, s2, r4
    assert seen["toolu_s2"].count("a.py LINE FORTY:") == 3
    assert seen["toolu_s2"].count("a.py LINE TEN:") == 1  # r4, after the script's own edit
    assert "No such tool available: Read" in seen["toolu_d1"]  # only scripts read here
    assert "[filecache]" not in json.dumps(model.requests)
    said = claude.home / ".cache" / "filecache" / "notices"
    assert len(list(said.iterdir())) == 1  # told once (a systemMessage), for this session
    assert claude.hook_log() == ""


@pytest.mark.parametrize("where", ["shell", "settings", "flag"])
def test_code_mode_asked_for_but_refused_leaves_filecache_serving(
    claude: Claude, where: str
) -> None:
    """``CLAUDE_CODE_EXPERIMENTAL_CODE_MODE`` on, but against a model server at another
    address than the Anthropic API Claude Code refuses Code Mode (and in ``claude -p`` it takes
    it only from ``--settings``): the model has its usual tools, their calls carry the model's
    own ids, and filecache serves them as in any session."""
    args = ["-p", "read a.py", "--allowedTools", TOOLS]
    if where == "shell":
        claude.env["CLAUDE_CODE_EXPERIMENTAL_CODE_MODE"] = "1"
    elif where == "flag":
        args += ["--settings", CODE_MODE_FLAG]
    else:
        settings = claude.home / ".claude" / "settings.json"
        mine = json.loads(settings.read_text()) if settings.exists() else {}
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(
            json.dumps({**mine, "env": {"CLAUDE_CODE_EXPERIMENTAL_CODE_MODE": "on"}})
        )
    a = claude.path("a.py")
    (claude.project / "a.py").write_text(lines("a.py"))
    script = Script([
        [tool_use("Read", {"file_path": a}, "toolu_k1")],
        [tool_use("Read", {"file_path": a}, "toolu_k2")],
        [tool_use("Bash", {"command": "cat a.py"}, "toolu_k3")],
        [text("done")],
    ])  # fmt: skip
    with ScriptedModel(script) as model:
        claude.run(model, *args)
    offered = [t["name"] for t in model.main_requests()[0]["tools"]]
    assert "Read" in offered and "REPL" not in offered
    seen = results_seen(model)
    assert "a.py line 59:" in seen["toolu_k1"]
    assert "[filecache] a.py unchanged since your result toolu_k1" in seen["toolu_k2"]
    assert "[filecache] a.py unchanged since your result toolu_k1" in seen["toolu_k3"]
    assert not (claude.home / ".cache" / "filecache" / "notices").exists()
    assert claude.hook_log() == ""
