"""Codex through ``filecache run codex``: the real binary, the real gateway, a scripted Responses
API on 127.0.0.1 as the upstream Codex would have used (a custom provider's ``base_url``, or the
built-in provider's ``OPENAI_BASE_URL``).

The assertions read what the model saw from the requests that upstream received
(``gateway_checks``), never filecache's records: a shell re-read arrives as a FileRef naming a
result of the same request; a file changed outside as a diff that applies to the earlier
output; at a small window a superseded output is pruned and keeps its bytes; calls and outputs
stay paired and no reference dangles in any request; Codex finishes. No key and no ``.env``
content reaches the gateway's log or store.

The binary: ``FILECACHE_TEST_CODEX`` (the version ``.ci/run`` pins); skipped without it,
failed under CI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gateway_checks import (
    apply_diff,
    check_no_dangling,
    check_pairing,
    check_sticky,
    diff_body,
    dump,
    references,
    results,
)
from gateway_run import log_and_store_bytes, user_env
from responses_server import ScriptedResponses, Turn, exec_call, message

pytestmark = pytest.mark.hosts
pytest.importorskip("aiohttp", reason="the gateway extra: pip install -e '.[gateway]'")

CODEX = os.environ.get("FILECACHE_TEST_CODEX", "")
if not CODEX or not os.access(CODEX, os.X_OK):
    message_ = f"no Codex binary (FILECACHE_TEST_CODEX={CODEX!r}); run .ci/run"
    if os.environ.get("CI"):
        pytest.fail(f"under CI the Codex CLI must be installed: {message_}", pytrace=False)
    pytest.skip(message_, allow_module_level=True)

MODEL = "gpt-5.5"  # a name with bundled metadata
KEY = "sk-proj-GATEWAYTEST-7c1d2e3f4a5b"
SECRET = "API_TOKEN=hunter2-codex-gateway-9a8b"
NOTES = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 81))


def output_lines(text: str) -> list[str]:
    """The command's output lines in a Codex ``exec_command`` result (after its header)."""
    return text.split("\nOutput:\n", 1)[1].splitlines()


@dataclass
class World:
    project: Path
    env: dict[str, str]
    store: Path

    def exec(
        self, turns: Sequence[Turn], *, builtin: bool = False, window: int | None = None
    ) -> ScriptedResponses:
        server = ScriptedResponses([*turns, [message("done")]]).start()
        env = dict(self.env)
        if builtin:  # the built-in OpenAI provider, pointed by the user at a base URL
            env |= {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.url}
            provider: list[str] = []
        else:
            env["SCRIPTED_API_KEY"] = KEY
            table = (f'model_providers.scripted={{name="scripted", base_url="{server.url}", '
                     'wire_api="responses", env_key="SCRIPTED_API_KEY"}')  # fmt: skip
            provider = ["-c", "model_provider=scripted", "-c", table]
        head = [sys.executable, "-m", "filecache", "run"]
        head += ["--window", str(window)] if window else []
        command = [
            *head, "codex", "exec", "--skip-git-repo-check", "-m", MODEL, *provider,
            "-c", 'approval_policy="never"', "-c", 'sandbox_mode="workspace-write"', "--json",
            "go",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, cwd=self.project, env=env, capture_output=True, text=True,
                stdin=subprocess.DEVNULL, timeout=300,
            )  # fmt: skip
        finally:
            server.stop()
        assert done.returncode == 0, done.stderr[-3000:]
        assert "filecache:" not in done.stderr, done.stderr[-3000:]
        assert server.requests and not server._script, "the script was not played to its end"
        assert all(p == "POST /v1/responses" for p in server.paths), server.paths
        for body in server.requests:
            check_pairing(body)
            check_no_dangling(body)
        return server


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    project = tmp_path / "project"
    project.mkdir()
    with user_env(tmp_path) as env:
        store = tmp_path / "gateway-store" / "gateway.db"
        store.parent.mkdir(mode=0o700)
        codex_home = tmp_path / "home" / ".codex"
        codex_home.mkdir(parents=True)
        env |= {
            "PATH": f"{Path(CODEX).parent}{os.pathsep}{env['PATH']}",
            "CODEX_HOME": str(codex_home),
            "FILECACHE_GATEWAY_STORE": str(store),
        }
        yield World(project, env, store)


def _first_carrying(server: ScriptedResponses, call_id: str) -> dict[str, Any]:
    return next(body for body in server.requests if call_id in results(body))


@pytest.mark.parametrize("builtin", [False, True], ids=["custom-provider", "builtin-provider"])
def test_shell_rereads_are_filerefs_and_changes_diffs(world: World, builtin: bool) -> None:
    (world.project / "notes.txt").write_text(NOTES)
    app = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(1, 41))
    (world.project / "app.py").write_text(app)
    (world.project / ".env").write_text(SECRET + "\n")
    new_app = app.replace("return x + 7\n", "return x * 7\n")

    def change_app(body: dict[str, Any]) -> list[dict[str, Any]]:
        (world.project / "app.py").write_text(new_app)  # changed outside the agent
        return [exec_call("call_p2", "cat app.py")]

    server = world.exec([
        [exec_call("call_n1", "cat notes.txt")],
        [exec_call("call_n2", "cat notes.txt")],
        [exec_call("call_p1", "cat app.py")],
        change_app,
        [exec_call("call_s1", "cat .env")],
    ], builtin=builtin)  # fmt: skip

    body = _first_carrying(server, "call_n2")
    ((path, kind, named, _),) = references(results(body)["call_n2"])
    assert kind == "unchanged" and path.endswith("notes.txt") and named == ["call_n1"]
    assert output_lines(results(body)["call_n1"]) == NOTES.splitlines()
    assert "line 30:" not in results(body)["call_n2"]

    body = _first_carrying(server, "call_p2")
    answer = results(body)["call_p2"]
    ((_, kind, (base,), _),) = references(answer)
    assert kind.startswith("changed") and base == "call_p1", answer
    old = output_lines(results(body)[base])
    assert old == app.splitlines()
    assert apply_diff(old, diff_body(answer)) == new_app.splitlines()

    last = results(server.requests[-1])
    assert SECRET in last["call_s1"]  # Codex's own output
    held = log_and_store_bytes(world.store.parent, Path(world.env["XDG_CACHE_HOME"]))
    assert KEY.encode() not in held and SECRET.encode() not in held
    assert b"hunter2-codex" not in held


def test_a_superseded_output_is_pruned_at_a_small_window(world: World) -> None:
    big = "".join(
        f"big line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(300)
    )
    (world.project / "big.txt").write_text(big)
    (world.project / "notes.txt").write_text(NOTES)

    def rewrite_big(body: dict[str, Any]) -> list[dict[str, Any]]:
        (world.project / "big.txt").write_text(big.upper())  # replaced whole
        return [exec_call("call_b2", "cat big.txt")]

    server = world.exec([
        [exec_call("call_b1", "cat big.txt")],
        [exec_call("call_n1", "cat notes.txt")],
        rewrite_big,
        [exec_call("call_q1", "seq 1 300")],
        [exec_call("call_n2", "sed -n '1,5p' notes.txt")],
    ], window=2000)  # fmt: skip
    pruned = check_sticky(server.requests)
    assert "call_b1" in pruned, dump(server.requests)
    assert len(pruned["call_b1"]) < len(big) // 4
    later = [body for body in server.requests if "call_b1" in results(body)]
    assert sum(results(body)["call_b1"] == pruned["call_b1"] for body in later) >= 2
