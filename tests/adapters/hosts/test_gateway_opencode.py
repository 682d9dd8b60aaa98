"""opencode through ``filecache run opencode``: the real binary, the real gateway, a scripted Chat
Completions API on 127.0.0.1 as the provider's ``baseURL`` in the user's opencode.json (which
stays as it was: the route reaches opencode through ``OPENCODE_CONFIG_CONTENT``).

The assertions read what the model saw from the requests that upstream received
(``gateway_checks``): a ranged re-read arrives as a FileRef naming a result of the same request
that shows those lines; a file changed outside as a diff that applies to the earlier text; at a
small window a superseded result is pruned and keeps its bytes; calls and results stay paired
and no reference dangles in any request; opencode finishes. No key and no ``.env`` content
reaches the gateway's log or store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
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
    shown_lines,
)
from gateway_run import log_and_store_bytes, user_env
from opencode_run import OpencodeHome, need_opencode
from scripted_chat import Call, ScriptedChat, Step

pytestmark = pytest.mark.hosts
pytest.importorskip("aiohttp", reason="the gateway extra: pip install -e '.[gateway]'")

KEY = "sk-opencode-GATEWAYTEST-3b4c5d"
SECRET = "API_TOKEN=hunter2-opencode-gateway-1f2e"
NOTES = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 81))


class World:
    def __init__(self, home: OpencodeHome, env: dict[str, str], store: Path) -> None:
        self.home, self.env, self.store = home, env, store

    def run(self, steps: Sequence[Step], window: int | None = None) -> ScriptedChat:
        chat = ScriptedChat(steps)
        with chat:
            self.home.configure(chat.base_url)
            config = self.home.config / "opencode.json"
            data = json.loads(config.read_text())
            data["provider"]["scripted"]["options"]["apiKey"] = KEY
            config.write_text(json.dumps(data, indent=2))
            head = [sys.executable, "-m", "filecache", "run"]
            head += ["--window", str(window)] if window else []
            done = subprocess.run(
                [*head, "opencode", "run", "work on the files"], cwd=self.home.project,
                env=self.env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        assert done.returncode == 0 and chat.finished(), (done.stdout[-2000:], done.stderr[-3000:])
        assert "filecache:" not in done.stderr, done.stderr[-3000:]
        # The user's provider is left as it was (opencode itself adds a "$schema" key).
        assert json.loads(config.read_text())["provider"] == data["provider"]
        for body in chat.tool_requests():
            check_pairing(body)
            check_no_dangling(body)
        return chat


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    binary = need_opencode()
    home = OpencodeHome(tmp_path)
    with user_env(tmp_path) as base:
        store = tmp_path / "gateway-store" / "gateway.db"
        store.parent.mkdir(mode=0o700)
        env = {
            **home.env,
            "PATH": f"{Path(binary).parent}{os.pathsep}{home.env['PATH']}",
            "XDG_RUNTIME_DIR": base["XDG_RUNTIME_DIR"],
            "FILECACHE_GATEWAY_STORE": str(store),
            "PYTHONPATH": base["PYTHONPATH"],
        }
        yield World(home, env, store)


def read(call: str, path: Path, **args: int) -> Call:
    return Call(call, "read", {"filePath": str(path), **args})


def _first_carrying(chat: ScriptedChat, call_id: str) -> dict[str, Any]:
    return next(body for body in chat.tool_requests() if call_id in results(body))


def test_rereads_are_filerefs_and_changes_diffs(world: World) -> None:
    project = world.home.project
    notes, app, env = project / "notes.txt", project / "app.py", project / ".env"
    notes.write_text(NOTES)
    old_app = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(1, 41))
    app.write_text(old_app)
    env.write_text(SECRET + "\n")
    new_app = old_app.replace("return x + 7\n", "return x * 7\n")

    chat = world.run([
        Step(calls=(read("r1", notes),)),
        Step(calls=(read("r2", notes, offset=10, limit=20),)),
        Step(calls=(read("p1", app),)),
        Step(calls=(read("p2", app),), before=lambda: app.write_text(new_app)),
        Step(calls=(read("s1", env),)),
    ])  # fmt: skip

    body = _first_carrying(chat, "r2")
    ((path, kind, named, _),) = references(results(body)["r2"])
    assert kind == "unchanged" and path.endswith("notes.txt") and named == ["r1"]
    shown = shown_lines(results(body)["r1"])
    assert all(shown[n] == NOTES.splitlines()[n - 1] for n in range(10, 30))

    body = _first_carrying(chat, "p2")
    answer = results(body)["p2"]
    ((_, kind, (base,), _),) = references(answer)
    assert kind.startswith("changed") and base == "p1", answer
    old = shown_lines(results(body)[base])
    old_lines = [old[n] for n in sorted(old)]
    assert old_lines == old_app.splitlines()
    assert apply_diff(old_lines, diff_body(answer)) == new_app.splitlines()

    assert SECRET in results(chat.tool_requests()[-1])["s1"]  # opencode's own answer
    held = log_and_store_bytes(world.store.parent, world.home.home / ".cache" / "filecache")
    assert KEY.encode() not in held and SECRET.encode() not in held
    assert b"hunter2-opencode-gateway" not in held


def test_a_superseded_result_is_pruned_at_a_small_window(world: World) -> None:
    project = world.home.project
    big, notes = project / "big.txt", project / "notes.txt"
    text = "".join(
        f"big line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(300)
    )
    big.write_text(text)
    notes.write_text(NOTES)
    chat = world.run([
        Step(calls=(read("b1", big),)),
        Step(calls=(read("n1", notes),)),
        Step(calls=(read("b2", big),), before=lambda: big.write_text(text.upper())),
        Step(calls=(Call("q1", "bash", {"command": "seq 1 300", "description": "count"}),)),
        Step(calls=(read("n2", notes, offset=1, limit=5),)),
    ], window=2000)  # fmt: skip
    requests = chat.tool_requests()
    pruned = check_sticky(requests)
    assert "b1" in pruned, dump(requests)
    assert len(pruned["b1"]) < len(text) // 4
    later = [body for body in requests if "b1" in results(body)]
    assert sum(results(body)["b1"] == pruned["b1"] for body in later) >= 2
