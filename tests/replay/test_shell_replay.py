"""Replay of a trace's ``bash`` calls: reads answered inside the harness's frame, edits redone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from filecache.replay.replay import replay_session
from filecache.replay.replay_shell import ShellFrame, find_frame, trace_path

ROW = "line {0}: x = compute({0})  # long enough to be worth a FileRef\n"
TEXT = "".join(ROW.format(n) for n in range(1, 41))


def test_find_frame_takes_the_encoding_the_harness_used() -> None:
    out = "a <b> & 'c'\n\tz\n"
    assert find_frame(f"<output>\n{out}</output>", out) == ShellFrame("<output>\n", "</output>")
    as_json = json.dumps({"returncode": 0, "output": out})
    frame = find_frame(as_json, out)
    assert frame is not None and frame.encoding == "json"
    assert json.loads(frame.wrap("[filecache] ref\n"))["output"] == "[filecache] ref\n"
    jinja = '{"output": "a \\u003cb\\u003e \\u0026 \\u0027c\\u0027\\n\\tz\\n"}'
    frame = find_frame(jinja, out)
    assert frame is not None and frame.encoding == "jinja-tojson"
    assert json.loads(frame.wrap(out)) == json.loads(jinja)
    stripped = ShellFrame("OBSERVATION:\n", "", "rstrip")
    assert find_frame("OBSERVATION:\na <b> & 'c'\n\tz", out) == stripped
    assert find_frame("something else", out) is None and find_frame("x", "") is None


def test_trace_path_maps_the_shells_paths_to_files(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("x\n")
    assert trace_path("/testbed/pkg/m.py", tmp_path, "/testbed") == "pkg/m.py"
    assert trace_path("/tmp/m.py", tmp_path, "/testbed") is None
    assert trace_path("/repo/pkg/m.py", tmp_path, None) == "pkg/m.py"  # the tail that exists
    assert trace_path("./pkg/../m.py", tmp_path, None) is None
    assert trace_path("./pkg//m.py", tmp_path, "/testbed") == "pkg/m.py"


def _trace(tmp_path: Path, steps: list[tuple[str, str]]) -> Path:
    trace = tmp_path / "shell-session"
    (trace / "files").mkdir(parents=True)
    (trace / "files" / "m.py").write_text(TEXT)
    messages: list[dict] = [{"role": "user", "content": "fix m.py"}]
    for n, (command, output) in enumerate(steps, 1):
        arguments = json.dumps({"command": command})
        call = {"id": f"c{n}", "type": "function",
                "function": {"name": "bash", "arguments": arguments}}  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        content = f"<returncode>0</returncode>\n<output>\n{output}</output>"
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": content})
    messages.append({"role": "assistant", "content": "done"})
    doc = {"format": "filecache-trace/1", "source": "test", "cwd": "/testbed", "messages": messages}
    (trace / "transcript.json").write_text(json.dumps(doc))
    return trace


def test_replay_serves_reads_redoes_sed_i_and_keeps_what_it_cannot_show(tmp_path: Path) -> None:
    lines = TEXT.splitlines(keepends=True)
    edited = lines.copy()
    edited[11] = edited[11].replace("compute(12)", "compute(twelve)")
    numbered = "".join(f"{n:6d}\t{line}" for n, line in enumerate(edited, 1))
    first = "".join(f"{n:6d}\t{t}" for n, t in enumerate(lines[:30], 1))
    trace = _trace(
        tmp_path,
        [
            ("nl -ba /testbed/m.py | sed -n '1,30p'", first),
            ("sed -n '5,25p' m.py", "".join(lines[4:25])),
            ("sed -i '12s/compute(12)/compute(twelve)/' m.py", ""),
            ("cat -n m.py | sed -n '1,30p'", "".join(numbered.splitlines(True)[:30])),
            ("python fix.py && head -n 3 m.py", "line 1: ...\n"),
            ("head -n 3 m.py", "something the replayed file does not hold\n"),
        ],
    )
    replay = replay_session(trace)
    served = {c["call_id"]: c["kind"] for c in replay.calls if c.get("shell")}
    assert served == {"c1": "partial", "c2": "unchanged", "c4": "diff"}
    assert set(replay.skipped) == {"c6"} and "not this file's" in replay.skipped["c6"]
    assert replay.files_identical and replay.stale_views == 0 and replay.dangling_refs == 0
    by_id = {m.get("tool_call_id"): m["content"] for m in replay.filecache_messages}
    frame = "<returncode>0</returncode>\n<output>\n"
    assert by_id["c2"].startswith(frame + "[filecache] m.py unchanged")
    assert "+line 12: x = compute(twelve)" in by_id["c4"]
    plain = {m.get("tool_call_id"): m["content"] for m in replay.plain_messages}
    recorded = json.loads((trace / "transcript.json").read_text())["messages"]
    assert all(plain[m["tool_call_id"]] == m["content"] for m in recorded if m["role"] == "tool")
    tokens = replay.prompt_tokens
    assert tokens.filecache < tokens.plain == tokens.recorded


def test_served_shell_reads_are_in_every_peers_history(tmp_path: Path) -> None:
    """A peer's run is the recording with its policy applied: a policy that changes nothing
    sends exactly the recorded requests, shell reads included (they were left out, giving peers
    savings they never made)."""
    lines = TEXT.splitlines(keepends=True)
    part = "".join(lines[4:25])
    trace = _trace(
        tmp_path,
        [
            ("sed -n '5,25p' m.py", part),
            ("ls", "m.py\n"),
            ("sed -n '5,25p' m.py", part),
            ("ls", "m.py\n"),
        ],  # fmt: skip
    )
    peers = ("anthropic-clear-tool-uses", "claude-code-dedup", "opencode")
    replay = replay_session(trace, peers=peers, trigger=10**9)
    assert {c["call_id"] for c in replay.calls if c.get("shell")} == {"c1", "c3"}
    for name in peers:  # none fires here (the trigger, no Read tool, no user turn ends)
        run = replay.policies[name]
        assert run.prompt_tokens == replay.prompt_tokens.recorded, name
        assert run.billed == replay.billed.recorded, name
        assert (run.results, run.stale, run.dangling) == (0, 0, 0), name
    cleared = replay_session(trace, peers=("anthropic-clear-tool-uses",), trigger=1)
    run = cleared.policies["anthropic-clear-tool-uses"]  # keeps 3: clears the first read
    assert run.results == 1 and run.prompt_tokens < replay.prompt_tokens.recorded


def test_recall_counts_the_files_shell_reads_use() -> None:
    """A shell agent's files are in use too: both recalls have pairs, and the recording's
    lines come from its own output (numbered or from the read's first line)."""
    import tempfile

    lines = TEXT.splitlines(keepends=True)
    with tempfile.TemporaryDirectory() as tmp:
        trace = _trace(
            Path(tmp),
            [
                ("sed -n '5,25p' m.py", "".join(lines[4:25])),
                ("nl -ba m.py | sed -n '1,10p'", "".join(
                    f"{n:6d}\t{t}" for n, t in enumerate(lines[:10], 1)
                )),
                ("sed -n '5,25p' m.py", "".join(lines[4:25])),
            ],
        )  # fmt: skip
        replay = replay_session(trace)
    assert replay.recall_pairs == 2 and replay.recall == 1.0
    assert replay.recall_all_pairs == 2 and replay.recall_all == 1.0
    assert replay.lines_in_use == (80, 21 + 25, 21 + 25)


def test_a_replay_answers_with_the_same_bytes_in_every_run(tmp_path: Path) -> None:
    """A served shell read's FileRef carries the root's seal; each replay copies the files to a
    new temporary root, so the seal is keyed by the session instead (the token counts moved
    by a few hundred between two replays of the mini-swe-agent sessions)."""
    part = "".join(TEXT.splitlines(keepends=True)[4:25])
    trace = _trace(tmp_path, [("sed -n '5,25p' m.py", part), ("sed -n '5,25p' m.py", part)])
    runs = [replay_session(trace) for _ in range(2)]
    answers = [{m.get("tool_call_id"): m["content"] for m in r.filecache_messages} for r in runs]
    assert "seal " in answers[0]["c2"] and "unchanged" in answers[0]["c2"]
    assert answers[0] == answers[1]
    assert runs[0].prompt_tokens == runs[1].prompt_tokens


def test_git_checkout_is_redone_however_the_trace_path_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``git checkout FILE`` restores from the trace's ``files/``: with a relative trace folder
    it was not redone (locate() needs a resolved root), so the read after it was kept as
    recorded and the figures differed from the same trace given by absolute path."""
    lines = TEXT.splitlines(keepends=True)
    edited = lines.copy()
    edited[11] = edited[11].replace("compute(12)", "compute(twelve)")
    part = "".join(lines[4:25])
    trace = _trace(
        tmp_path,
        [
            ("sed -n '5,25p' m.py", part),
            ("sed -i '12s/compute(12)/compute(twelve)/' m.py", ""),
            ("sed -n '5,25p' m.py", "".join(edited[4:25])),
            ("git checkout m.py", "Updated 1 path from the index\n"),
            ("sed -n '5,25p' m.py", part),
        ],
    )
    by_path = replay_session(trace)
    monkeypatch.chdir(tmp_path)
    relative = replay_session(Path(trace.name))
    assert relative.skipped == by_path.skipped == {}
    assert relative.prompt_tokens == by_path.prompt_tokens
    assert relative.billed == by_path.billed
    served = {c["call_id"] for c in relative.calls if c.get("shell")}
    assert served == {"c1", "c3", "c5"}
    assert relative.files_identical and relative.stale_views == 0


@pytest.mark.parametrize(
    ("command", "rows"),
    [
        ("nl -ba m.py | grep -n 'compute(12)'", [12]),
        ("nl -ba m.py | grep -n -A 2 'compute(12)'", [12, 13, 14]),
        ("cat -n m.py | grep -n -B 1 'compute(12)'", [11, 12]),
    ],
)
def test_grep_n_of_numbered_lines_is_read_as_bash_prints_it(
    tmp_path: Path, command: str, rows: list[int]
) -> None:
    """``nl -ba F | grep -n PAT`` prints ``12:    12<TAB>text``: grep's number, then nl's. The
    checker read it as line 12 holding ``    12<TAB>text`` and reported a stale view (the
    bytes served equal bash's; 2 answers in 60 held-out mini-swe-agent sessions)."""
    lines = TEXT.splitlines(keepends=True)
    mark = {n: (":" if n == 12 else "-") for n in rows}
    output = "".join(f"{n}{mark[n]}{n:6d}\t{lines[n - 1]}" for n in rows)
    part = "".join(lines[4:25])
    trace = _trace(tmp_path, [("sed -n '5,25p' m.py", part), (command, output)])
    replay = replay_session(trace)
    assert {c["call_id"] for c in replay.calls if c.get("shell")} == {"c1", "c2"}
    assert replay.stale_views == 0 and replay.dangling_refs == 0
    assert replay.recall_all == 1.0
