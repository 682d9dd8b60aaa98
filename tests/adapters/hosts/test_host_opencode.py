"""filecache inside opencode: the real binary, set up by ``filecache install opencode``.

Each end-to-end test runs ``opencode run`` (pinned, installed by ``.ci/run``; under CI a missing
binary fails) in a throwaway HOME against ``scripted_chat``, and reads what the model saw from the
requests opencode sent: every tool result by the call id the script chose. ``no_dangling`` checks
every request of every run: a FileRef or diff names only results that request carries in full.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from opencode_run import OpencodeHome, need_opencode
from scripted_chat import Call, ScriptedChat, Step

from filecache.core.hashing import version_of
from filecache.core.render import host_instructions

pytestmark = pytest.mark.hosts

NOTES = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 61))
SECRET = "API_TOKEN=hunter2-opencode-7f3a9c"
TOLD = host_instructions("opencode", read="read", shell="bash", numbered=False)
REFERENCE = re.compile(r"^\[filecache\] .* since your results? (\S+?(?: and \S+?)*) \(", re.M)


@pytest.fixture
def home(tmp_path: Path) -> OpencodeHome:
    need_opencode()
    home = OpencodeHome(tmp_path)
    (home.project / "notes.txt").write_text(NOTES)
    return home


def read(call: str, path: Path, **args: int) -> Call:
    return Call(call, "read", {"filePath": str(path), **args})


def bash(call: str, command: str) -> Call:
    return Call(call, "bash", {"command": command, "description": "scripted"})


def content_of(result: str) -> str:
    """The numbered lines (or filecache's answer) inside a read result's <content> block."""
    found = re.search(r"<content>\n(.*)\n\n\(", result, re.S)
    assert found, result
    return found[1]


def no_dangling(chat: ScriptedChat) -> None:
    for number, body in enumerate(chat.tool_requests()):
        shown = {
            m["tool_call_id"]: m["content"]
            for m in body["messages"]
            if m.get("role") == "tool" and isinstance(m.get("content"), str)
        }
        for call, text in shown.items():
            for named in REFERENCE.findall(text):
                for base in named.split(" and "):
                    assert base in shown, f"request {number}: {call} names {base}, not sent"
                    assert "[Old tool result content cleared]" not in shown[base]


def test_reads_through_opencode_are_short_when_the_model_holds_the_lines(
    home: OpencodeHome,
) -> None:
    line = home.install()
    assert "installed filecache's plugin for opencode in" in line and str(home.config) in line
    notes, env, new = home.project / "notes.txt", home.project / ".env", home.project / "new.txt"
    env.write_text(SECRET + "\n")

    def outside_change() -> None:
        notes.write_text(NOTES.replace("line 40: the", "line 40: a changed"))

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
        Step(calls=(Call("w1", "write", {"filePath": str(new), "content": NOTES.upper()}),)),
        Step(calls=(read("r7", new), read("r8", notes, offset=38, limit=5))),
    ])  # fmt: skip
    no_dangling(chat)

    first = chat.result("r1")  # content: opencode's own output, untouched
    assert first.startswith(f"<path>{notes}</path>\n<type>file</type>\n<content>\n1: line 1: ")
    assert first.endswith("60: line 60: the quick brown fox jumps over the lazy dog\n\n"
                          "(End of file - total 60 lines)\n</content>")  # fmt: skip

    again = chat.result("r2")  # unchanged: one line naming the first read, in read's shape
    short_hash = version_of(NOTES.encode()).split(":")[1][:8]
    assert re.fullmatch(  # the seal: a keyed tag telling filecache's line from a file's text
        re.escape(f"<path>{notes}</path>\n<type>file</type>\n<content>\n"
                  f"[filecache] notes.txt unchanged since your result r1 (60 lines, {short_hash}")
        + r"(; seal [0-9a-f]{6})?\)\n"
        + re.escape(TOLD + "\n\n(End of file - total 60 lines)\n</content>"),
        again,
    )  # fmt: skip
    assert len(again) * 3 < len(first)
    # told once, in the first short answer; the hints name only what opencode's tools have
    every = "".join(m["content"] for body in chat.tool_requests() for m in body["messages"]
                    if m.get("role") == "tool" and isinstance(m.get("content"), str))  # fmt: skip
    assert chat.result("r3").count(TOLD) == 0 and "fresh=true" not in every

    ranged = chat.result("r3")  # an offset re-read of held lines: short, opencode's footer
    assert "unchanged since your result r1 (lines 10-14," in content_of(ranged)
    assert ranged.endswith("(Showing lines 10-14 of 60. Use offset=15 to continue.)\n</content>")

    assert chat.result("e1") == "Edit applied successfully."
    after_edit = content_of(chat.result("r4"))  # the model knows what it wrote
    assert after_edit.startswith("[filecache] notes.txt unchanged since your result")
    assert "line 7" not in after_edit

    diff = content_of(chat.result("r5"))  # changed outside: a diff from the model's version
    assert diff.startswith("[filecache] notes.txt changed since your result ")
    assert diff.endswith("\n(Apply this diff to the text you already have.)")
    assert "-line 40: the quick" in diff and "+line 40: a changed quick" in diff
    assert "line 7: THE" not in diff.split("@@", 1)[0]  # no content beyond the hunk's context

    assert chat.result("b1").startswith("[filecache] notes.txt unchanged since your result r5")

    # A denied file: opencode's own output stands (the model asked for it), nothing is stored.
    assert f"1: {SECRET}" in chat.result("r6") and chat.result("b2") == SECRET + "\n"
    stored = home.store_bytes()
    assert stored and b"hunter2" not in stored
    assert version_of((SECRET + "\n").encode()).split(":")[1].encode() not in stored

    # Parallel calls in one turn: a file the model wrote (large enough that a FileRef is
    # shorter), a range after the outside change.
    assert content_of(chat.result("r7")).startswith("[filecache] new.txt unchanged since your "
                                                    "result w1")  # fmt: skip
    assert "unchanged since your result r5 (lines 38-42," in content_of(chat.result("r8"))


def test_after_compaction_content_comes_again(home: OpencodeHome) -> None:
    home.install()
    notes = home.project / "notes.txt"
    config = home.config / "opencode.json"
    compact_all = json.loads(config.read_text()) | {"compaction": {"tail_turns": 0}}
    config.write_text(json.dumps(compact_all))  # summarise everything, keep no tail
    chat = home.run([
        Step(calls=(read("r1", notes),)),
        Step(calls=(read("r2", notes),), prompt_tokens=199_000),  # overflows: opencode compacts
        Step(calls=(read("r3", notes),)),
        Step(calls=(read("r4", notes),)),
    ])  # fmt: skip
    no_dangling(chat)
    summaries = [r for r in chat.requests if not r.get("tools")]
    assert len(summaries) >= 2  # the title, and the compaction's summary
    last = chat.tool_requests()[-1]
    assert not any(m.get("tool_call_id") in ("r1", "r2") for m in last["messages"])
    assert content_of(chat.result("r3")).startswith("1: line 1: ")  # the content, again
    assert "unchanged since your result r3" in content_of(chat.result("r4"))


def test_project_install_and_a_failed_call_leave_opencode_alone(home: OpencodeHome) -> None:
    home.seed(home.project / ".opencode")  # opencode installs its plugin package there too
    line = home.install("--project")
    assert str(home.project / ".opencode" / "opencode.json") in line
    notes = home.project / "notes.txt"
    chat = home.run([
        Step(calls=(read("r1", notes),)),
        Step(calls=(read("r2", home.project / "missing.txt"),)),
        Step(calls=(bash("b1", "cat notes.txt; exit 3"),)),
        Step(calls=(read("r3", notes, offset=61),)),
        Step(calls=(read("r4", notes, offset=21),)),
    ])  # fmt: skip
    no_dangling(chat)
    assert "File not found" in chat.result("r2")
    assert chat.result("b1").startswith("line 1: the quick")  # a failed command: its output
    assert "out of range" in chat.result("r3")
    assert "unchanged since your result r1 (lines 21-60," in content_of(chat.result("r4"))


def residents(home: OpencodeHome) -> list[int]:
    """The pids of filecache's resident processes that this HOME's opencode started."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        mine = f"HOME={home.home}".encode() in environ
        if mine and b"filecache.adapters.hosts.opencode\0serve" in command:
            found.append(int(entry.name))
    return found


def test_a_killed_resident_is_replaced_and_a_resumed_session_keeps_its_view(
    home: OpencodeHome,
) -> None:
    home.install()
    notes = home.project / "notes.txt"
    killed: list[int] = []

    def kill_resident() -> None:
        pids = residents(home)
        assert len(pids) == 1, pids
        os.kill(pids[0], signal.SIGKILL)  # the process this test's opencode started
        killed.extend(pids)  # r2 follows at once: its call may be the first to find it dead

    started: list[int] = []
    chat = home.run([
        Step(calls=(read("r1", notes),)),
        Step(calls=(read("r2", notes),), before=kill_resident),
        Step(calls=(read("r3", notes),), before=lambda: started.extend(residents(home))),
    ])  # fmt: skip
    no_dangling(chat)
    assert killed and started and killed[0] not in started  # a new process answered r2 and r3
    assert "unchanged since your result r1" in content_of(chat.result("r2"))
    assert "unchanged since your result r1" in content_of(chat.result("r3"))
    for _ in range(100):  # each exits when opencode closes its stdin: none outlives opencode
        if not residents(home):
            break
        time.sleep(0.1)
    assert residents(home) == []

    # Resumed in a new opencode process: its messages still carry r1, so FileRefs still name it.
    resumed = home.run([Step(calls=(read("r4", notes),))], "go on", "--continue")
    no_dangling(resumed)
    assert "unchanged since your result r1" in content_of(resumed.result("r4"))
    assert resumed.result("r1").startswith(f"<path>{notes}</path>")  # r1 is in these requests


def queued(pid: int, fd: int) -> bytes:
    """What waits unread on socket ``fd`` of process ``pid`` (opencode gives its children
    sockets as stdin and stdout): peeked at through a copy of the descriptor, taking nothing."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        copy = libc.syscall(438, pidfd, fd, 0)  # SYS_pidfd_getfd, the same number on every arch
    finally:
        os.close(pidfd)
    if copy < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"pidfd_getfd (Linux 5.6 or later): {os.strerror(error)}")
    with socket.socket(fileno=copy) as peer:
        try:
            return peer.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return b""


def need_peeking() -> None:
    mine, other = socket.socketpair()
    with mine, other:
        other.sendall(b"x")
        try:
            assert queued(os.getpid(), mine.fileno()) == b"x"
        except OSError as exc:
            pytest.skip(f"cannot peek at a resident's stdin: {exc}")


def test_a_resident_that_dies_with_the_call_pending_is_replaced_within_that_call(
    home: OpencodeHome,
) -> None:
    need_peeking()
    home.install()
    notes = home.project / "notes.txt"
    killed: list[int | OSError] = []

    def kill_once_r2_waits(pid: int) -> None:
        # the stopped resident holds r2's request unread: the plugin is waiting for its answer
        try:
            for _ in range(3000):
                if b'"call":"r2"' in queued(pid, 0):
                    killed.append(pid)
                    return
                time.sleep(0.01)
        except OSError as exc:
            killed.append(exc)  # reported below
        finally:
            os.kill(pid, signal.SIGKILL)  # never left stopped

    killer: list[threading.Thread] = []

    def stop_resident() -> None:
        pids = residents(home)
        assert len(pids) == 1, pids
        os.kill(pids[0], signal.SIGSTOP)  # alive to opencode, answering nothing
        killer.append(threading.Thread(target=kill_once_r2_waits, args=(pids[0],)))
        killer[0].start()

    started: list[int] = []
    chat = home.run([
        Step(calls=(read("r1", notes),)),
        Step(calls=(read("r2", notes),), before=stop_resident),
        Step(calls=(read("r3", notes),), before=lambda: started.extend(residents(home))),
    ])  # fmt: skip
    killer[0].join()
    no_dangling(chat)
    assert killed and isinstance(killed[0], int), f"r2's request never seen waiting: {killed}"
    # r2 itself was answered by filecache, by a resident started within that call
    assert "unchanged since your result r1" in content_of(chat.result("r2"))
    assert started and killed[0] not in started
    assert "unchanged since your result r1" in content_of(chat.result("r3"))


def compact_keeping(home: OpencodeHome, tokens: int) -> None:
    """opencode's compaction keeps the newest ``tokens`` of the conversation verbatim (its
    "tail", split inside a turn when a whole turn does not fit) and summarises the rest."""
    config = home.config / "opencode.json"
    keep_tail = json.loads(config.read_text()) | {"compaction": {"preserve_recent_tokens": tokens}}
    config.write_text(json.dumps(keep_tail))


def test_a_kept_answer_never_names_a_summarised_result(home: OpencodeHome) -> None:
    home.install()
    compact_keeping(home, 300)  # the FileRef r2 is kept; r1, whose text it names, is summarised
    notes = home.project / "notes.txt"
    chat = home.run([
        Step(calls=(read("r1", notes),)),
        Step(calls=(read("r2", notes),), prompt_tokens=199_000),  # overflows: opencode compacts
        Step(calls=(read("r3", notes),)),
        Step(calls=(read("r4", notes),)),
    ])  # fmt: skip
    no_dangling(chat)
    after = chat.tool_requests()[2]  # the first request after the compaction
    kept = {m.get("tool_call_id"): m.get("content") for m in after["messages"]}
    assert "r1" not in kept and "r2" in kept  # the tail kept r2's answer, not r1
    # r2 is sent as the lines it stood for, in read's shape (the same text in every request)
    assert content_of(kept["r2"]) == content_of(chat.result("r1"))
    assert chat.last_result("r2") == kept["r2"]
    assert content_of(chat.result("r3")).startswith("1: line 1: ")  # content: a new base
    assert "unchanged since your result r3" in content_of(chat.result("r4"))


def test_a_continued_session_that_compacts_never_names_a_summarised_result(
    home: OpencodeHome,
) -> None:
    home.install()
    notes = home.project / "notes.txt"
    first = home.run([Step(calls=(read("r1", notes),)), Step(calls=(read("r2", notes),))])
    no_dangling(first)
    assert "unchanged since your result r1" in content_of(first.result("r2"))
    compact_keeping(home, 300)  # the new process compacts: r1 is summarised, the tail kept
    again = home.run([
        Step(calls=(read("r3", notes),), prompt_tokens=199_000),
        Step(calls=(read("r4", notes),)),
        Step(calls=(read("r5", notes),)),
    ], "go on", "--continue")  # fmt: skip
    no_dangling(again)
    last = again.tool_requests()[-1]
    assert not any(m.get("tool_call_id") == "r1" for m in last["messages"])
    assert content_of(again.result("r4")).startswith("1: line 1: ")  # content: a new base
    assert "unchanged since your result r4" in content_of(again.result("r5"))


def test_a_store_that_cannot_be_written_is_said_once(home: OpencodeHome) -> None:
    home.install()
    (home.home / "a-file").write_text("not a folder")
    home.env["FILECACHE_STORE"] = str(home.home / "a-file" / "cache.db")
    notes = home.project / "notes.txt"
    chat = home.run([Step(calls=(read("r1", notes),)), Step(calls=(read("r2", notes),))])
    assert chat.result("r2") == chat.result("r1")  # opencode's own output, both times
    said = [line for line in home.last_stderr.splitlines() if "filecache serves" in line]
    assert len(said) == 1, home.last_stderr[-3000:]  # once, though every call failed
    assert said[0].startswith("filecache serves nothing in this session (StoreError: ")
    assert said[0].endswith("opencode's own results stand. `filecache doctor` says more.")
    again = home.run([Step(calls=(read("r3", notes),))], "go on", "--continue")
    assert "filecache serves" not in home.last_stderr  # the same session: said already
    assert again.result("r3") == chat.result("r1")


def test_in_code_mode_the_models_own_calls_are_served(home: OpencodeHome) -> None:
    """opencode's code mode (``OPENCODE_EXPERIMENTAL_CODE_MODE``) adds a code tool whose
    scripts call MCP tools (1.18.33: only those, and the tool only beside an MCP server), each
    with ``tool.execute.after`` and the id ``<the code tool's call id>/<n>``, which filecache
    leaves alone (test_host_kilo_unit); the model's own read and bash stay direct calls and are
    served as in any session."""
    home.install()
    home.env["OPENCODE_EXPERIMENTAL_CODE_MODE"] = "true"
    notes = home.project / "notes.txt"
    chat = home.run([Step(calls=(read("r1", notes),)), Step(calls=(read("r2", notes),)),
                     Step(calls=(bash("b1", "cat notes.txt"),))])  # fmt: skip
    assert "unchanged since your result r1" in content_of(chat.result("r2"))
    assert "unchanged since your result r1" in chat.result("b1")
    assert "filecache serves" not in home.last_stderr
    assert "filecache leaves" not in home.last_stderr
