"""Codex's rollout read per call (``codex_rollout``): only what was appended, a line at a time.

Issue 31, failure 10: every Codex hook read its rollout whole (and held it whole in memory). A
process that reads the same rollout again (the resident hook server) now reads only the bytes
appended since; a rollout rewritten, truncated or replaced is read again from its start; random
appends cut anywhere give what a fresh read of the same bytes gives.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from filecache.adapters.hosts import codex_rollout, regular_files
from filecache.adapters.hosts.codex_rollout import read_rollout
from hypothesis import given, settings
from hypothesis import strategies as st


def _line(kind: str, payload: dict[str, Any], spaced: bool = False) -> str:
    line = {"timestamp": "t", "ordinal": 1, "type": kind, "payload": payload}
    return json.dumps(line) if spaced else json.dumps(line, separators=(",", ":"))


def _call(cid: str, spaced: bool = False) -> str:
    arguments = json.dumps({"cmd": f"cat {cid}"})
    payload = {"type": "function_call", "call_id": cid, "name": "exec_command",
               "arguments": arguments}  # fmt: skip
    return _line("response_item", payload, spaced)


def _out(cid: str, text: str = "Output:\na\n", spaced: bool = False) -> str:
    payload = {"type": "function_call_output", "call_id": cid, "output": text}
    return _line("response_item", payload, spaced)


def _done(cid: str, code: int = 0) -> str:
    item = {"type": "CommandExecution", "id": cid, "exit_code": code, "cwd": "/p",
            "status": "completed" if code == 0 else "failed"}  # fmt: skip
    return _line("event_msg", {"type": "item_completed", "item": item})


def _session(calls: int, start: int = 0) -> str:
    output = "Output:\n" + "x" * 300
    return "".join(
        f"{_call(f'c{n}')}\n{_done(f'c{n}')}\n{_out(f'c{n}', output)}\n"
        for n in range(start, start + calls)
    )


@pytest.fixture(autouse=True)
def _fresh_readers() -> None:
    codex_rollout._READERS.clear()  # each test as a new process would see it


def test_a_call_after_one_appended_call_reads_about_that_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before: every call read the whole rollout (and up to 16 MiB past it)."""
    path = tmp_path / "rollout.jsonl"
    path.write_text(_session(2000))
    first = read_rollout(path, ["c5"])
    assert first is not None and "c5" in first.held and first.ended["c5"].exit_code == 0
    counted: list[int] = []
    opened = regular_files.open_regular

    class Counting(io.BufferedReader):
        def read(self, size: int | None = -1, /) -> bytes:
            data = super().read(size)
            counted.append(len(data))
            return data

    def counting_open(name: str | Path) -> tuple[Any, int]:
        file, size = opened(name)
        return Counting(file.detach()), size

    monkeypatch.setattr(regular_files, "open_regular", counting_open)
    appended = _session(1, 2000)
    with path.open("a") as out:
        out.write(appended)
    second = read_rollout(path, ["c2000"])
    assert second is not None and {"c5", "c2000"} <= second.held
    assert second.ended["c2000"].exit_code == 0
    assert path.stat().st_size > 300 * len(appended)
    assert sum(counted) <= len(appended) + 10 * 4096  # the appended call, and the probes


def test_a_rewritten_or_truncated_rollout_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    text = _session(30)
    path.write_text(text)
    found = read_rollout(path)
    assert found is not None and "c0" in found.held
    same = text.replace('"c0"', '"z0"')  # same size, same inode, another start
    assert len(same) == len(text)
    with path.open("r+") as out:
        out.write(same)
    found = read_rollout(path)
    assert found is not None and "z0" in found.held and "c0" not in found.held
    path.write_text(_session(3))  # shorter
    found = read_rollout(path)
    assert found is not None and found.held == {"c0", "c1", "c2"}
    path.write_text(_session(2) + _session(40, 100))  # shorter, then longer than before
    found = read_rollout(path)
    assert found is not None and "c2" not in found.held and {"c0", "c139"} <= found.held


def test_a_line_over_the_cap_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(_session(2) + _call("big") + "\n" + _out("big", "y" * 5000) + "\n")

    original = regular_files.complete_lines

    def capped(file: Any, start: int, end: int) -> Any:
        return original(file, start, end, 4096)

    monkeypatch.setattr(regular_files, "complete_lines", capped)
    found = read_rollout(path)
    assert found is not None and found.held == {"c0", "c1"} and found.pending == {"big"}


_KINDS = st.sampled_from(["call", "call", "out", "out", "cut", "done", "compact", "rollback",
                          "garbage", "spaced"])  # fmt: skip


def _lines(ops: list[tuple[str, int]]) -> list[str]:
    out = []
    for kind, n in ops:
        cid = f"c{n}"
        if kind == "call":
            out.append(_call(cid))
        elif kind == "out":
            out.append(_out(cid))
        elif kind == "cut":
            out.append(_out(cid, "…120 tokens truncated…"))
        elif kind == "done":
            out.append(_done(cid, n % 2))
        elif kind == "compact":
            kept = [{"type": "function_call_output", "call_id": cid, "output": "k"}]
            out.append(_line("compacted", {"message": "m", "replacement_history": kept}))
        elif kind == "rollback":
            out.append(_line("event_msg", {"type": "thread_rolled_back", "num_turns": 1}))
        elif kind == "garbage":
            out.append('{"type":"response_item","payload":{"type":"function_call_out')
        else:
            out.append(_out(cid, spaced=True))
    return out


@given(
    ops=st.lists(st.tuples(_KINDS, st.integers(0, 6)), min_size=1, max_size=30),
    cuts=st.lists(st.integers(0, 10**4), max_size=6),
    asked=st.lists(st.integers(0, 6), max_size=3),
)
@settings(max_examples=150)
def test_incremental_reads_equal_a_fresh_read(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[str, int]],
    cuts: list[int],
    asked: list[int],
) -> None:
    path = tmp_path_factory.mktemp("rollout") / "rollout.jsonl"
    data = "".join(line + "\n" for line in _lines(ops)).encode()
    calls = [f"c{n}" for n in asked]
    path.write_bytes(b"")
    codex_rollout._READERS.clear()
    written = 0
    for point in sorted({min(c, len(data)) for c in cuts} | {len(data)}):
        with path.open("ab") as out:
            out.write(data[written:point])
        written = point
        incremental = read_rollout(path, calls)
        kept = dict(codex_rollout._READERS)
        codex_rollout._READERS.clear()
        fresh = read_rollout(path, calls)
        codex_rollout._READERS.clear()
        codex_rollout._READERS.update(kept)
        assert incremental == fresh
