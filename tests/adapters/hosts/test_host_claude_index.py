"""The Claude Code transcript index (``claude_index``): per call, what was appended, no more.

Issue 31, failure 10: every hook call loaded and rewrote the whole index (14 MB of JSON at 50k
calls) and walked every entry, and held the transcript's new bytes whole in memory. Here:
- a call after one appended line reads about that line of the transcript and writes about
  that much to the index, however long the session (counted in the process's own I/O);
- a transcript rewritten or truncated (same size or shorter, another prefix) is indexed again;
- random appends (cut mid-line, as a hook sees a line being written), rewinds, compactions,
  parallel calls, bridges, rewritten entries: the index equals a parse of the whole text;
- a line over the cap is skipped like a malformed one, with bounded memory.
"""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts import claude_index
from filecache.adapters.hosts.claude_index import read_held
from filecache.adapters.hosts.claude_transcript import held_calls
from filecache.adapters.hosts.regular_files import complete_lines
from hypothesis import given, settings
from hypothesis import strategies as st

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "hosts" / "claude-code"


def _io() -> dict[str, int]:
    with open("/proc/self/io") as fh:
        return {k: int(v) for k, v in (line.split(": ") for line in fh.read().splitlines())}


def _call(n: int, parent: str | None) -> tuple[list[dict[str, Any]], str]:
    """One Read call as Claude Code writes it: the assistant's tool_use, then its result."""
    use, result = f"use-{n}", f"result-{n}"
    text = "".join(f"{i:6}\u2192line {i} of file {n}\n" for i in range(1, 40))
    return [
        {"parentUuid": parent, "isSidechain": False, "type": "assistant", "uuid": use,
         "message": {"id": f"msg_{n}", "role": "assistant", "content": [
             {"type": "tool_use", "id": f"toolu_{n}", "name": "Read",
              "input": {"file_path": f"/p/f{n}.py"}}]}},
        {"parentUuid": use, "isSidechain": False, "type": "user", "uuid": result,
         "message": {"role": "user", "content": [
             {"tool_use_id": f"toolu_{n}", "type": "tool_result", "content": text}]},
         "toolUseResult": {"type": "text", "file": {"filePath": f"/p/f{n}.py", "content": text,
                                                     "numLines": 39, "startLine": 1,
                                                     "totalLines": 39}}},
    ], result  # fmt: skip


def _session(calls: int) -> tuple[str, str]:
    prompt = {"parentUuid": None, "isSidechain": False, "type": "user", "uuid": "prompt",
              "message": {"role": "user", "content": "read them all"}}  # fmt: skip
    lines, parent = [json.dumps(prompt)], "prompt"
    for n in range(calls):
        entries, parent = _call(n, parent)
        lines += [json.dumps(e) for e in entries]
    return "".join(line + "\n" for line in lines), parent


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts the process's own I/O")
def test_a_call_after_one_appended_call_reads_and_writes_about_that_call(tmp_path: Path) -> None:
    """Failed before: the index was one JSON file read and rewritten whole by every call."""
    text, parent = _session(2000)
    transcript, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    transcript.write_text(text)
    first = read_held(transcript, cache_dir=cache, among=["toolu_5"])
    assert first.ids == {"toolu_5"} and first.known == {"toolu_5"}
    entries, _ = _call(2000, parent)
    appended = "".join(json.dumps(e) + "\n" for e in entries)
    with transcript.open("a") as out:
        out.write(appended)
    before = _io()
    second = read_held(transcript, cache_dir=cache, among=["toolu_5", "toolu_2000", "toolu_x"])
    after = _io()
    assert second.ids == {"toolu_5", "toolu_2000"} and second.known == {"toolu_5", "toolu_2000"}
    size = transcript.stat().st_size
    read, written = after["rchar"] - before["rchar"], after["wchar"] - before["wchar"]
    index = sum(p.stat().st_size for p in cache.iterdir())
    assert size > 100 * len(appended) and index > 20 * 4096
    # The appended bytes, the probes, and a few index pages (not the session, nor the index).
    assert read < 4 * len(appended) + 64 * 4096, (read, len(appended), size)
    assert written < 2 * len(appended) + 64 * 4096, (written, index)


def test_the_transcript_bytes_read_on_the_second_call_are_the_appended_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, parent = _session(300)
    transcript, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    transcript.write_text(text)
    read_held(transcript, cache_dir=cache, among=[])
    counted: list[int] = []
    opened = claude_index.open_regular

    class Counting(io.BufferedReader):
        def read(self, size: int | None = -1, /) -> bytes:
            data = super().read(size)
            counted.append(len(data))
            return data

    def counting_open(path: str | Path) -> tuple[Any, int]:
        file, size = opened(path)
        return Counting(file.detach()), size

    monkeypatch.setattr(claude_index, "open_regular", counting_open)
    entries, _ = _call(300, parent)
    line = json.dumps(entries[0]) + "\n"
    with transcript.open("a") as out:
        out.write(line)
    held = read_held(transcript, cache_dir=cache, among=["toolu_300"])
    assert held.pending == {"toolu_300"}  # the turn's call, its result not written yet
    assert sum(counted) <= len(line) + 10 * 4096  # the line, and the probes (twice)


def test_a_rewritten_or_truncated_transcript_is_indexed_again(tmp_path: Path) -> None:
    text, _ = _session(50)
    transcript, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    transcript.write_text(text)
    asked = ["toolu_0", "toolu_Z", "toolu_30", "toolu_99", "toolu_9"]

    def check() -> None:
        expected = held_calls(transcript.read_text().splitlines())
        got = read_held(transcript, cache_dir=cache, among=asked)
        assert (got.ids, got.known) == (expected.ids & set(asked), expected.known & set(asked))

    assert read_held(transcript, cache_dir=cache, among=asked).ids == {"toolu_0", "toolu_30",
                                                                       "toolu_9"}  # fmt: skip
    # Same size, same inode, another prefix: the first call's id renamed in place.
    same = text.replace('"toolu_0"', '"toolu_Z"')
    assert len(same) == len(text)
    with transcript.open("r+") as out:
        out.write(same)
    check()
    assert read_held(transcript, cache_dir=cache, among=asked).ids == {"toolu_Z", "toolu_30",
                                                                       "toolu_9"}  # fmt: skip
    # Shorter: the first 10 calls only.
    cut, parent = _session(10)
    transcript.write_text(cut)
    check()
    # Shorter, then longer than the offset again before the next call.
    text, _ = _session(50)
    transcript.write_text(text)
    check()
    entries, _ = _call(99, parent)
    with transcript.open("w") as out:
        out.write(cut + "".join(json.dumps(e) + "\n" for e in entries) * 45)
    assert transcript.stat().st_size > len(text)
    check()
    assert read_held(transcript, cache_dir=cache, among=asked).ids == {
        "toolu_0",
        "toolu_99",
        "toolu_9",
    }


def test_the_index_is_private_and_a_damaged_one_is_built_again(tmp_path: Path) -> None:
    text, _ = _session(20)
    transcript, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    transcript.write_text(text)
    assert read_held(transcript, cache_dir=cache).ids == held_calls(text.splitlines()).ids
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    (index,) = cache.glob("*.sqlite")
    assert stat.S_IMODE(index.stat().st_mode) == 0o600
    for name in cache.iterdir():
        name.write_bytes(b"not a database" * 300)
    assert read_held(transcript, cache_dir=cache).ids == held_calls(text.splitlines()).ids


def test_a_line_over_the_cap_is_skipped_like_a_malformed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, parent = _session(5)
    entries, _ = _call(5, parent)
    entries[1]["message"]["content"][0]["content"] = "x" * 5000  # its result, over the cap
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(text + "".join(json.dumps(e) + "\n" for e in entries))
    monkeypatch.setattr(claude_index, "complete_lines", _capped(4096))
    got = read_held(transcript, cache_dir=tmp_path / "c", among=["toolu_5", "toolu_4"])
    without = text + json.dumps(entries[0]) + "\n"  # as if the result's line were malformed
    expected = held_calls(without.splitlines())
    assert got.ids == expected.ids & {"toolu_5", "toolu_4"} == {"toolu_4", "toolu_5"}
    assert got.pending == {"toolu_5"}  # in the turn, result unseen: what a torn line gives


def _capped(cap: int) -> Any:
    def lines(file: Any, start: int, end: int) -> Any:
        return complete_lines(file, start, end, cap)

    return lines


@given(
    lines=st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    cut=st.integers(0, 400),
    chunk=st.sampled_from([1, 3, 7, 1 << 20]),
    cap=st.integers(0, 40),
)
@settings(max_examples=200)
def test_complete_lines_gives_each_whole_line_once(
    lines: list[bytes], cut: int, chunk: int, cap: int
) -> None:
    from filecache.adapters.hosts import regular_files

    data = b"".join(line + b"\n" for line in lines)
    end = min(cut, len(data))
    old, regular_files._CHUNK = regular_files._CHUNK, chunk
    try:
        got = list(complete_lines(io.BytesIO(data), 0, end, cap))
    finally:
        regular_files._CHUNK = old
    whole = data[:end].split(b"\n")[:-1]
    assert [line for line, _ in got] == [line if len(line) <= cap else None for line in whole]
    assert [after for _, after in got] == [i + 1 for i in range(end) if data[i] == ord("\n")]


# -- incremental == whole, on random transcripts ------------------------------------------------

KINDS = ["prompt", "call", "call", "call", "parallel", "parallel", "rewind", "compact",
         "progress", "forward", "rewrite", "micro", "clear", "garbage", "side",
         "collide", "shadow"]  # fmt: skip
RESULTS = ["ok", "ok", "ok", "error", "cleared", "stub", "list"]


def _result(call: str, how: str) -> dict[str, Any]:
    content: Any = {
        "ok": "text", "error": "boom", "cleared": "[Old tool result content cleared]",
        "stub": "File unchanged since last read.", "list": [{"type": "text", "text": "t"}],
    }[how]  # fmt: skip
    return {"type": "tool_result", "tool_use_id": call, "content": content,
            "is_error": how == "error"}  # fmt: skip


def _transcript(ops: list[tuple[str, int, int]]) -> list[str]:
    """Claude Code's shapes, mostly in the order it writes them, with rewinds, compactions,
    progress entries, forward references, rewritten entries and collisions mixed in."""
    lines: list[str] = []
    made: list[str] = []
    bridges: list[str] = []
    leaf: str | None = None
    count = 0

    def fresh() -> str:
        nonlocal count
        count += 1
        return f"e{count}"

    def add(entry: dict[str, Any]) -> None:
        entry.setdefault("isSidechain", False)
        lines.append(json.dumps(entry))
        if "uuid" in entry:
            made.append(entry["uuid"])

    def user(uuid: str, parent: str | None, content: Any) -> None:
        add({"type": "user", "uuid": uuid, "parentUuid": parent,
             "message": {"role": "user", "content": content}})  # fmt: skip

    def assistant(uuid: str, parent: str | None, message: str, calls: list[str]) -> None:
        add({"type": "assistant", "uuid": uuid, "parentUuid": parent,
             "message": {"id": message, "content": [
                 {"type": "tool_use", "id": c, "name": "Read"} for c in calls]}})  # fmt: skip

    for kind, a, b in ops:
        pick = made[a % len(made)] if made else None
        call = f"c{a % 4}" if b % 7 == 0 else f"c{count + 1}"  # now and then an id again
        if kind == "prompt":
            prev, leaf = leaf, fresh()
            user(leaf, pick if b % 9 == 0 else prev, "a prompt")
        elif kind == "call":
            use = fresh()
            assistant(use, leaf, f"m{use}", [call] if b % 5 else [])
            leaf = use
            if b % 3:
                leaf = fresh()
                user(leaf, use, [_result(call, RESULTS[b % len(RESULTS)])])
        elif kind == "parallel":
            message, uses = f"m{count}", []
            for i in range(2 + a % 3):
                use = fresh()
                assistant(use, leaf, message, [f"{call}p{i}"])
                uses.append((use, f"{call}p{i}"))
                leaf = use
            for use, parallel in uses[b % len(uses) :] + uses[: b % len(uses)]:
                if (a + b) % 5:
                    leaf = fresh()
                    user(leaf, use, [_result(parallel, RESULTS[(a * b) % len(RESULTS)])])
        elif kind == "rewind":
            leaf = fresh()
            user(leaf, pick, "another way")
        elif kind == "compact":
            leaf = fresh()
            add({"type": "system", "subtype": "compact_boundary", "uuid": leaf,
                 "parentUuid": None, "logicalParentUuid": pick})  # fmt: skip
        elif kind == "progress":  # mostly between a message and the next; now and then not
            bridge = fresh()
            add({"type": "progress", "uuid": bridge, "parentUuid": pick if b % 4 == 0 else leaf})
            bridges.append(bridge)
            leaf = bridge
        elif kind == "forward":  # names an entry written later (or never)
            leaf = fresh()
            user(leaf, f"e{count + 1 + a % 4}", "ahead")
        elif kind == "rewrite" and made:
            again = next(json.loads(x) for x in lines if f'"uuid": "{pick}"' in x)
            if "uuid" in again:
                if b % 2:
                    again["parentUuid"] = pick
                lines.append(json.dumps(again))
        elif kind == "micro":
            add({"type": "system", "subtype": "microcompact_boundary", "uuid": fresh(),
                 "parentUuid": leaf, "microcompactMetadata": {"compactedToolIds": [
                     f"c{i}" for i in range(a % 3, count, 1 + b % 5)]}})  # fmt: skip
            leaf = made[-1]
        elif kind == "clear":
            lines.append(
                json.dumps(
                    {
                        "type": "api-request",
                        "params": {
                            "context_management": {
                                "edits": [
                                    {"type": "clear_tool_uses_20250919" if b % 2 else "other"}
                                ]
                            }
                        },
                    }
                )
            )
        elif kind == "garbage":
            lines.append(["{not json", "[1, 2]", "", '{"type": "user"}'][a % 4])
        elif kind == "side":
            add({"type": "assistant", "uuid": fresh(), "parentUuid": pick, "isSidechain": True,
                 "message": {"id": "ms", "content": [
                     {"type": "tool_use", "id": call, "name": "Read"}]}})  # fmt: skip
        elif kind == "collide" and pick is not None:  # a bridge and a message of one uuid
            add({"type": "progress", "uuid": pick, "parentUuid": made[b % len(made)]})
        elif kind == "shadow" and bridges:  # a message and a bridge of one uuid
            user(bridges[a % len(bridges)], made[b % len(made)], "shadow")
    return lines


_ops = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 60), st.integers(0, 60)),
                min_size=1, max_size=40)  # fmt: skip


@given(
    ops=_ops,
    cuts=st.lists(st.integers(0, 10**5), max_size=6),
    sidechain=st.sampled_from([False, False, False, True]),
    among=st.one_of(st.none(), st.none(), st.lists(st.integers(0, 60), max_size=6)),
)
@settings(max_examples=200)
def test_incremental_indexing_equals_a_parse_of_the_whole_text(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[str, int, int]],
    cuts: list[int],
    sidechain: bool,
    among: list[int] | None,
) -> None:
    """The transcript grows in pieces cut anywhere (a hook runs while a line is written):
    after each piece the index answers as ``held_calls`` over the complete lines so far."""
    folder = tmp_path_factory.mktemp("idx")
    transcript, cache = folder / "s.jsonl", folder / "cache"
    lines = _transcript(ops)
    if sidechain:
        lines = [line.replace('"isSidechain": false', '"isSidechain": true') for line in lines]
    data = "".join(line + "\n" for line in lines).encode()
    points = sorted({min(c, len(data)) for c in cuts} | {len(data)})
    asked = None if among is None else [f"c{n}" for n in among]
    transcript.write_bytes(b"")
    written = 0
    for point in points:
        with transcript.open("ab") as out:
            out.write(data[written:point])
        written = point
        whole = data[: data.rfind(b"\n", 0, point) + 1].decode().splitlines()
        expected = held_calls(whole, sidechain=sidechain)
        got = read_held(transcript, cache_dir=cache, sidechain=sidechain, among=asked)
        if asked is None:
            assert got == expected
        else:
            mine = frozenset(asked)
            assert got.asked == mine
            assert (got.ids, got.pending, got.known) == (
                expected.ids & mine,
                expected.pending & mine,
                expected.known & mine,
            )


def test_the_random_transcripts_reach_every_case() -> None:
    """The generator above is not vacuous: its transcripts hold calls, pending calls, parallel
    siblings off the walked chain, and cut chains."""
    ops = [("prompt", 0, 1), ("call", 1, 1), ("parallel", 1, 1), ("call", 2, 3),
           ("progress", 0, 1), ("call", 3, 2), ("call", 4, 0)]  # fmt: skip
    got = held_calls(_transcript(ops))
    assert len(got.ids) >= 4 and got.pending


def _use(uuid: str, parent: str | None, call: str) -> dict[str, Any]:
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "isSidechain": False,
            "message": {"id": f"m-{uuid}", "content": [
                {"type": "tool_use", "id": call, "name": "Read"}]}}  # fmt: skip


def _done(uuid: str, parent: str | None, call: str) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "isSidechain": False,
            "message": {"role": "user", "content": [_result(call, "ok")]}}  # fmt: skip


def _bridge(uuid: str, parent: str | None) -> dict[str, Any]:
    return {"type": "progress", "uuid": uuid, "parentUuid": parent, "isSidechain": False}


def _prompt(uuid: str, parent: str | None) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "isSidechain": False,
            "message": {"role": "user", "content": "go on"}}  # fmt: skip


# A call c0 (D, E) then a call c1 (B, R) chained to it through the bridge X, then one more line.
_BEFORE = [_use("D", None, "c0"), _done("E", "D", "c0"), _bridge("X", "E"), _use("B", "X", "c1"),
           _done("R", "B", "c1")]  # fmt: skip


@pytest.mark.parametrize(
    ("entries", "held_at_end"),
    [
        pytest.param(  # the root's parent, named before it was written, comes as a bridge
            [_use("D", None, "c0"), _done("E", "D", "c0"), _prompt("A", "X"),
             _use("B", "A", "c1"), _done("R", "B", "c1"), _bridge("X", "E")],
            {"c0", "c1"}, id="late-bridge-above-the-root",
        ),
        pytest.param(  # a message written with the bridge's uuid: the path ends at it (a loop)
            [*_BEFORE, _prompt("X", "R")], {"c1"}, id="message-named-like-a-bridge",
        ),
        pytest.param(  # the bridge written again with another parent
            [*_BEFORE, _bridge("X", None)], {"c1"}, id="bridge-rewritten",
        ),
        pytest.param(  # an entry written again with another parent
            [*_BEFORE, {**_use("B", None, "c1")}], {"c1"}, id="entry-rewritten",
        ),
    ],
)  # fmt: skip
def test_changes_below_the_newest_entry_are_walked_again(
    tmp_path: Path, entries: list[dict[str, Any]], held_at_end: set[str]
) -> None:
    """Lines that change the chain without a new newest entry on it: the index walks it again
    (each case failed with that walk left out)."""
    transcript, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    transcript.write_text("")
    for n, entry in enumerate(entries):
        with transcript.open("a") as out:
            out.write(json.dumps(entry) + "\n")
        expected = held_calls(json.dumps(e) for e in entries[: n + 1])
        assert read_held(transcript, cache_dir=cache) == expected
    assert expected.ids == held_at_end


def test_a_hook_killed_while_indexing_leaves_an_index_the_next_one_trusts(tmp_path: Path) -> None:
    """SIGKILL at whatever moment the build has reached: the next call answers as a full parse
    (the transaction rolled back, or committed whole)."""
    import signal
    import subprocess
    import sys
    import time

    text, _ = _session(3000)
    transcript, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    transcript.write_text(text)
    code = (
        "import sys; from pathlib import Path; "
        "from filecache.adapters.hosts.claude_index import read_held; "
        "print('go', flush=True); read_held(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))"
    )
    for delay in (0.05, 0.3, 1.0):
        child = subprocess.Popen(
            [sys.executable, "-c", code, str(transcript), str(cache)], stdout=subprocess.PIPE
        )
        assert child.stdout is not None and child.stdout.readline() == b"go\n"
        time.sleep(delay)  # somewhere in the build (or after it): any moment will do
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        with transcript.open("a") as out:
            entries, _ = _call(9000 + int(delay * 100), "prompt")
            out.write("".join(json.dumps(e) + "\n" for e in entries))
        expected = held_calls(transcript.read_text().splitlines())
        assert read_held(transcript, cache_dir=cache) == expected


def test_parallel_readers_of_a_growing_transcript_agree_with_a_full_parse(tmp_path: Path) -> None:
    """Threads (the hook server's parallel calls) and a writer at once: every answer is the
    parse of some prefix, none is incomplete, and the last equals the whole."""
    import threading

    text, parent = _session(200)
    transcript, cache = tmp_path / "s.jsonl", tmp_path / "cache"
    transcript.write_text(text)
    answers: list[Any] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            answers.append(read_held(transcript, cache_dir=cache, current="toolu_now"))

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    for n in range(200, 260):
        entries, parent = _call(n, parent)
        with transcript.open("a") as out:
            out.write("".join(json.dumps(e) + "\n" for e in entries))
    done.set()
    for thread in threads:
        thread.join()
    assert answers and all(a.complete for a in answers)
    assert all({f"toolu_{n}" for n in range(200)} <= a.ids for a in answers)
    whole = held_calls(transcript.read_text().splitlines())
    final = read_held(transcript, cache_dir=cache)
    assert final == whole and len(whole.ids) == 260
