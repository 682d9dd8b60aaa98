"""Record one scripted Claude Code session with the real binary, plain or with filecache's hook.

Used by ``tests/adapters/hosts/test_host_claude_replay_real.py`` and by
``fixtures/imports/claude-code/make_cc2128.py`` (which writes ``cc-2.1.328-rereads.jsonl``):
two files of this repository copied into a throwaway project; reads (two in parallel), an Edit,
ranged re-reads, Bash ``cat``, ``sed -i``, a second prompt (``--resume``). ``record`` returns the
session file Claude Code wrote and every tool result as the model was sent it (from the
requests the scripted server received).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from anthropic_server import Script, ScriptedModel, result_text, text, tool_use
from hook_servers import private_runtime

REPO = Path(__file__).resolve().parent.parent
FILES = {"metrics.py": "filecache/importers/line_map.py",
         "trace_format.py": "filecache/replay/trace_format.py"}  # fmt: skip
SEAL = re.compile(r"(; | \()seal [0-9a-f]+")
UNREAD = ("api-request-blob", "api-request-shape")  # request bodies and shapes: large, unread


def turns(project: Path) -> tuple[list[list[Any]], list[list[Any]]]:
    m, t = str(project / "metrics.py"), str(project / "trace_format.py")
    cat = "cat trace_format.py"
    sed = "sed -i 's/Pure: no I\\/O./Pure: no I\\/O at all./' trace_format.py"
    first = [
        [tool_use("Read", {"file_path": m}, "toolu_m1"),
         tool_use("Read", {"file_path": t}, "toolu_t1")],
        [tool_use("Edit", {"file_path": m, "old_string": "Pure but for",
                           "new_string": "Pure, but for"}, "toolu_e1")],
        [tool_use("Read", {"file_path": m, "offset": 30, "limit": 40}, "toolu_m2")],
        [tool_use("Bash", {"command": cat, "description": "Show it"}, "toolu_c1")],
        [tool_use("Bash", {"command": sed,
                           "description": "Edit it"}, "toolu_s1")],
        [tool_use("Read", {"file_path": t}, "toolu_t2")],
        [tool_use("Read", {"file_path": m}, "toolu_m3")],
        [text("done")],
    ]  # fmt: skip
    second = [
        [tool_use("Read", {"file_path": m, "offset": 100, "limit": 50}, "toolu_m4")],
        [tool_use("Bash", {"command": cat, "description": "Show it"}, "toolu_c2")],
        [text("again")],
    ]  # fmt: skip
    return first, second


def record(claude: str, base: Path, hooked: bool) -> tuple[Path, dict[str, str]]:
    """One run; (its session file, the last request's tool results by id)."""
    home, project = base / "home", base / "project"
    home.mkdir(parents=True)
    project.mkdir()
    for name, source in FILES.items():
        shutil.copy(REPO / source, project / name)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_API_KEY": "sk-test",
           "XDG_CACHE_HOME": str(home / ".cache"), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1"}  # fmt: skip
    if hooked:
        subprocess.run([sys.executable, "-m", "filecache", "install", "claude-code", "--command"],
                       cwd=project,
                       env=env, check=True, capture_output=True)  # fmt: skip
    with private_runtime(env):  # the hooks' resident server: stopped when the run ends
        return _run(claude, home, project, env)


def _run(
    claude: str, home: Path, project: Path, env: dict[str, str]
) -> tuple[Path, dict[str, str]]:
    first, second = turns(project)
    script = Script(first)
    with ScriptedModel(script) as model:
        env["ANTHROPIC_BASE_URL"] = model.base_url
        run = [claude, "--output-format", "json", "--allowedTools", "Read,Edit,Write,Bash", "-p"]
        out = subprocess.run([*run, "tidy the two files"], cwd=project, env=env,
                             capture_output=True, text=True, check=True)  # fmt: skip
        session = json.loads(out.stdout)["session_id"]
        script.turns += second
        subprocess.run([*run, "look again", "--resume", session], cwd=project, env=env,
                       check=True, capture_output=True)  # fmt: skip
        seen: dict[str, str] = {}
        for body in model.main_requests():
            for message in body.get("messages", []):
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        seen[str(block["tool_use_id"])] = result_text(block)
    return next((home / ".claude" / "projects").glob(f"*/{session}.jsonl")), seen


def fixture_text(session: Path, base: Path) -> str:
    """The plain run's session file as a fixture: the lines nobody reads (``UNREAD``) left
    out, the throwaway folders renamed ``/home/user/proj`` and ``/home/user``."""
    kept = [
        line for line in session.read_text().splitlines(keepends=True)
        if json.loads(line).get("type") not in UNREAD
    ]  # fmt: skip
    out = "".join(kept).replace(str(base / "project"), "/home/user/proj")
    return out.replace(str(base / "home"), "/home/user")


def normalized(value: str, root: str) -> str:
    """A tool result with its project root and the stores' seals taken out."""
    return SEAL.sub("", value.replace(root, "ROOT"))
