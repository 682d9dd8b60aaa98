"""Soak under kill -9: processes sharing sessions do mixed ops, are killed, restart; then an oracle.

Workers (separate processes, ``FileCache`` on one root and one SQLite store) share session ids
(slot ``i`` uses id ``s{i % 3}``, so with 4 workers ``s0`` has two processes at once). Each does
mixed ops on three files: full and ranged reads (``mode="full"``), edits of ``a.txt``/``b.txt``
that carry a unique marker and never remove text (a line gets the marker appended, or a marker
line is inserted after it), writes of ``c.txt`` only, and ``forget``. After every op the worker
flushes the cache's blobs and appends the outcome to its slot's JSONL log. The supervisor kills a
random worker with SIGKILL every ``--kill-min``..``--kill-max`` seconds and restarts it (same
slot, same session, a new call-id prefix) until every slot has done ``--ops`` ops.

Then the oracle, per session: the delivered answers of all its processes, ordered by the store's
event seq (a ``forget`` by the store head read under the session lock), go through the simulated
model of ``tests/session/test_invariant.py``, whose "disk" for an answer is the true content of the
answer's version (the store's blob, or a delivered full answer of that version). Counted:

- stale: the model's reconstruction differs from the version's content, or an answer relies on
  a result the model does not hold (hard: must be 0);
- relying on undelivered: answers that rely (``deps``/``base_call_id``) on a result that was
  committed but never delivered because its process was killed after the commit. A documented
  limit, not a failure: the model of a killed process never saw that result;
- unknown: answers whose version content is known nowhere (skipped), and those relying on them;
- lost edits (a successful edit's marker missing from the final file), failed-but-applied edits,
  delivered answers with no ledger row, failed calls with a ledger row (all hard);
- intents left after a final ``FileCache`` open (recovery; hard), ``.fc-*.tmp`` files in the
  root (reported), ``PRAGMA integrity_check`` (hard).

Prints a table; exits 1 if a hard invariant is violated. Usage::

    .venv/bin/python bench/bench_soak.py [--workers 4] [--ops 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak_oracle import EDITED, SESSIONS, WRITTEN, Counts, load_log, oracle

REPO = Path(__file__).resolve().parent.parent
WORDS = ("alpha", "beta", "gamma", "x = compute(1)", "return value", "delta")
# op weights: full read, ranged read, edit, write (c.txt), forget
WEIGHTS = (("full", 30), ("ranged", 25), ("edit", 30), ("write", 5), ("forget", 10))


def _line(rng: random.Random, tag: str) -> str:
    return tag + " " + " ".join(rng.choice(WORDS) for _ in range(5))


def make_root(root: Path, seed: int) -> None:
    """Three files of 50-300 lines; every line starts with a unique tag."""
    rng = random.Random(seed)
    for name in (*EDITED, WRITTEN):
        count = rng.randint(50, 300)
        lines = [_line(rng, f"{name[0]}{i:04d}") for i in range(count)]
        (root / name).write_text("\n".join(lines) + "\n")


def initial_texts(root: Path) -> dict[str, str]:
    """The files before the soak, by version (the first edit's base may never be read)."""
    from filecache.core.hashing import version_of

    return {version_of(p.read_bytes()): p.read_text() for p in sorted(root.glob("*.txt"))}


# -- worker ---------------------------------------------------------------------------------


def worker(config: dict[str, Any]) -> None:
    from filecache import FileCache, FileCacheError

    root, slot, prefix = Path(config["root"]), config["slot"], config["prefix"]
    log_path = Path(config["log"])
    done = load_log(log_path)
    held = [r["call_id"] for r in done if r["ok"] and r["op"] != "forget"]
    rng = random.Random(f"{config['seed']}-{prefix}")
    cache = FileCache(root, store=config["store"])
    sid = config["session"]
    session = cache.session(sid)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    ops = [n for n, w in WEIGHTS for _ in range(w) if config["forget"] or n != "forget"]
    for k in range(len(done), config["ops"]):
        cid = f"{prefix}-{k}"
        op = rng.choice(ops)
        rec: dict[str, Any] = {"call_id": cid, "session": sid, "slot": slot, "op": op}
        try:
            _do(op, rec, session, cache, root, rng, cid, held)
            rec["ok"] = True
        except FileCacheError as exc:
            rec.update(ok=False, error=type(exc).__name__, message=str(exc)[:300])
        except Exception as exc:  # not filecache's error tree: counted as unexpected
            rec.update(ok=False, error=type(exc).__name__, message=str(exc)[:300], raw=True)
        cache.engine.versions.flush()  # blobs stored, so the oracle knows each version's content
        os.write(fd, (json.dumps(rec) + "\n").encode())
        if rec["ok"] and op != "forget":
            held.append(cid)
    os.close(fd)
    cache.close()


def _do(op: str, rec: dict[str, Any], session: Any, cache: Any, root: Path,
        rng: random.Random, cid: str, held: list[str]) -> None:  # fmt: skip
    if op in ("full", "ranged"):
        path = rng.choice((*EDITED, WRITTEN))
        offset = limit = None
        if op == "ranged":
            count = (root / path).read_bytes().count(b"\n")
            offset, limit = rng.randint(1, max(count, 1)), rng.randint(1, 40)
        rec["args"] = [path, offset, limit]
        r = session.read(path, offset=offset, limit=limit, mode="full", call_id=cid)
        rec.update(kind=r.kind, text=r.text, version=r.version, start=r.start, end=r.end,
                   base_call_id=r.base_call_id, line_count=r.line_count)  # fmt: skip
    elif op == "edit":
        path = rng.choice(EDITED)
        lines = (root / path).read_text().split("\n")[:-1]
        i = rng.randrange(len(lines))
        marker = f"<{cid}>"
        old = ("\n" if i else "") + lines[i] + "\n"  # a whole line: unique (tags are)
        if rng.random() < 0.5:
            new = old[:-1] + " " + marker + "\n"
        else:
            new = old + "  + " + marker + " " + _line(rng, "") + "\n"
        rec.update(args=[path], old=old, new=new, marker=marker)
        w = session.edit(path, old, new, call_id=cid)
        rec.update(kind=w.kind, text=w.text, version=w.version, base_version=w.base_version)
    elif op == "write":
        tag = cid.replace("-", "")
        content = "".join(_line(rng, f"{tag}.{i}") + "\n" for i in range(rng.randint(50, 300)))
        rec.update(args=[WRITTEN], content=content)
        w = session.write(WRITTEN, content, call_id=cid)
        rec.update(kind=w.kind, text=w.text, version=w.version, base_version=w.base_version)
    elif op == "forget":
        ids = rng.sample(held[-30:], min(len(held[-30:]), rng.randint(1, 3)))
        with session.lock:  # no other call of the session between the forget and the head
            session.forget(ids)
            rec.update(ids=ids, after_seq=cache.engine.store.head(session.id))


# -- supervisor -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What to run: ``workers`` slots of ``ops`` ops each; slot ``i`` uses session ``s{i %
    sessions}``; a kill every ``kill_min``..``kill_max`` s, at most ``max_kills`` (None: no
    limit); ``forget``: whether forget is among the ops."""

    workers: int = 4
    ops: int = 2000
    seed: int = 1
    sessions: int = SESSIONS
    kill_min: float = 0.3
    kill_max: float = 1.5
    max_kills: int | None = None
    forget: bool = True


@dataclass
class Run:
    elapsed: float
    kills: int
    restarts: int
    crashes: int


def supervise(plan: Plan, root: Path, store: Path, logs: Path) -> Run:
    rng = random.Random(plan.seed)
    incarnation = [0] * plan.workers
    procs: dict[int, subprocess.Popen[bytes]] = {}
    done: set[int] = set()
    kills = restarts = crashes = 0

    def start(slot: int) -> None:
        config = {
            "root": str(root), "store": str(store), "slot": slot, "ops": plan.ops,
            "seed": plan.seed, "forget": plan.forget, "session": f"s{slot % plan.sessions}",
            "prefix": f"w{slot}i{incarnation[slot]}", "log": str(logs / f"slot{slot}.jsonl"),
        }  # fmt: skip
        incarnation[slot] += 1
        procs[slot] = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps(config)], cwd=REPO
        )

    def kill_due() -> bool:
        limit = plan.max_kills
        return time.perf_counter() >= next_kill and bool(procs) and (limit is None or kills < limit)

    began = time.perf_counter()
    for slot in range(plan.workers):
        start(slot)
    next_kill = time.perf_counter() + rng.uniform(plan.kill_min, plan.kill_max)
    while len(done) < plan.workers:
        time.sleep(0.02)
        for slot, proc in list(procs.items()):
            rc = proc.poll()
            if rc is None:
                continue
            del procs[slot]
            if rc == 0:
                done.add(slot)
            else:  # died on its own: restart (counted; the log says why if it got that far)
                crashes += 1
                if crashes > 20:
                    raise SystemExit(f"workers keep crashing (slot {slot}, exit {rc})")
                start(slot)
        if kill_due():
            slot = rng.choice(sorted(procs))
            procs[slot].send_signal(signal.SIGKILL)
            procs[slot].wait()
            kills += 1
            restarts += 1
            start(slot)
            next_kill = time.perf_counter() + rng.uniform(plan.kill_min, plan.kill_max)
    return Run(time.perf_counter() - began, kills, restarts, crashes)


# -- main -----------------------------------------------------------------------------------


def soak(plan: Plan, where: Path | None = None) -> tuple[Run, Counts]:
    """Run the soak in ``where`` (an empty folder; a temporary one when None)."""
    with tempfile.TemporaryDirectory(prefix="fc-soak-") as tmp:
        base = where or Path(tmp)
        root, logs = base / "root", base / "logs"
        root.mkdir()
        logs.mkdir()
        store = base / "store.db"
        make_root(root, plan.seed)
        initial = initial_texts(root)
        run = supervise(plan, root, store, logs)
        counts = Counts()
        oracle(root, store, logs, counts, initial)
        return run, counts


def report(plan: Plan, run: Run, c: Counts) -> str:
    shared = sum(1 for i in range(plan.sessions) if len(range(i, plan.workers, plan.sessions)) > 1)
    rows = [
        ("workers x ops per worker", f"{plan.workers} x {plan.ops}"),
        ("session ids / used by 2+ processes", f"{plan.sessions} / {shared}"),
        ("wall time", f"{run.elapsed:.1f} s"),
        ("ops/s (all workers, incl. restarts)", f"{c.ops / run.elapsed:.0f}"),
        ("kill -9 / restarts / crashes", f"{run.kills} / {run.restarts} / {run.crashes}"),
        ("ops logged / failed", f"{c.ops} / {c.failed_ops} {dict(sorted(c.errors.items()))}"),
        ("read answers by kind", str(dict(sorted(c.kinds.items())))),
        ("answers checked by the oracle", str(c.checked)),
        ("skipped: version content unknown", str(c.unknown)),
        ("stale answers (must be 0)", str(c.stale)),
        ("  of which rely on a forgotten result", str(c.stale_forgotten)),
        ("committed, never delivered (killed)", str(c.undelivered)),
        ("answers relying on those (limit)", str(c.relies_undelivered)),
        ("writes recovered as changes", str(c.recovered_changes)),
        ("forgets", str(c.forgets)),
        ("edits ok / failed", f"{c.edits_ok} / {c.edits_failed}"),
        ("lost edits (must be 0)", str(c.lost_edits)),
        ("failed-but-applied edits (must be 0)", str(c.failed_applied)),
        ("delivered without ledger row (must be 0)", str(c.unrecorded_answers)),
        ("failed with a ledger row (must be 0)", str(c.failed_recorded)),
        ("unexpected exceptions (must be 0)", str(c.unexpected)),
        ("intents before final open / left after", f"{c.intents_before_open} / {c.intents_left}"),
        (".fc-*.tmp files in the root", str(c.tmp_files)),
        ("PRAGMA integrity_check", c.integrity),
    ]
    width = max(len(k) for k, _ in rows)
    out = [f"| {'measure'.ljust(width)} | value |", f"|{'-' * (width + 2)}|-------|"]
    out += [f"| {k.ljust(width)} | {v} |" for k, v in rows]
    return "\n".join(out)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.path.insert(0, str(REPO))
        worker(json.loads(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--ops", type=int, default=2000, help="ops per worker slot")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kill-min", type=float, default=0.3)
    parser.add_argument("--kill-max", type=float, default=1.5)
    parser.add_argument("--max-kills", type=int, default=None)
    parser.add_argument("--sessions", type=int, default=SESSIONS, help="session ids (slot %% n)")
    parser.add_argument("--no-forget", action="store_true", help="leave forget out of the ops")
    parser.add_argument("--keep", type=Path, default=None, help="run in this (empty) folder")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=False)
    plan = Plan(args.workers, args.ops, args.seed, args.sessions, args.kill_min, args.kill_max,
                args.max_kills, not args.no_forget)  # fmt: skip
    run, counts = soak(plan, args.keep)
    print(report(plan, run, counts))
    for line in counts.examples:
        print("  " + line)
    bad = counts.hard_failures()
    if bad:
        print("FAILED: " + ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
