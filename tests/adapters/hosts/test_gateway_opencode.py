"""opencode and Kilo CLI (its fork) through ``filecache run opencode|kilo``: the real binaries,
the real gateway, a scripted Chat Completions API on 127.0.0.1 as the provider's ``baseURL`` in
the user's opencode.json (Kilo: kilo.json), which stays as it was: the route reaches the host
through ``OPENCODE_CONFIG_CONTENT`` (``KILO_CONFIG_CONTENT``). Each test runs once per host.

The assertions read what the model saw from the requests that upstream received
(``gateway_checks``): a ranged re-read arrives as a FileRef naming a result of the same request
that shows those lines; a file changed outside as a diff that applies to the earlier text; at a
small window a superseded result is pruned and keeps its bytes; calls and results stay paired
and no reference dangles in any request; the host finishes. No key and no ``.env`` content
reaches the gateway's log or store. Once the gateway is gone, the plain host, started as the
user starts it, works as before (nothing it keeps points at the gateway), and ``filecache run``
runs the plain host when the gateway cannot start.
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
from gateway_run import log_and_store_bytes, stop_and_wait, stop_user_gateways, user_env
from kilo_run import KiloHome, need_kilo
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
        self.host = home.flavour.host
        self.config = home.config / home.flavour.config_file
        # Kilo asks before reading a .env file whatever the config says; --auto allows it
        self.run_args = ["run", "--auto"] if self.host == "kilo" else ["run"]

    def run(
        self, steps: Sequence[Step], window: int | None = None, *, through: bool = True
    ) -> tuple[ScriptedChat, str]:
        """The host once, against a server scripted with ``steps``: through ``filecache run``
        (``through``), else the plain binary as the user starts it; (the server, stderr)."""
        chat = ScriptedChat(steps)
        with chat:
            self.home.configure(chat.base_url)
            data = json.loads(self.config.read_text())
            data["provider"]["scripted"]["options"]["apiKey"] = KEY
            self.config.write_text(json.dumps(data, indent=2))
            head = [sys.executable, "-m", "filecache", "run"]
            head += ["--window", str(window)] if window else []
            command = [*head, self.host] if through else [self.host]
            done = subprocess.run(
                [*command, *self.run_args, "work on the files"], cwd=self.home.project,
                env=self.env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        assert done.returncode == 0 and chat.finished(), (done.stdout[-2000:], done.stderr[-3000:])
        # The user's provider is left as it was (the host itself adds a "$schema" key).
        assert json.loads(self.config.read_text())["provider"] == data["provider"]
        for body in chat.tool_requests():
            check_pairing(body)
            check_no_dangling(body)
        return chat, done.stderr


@pytest.fixture(params=["opencode", "kilo"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    binary = need_opencode() if request.param == "opencode" else need_kilo()
    home = OpencodeHome(tmp_path) if request.param == "opencode" else KiloHome(tmp_path)
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

    chat, stderr = world.run([
        Step(calls=(read("r1", notes),)),
        Step(calls=(read("r2", notes, offset=10, limit=20),)),
        Step(calls=(read("p1", app),)),
        Step(calls=(read("p2", app),), before=lambda: app.write_text(new_app)),
        Step(calls=(read("s1", env),)),
    ])  # fmt: skip
    assert "filecache:" not in stderr, stderr[-3000:]

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

    # What it saved: one row for the conversation, the host's title requests on one line.
    stop_and_wait(world.env)
    done = subprocess.run(
        [sys.executable, "-m", "filecache", "stats", "--json"], cwd=world.home.project,
        env=world.env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout)
    (main,) = report["sessions"]
    assert main["headline"]["requests"] >= len(chat.tool_requests()), done.stdout
    assert main["headline"]["prompt_tokens"]["saved"] > 0
    titles = [b for b in chat.requests if not b.get("tools")]  # kilo run (7.7.7) asks none
    assert titles or world.host == "kilo", "opencode asked for no title"
    side = report["side_requests"]
    assert (side["headline"]["requests"] if side else 0) == len(titles), done.stdout

    assert SECRET in results(chat.tool_requests()[-1])["s1"]  # the host's own answer
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
    chat, _ = world.run([
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


def test_the_plain_host_works_once_the_gateway_is_gone(world: World) -> None:
    """``filecache run`` persists nothing: no file the host keeps names the gateway, and with
    the gateway stopped the host started as the user starts it sends its requests straight to
    its provider, its reads as the host shows them."""
    notes = world.home.project / "notes.txt"
    notes.write_text(NOTES)
    world.run([Step(calls=(read("r1", notes),)), Step(calls=(read("r2", notes),))])
    states = Path(world.env["XDG_RUNTIME_DIR"]).rglob("gateway-*.json")
    urls = {json.loads(p.read_text())["url"] for p in states if ".routes" not in p.name}
    assert len(urls) == 1, urls
    url = urls.pop().encode()
    stop_user_gateways(world.env)
    ours = world.home.home / ".cache" / "filecache"  # the gateway's own log
    kept = [p for p in world.home.home.rglob("*") if p.is_file() and ours not in p.parents]
    assert not [p for p in kept if "node_modules" not in p.parts and url in p.read_bytes()]
    chat, _ = world.run(
        [Step(calls=(read("r1", notes),)), Step(calls=(read("r2", notes),))], through=False
    )
    body = _first_carrying(chat, "r2")
    assert results(body)["r2"] == results(body)["r1"]  # the host's own read, as without us
    assert not references(results(body)["r2"])


def test_the_plain_host_runs_when_the_gateway_cannot_start(world: World) -> None:
    runtime = Path(world.env["XDG_RUNTIME_DIR"]) / "filecache"
    runtime.mkdir(mode=0o755)  # a folder others may enter: refused, so no gateway
    runtime.chmod(0o755)
    notes = world.home.project / "notes.txt"
    notes.write_text(NOTES)
    chat, stderr = world.run([Step(calls=(read("r1", notes),))])
    (note,) = [line for line in stderr.splitlines() if line.startswith("filecache:")]
    assert note.startswith("filecache: the gateway is not available")
    assert note.endswith(f"running plain {world.host}")
    assert chat.requests  # straight to the provider the user configured
