"""The kill -9 soak of ``bench/bench_soak.py``, small: 2 processes x 400 mixed ops, 3 kills.

Real processes on one root and one SQLite store, killed with SIGKILL and restarted; then the
never-stale oracle of ``tests/session/test_invariant.py`` over every delivered answer. Twice: two
sessions with ``forget`` among the ops, and both processes on one session id without
``forget`` (a forget is not yet seen by the other process: ``test_forget_shared.py``). The
oracle itself is checked too: an altered answer and an unseen forget are caught.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.soak

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_soak.py"


def _bench() -> ModuleType:
    if str(BENCH.parent) not in sys.path:
        sys.path.insert(0, str(BENCH.parent))  # bench_soak imports soak_oracle beside it
    spec = importlib.util.spec_from_file_location("bench_soak", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_soak"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


Soaked = tuple[ModuleType, Path, Any, Any, float]


def _soak(tmp_path_factory: pytest.TempPathFactory, **plan: Any) -> Soaked:
    bench = _bench()
    where = tmp_path_factory.mktemp("soak") / "run"
    where.mkdir()
    began = time.perf_counter()
    run, counts = bench.soak(
        bench.Plan(workers=2, ops=400, kill_min=0.03, kill_max=0.12, max_kills=3, **plan), where
    )
    return bench, where, run, counts, time.perf_counter() - began


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory) -> Soaked:
    return _soak(tmp_path_factory, seed=7)


@pytest.fixture(scope="module")
def soaked_shared(tmp_path_factory: pytest.TempPathFactory) -> Soaked:
    return _soak(tmp_path_factory, seed=8, sessions=1, forget=False)


@pytest.mark.parametrize("which", ["soaked", "soaked_shared"])
def test_soak_under_kill_9_is_never_stale_and_loses_nothing(which: str, request) -> None:
    _, _, run, counts, _elapsed = request.getfixturevalue(which)
    assert run.kills >= 2 and run.crashes == 0
    assert counts.ops == 800
    assert counts.checked > 50 and counts.edits_ok > 20
    assert (counts.forgets > 0) == (which == "soaked")
    assert counts.stale == 0, counts.examples
    assert counts.lost_edits == 0
    assert counts.failed_applied == 0
    assert counts.unrecorded_answers == 0 and counts.failed_recorded == 0
    assert counts.unexpected == 0
    assert counts.intents_left == 0
    assert counts.integrity == "ok"
    assert counts.hard_failures() == []


def _copy_logs(where: Path, to: Path) -> Path:
    logs = to / "logs"
    shutil.copytree(where / "logs", logs)
    return logs


def test_the_oracle_catches_an_altered_answer(soaked, tmp_path: Path) -> None:
    """One line of one delivered full answer changed: the oracle reports it stale."""
    bench, where, _, _, _ = soaked
    logs = _copy_logs(where, tmp_path)
    for log in sorted(logs.glob("slot*.jsonl")):
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        for row in rows:
            if row["ok"] and row.get("kind") == "full" and row["end"] >= 2:
                head, first, rest = row["text"].split("\n", 2)
                number, _, text = first.partition("\t")
                row["text"] = "\n".join([head, f"{number}\t{text} (altered)", rest])
                log.write_text("".join(json.dumps(r) + "\n" for r in rows))
                break
        else:
            continue
        break
    else:
        pytest.fail("no full answer to alter")
    counts = bench.Counts()
    bench.oracle(where / "root", where / "store.db", logs, counts, {})
    assert counts.stale >= 1
    assert "stale" in counts.hard_failures()


def test_the_oracle_catches_an_answer_relying_on_a_forgotten_result(soaked, tmp_path) -> None:
    """A forget that filecache never saw, added to a log: answers relying on it are stale."""
    bench, where, _, counts, _ = soaked
    assert counts.stale == 0
    logs = _copy_logs(where, tmp_path)
    for log in sorted(logs.glob("slot*.jsonl")):
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        ids = {r["call_id"]: r for r in rows}
        relied = [r for r in rows if r["ok"] and r.get("kind") == "unchanged"]
        base = next((ids[r["base_call_id"]] for r in relied if r["base_call_id"] in ids), None)
        if base is None:
            continue
        forget = {"call_id": "extra-forget", "session": base["session"], "slot": base["slot"],
                  "op": "forget", "ok": True, "ids": [base["call_id"]], "after_seq": 0}  # fmt: skip
        log.write_text("".join(json.dumps(r) + "\n" for r in [forget, *rows]))
        break
    else:
        pytest.fail("no unchanged answer")
    counts = bench.Counts()
    bench.oracle(where / "root", where / "store.db", logs, counts, {})
    assert counts.stale >= 1
