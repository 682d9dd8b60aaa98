"""Gemini CLI through ``filecache run gemini``: the real binary, the real gateway, a scripted
Gemini API on 127.0.0.1 as the ``GOOGLE_GEMINI_BASE_URL`` the user set (the upstream Gemini CLI
would have called; ``filecache run`` points this one process at the gateway instead).

The assertions read what the model saw from the requests that upstream received
(``gateway_checks``), never filecache's records: a re-read (``read_file``, and a ``cat`` of the
same file through ``run_shell_command``) arrives as a FileRef naming a result of the same
request whose text shows those lines; a file changed outside as a diff that applies to the
earlier result's text; at a small window a superseded result is pruned and keeps its bytes in
every later request; calls and results stay paired and no reference dangles in any request;
the streamed answers arrive whole (Gemini CLI finishes and prints the scripted answer); every
``thoughtSignature`` Gemini CLI sent passes unchanged. No key and no ``.env`` content reaches
the gateway's log or store.

The binary: ``FILECACHE_TEST_GEMINI`` (the version ``.ci/run`` pins); skipped without it,
failed under CI.
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
from gemini_server import Script, ScriptedGemini, Turn, call, text

pytestmark = pytest.mark.hosts
pytest.importorskip("aiohttp", reason="the gateway extra: pip install -e '.[gateway]'")

GEMINI = os.environ.get("FILECACHE_TEST_GEMINI", "")
if not GEMINI or not os.access(GEMINI, os.X_OK):
    message_ = f"no Gemini CLI binary (FILECACHE_TEST_GEMINI={GEMINI!r}); run .ci/run"
    if os.environ.get("CI"):
        pytest.fail(f"under CI the Gemini CLI must be installed: {message_}", pytrace=False)
    pytest.skip(message_, allow_module_level=True)

KEY = "AIzaSyGATEWAYTEST-gemini-5e6f7a8b9c"
SECRET = "API_TOKEN=hunter2-gemini-gateway-4d3c"
NOTES = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 81))
SETTINGS = {  # nothing leaves the machine; API-key auth (what the gateway serves)
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}},
}


@dataclass
class World:
    project: Path
    env: dict[str, str]
    store: Path
    cache: Path

    def run(self, turns: list[Turn], window: int | None = None) -> ScriptedGemini:
        script = Script([*turns, [text("all done")]])
        with ScriptedGemini(script) as model:
            env = {**self.env, "GOOGLE_GEMINI_BASE_URL": model.base_url}
            head = [sys.executable, "-m", "filecache", "run"]
            head += ["--window", str(window)] if window else []
            done = subprocess.run(
                [*head, "gemini", "-p", "work on the files", "--yolo", "--output-format", "json"],
                cwd=self.project, env=env, capture_output=True, text=True, timeout=300,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
        assert "filecache:" not in done.stderr, done.stderr[-3000:]
        assert json.loads(done.stdout)["response"] == "all done"  # the last stream, whole
        assert script.answered == len(turns) + 1, dump(model.main_requests())
        assert all("/r/" not in path for path in model.paths)  # the upstream's own paths
        for body in model.main_requests():
            check_pairing(body)
            check_no_dangling(body)
            signed = [p for c in body["contents"] for p in c["parts"] if "thoughtSignature" in p]
            assert all(p["thoughtSignature"] == "skip_thought_signature_validator" for p in signed)
        return model


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with user_env(tmp_path) as base:
        home = Path(base["HOME"])
        (home / ".gemini").mkdir(parents=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
        project = tmp_path / "project"
        project.mkdir()
        store = tmp_path / "gateway-store" / "gateway.db"
        store.parent.mkdir(mode=0o700)
        env = {
            **base,
            "PATH": f"{Path(GEMINI).parent}{os.pathsep}{base['PATH']}",
            "GEMINI_API_KEY": KEY,
            "GEMINI_CLI_NO_RELAUNCH": "1",  # one node process
            "GEMINI_CLI_TRUST_WORKSPACE": "true",  # headless: the throwaway project is trusted
            "GEMINI_TELEMETRY_ENABLED": "false",
            "NO_COLOR": "1",
            "FILECACHE_GATEWAY_STORE": str(store),
        }
        yield World(project, env, store, home / ".cache" / "filecache")


def _first_carrying(model: ScriptedGemini, call_id: str) -> dict[str, Any]:
    return next(body for body in model.main_requests() if call_id in results(body))


def _span(parenthesis: str) -> tuple[int, int]:
    first, last = parenthesis.split(" ", 1)[1].split(" ", 1)[0].split("-")
    return int(first), int(last)


def test_rereads_are_filerefs_and_changes_diffs(world: World) -> None:
    project = world.project
    notes, app = project / "notes.txt", project / "app.py"
    notes.write_text(NOTES)
    old_app = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(1, 41))
    app.write_text(old_app)
    (project / ".env.local").write_text(SECRET + "\n")
    new_app = old_app.replace("return x + 7\n", "return x * 7\n")

    def change_outside(body: dict[str, Any]) -> list[dict[str, Any]]:
        app.write_text(new_app)  # the user edits app.py between two turns
        return [call("read_file", {"file_path": str(app)}, "p2")]

    model = world.run([
        [call("read_file", {"file_path": str(notes)}, "r1")],
        [call("read_file", {"file_path": "notes.txt", "start_line": 10, "end_line": 29}, "r2")],
        [call("run_shell_command", {"command": "cat notes.txt"}, "c1")],
        [call("read_file", {"file_path": str(app)}, "p1")],
        change_outside,
        [call("run_shell_command", {"command": "cat .env.local"}, "s1")],
    ])  # fmt: skip

    body = _first_carrying(model, "r2")
    ((path, kind, named, span),) = references(results(body)["r2"])
    assert kind == "unchanged" and path.endswith("notes.txt") and named == ["r1"]
    first, last = _span(span)
    assert (first, last) == (10, 29)
    shown = results(body)["r1"].split("\n")  # Gemini CLI shows a whole file as it is
    assert shown[first - 1 : last] == NOTES.split("\n")[first - 1 : last]

    body = _first_carrying(model, "c1")
    ((path, kind, named, span),) = references(results(body)["c1"])
    assert kind == "unchanged" and named == ["r1"] and _span(span) == (1, 80)
    assert results(body)["c1"].startswith("<untrusted_context>\nOutput: [filecache] ")

    body = _first_carrying(model, "p2")
    answer = results(body)["p2"]
    ((_, kind, (base,), _),) = references(answer)
    assert kind.startswith("changed") and base == "p1", answer
    old_lines = results(body)[base].split("\n")
    assert old_lines == old_app.split("\n")
    assert apply_diff(old_lines, diff_body(answer)) == new_app.split("\n")

    assert SECRET in results(model.main_requests()[-1])["s1"]  # Gemini CLI's own answer
    held = log_and_store_bytes(world.store.parent, world.cache)
    assert KEY.encode() not in held and SECRET.encode() not in held
    assert b"hunter2-gemini-gateway" not in held


def test_a_superseded_result_is_pruned_at_a_small_window(world: World) -> None:
    project = world.project
    big, notes = project / "big.txt", project / "notes.txt"
    content = "".join(
        f"big line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(300)
    )
    big.write_text(content)
    notes.write_text(NOTES)

    def change_outside(body: dict[str, Any]) -> list[dict[str, Any]]:
        big.write_text(content.upper())
        return [call("read_file", {"file_path": str(big)}, "b2")]

    model = world.run([
        [call("read_file", {"file_path": str(big)}, "b1")],
        [call("read_file", {"file_path": str(notes)}, "n1")],
        change_outside,
        [call("run_shell_command", {"command": "seq 1 300"}, "q1")],
        [call("read_file", {"file_path": str(notes), "start_line": 1, "end_line": 5}, "n2")],
    ], window=2000)  # fmt: skip
    requests = model.main_requests()
    pruned = check_sticky(requests)
    assert "b1" in pruned, dump(requests)
    assert len(pruned["b1"]) < len(content) // 4
    later = [body for body in requests if "b1" in results(body)]
    assert sum(results(body)["b1"] == pruned["b1"] for body in later) >= 2


def test_when_the_gateway_cannot_start_the_plain_gemini_runs(world: World) -> None:
    """A runtime folder others may enter is refused, so no gateway starts: Gemini CLI runs as
    it would without filecache (its requests reach the upstream as it sent them, its answer
    arrives), with one line on stderr saying why."""
    runtime = Path(world.env["XDG_RUNTIME_DIR"]) / "filecache"
    runtime.mkdir()
    runtime.chmod(0o777)
    (world.project / "notes.txt").write_text(NOTES)
    turns: list[Turn] = [[call("read_file", {"file_path": "notes.txt"}, f"r{i}")] for i in (1, 2)]
    script = Script([*turns, [text("fine")]])
    with ScriptedGemini(script) as model:
        env = {**world.env, "GOOGLE_GEMINI_BASE_URL": model.base_url}
        done = subprocess.run(
            [sys.executable, "-m", "filecache", "run", "gemini", "-p", "go", "--yolo",
             "--output-format", "json"], cwd=world.project, env=env, capture_output=True,
            text=True, timeout=300, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    runtime.chmod(0o700)
    assert done.returncode == 0 and json.loads(done.stdout)["response"] == "fine", done.stderr
    assert "running plain gemini" in done.stderr
    last = results(model.main_requests()[-1])
    assert last["r1"] == last["r2"] == NOTES  # no FileRef: Gemini CLI's own results
    assert not world.store.exists()
