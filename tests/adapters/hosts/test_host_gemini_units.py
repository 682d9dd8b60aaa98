"""Gemini CLI's host parts without the binary: the session file, the installer, the hook's
call-id resolution on hand-written session files in Gemini CLI 0.61's format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts import gemini_cli, gemini_settings
from filecache.adapters.hosts.config_files import client_command
from filecache.adapters.hosts.gemini_transcript import parse, wire_id

from filecache.errors import ConfigError


def _call(call_id: str, args: dict[str, Any], text: str, *, error: bool = False) -> dict[str, Any]:
    response = {"error": text} if error else {"output": text}
    part = {"functionResponse": {"id": call_id, "name": "read_file", "response": response}}
    return {"id": call_id, "name": "read_file", "args": args, "result": [part]}


def _turn(n: int, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records Gemini CLI appends for one model turn whose calls completed."""
    return [
        {"id": f"g{n}", "type": "gemini", "content": ""},
        {"id": f"g{n}", "type": "gemini", "content": "", "toolCalls": calls},
        {"id": f"u{n}", "type": "user", "content": [c["result"][0] for c in calls]},
    ]


def _jsonl(records: list[dict[str, Any]]) -> str:
    head = {"sessionId": "s", "projectHash": "h", "kind": "main"}
    return "".join(json.dumps(r) + "\n" for r in [head, *records])


def test_wire_ids_lose_the_tool_prefix() -> None:
    assert wire_id("read_file__c001", "read_file") == "c001"
    assert wire_id("read_file__read_file_17_0", "read_file") == "read_file_17_0"
    assert wire_id("c001", "read_file") == "c001"


def test_the_session_file_says_what_is_held() -> None:
    one = _call("read_file__c1", {"file_path": "a.py"}, "A\n")
    two = _call("read_file__c2", {"file_path": "b.py"}, "B\n")
    records = [*_turn(1, [one]), *_turn(2, [two]), {"$set": {"lastUpdated": "now"}}]
    got = parse(_jsonl(records))
    assert [c.id for c in got.calls] == ["c1", "c2"] and got.held == {"c1": "A\n", "c2": "B\n"}
    rewound = parse(_jsonl([*records, {"$rewindTo": "g2"}]))
    assert rewound.held == {"c1": "A\n"} and len(rewound.calls) == 2  # calls only grow
    masked = {**two["result"][0]["functionResponse"], "response": {"output": "<masked>"}}
    history = [records[1], records[2], records[4], {**records[5], "content": [
        {"functionResponse": masked}]}]  # fmt: skip
    compressed = parse(_jsonl([*records, {"$set": {"messages": history}}]))
    assert compressed.held == {"c1": "A\n", "c2": "<masked>"}
    assert compressed.calls[1].text == "B\n"  # what the model got first
    assert parse('{"id": "x", "type": "user", "content": [}\n').calls == ()  # a torn line


def test_install_merges_is_idempotent_and_uninstalls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "gh"))
    path = tmp_path / "gh" / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True)
    mine = {"matcher": "read_file", "hooks": [{"type": "command", "command": "echo mine"}]}
    path.write_text(json.dumps({"theme": "x", "hooks": {"AfterTool": [mine]}}))
    line = gemini_cli.install(scope=None, uninstall=False, cwd=tmp_path)
    assert line.startswith(f"installed filecache hooks for Gemini CLI in {path}")
    first = path.read_bytes()
    settings = json.loads(first)
    assert settings["theme"] == "x" and settings["hooks"]["AfterTool"][0] == mine
    ours = settings["hooks"]["AfterTool"][1]
    assert ours["matcher"] == gemini_settings.HOOKS["AfterTool"]
    assert ours["hooks"] == [{"type": "command", "name": "filecache", "timeout": 30000,
                              "command": client_command("gemini-cli")}]  # fmt: skip
    assert "SessionStart" in settings["hooks"]
    assert "already in" in gemini_cli.install(scope="user", uninstall=False, cwd=tmp_path)
    assert path.read_bytes() == first
    assert [(f.host, f.scope, f.count) for f in gemini_cli.installed(tmp_path)] == [
        ("gemini-cli", "user", len(gemini_settings.HOOKS))
    ]
    assert "removed" in gemini_cli.install(scope="user", uninstall=True, cwd=tmp_path)
    assert json.loads(path.read_text()) == {"theme": "x", "hooks": {"AfterTool": [mine]}}
    project = tmp_path / ".gemini" / "settings.json"
    project.parent.mkdir()
    project.write_text('{"hooks": []}')
    with pytest.raises(ConfigError, match="not an object"):
        gemini_cli.install(scope="project", uninstall=False, cwd=tmp_path)
    assert project.read_text() == '{"hooks": []}'


def _event(tmp: Path, transcript: Path, tool: str, args: dict[str, Any], shown: str) -> bytes:
    return json.dumps({
        "session_id": "s1", "transcript_path": str(transcript), "cwd": str(tmp),
        "hook_event_name": "AfterTool", "timestamp": "t", "tool_name": tool, "tool_input": args,
        "tool_response": {"llmContent": shown, "returnDisplay": ""},
    }).encode()  # fmt: skip


def test_a_fileref_names_a_call_only_once_the_session_file_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    text = "".join(
        f"line {i} of a file long enough to be worth a short answer\n" for i in range(40)
    )
    (tmp_path / "a.py").write_text(text)
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(_jsonl([]))
    args = {"file_path": "a.py"}
    assert gemini_cli.run_hook([], _event(tmp_path, transcript, "read_file", args, text)) == b""
    # The same batch (the session file does not have the first call yet): content stands.
    assert gemini_cli.run_hook([], _event(tmp_path, transcript, "read_file", args, text)) == b""
    first = _call("read_file__c1", args, text)
    second = _call("read_file__c2", args, text)
    transcript.write_text(_jsonl(_turn(1, [first, second])))
    out = json.loads(gemini_cli.run_hook([], _event(tmp_path, transcript, "read_file", args, text)))
    assert out["decision"] == "deny"
    reason = out["reason"]
    assert reason.startswith("[filecache] a.py unchanged since your result c")
    assert reason.endswith("\n" + gemini_cli.NOTE) and gemini_cli._PENDING not in reason
    # The model's history no longer holds the results (a compression): content again.
    transcript.write_text(_jsonl([*_turn(1, [first, second]), {"$set": {"messages": []}}]))
    assert gemini_cli.run_hook([], _event(tmp_path, transcript, "read_file", args, text)) == b""


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        ("a\nb\n", (1, 3, 3, "a\nb\n")),
        (
            "\nIMPORTANT: The file content has been truncated.\nStatus: Showing lines 3-5 of 41 "
            "total lines.\nAction: To read more of the file, ...\n\n--- FILE CONTENT "
            "(truncated) ---\nc\nd\ne",
            (3, 5, 41, "c\nd\ne"),
        ),
        ("x" * 10 + "... [truncated]\n", None),
        ("Cannot display content of binary file: a.bin", None),
        ("", None),
    ],
)
def test_what_read_file_showed(shown: str, expected: Any) -> None:
    assert gemini_cli._shown_lines(shown) == expected


def test_loading_a_growing_session_file_reads_what_was_appended(tmp_path: Path) -> None:
    from filecache.adapters.hosts.gemini_transcript import load

    one = _call("read_file__c1", {"file_path": "a.py"}, "A\n")
    two = _call("read_file__c2", {"file_path": "b.py"}, "B\n")
    path = tmp_path / "session.jsonl"
    text = _jsonl([*_turn(1, [one]), *_turn(2, [two]), {"$rewindTo": "g2"}])
    cut = text.index('{"id": "g2"') + 10  # a line still being written
    path.write_text(text[:cut])
    assert load(str(path)) == parse(text[: text.index('{"id": "g2"')])
    with open(path, "a") as out:
        out.write(text[cut:])
    assert load(str(path)) == parse(text) and load(str(path)).held == {"c1": "A\n"}
    path.write_text(_jsonl(_turn(1, [two])))  # rewritten shorter: read again
    assert load(str(path)) == parse(path.read_text())
    assert load(None).calls == () and load(str(tmp_path / "none")).held == {}


def test_a_session_file_rewritten_in_place_or_not_a_file_is_never_trusted(tmp_path: Path) -> None:
    """Issue 31 (10, 11): a session file rewritten in place to the same size or longer was
    read on from the old offset (only its inode and size were compared); a FIFO blocked the
    thread that opened it for good."""
    import os
    import threading

    from filecache.adapters.hosts.gemini_transcript import load

    one = _call("read_file__c1", {"file_path": "a.py"}, "A\n")
    two = _call("read_file__c2", {"file_path": "b.py"}, "B\n")
    path = tmp_path / "session.jsonl"
    text = _jsonl(_turn(1, [one]))
    path.write_text(text)
    assert load(str(path)).held == {"c1": "A\n"}
    other = text.replace('"c1"', '"c9"').replace("read_file__c1", "read_file__c9")
    with open(path, "r+") as out:  # same inode, same size, other bytes; then a turn more
        out.write(other + _jsonl(_turn(2, [two])).split("\n", 1)[1])
    assert load(str(path)) == parse(path.read_text())
    assert set(load(str(path)).held) == {"c9", "c2"}
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.append(load(str(fifo))), daemon=True)
    reader.start()
    reader.join(60)  # not a timing: a reader that blocks never returns at all
    assert got and got[0].held == {} and got[0].calls == ()
