"""Claude Code's Code Mode, hook side, on real payloads: a script's tool calls
(fixtures/hosts/claude-code/code-mode-*.jsonl, captured from Claude Code 2.1.332 in Code Mode by
make_code_mode_fixtures.py) get Claude Code's own output; the model's own calls are served as
in any session (the 2.1.328 capture beside them). The real binary in Code Mode:
test_host_claude_code.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts.base import log_path
from filecache.adapters.hosts.claude_code import scripted
from filecache.adapters.hosts.registry import run_hook
from test_host_claude_hook import base, hook, lines, payloads, post, read_event, replaced

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "hosts" / "claude-code"
NOTICE = "Code Mode is on: a tool result goes to the model's script, not to the model"
REPL_ID = "repl_0f9c2a4e-7b1d-4c3e-9a8f-5d6e7f8a9b0c"
"""The other form Claude Code gives a script's call (``repl_`` and a UUID: 2.1.323 and 2.1.328,
and 2.1.332 in the interactive terminal)."""

__all__ = ["base"]  # the 2.1.328 capture's project and transcript (test_host_claude_hook)


@pytest.fixture
def code_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The Code Mode capture's folder, rebuilt: ``a.py`` as the run started, the transcript
    where the payloads say it is."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.py").write_text(lines("a.py"))
    events = captured(tmp_path)
    transcript = Path(events[0]["transcript_path"])
    transcript.parent.mkdir(parents=True)
    raw = (FIXTURES / "code-mode-session.jsonl").read_text()
    transcript.write_text(raw.replace("{BASE}", str(tmp_path)))
    return tmp_path


def captured(folder: Path) -> list[dict[str, Any]]:
    raw = (FIXTURES / "code-mode-payloads.jsonl").read_text().replace("{BASE}", str(folder))
    return [json.loads(line) for line in raw.splitlines()]


def test_a_scripts_calls_get_claude_codes_own_output_and_the_user_is_told_once(
    code_mode: Path,
) -> None:
    """The capture in order: two Reads of a.py, a ``cat``, a ``file().text()`` (a Read too),
    an ``edit``, a Read after it, a Read of a file that is not there (a failure), then the
    ``REPL`` call itself. Every script call carries a ``toolu_cc_`` id and nothing else marks
    it; each keeps Claude Code's output, the re-reads included."""
    events = captured(code_mode)
    calls = [e for e in events if e["hook_event_name"] in ("PostToolUse", "PostToolUseFailure")]
    assert [(e["tool_name"], scripted(e)) for e in calls] == [
        ("Read", True), ("Read", True), ("Bash", True), ("Read", True), ("Edit", True),
        ("Read", True), ("Read", True), ("REPL", False),
    ]  # fmt: skip
    assert calls[-1]["tool_use_id"] == "toolu_s1" and calls[-2]["hook_event_name"] == (
        "PostToolUseFailure"
    )
    assert {k for e in calls[:-1] for k in e} == {k for e in calls[-1:] for k in e} | {
        "error", "is_interrupt"}  # fmt: skip
    answers = []
    a = code_mode / "project" / "a.py"
    for event in events:
        if event.get("tool_name") == "Edit":  # the script's edit, as Claude Code applied it
            a.write_text(a.read_text().replace("a.py line 7:", "a.py line seven:"))
        answers.append(hook(event))
    said = [x for x in answers if x is not None]
    assert len(said) == 1 and set(said[0]) == {"systemMessage"}
    assert NOTICE in said[0]["systemMessage"]
    assert answers.index(said[0]) == events.index(calls[0])  # at the first call of a script
    assert not log_path().exists()


@pytest.mark.parametrize("form", ["toolu_cc", "repl"])
def test_a_scripts_calls_beside_the_models_own_are_never_named_by_a_fileref(
    base: Path, form: str
) -> None:
    """A script's re-read of a file the model read itself is the script's own (no FileRef);
    its edit is not the model's (the model's next read of the file is a diff against what it
    was shown); the model's own re-read is still short, and names the model's result."""
    events = payloads(base)
    project = base / "project"
    assert hook(events[0]) is None and hook(post(events, "toolu_a1")) is None
    script_read = {**post(events, "toolu_a1"), "tool_use_id": script_id(form, "read")}
    assert hook(script_read) is not None  # told once: {"systemMessage": ...}
    assert hook({**script_read, "tool_use_id": script_id(form, "again")}) is None
    first = replaced(hook(read_event(base, project / "a.py", "toolu_whole")))["file"]["content"]
    assert first.startswith("[filecache] a.py unchanged since your result toolu_a1")
    edit = post(events, "toolu_e1")
    (project / "a.py").write_text((project / "a.py").read_text().replace("line 7:", "line seven:"))
    assert hook({**edit, "tool_use_id": script_id(form, "edit")}) is None
    after = replaced(hook(read_event(base, project / "a.py", "toolu_after")))["file"]
    assert after["content"].startswith("[filecache] a.py changed since your result toolu_a1")
    assert "+a.py line seven:" in after["content"]
    assert not log_path().exists()


def script_id(form: str, tag: str) -> str:
    """A script call's id in ``form``: ``toolu_cc_`` and 32 hex digits (2.1.332), or
    ``REPL_ID``'s shape."""
    if form == "toolu_cc":
        return "toolu_cc_" + tag.encode().hex().ljust(32, "0")[:32]
    return REPL_ID[: -len(tag)] + tag


@pytest.mark.parametrize(
    ("call", "by_script"),
    [("toolu_cc_363445d1a0ec47e8bcea724cb40fe96f", True), (REPL_ID, True),
     ("toolu_01A09q90qw90lq917835lq9", False), ("toolu_s1", False), ("toolu_a1", False),
     ("", False), (None, False), (7, False), ("xrepl_1", False), ("TOOLU_CC_1", False)],
)  # fmt: skip
def test_what_marks_a_scripts_call(call: object, by_script: bool) -> None:
    """The prefixes Claude Code itself tells a script's call by; an id from the model API
    (``toolu_01...``, letters and digits after ``toolu_``) never has them."""
    assert scripted({"tool_use_id": call}) is by_script
    out = run_hook(
        "claude-code", [],
        json.dumps({"hook_event_name": "PostToolUse", "tool_use_id": call}).encode(),
    )  # fmt: skip
    assert out == b""
