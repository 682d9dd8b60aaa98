"""The Claude Code hook on real payloads (fixtures/hosts/claude-code/payloads.jsonl, captured from
Claude Code 2.1.328), run in a fresh project: answer shapes, the fallbacks, hostile input."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts import claude_code
from filecache.adapters.hosts.base import log_path
from filecache.adapters.hosts.registry import run_hook
from test_secrets import store_bytes

from filecache.core.render import host_instructions

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "hosts" / "claude-code"
SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
HINT = host_instructions("Claude Code")


def lines(tag: str, n: int = 60) -> str:
    return "".join(
        f"{tag} line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(n)
    )


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The captured run's folder, rebuilt: the project as it was when the run started, and
    the transcript (all of it before /compact) where the payloads say it is."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    project = tmp_path / "project"
    project.mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (project / name).write_text(lines(name))
    first = json.loads((FIXTURES / "payloads.jsonl").read_text().splitlines()[0])
    transcript = Path(first["transcript_path"].replace("{BASE}", str(tmp_path)))
    transcript.parent.mkdir(parents=True)
    kept = []
    for line in (FIXTURES / "session.jsonl").read_text().splitlines():
        if '"compact_boundary"' in line:
            break
        kept.append(line.replace("{BASE}", str(tmp_path)))
    transcript.write_text("\n".join(kept) + "\n")
    return tmp_path


def payloads(base: Path) -> list[dict[str, Any]]:
    raw = (FIXTURES / "payloads.jsonl").read_text().replace("{BASE}", str(base))
    return [json.loads(line) for line in raw.splitlines()]


def hook(event: dict[str, Any]) -> dict[str, Any] | None:
    out = run_hook("claude-code", [], json.dumps(event).encode())
    return json.loads(out) if out else None


def post(events: list[dict[str, Any]], call: str) -> dict[str, Any]:
    return next(e for e in events if e.get("tool_use_id") == call and "tool_response" in e)


def replaced(answer: dict[str, Any] | None) -> Any:
    assert answer is not None
    specific = answer["hookSpecificOutput"]
    assert specific["hookEventName"] == "PostToolUse"
    return specific["updatedToolOutput"]


def test_captured_payloads_replayed_give_short_answers_in_claude_codes_shapes(base: Path) -> None:
    events = payloads(base)
    project = base / "project"
    # Nothing rides in every request from the start: the instructions come with a short answer.
    assert events[0]["hook_event_name"] == "SessionStart" and hook(events[0]) is None
    assert hook(post(events, "toolu_a1")) is None  # first read: Claude Code's own content
    # The whole file again: the first short answer of the context, with the instructions on
    # one more line after the FileRef (Claude Code numbers it 2).
    first = replaced(hook(read_event(base, project / "a.py", "toolu_whole")))["file"]
    assert first["content"] == first["content"].split("\n")[0] + "\n" + HINT
    assert first["content"].startswith("[filecache] a.py unchanged since your result toolu_a1")
    assert (first["startLine"], first["numLines"]) == (1, 2)
    ranged = replaced(hook(post(events, "toolu_a2")))  # offset 5, limit 10
    assert ranged["type"] == "text" and set(ranged["file"]) == {
        "filePath", "content", "numLines", "startLine", "totalLines"}  # fmt: skip
    assert ranged["file"]["content"].startswith(
        "[filecache] a.py unchanged since your result toolu_a1 (lines 5-14,"
    )
    assert (ranged["file"]["startLine"], ranged["file"]["numLines"]) == (5, 1)
    assert ranged["file"]["totalLines"] == 61 and ranged["file"]["filePath"] == str(
        project / "a.py"
    )
    assert hook(post(events, "toolu_p1")) is None and hook(post(events, "toolu_p2")) is None
    # The model's Edit, as Claude Code applied it; then a re-read is short.
    (project / "a.py").write_text((project / "a.py").read_text().replace("line 7:", "line seven:"))
    assert hook(post(events, "toolu_e1")) is None
    after_edit = replaced(hook(post(events, "toolu_a3")))["file"]["content"]
    assert after_edit.startswith("[filecache] a.py unchanged since your result toolu_e1")
    write = post(events, "toolu_w1")
    (project / "new.txt").write_text(write["tool_input"]["content"])
    assert hook(write) is None
    bash = replaced(hook(post(events, "toolu_b1")))
    original = post(events, "toolu_b1")["tool_response"]
    assert set(bash) == set(original) and bash["stderr"] == original["stderr"]
    assert bash["stdout"] == (  # no instructions: toolu_whole carries them
        f"[filecache] b.py unchanged since your result toolu_p1 (60 lines, "
        f"{bash['stdout'].rsplit(', ', 1)[1]}"
    )
    failures = [e for e in events if e["hook_event_name"] == "PostToolUseFailure"]
    assert {e["tool_use_id"] for e in failures} == {"toolu_f1", "toolu_f2"}
    (project / "c.py").write_text((project / "c.py").read_text().replace("line 3:", "line three:"))
    assert all(hook(e) is None for e in failures)
    diff = replaced(hook(post(events, "toolu_p3")))["file"]["content"]
    assert diff.startswith("[filecache] c.py changed since your result toolu_p2")
    assert "+c.py line three:" in diff and "fresh=true" not in diff and HINT not in diff
    assert not log_path().exists()


def test_compaction_events_forget_everything(base: Path) -> None:
    events = payloads(base)
    whole = read_event(base, base / "project" / "a.py", "toolu_a2")
    hook(post(events, "toolu_a1"))
    assert replaced(hook(whole)) is not None
    compact = next(e for e in events if e["hook_event_name"] == "PreCompact")
    assert hook(compact) is None
    assert hook(whole) is None  # content again (Claude Code's own)
    hook(post(events, "toolu_a1"))
    starts = [e for e in events if e["hook_event_name"] == "SessionStart"]
    assert {e["source"] for e in starts} >= {"startup", "resume", "compact"}
    assert hook(next(e for e in starts if e["source"] == "compact")) is None
    assert hook(whole) is None


def read_event(base: Path, path: Path, call: str, **file: Any) -> dict[str, Any]:
    event = post(payloads(base), "toolu_a1")
    content = path.read_text(errors="replace") if path.exists() else ""
    shown = {"filePath": str(path), "content": content, "numLines": content.count("\n") + 1,
             "startLine": 1, "totalLines": content.count("\n") + 1, **file}  # fmt: skip
    return {**event, "tool_use_id": call, "tool_input": {"file_path": str(path)},
            "tool_response": {"type": "text", "file": shown}}  # fmt: skip


def test_denied_outside_binary_and_claude_codes_own_stubs_are_left_alone(base: Path) -> None:
    project = base / "project"
    (project / ".env").write_text(SECRET + "\n")
    outside = base / "elsewhere.txt"
    outside.write_text(lines("elsewhere"))
    (project / "blob.bin").write_bytes(b"\x00\x01" * 500)
    for i, path in enumerate([project / ".env", outside, project / "blob.bin"] * 2):
        assert hook(read_event(base, path, f"toolu_x{i}")) is None
    stub = "File unchanged since last read. The content from the earlier Read tool_result ..."
    assert hook(read_event(base, project / "a.py", "toolu_y1")) is None
    assert hook(read_event(base, project / "a.py", "toolu_y2", content=stub)) is None
    capped = read_event(base, project / "a.py", "toolu_y3", truncatedByTokenCap=True)
    assert hook(capped) is None
    assert hook({**capped, "tool_response": {"type": "image", "file": {"base64": ""}}}) is None
    db = project / ".filecache" / "cache.db"
    assert SECRET.encode() not in store_bytes(db) and b"wJalrXUtnFEMI" not in store_bytes(db)
    assert not log_path().exists()


def test_text_claude_code_showed_differently_backs_no_fileref(base: Path) -> None:
    project = base / "project"
    event = read_event(base, project / "a.py", "toolu_z1")
    event["tool_response"]["file"]["content"] = event["tool_response"]["file"]["content"][:-30]
    assert hook(event) is None  # Claude Code cut it: the model holds the cut text
    again = read_event(base, project / "a.py", "toolu_z2")
    assert hook(again) is None  # so this is content, not "unchanged since toolu_z1"


def bash_event(base: Path, command: str, call: str, stdout: str, cwd: Path) -> dict[str, Any]:
    event = next(e for e in payloads(base) if e.get("tool_name") == "Bash" and "tool_response"
                 in e)  # fmt: skip
    response = {**event["tool_response"], "stdout": stdout.rstrip("\n")}
    return {**event, "tool_use_id": call, "cwd": str(cwd),
            "tool_input": {"command": command, "description": "Show"},
            "tool_response": response}  # fmt: skip


def test_a_shell_cat_that_prints_something_else_gets_no_fileref(base: Path) -> None:
    """A user's shell function ``cat`` printing other text: the model holds that text, so no
    FileRef or diff stands for it (issue 31, 1)."""
    project = base / "project"
    text = (project / "a.py").read_text()
    assert hook(bash_event(base, "cat a.py", "toolu_k1", text, project)) is None
    shown = "a.py line 0: something the user's function printed\n"
    assert hook(bash_event(base, "cat a.py", "toolu_k2", shown, project)) is None
    answer = hook(bash_event(base, "cat a.py", "toolu_k3", text, project))
    assert "unchanged since your result toolu_k1" in replaced(answer)["stdout"]
    (project / "a.py").write_text(text.replace("line 7:", "line seven:"))
    # the shell printed the old text (a function, a cache): no diff stands for the new one
    assert hook(bash_event(base, "cat a.py", "toolu_k4", text, project)) is None
    again = hook(bash_event(base, "cat a.py", "toolu_k5", text.replace("line 7:", "line seven:"),
                            project))  # fmt: skip
    assert again is None or "toolu_k4" not in replaced(again)["stdout"]


def test_a_bash_read_in_a_subfolder_is_that_folders_file(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = base / "project"
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))  # as Claude Code sets it
    (project / "sub").mkdir()
    (project / "sub" / "a.py").write_text(lines("sub"))
    root_text = (project / "a.py").read_text()
    assert hook(bash_event(base, "cat a.py", "toolu_d1", root_text, project)) is None
    sub = project / "sub"
    assert hook(bash_event(base, "cat a.py", "toolu_d2", lines("sub"), sub)) is None
    answer = replaced(hook(bash_event(base, "cat a.py", "toolu_d3", lines("sub"), sub)))
    assert "sub/a.py unchanged since your result toolu_d2" in answer["stdout"]


def test_a_read_whose_content_is_not_disks_gets_no_fileref_or_diff(base: Path) -> None:
    """Claude Code read the file before it changed; the hook sees the new bytes: a diff to
    them (or a FileRef) would stand for lines the Read did not return."""
    project = base / "project"
    path = project / "a.py"
    assert hook(read_event(base, path, "toolu_r1")) is None
    old = read_event(base, path, "toolu_r2")
    path.write_text(path.read_text().replace("line 7:", "line seven:"))
    assert hook(old) is None  # it returned the old text, which the model now holds
    again = hook(read_event(base, path, "toolu_r3"))
    assert again is None or "toolu_r2" not in replaced(again)["file"]["content"]


@pytest.mark.parametrize(
    "payload",
    [b"", b"not json", b"[]", b"{}", b'{"hook_event_name": "PostToolUse"}',
     b'{"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Read",'
     b' "tool_use_id": "t", "tool_input": {"file_path": 7}, "tool_response": {"type": "text",'
     b' "file": {"content": 1, "numLines": "x"}}}',
     b'{"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Bash",'
     b' "tool_use_id": "t", "tool_input": {"command": ["cat"]}, "tool_response": null}'],
)  # fmt: skip
def test_hostile_payloads_answer_nothing_and_never_raise(base: Path, payload: bytes) -> None:
    os.chdir(base / "project")
    assert run_hook("claude-code", [], payload) == b""


@pytest.mark.parametrize("response", [None, [], "text", {"type": "text"}, {"type": "text",
    "file": {"content": "x", "numLines": 1, "startLine": -4, "totalLines": 1}}])  # fmt: skip
def test_misshapen_read_results_are_left_alone_without_a_log_line(
    base: Path, response: Any
) -> None:
    event = {**read_event(base, base / "project" / "a.py", "toolu_h1"), "tool_response": response}
    assert hook(event) is None and not log_path().exists()


def test_an_internal_failure_is_one_log_line_and_no_answer(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filecache.adapters.hosts.base import HostSession

    events = payloads(base)
    hook(post(events, "toolu_a1"))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected\nfailure")

    monkeypatch.setattr(HostSession, "read", broken)  # a bug anywhere below the hook
    assert run_hook("claude-code", [], json.dumps(post(events, "toolu_a2")).encode()) == b""
    logged = log_path().read_text().splitlines()
    assert len(logged) == 1 and "claude-code" in logged[0] and "injected failure" in logged[0]


def test_a_subagent_is_its_own_context(base: Path) -> None:
    events = payloads(base)
    hook(post(events, "toolu_a1"))
    sub = {**post(events, "toolu_a2"), "agent_id": "a1b2c3", "agent_type": "Explore"}
    assert hook(sub) is None  # the subagent never saw toolu_a1: content
    assert claude_code.HOST_NAME == "claude-code"


def test_a_call_the_transcript_does_not_name_yet_is_kept_until_the_next_prompt(
    base: Path,
) -> None:
    # Claude Code runs a parallel call's tool while the response still streams: a sibling's
    # hook may read the transcript before that call's entry is written. Its fact is kept...
    a = base / "project" / "a.py"
    assert hook(read_event(base, a, "toolu_inflight")) is None
    again = replaced(hook(read_event(base, a, "toolu_next")))["file"]["content"]
    assert again.startswith("[filecache] a.py unchanged since your result toolu_inflight")
    # ...until a new prompt (or a session start), when every call of the turn is written.
    prompt = {**payloads(base)[0], "hook_event_name": "UserPromptSubmit", "prompt": "go on"}
    assert hook(prompt) is None
    assert hook(read_event(base, a, "toolu_later")) is None  # content: toolu_inflight is gone


def test_a_call_the_transcript_shows_lost_is_forgotten_at_once(base: Path) -> None:
    events = payloads(base)
    hook(post(events, "toolu_a1"))
    transcript = Path(events[0]["transcript_path"])
    text = transcript.read_text()
    result = next(line for line in text.splitlines() if '"tool_use_id":"toolu_a1"' in line
                  or '"tool_use_id": "toolu_a1"' in line)  # fmt: skip
    entry = json.loads(result)
    for block in entry["message"]["content"]:
        block["content"] = "[Old tool result content cleared]"
    transcript.write_text(text.replace(result, json.dumps(entry)))
    assert hook(post(events, "toolu_a2")) is None  # content: toolu_a1 was cleared


def _content(answer: dict[str, Any] | None) -> str:
    return str(replaced(answer)["file"]["content"])


def _clear(transcript: Path, call: str) -> None:
    """Claude Code clears the result of ``call`` in its transcript (microcompact)."""
    text = transcript.read_text()
    line = next(row for row in text.splitlines() if f'"tool_use_id":"{call}"' in row
                or f'"tool_use_id": "{call}"' in row)  # fmt: skip
    entry = json.loads(line)
    for block in entry["message"]["content"]:
        block["content"] = "[Old tool result content cleared]"
    transcript.write_text(text.replace(line, json.dumps(entry)))


def test_the_instructions_come_once_with_a_short_answer_and_again_once_it_is_lost(
    base: Path,
) -> None:
    a = base / "project" / "a.py"
    transcript = Path(payloads(base)[0]["transcript_path"])
    assert hook(read_event(base, a, "toolu_a1")) is None  # content: nothing added
    # toolu_a2 is a call the transcript names (with a result held): the first short answer.
    carried = _content(hook(read_event(base, a, "toolu_a2")))
    assert carried.endswith("\n" + HINT) and carried.count(HINT) == 1
    assert _content(hook(read_event(base, a, "toolu_x3"))).count("\n") == 0  # said already
    # Claude Code clears the result that carried them: the next short answer carries them.
    _clear(transcript, "toolu_a2")
    again = _content(hook(read_event(base, a, "toolu_x4")))
    assert again.startswith("[filecache] a.py unchanged since your result toolu_a1")
    assert again.endswith("\n" + HINT)
    assert _content(hook(read_event(base, a, "toolu_x5"))).count("\n") == 0
    # A new prompt: the transcript does not hold toolu_x4 (it never wrote it), nor anything
    # relying on the x calls; a1 is still held, so the next re-read is short, and carries them.
    prompt = {**payloads(base)[0], "hook_event_name": "UserPromptSubmit", "prompt": "go on"}
    assert hook(prompt) is None
    assert _content(hook(read_event(base, a, "toolu_x6"))).endswith("\n" + HINT)
    # /clear (and compaction) drop the context: content, then a short answer that carries them.
    clear = {**payloads(base)[0], "hook_event_name": "SessionStart", "source": "clear"}
    assert hook(clear) is None
    assert hook(read_event(base, a, "toolu_x7")) is None
    assert _content(hook(read_event(base, a, "toolu_x8"))).endswith("\n" + HINT)


def test_a_short_answer_no_shorter_with_the_instructions_leaves_claude_codes_own(
    base: Path,
) -> None:
    events = payloads(base)
    a = base / "project" / "a.py"
    assert hook(post(events, "toolu_a1")) is None
    # Ten lines again: a FileRef plus the instructions would cost more than the lines, so
    # Claude Code's own content stands and nothing relies on the call.
    assert hook(post(events, "toolu_a2")) is None
    carried = _content(hook(read_event(base, a, "toolu_x1")))  # the whole file: short
    assert carried.startswith("[filecache] a.py unchanged since your result toolu_a1")
    assert carried.endswith("\n" + HINT)
    # Said once: now the ten lines are a FileRef of their own.
    ranged = _content(hook(post(events, "toolu_a2")))
    assert ranged.startswith("[filecache] a.py unchanged since your result ") and "\n" not in ranged


@pytest.mark.parametrize("rounds", [4])
def test_parallel_short_answers_carry_the_instructions_exactly_once(
    base: Path, rounds: int
) -> None:
    # The resident hook server answers parallel calls in threads, each with its own store
    # connection: of two short answers at once, one carries the instructions.
    import threading

    a = base / "project" / "a.py"
    compact = next(e for e in payloads(base) if e["hook_event_name"] == "PreCompact")
    for n in range(rounds):
        assert hook(compact) is None
        assert hook(read_event(base, a, f"toolu_c{n}")) is None
        gate = threading.Barrier(2)
        out: dict[str, str] = {}

        def call(cid: str, gate: threading.Barrier, out: dict[str, str]) -> None:
            gate.wait()
            out[cid] = _content(claude_code.answer(read_event(base, a, cid)))

        threads = [threading.Thread(target=call, args=(f"toolu_p{n}{k}", gate, out)) for k in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(text.count(HINT) for text in out.values()) == [0, 1], out


def test_a_copy_of_a_denied_file_made_by_bash_is_not_stored_by_a_later_call(base: Path) -> None:
    """``cp .env copy.txt`` in one hook call, a Read of the copy in the next: each call is a
    new session object, and the copy is still denied (issue 31, 7)."""
    project = base / "project"
    (project / ".env").write_text(SECRET + "\n")
    assert hook(bash_event(base, "cp .env copy.txt", "toolu_cp", "", project)) is None
    (project / "copy.txt").write_text(SECRET + "\n")  # what the host's cp did
    assert hook(read_event(base, project / "copy.txt", "toolu_c1")) is None
    (project / "copy2.txt").write_text(SECRET + "\n")  # a copy made where no command named it
    assert hook(read_event(base, project / ".env", "toolu_e1")) is None  # the Read of .env
    assert hook(read_event(base, project / "copy2.txt", "toolu_c3")) is None
    db = project / ".filecache" / "cache.db"
    assert SECRET.encode() not in store_bytes(db) and b"wJalrXUtnFEMI" not in store_bytes(db)
