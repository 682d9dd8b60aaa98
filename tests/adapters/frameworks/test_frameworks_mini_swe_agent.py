"""``CachedEnvironment``: a mini-swe-agent environment whose shell reads go through the cache.

The first tests wrap a real shell (``bash -c`` in a subprocess, mini-swe-agent's environment
protocol); the last drives mini-swe-agent's own ``DefaultAgent`` with its scripted tool-call model
and ``LocalEnvironment`` when mini-swe-agent is installed.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.mini_swe_agent import CachedEnvironment
from needs import need

from filecache import FileCache


@dataclass
class ShellConfig:
    cwd: str


class Shell:
    """mini-swe-agent's environment protocol over a real ``bash`` subprocess."""

    def __init__(self, cwd: Path) -> None:
        self.config = ShellConfig(str(cwd))
        self.ran: list[str] = []

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None):  # type: ignore[no-untyped-def]
        self.ran.append(action["command"])
        done = subprocess.run(
            ["bash", "-c", action["command"]], cwd=cwd or self.config.cwd, capture_output=True,
            text=True, timeout=timeout or 30,
        )  # fmt: skip
        return {"output": done.stdout + done.stderr, "returncode": done.returncode}

    def get_template_vars(self) -> dict[str, Any]:
        return {"cwd": self.config.cwd}


def test_cat_twice_then_sed_then_cat(cache: FileCache, root: Path) -> None:
    shell = Shell(root)
    env = CachedEnvironment(shell, cache)
    plain = subprocess.run(["cat", "notes.txt"], cwd=root, capture_output=True, text=True).stdout
    with cache.conversation("mswea-1"):
        first = env.execute({"command": "cat notes.txt", "tool_call_id": "call_1"})
        second = env.execute({"command": "cat notes.txt", "tool_call_id": "call_2"})
        changed = env.execute({"command": "sed -i 's/^line 7:/line seven:/' notes.txt"})
        third = env.execute({"command": "cat notes.txt", "tool_call_id": "call_4"})
    assert first["output"] == plain and first["returncode"] == 0  # byte-identical, not run
    assert second["output"].startswith("[filecache] notes.txt unchanged since your result call_1")
    assert shell.ran == ["sed -i 's/^line 7:/line seven:/' notes.txt"]
    assert changed["returncode"] == 0
    assert "changed since your result" in third["output"] and "+line seven:" in third["output"]
    assert env.get_template_vars() == {"cwd": str(root)}  # the wrapped environment's


def test_outside_the_root_every_command_runs(cache: FileCache, root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("other\n")
    shell = Shell(elsewhere)
    env = CachedEnvironment(shell, cache)
    with cache.conversation("mswea-2"):
        assert env.execute({"command": "cat notes.txt"})["output"] == "other\n"
        assert env.execute({"command": "cat notes.txt"})["output"] == "other\n"
    assert shell.ran == ["cat notes.txt", "cat notes.txt"]


def test_conversations_do_not_share_reads(cache: FileCache, root: Path) -> None:
    env = CachedEnvironment(Shell(root), cache)
    with cache.conversation("mswea-a"):
        env.execute({"command": "cat notes.txt", "tool_call_id": "a1"})
    with cache.conversation("mswea-b"):
        out = env.execute({"command": "cat notes.txt", "tool_call_id": "b1"})["output"]
    assert out.startswith("line 1:")


@pytest.mark.frameworks
def test_mini_swe_agents_own_loop(cache: FileCache, root: Path) -> None:
    need("minisweagent")
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.test_models import DeterministicToolcallModel, make_toolcall_output

    def step(cid: str, command: str) -> dict[str, Any]:
        call = {
            "id": cid, "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }  # fmt: skip
        return make_toolcall_output(None, [call], [{"command": command, "tool_call_id": cid}])

    model = DeterministicToolcallModel(
        outputs=[
            step("call_1", "cat notes.txt"),
            step("call_2", "cat notes.txt"),
            step("call_3", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
        ]
    )
    env = CachedEnvironment(LocalEnvironment(cwd=str(root)), cache)
    agent = DefaultAgent(model, env, system_template="You code.", instance_template="{{task}}")
    with cache.conversation("mswea-real"):
        result = agent.run("read notes twice")
    assert result["exit_status"] == "Submitted"
    tool_messages = {
        m["tool_call_id"]: m["content"] for m in agent.messages if m.get("tool_call_id")
    }
    assert "line 60:" in str(tool_messages["call_1"])
    assert "unchanged since your result call_1" in str(tool_messages["call_2"])
