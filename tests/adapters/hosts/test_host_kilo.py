"""filecache inside Kilo CLI: the real binary, set up by ``filecache install kilo``.

Each test runs ``kilo run`` (pinned 7.7.7, installed by ``.ci/run``; under CI a missing binary
fails) in a throwaway HOME against ``scripted_chat``, with nothing reaching past 127.0.0.1
(tests/kilo_run.py), and reads what the model saw from the requests Kilo sent: every tool
result by the call id the script chose. ``no_dangling`` (opencode's tests' check) holds for
every request: a FileRef or diff names only results that request carries in full.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts.host_specs import spec
from hook_servers import private_runtime
from host_leftovers_kit import throwaway_install
from kilo_run import KiloHome, need_kilo
from scripted_chat import Call, ScriptedChat, Step
from test_host_opencode import bash, content_of, no_dangling, read

from filecache.core.hashing import version_of

pytestmark = pytest.mark.hosts

NOTES = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 61))
SECRET = "API_TOKEN=hunter2-kilo-5d1e0b"
_TOLD = spec("kilo").told
TOLD = _TOLD() if _TOLD is not None else ""  # what a FileRef means: with the first short answer


@pytest.fixture
def home(tmp_path: Path) -> KiloHome:
    need_kilo()
    home = KiloHome(tmp_path)
    (home.project / "notes.txt").write_text(NOTES)
    return home


def carried(chat: ScriptedChat, call: str) -> dict[str, Any]:
    """The first request that carried ``call``'s result."""
    for body in chat.tool_requests():
        if any(m.get("tool_call_id") == call for m in body["messages"] if m["role"] == "tool"):
            return body
    raise KeyError(call)


def test_reads_through_kilo_are_short_when_the_model_holds_the_lines(
    home: KiloHome, gnu_patch: Callable[[str | bytes, str], bytes]
) -> None:
    line = home.install()
    assert "installed filecache's plugin for Kilo CLI in" in line
    assert str(home.config / "kilo.json") in line  # a HOME where Kilo never ran: its own name
    notes, env = home.project / "notes.txt", home.project / ".env"
    env.write_text(SECRET + "\n")
    edited = NOTES.replace("line 7: the", "line 7: THE")
    changed = edited.replace("line 40: the", "line 40: a changed")

    def outside_change() -> None:
        notes.write_text(changed)

    chat = home.run([
        Step(calls=(read("r1", notes),)),
        Step(calls=(read("r2", notes),)),
        Step(calls=(read("r3", notes, offset=10, limit=5),)),
        Step(calls=(Call("e1", "edit", {"filePath": str(notes), "oldString": "line 7: the",
                                        "newString": "line 7: THE"}),)),
        Step(calls=(read("r4", notes),)),
        Step(calls=(read("r5", notes),), before=outside_change),
        Step(calls=(bash("b1", "cat notes.txt"),)),
        Step(calls=(read("r6", env), bash("b2", "cat .env"))),
        Step(calls=(read("r7", env),)),
    ])  # fmt: skip
    no_dangling(chat)  # every request, every FileRef and diff

    first = chat.result("r1")  # content: Kilo's own output, untouched
    assert first.startswith(f"<path>{notes}</path>\n<type>file</type>\n<content>\n1: line 1: ")
    assert first.endswith("60: line 60: the quick brown fox jumps over the lazy dog\n\n"
                          "(End of file - total 60 lines)\n</content>")  # fmt: skip

    again = chat.result("r2")  # unchanged: one line naming r1, in read's shape
    short_hash = version_of(NOTES.encode()).split(":")[1][:8]
    assert re.fullmatch(
        re.escape(f"<path>{notes}</path>\n<type>file</type>\n<content>\n"
                  f"[filecache] notes.txt unchanged since your result r1 (60 lines, {short_hash}")
        + r"(; seal [0-9a-f]{6})?\)\n"
        + re.escape(f"{TOLD}\n" if TOLD else "")
        + re.escape("\n(End of file - total 60 lines)\n</content>"),
        again,
    )  # fmt: skip
    assert len(again) * 3 < len(first)
    every = "".join(m["content"] for body in chat.tool_requests() for m in body["messages"]
                    if m.get("role") == "tool" and isinstance(m.get("content"), str))  # fmt: skip
    assert chat.result("r3").count(TOLD) == 0 and "fresh=true" not in every  # told once
    request = carried(chat, "r2")  # the result it names is in the request that carries it
    assert any(m.get("tool_call_id") == "r1" and m["content"] == first
               for m in request["messages"])  # fmt: skip

    ranged = chat.result("r3")
    assert "unchanged since your result r1 (lines 10-14," in content_of(ranged)
    assert ranged.endswith("(Showing lines 10-14 of 60. Use offset=15 to continue.)\n</content>")

    assert chat.result("e1") == "Edit applied successfully."
    after_edit = content_of(chat.result("r4"))  # the model knows what it wrote
    assert after_edit.startswith("[filecache] notes.txt unchanged since your result")
    assert "line 7" not in after_edit

    diff = content_of(chat.result("r5"))  # changed outside: a diff from the model's version
    assert diff.startswith("[filecache] notes.txt changed since your result ")
    assert gnu_patch(edited, diff) == changed.encode()  # it applies, and gives the disk's bytes
    assert chat.result("b1").startswith("[filecache] notes.txt unchanged since your result r5")

    # A denied file: Kilo's own output every time (the model asked for it), nothing stored.
    assert f"1: {SECRET}" in chat.result("r6") and chat.result("b2") == SECRET + "\n"
    assert f"1: {SECRET}" in chat.result("r7")
    stored = home.store_bytes()
    assert stored and b"hunter2" not in stored
    assert version_of((SECRET + "\n").encode()).split(":")[1].encode() not in stored


def test_sessions_are_kilos_and_a_project_install_replaces_the_users(home: KiloHome) -> None:
    home.install()
    home.seed(home.project / ".kilo")  # Kilo installs its plugin package there too
    line = home.install("--project")
    assert str(home.project / ".kilo" / "kilo.json") in line and "removed" in line
    assert "opencode_plugin.js" not in (home.config / "kilo.json").read_text()
    notes = home.project / "notes.txt"
    chat = home.run([Step(calls=(read("r1", notes),)), Step(calls=(read("r2", notes),))])
    no_dangling(chat)
    assert "unchanged since your result r1" in content_of(chat.result("r2"))  # loaded once
    assert chat.result("r2").count("[filecache] notes.txt ") == 1  # one plugin answered
    done = subprocess.run(
        [sys.executable, "-m", "filecache", "stats"], cwd=home.project,
        env={**os.environ, **home.env}, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert "Kilo CLI session ses_" in done.stdout and "opencode session" not in done.stdout


def resolved_plugins(home: KiloHome) -> list[Any]:
    """The "plugin" list Kilo itself resolves from every config file (``kilo debug config``)."""
    done = subprocess.run(
        [need_kilo(), "debug", "config"], cwd=home.project, env=home.env,
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return list(json.loads(done.stdout[done.stdout.index("{") :]).get("plugin", []))


def ours(plugins: list[Any]) -> list[Any]:
    return [p for p in plugins if "opencode_plugin.js" in json.dumps(p)]


def test_kilo_loads_the_entry_from_the_file_install_picks(home: KiloHome) -> None:
    """Kilo merges its user files in a fixed order and a later "plugin" list replaces an
    earlier one: asked after each install, Kilo resolves filecache's entry exactly once."""
    assert ours(resolved_plugins(home)) == []  # Kilo's first start writes its own kilo.jsonc
    assert (home.config / "kilo.jsonc").exists() and not (home.config / "kilo.json").exists()
    assert str(home.config / "kilo.jsonc") in home.install()
    (entry,) = ours(resolved_plugins(home))
    assert entry[1]["host"] == "kilo"

    # a later file's list (opencode.json, by hand) replaces kilo.jsonc's: the entry is lost
    (home.config / "opencode.json").write_text(json.dumps({"plugin": ["file:///x/other.js"]}))
    assert ours(resolved_plugins(home)) == []
    assert str(home.config / "opencode.json") in home.install()  # moved there
    assert len(ours(resolved_plugins(home))) == 1

    home.seed(home.project / ".kilo")
    home.install("--project")  # the user's removed: loaded once, from the project
    assert len(ours(resolved_plugins(home))) == 1
    assert "opencode_plugin.js" not in (home.config / "opencode.json").read_text()


_TIME = re.compile(r"Message time: \S+")


def requests_seen(home: KiloHome, base: Path) -> list[Any]:
    """The messages of a two-read session, without what differs between any two runs."""
    notes = str(home.project / "notes.txt")
    with private_runtime(home.env):
        chat = home.run([
            Step(calls=(Call("r1", "read", {"filePath": notes}),)),
            Step(calls=(Call("r2", "read", {"filePath": notes}),)),
            Step(text="done"),
        ])  # fmt: skip
    text = json.dumps([body["messages"] for body in chat.tool_requests()])
    return list(json.loads(_TIME.sub("Message time: X", text.replace(str(base), "WORLD"))))


def test_a_plugin_left_by_a_removed_filecache_leaves_kilo_as_plain(tmp_path: Path) -> None:
    """The entry stays in kilo.json; its interpreter is removed (the plugin file of an
    editable install's clone stays), then the package too (``pip uninstall``: the plugin file
    is gone). Kilo's requests each time equal those of a HOME that never had filecache."""
    need_kilo()
    python, package = throwaway_install(tmp_path / "install")
    left = KiloHome(tmp_path / "left")
    (left.project / "notes.txt").write_text(NOTES)
    assert "installed" in left.install(python=str(python))
    assert str(python) in (left.config / "kilo.json").read_text()
    plain = KiloHome(tmp_path / "plain")
    (plain.project / "notes.txt").write_text(NOTES)
    want = requests_seen(plain, tmp_path / "plain")
    assert "unchanged since" not in json.dumps(want)
    python.unlink()  # the plugin's spawn fails: Kilo's own output stands
    assert requests_seen(left, tmp_path / "left") == want
    shutil.rmtree(package)  # the plugin file is gone: Kilo skips the entry
    assert requests_seen(left, tmp_path / "left") == want
    assert not (left.project / ".filecache").exists()  # nothing of filecache ran
