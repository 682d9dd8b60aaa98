"""``filecache replay`` of imported Claude Code logs runs them through the hook's own logic.

The bundled transcripts (real Claude Code 2.1.19 stream-json runs, a small session file, and a
session file the real 2.1.328 binary wrote on a scripted session with re-reads)
are imported and replayed through ``claude_code.answer``; a session file written here with
re-reads, an Edit and a ``cat`` shows FileRefs and diffs; the live hook (``run_hook``, as the
hook command runs it) given the same events answers exactly what the replay used.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import filecache.adapters.hosts.claude_replay as claude_replay
import pytest
from click.testing import CliRunner
from filecache.adapters.hosts.claude_replay import render_read, replay_claude_code
from filecache.adapters.hosts.registry import run_hook

from filecache.cli import main
from filecache.core.render import host_instructions
from filecache.errors import TranscriptError
from filecache.importers import import_logs
from filecache.replay.replay_host import trace_host
from filecache.stats import collect_stats, format_stats, host_of

FIXTURES = Path(__file__).parents[3] / "fixtures" / "imports" / "claude-code"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("traces")
    import_logs("claude-code", sorted(FIXTURES.glob("*.jsonl")), out)
    return out


# name -> (requests, prompt tokens recorded, through the hook, reads by kind f/u/d)
BUNDLED = {
    "cc-2.1.328-rereads": (11, 51639, 29835, (2, 5, 1)),
    "project-session.1": (6, 2269, 2269, (3, 0, 0)),
    "project-session.2": (3, 591, 591, (2, 0, 0)),
    "skillsbench-citation-check": (16, 273808, 273808, (1, 0, 0)),
    "skillsbench-econ-detrending-correlation": (10, 66412, 66412, (0, 0, 0)),
    "skillsbench-exoplanet-detection-period": (8, 11558, 11558, (1, 0, 0)),
}


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_the_bundled_transcripts_replay_through_the_hook(imported: Path, name: str) -> None:
    result = replay_claude_code(imported / name)
    requests, recorded, through_hook, (full, unchanged, diff) = BUNDLED[name]
    assert (result.stale_views, result.dangling_refs) == (0, 0), result.problems
    assert result.files_identical, result.mismatches
    assert result.requests == requests
    assert result.prompt_tokens.recorded == recorded
    # Each FileRef and diff carries a seal keyed by this machine's key: its token count may
    # differ by a few tokens on another machine in every request it stays in (29,767-29,902
    # over 7 keys for the first); on one machine every run gives the same figures (below).
    slack = 3 * result.requests * (unchanged + diff)
    assert abs(result.prompt_tokens.filecache - through_hook) <= slack
    assert result.prompt_tokens.plain == result.prompt_tokens.recorded  # Claude Code's own tools
    reads = result.reads
    assert (reads["full"], reads["unchanged"], reads["diff"]) == (full, unchanged, diff)
    # Never worse than the recording: the instructions ride only with a short answer that
    # still saves; a session without one pays nothing.
    saves = name == "cc-2.1.328-rereads"
    assert (result.billed.filecache < result.billed.recorded) == saves
    assert result.billed.filecache <= result.billed.recorded
    assert result.prompt_tokens.filecache <= result.prompt_tokens.recorded


def test_a_replay_through_the_hook_repeats_its_figures(imported: Path) -> None:
    """Each run copies the files to a new temporary root; the seal is keyed by the session's
    name, not that root, so the answers and their token counts repeat (they differed by a few
    tokens per FileRef between runs)."""
    first, again = (replay_claude_code(imported / "cc-2.1.328-rereads") for _ in range(2))
    assert first.prompt_tokens == again.prompt_tokens and first.billed == again.billed
    assert first.filecache_messages == again.filecache_messages


def test_the_hooks_instructions_ride_with_the_first_short_answer(imported: Path) -> None:
    hint = host_instructions("Claude Code")
    quiet = replay_claude_code(imported / "project-session.1")
    assert not any(hint in str(m.get("content")) for m in quiet.filecache_messages)
    result = replay_claude_code(imported / "cc-2.1.328-rereads")
    carrying = [m for m in result.filecache_messages if hint in str(m.get("content"))]
    assert len(carrying) == 1 and carrying[0]["role"] == "tool"
    assert "unchanged since your result" in str(carrying[0]["content"])


def _long_file(n: int = 80) -> str:
    return "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(n))


class _Log:
    """A Claude Code session file (``~/.claude/projects/...``), written entry by entry."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.n = 0

    def _add(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        self.n += 1
        uid = f"00000000-0000-4000-8000-{self.n:012d}"
        self.lines.append({"parentUuid": self.parent, "isSidechain": False, "cwd": self.cwd,
                           "sessionId": "s1", "type": kind, "uuid": uid, "message": message,
                           **extra})  # fmt: skip
        self.parent = uid

    def prompt(self, text: str) -> None:
        self._add("user", {"role": "user", "content": text})

    def call(self, cid: str, name: str, given: dict[str, Any], text: str, payload: Any) -> None:
        use = {"type": "tool_use", "id": cid, "name": name, "input": given}
        self._add("assistant", {"id": f"msg_{cid}", "role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": cid, "content": text}
        self._add("user", {"role": "user", "content": [result]}, toolUseResult=payload)

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(e) + "\n" for e in self.lines), encoding="utf-8")
        return path


def _read(log: _Log, cid: str, path: str, text: str, start: int = 1) -> None:
    rows = text.split("\n")
    numbered = "\n".join(f"{n:>6}→{row}" for n, row in enumerate(rows, start))
    file = {"filePath": path, "content": text, "numLines": len(rows), "startLine": start,
            "totalLines": len(rows)}  # fmt: skip
    log.call(cid, "Read", {"file_path": path}, numbered, {"type": "text", "file": file})


def _session_with_rereads(tmp_path: Path) -> Path:
    """Read a.py, read it again, Edit it, read it, cat b.py twice, sed -i b.py, cat b.py."""
    cwd = "/home/me/proj"
    a, b = _long_file(), _long_file(60).replace("line", "row")
    log = _Log(cwd)
    log.prompt("tidy a.py and b.py")
    _read(log, "toolu_r1", f"{cwd}/a.py", a)
    _read(log, "toolu_r2", f"{cwd}/a.py", a)
    old, new = "line 3: the quick", "line three: the quick"
    log.call("toolu_e1", "Edit", {"file_path": f"{cwd}/a.py", "old_string": old,
             "new_string": new}, f"The file {cwd}/a.py has been updated.",
             {"filePath": f"{cwd}/a.py", "oldString": old, "newString": new,
              "originalFile": a})  # fmt: skip
    _read(log, "toolu_r3", f"{cwd}/a.py", a.replace(old, new))
    for cid in ("toolu_c1", "toolu_c2"):
        out = b.rstrip("\n")
        log.call(cid, "Bash", {"command": f"cat {cwd}/b.py"}, out,
                 {"stdout": out, "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip
    log.call("toolu_s1", "Bash", {"command": f"sed -i 's/row 7:/row seven:/' {cwd}/b.py"}, "",
             {"stdout": "", "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip
    out = b.replace("row 7:", "row seven:").rstrip("\n")
    log.call("toolu_c3", "Bash", {"command": f"cat {cwd}/b.py"}, out,
             {"stdout": out, "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip
    return log.write(tmp_path / "rereads.jsonl")


@pytest.fixture
def rereads(tmp_path: Path) -> Path:
    import_logs("claude-code", [_session_with_rereads(tmp_path)], tmp_path / "traces")
    return tmp_path / "traces" / "rereads"


def test_rereads_become_filerefs_and_diffs_naming_the_real_tool_use_ids(rereads: Path) -> None:
    result = replay_claude_code(rereads)
    assert (result.stale_views, result.dangling_refs) == (0, 0), result.problems
    kinds = {c["call_id"]: c["kind"] for c in result.calls}
    assert kinds["toolu_r2"] == "unchanged"  # a re-read of an unchanged file
    assert kinds["toolu_r3"] == "unchanged"  # a read after the model's own Edit
    assert kinds["toolu_c2"] == "unchanged"  # a Bash cat re-read
    assert kinds["toolu_c3"] == "diff"  # after a sed -i the model did not write itself
    sent = {m.get("tool_call_id"): m["content"] for m in result.filecache_messages}
    assert "unchanged since your result toolu_r1" in sent["toolu_r2"]
    assert sent["toolu_r2"].startswith("     1→[filecache]")  # numbered as Claude Code does
    assert "since your result toolu_c1" in sent["toolu_c3"]
    assert result.prompt_tokens.filecache < result.prompt_tokens.recorded
    assert result.billed.filecache < result.billed.recorded


def test_the_live_hook_answers_what_the_replay_used(
    rereads: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every event the replay feeds the hook logic, given as bytes to ``run_hook`` (the hook
    command's entry, configured by its environment as Claude Code runs it) against its own
    store, gets the same answer: the replay runs the hook, not a copy of it."""
    seen: list[tuple[dict[str, Any], Any]] = []
    replayed = claude_replay.answer

    def both(event: dict[str, Any], site: Any) -> Any:
        out = replayed(event, site)
        monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(site.root))
        monkeypatch.setenv("FILECACHE_STORE", str(tmp_path / "live.db"))
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        live = run_hook("claude-code", [], json.dumps(event).encode())
        seen.append((event, out))
        # the seal is the one difference: the replay keys it by the session's name (so its
        # figures repeat), the live hook by the root
        unsealed = re.compile(r"seal [0-9a-f]{6}")
        expected = unsealed.sub("seal", json.dumps(out))
        assert unsealed.sub("seal", json.dumps(json.loads(live) if live else None)) == expected, (
            event.get("tool_use_id")
        )
        return out

    monkeypatch.setattr(claude_replay, "answer", both)
    result = replay_claude_code(rereads)
    replaced = [e for e, out in seen if out and e["hook_event_name"] == "PostToolUse"]
    assert len(replaced) == 4 and result.stale_views == 0
    assert not (tmp_path / "xdg" / "filecache" / "hooks.log").exists()  # no internal error


def test_render_read_numbers_like_the_recording() -> None:
    file = {"content": "[filecache] a.py unchanged", "startLine": 5}
    assert render_read(file, "     5→x\n\n<system-reminder>\nr\n</system-reminder>\n") == (
        "     5→[filecache] a.py unchanged\n\n<system-reminder>\nr\n</system-reminder>\n"
    )
    assert render_read(file, "5\tx") == "5\t[filecache] a.py unchanged"


def test_cli_replays_claude_code_traces_through_the_hook_and_stats_names_them(
    rereads: Path, tmp_path: Path
) -> None:
    store = tmp_path / "replayed.db"
    runner = CliRunner()
    out = runner.invoke(main, ["replay", str(rereads), "--json", "--store", str(store)])
    assert out.exit_code == 0, out.output
    session = json.loads(out.output)["sessions"][0]
    assert session["reads"]["unchanged"] == 3 and session["stale_views"] == 0
    library = runner.invoke(main, ["replay", str(rereads), "--json", "--host", "none"])
    assert json.loads(library.output)["sessions"][0] != session  # the library Session's logic
    refused = runner.invoke(main, ["replay", str(rereads), "--host", "claude-code",
                                   "--window", "32000"])  # fmt: skip
    assert refused.exit_code != 0 and "--host none" in refused.output

    stats = runner.invoke(main, ["stats", "--store", str(store), "--json"])
    (row,) = json.loads(stats.output)["sessions"]
    assert (row["host"], row["host_session_id"]) == ("Claude Code", "rereads")
    from filecache.store.opening import open_store

    with open_store(tmp_path, str(store)) as opened:
        report = collect_stats(opened)
    (only,) = report.sessions
    assert host_of(only.session_id) == ("Claude Code", "rereads")
    assert only.saved > 0
    assert "Claude Code session rereads" in format_stats(report)
    page = tmp_path / "stats.html"
    html = runner.invoke(main, ["stats", "--store", str(store), "--html", str(page)])
    assert html.exit_code == 0 and "Claude Code session rereads" in page.read_text()


def test_a_trace_without_the_hooks_calls_is_refused_with_what_to_do(imported: Path) -> None:
    trace = json.loads((imported / "project-session.2" / "transcript.json").read_text())
    del trace["claude_code"]
    old = imported.parent / "old-trace"
    (old / "files").mkdir(parents=True, exist_ok=True)
    (old / "transcript.json").write_text(json.dumps(trace))
    with pytest.raises(TranscriptError, match="import the log again"):
        replay_claude_code(old)
    assert trace_host(old) is None  # --host auto replays it as any trace
    out = CliRunner().invoke(main, ["replay", str(old), "--json"])
    assert out.exit_code == 0, out.output
    assert trace_host(imported / "project-session.2") == "claude-code"


STUB = (
    "File unchanged since last read. The content from the earlier Read tool_result in this "
    "conversation is still current \u2014 refer to that instead of re-reading."
)


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "file_unchanged", "file": {"filePath": "/home/me/proj/a.py"}},
        {
            "type": "text",
            "file": {
                "filePath": "/home/me/proj/a.py",
                "content": STUB,
                "numLines": 1,
                "startLine": 1,
                "totalLines": 81,
            },
        },
    ],  # fmt: skip
)
def test_claude_codes_own_unchanged_stub_is_left_alone_and_never_named(
    tmp_path: Path, payload: dict[str, Any]
) -> None:
    cwd = "/home/me/proj"
    a = _long_file()
    log = _Log(cwd)
    log.prompt("look at a.py")
    _read(log, "toolu_r1", f"{cwd}/a.py", a)
    log.call("toolu_r2", "Read", {"file_path": f"{cwd}/a.py"}, STUB, payload)
    _read(log, "toolu_r3", f"{cwd}/a.py", a)
    import_logs("claude-code", [log.write(tmp_path / "stub.jsonl")], tmp_path / "traces")
    result = replay_claude_code(tmp_path / "traces" / "stub")
    sent = {m.get("tool_call_id"): m["content"] for m in result.filecache_messages}
    assert sent["toolu_r2"] == STUB  # Claude Code's own answer, not mangled
    assert "unchanged since your result toolu_r1 " in sent["toolu_r3"]  # never the stub's id
    assert (result.stale_views, result.dangling_refs) == (0, 0), result.problems


@pytest.mark.parametrize("last", ["toolu_p1", "toolu_p2"])
def test_parallel_reads_are_imported_whichever_result_the_next_message_hangs_under(
    tmp_path: Path, last: str
) -> None:
    """Claude Code 2.1.x: one assistant entry per tool_use of a response, chained; each result
    under its own tool_use entry; the next message under whichever result was written last."""
    cwd = "/home/me/proj"
    a, b = _long_file(), _long_file(50).replace("line", "row")
    entries: list[dict[str, Any]] = []

    def add(uid: str, parent: str | None, kind: str, message: dict[str, Any], **extra: Any) -> None:
        entries.append({"uuid": uid, "parentUuid": parent, "type": kind, "isSidechain": False,
                        "cwd": cwd, "sessionId": "s1", "message": message, **extra})  # fmt: skip

    def use(cid: str, path: str) -> dict[str, Any]:
        block = {"type": "tool_use", "id": cid, "name": "Read", "input": {"file_path": path}}
        return {"id": "msg_1", "role": "assistant", "content": [block]}

    def result(cid: str, path: str, text: str) -> dict[str, Any]:
        rows = text.split("\n")
        file = {"filePath": path, "content": text, "numLines": len(rows), "startLine": 1,
                "totalLines": len(rows)}  # fmt: skip
        numbered = "\n".join(f"{n:>6}→{row}" for n, row in enumerate(rows, 1))
        block = {"type": "tool_result", "tool_use_id": cid, "content": numbered}
        return {"message": {"role": "user", "content": [block]},
                "toolUseResult": {"type": "text", "file": file}}  # fmt: skip

    add("u0", None, "user", {"role": "user", "content": "read both"})
    add("a1", "u0", "assistant", use("toolu_p1", f"{cwd}/a.py"))
    add("a2", "a1", "assistant", use("toolu_p2", f"{cwd}/b.py"))
    results = {
        "toolu_p1": ("r1", "a1", f"{cwd}/a.py", a),
        "toolu_p2": ("r2", "a2", f"{cwd}/b.py", b),
    }
    for cid in sorted(results, key=lambda c: c == last):  # ``last`` is written last
        uid, parent, path, text = results[cid]
        entry = result(cid, path, text)
        add(uid, parent, "user", entry["message"], toolUseResult=entry["toolUseResult"])
    again = {"type": "tool_use", "id": "toolu_p3", "name": "Read",
             "input": {"file_path": f"{cwd}/a.py"}}  # fmt: skip
    add(
        "a3",
        results[last][0],
        "assistant",
        {"id": "msg_2", "role": "assistant", "content": [again]},
    )
    entry = result("toolu_p3", f"{cwd}/a.py", a)
    add("r3", "a3", "user", entry["message"], toolUseResult=entry["toolUseResult"])
    log = tmp_path / "parallel.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    import_logs("claude-code", [log], tmp_path / "traces")
    replay = replay_claude_code(tmp_path / "traces" / "parallel")
    kinds = {c["call_id"]: c["kind"] for c in replay.calls}
    assert set(kinds) == {"toolu_p1", "toolu_p2", "toolu_p3"}
    assert kinds["toolu_p3"] == "unchanged"
    assert (replay.stale_views, replay.dangling_refs) == (0, 0), replay.problems
