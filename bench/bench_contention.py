"""Optimistic reads under contention: processes with two objects each hammer one session.

Each worker process opens two ``FileCache`` objects on one root and one SQLite store and, for
``--seconds``, does random whole and ranged reads (60%), edits (20%) and forgets of a held call
id (20%) through either object's ``Session("s")``. A read skips the catch-up query and reruns
when its commit finds the head moved on (``Session._turn(optimistic=True)``); the worker counts
those reruns (commits refused with ``StoreConflictError``) and any ``StoreConflictError`` that
reached it. Then the ledger is checked: no read may rely on (``deps`` or ``base_call_id``) a call
id forgotten before it. Exits 1 if a conflict reached a caller or a read relies on a forgotten id.

    .venv/bin/python bench/bench_contention.py [--procs 4] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def worker(root: str, store: str, idx: int, seconds: float) -> dict[str, object]:
    sys.path.insert(0, str(REPO))
    from filecache import EditError, FileCache
    from filecache.errors import StoreConflictError
    from filecache.store import sqlite_store

    reruns = 0
    commit = sqlite_store.SqliteStore.commit

    def counted(self: sqlite_store.SqliteStore, *args: object, **kwargs: object) -> int:
        nonlocal reruns
        try:
            return commit(self, *args, **kwargs)  # type: ignore[arg-type]
        except StoreConflictError:
            reruns += 1  # the caller (a read) catches up and runs again
            raise

    sqlite_store.SqliteStore.commit = counted  # type: ignore[method-assign]
    rng = random.Random(idx)
    counts = {"reads": 0, "edits": 0, "forgets": 0, "conflicts_to_caller": 0}
    with FileCache(root, store=store) as one, FileCache(root, store=store) as two:
        sessions = [one.session("s"), two.session("s")]
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            n += 1
            s = rng.choice(sessions)
            op = rng.random()
            path = f"f{rng.randrange(3)}.txt"
            try:
                if op < 0.6:
                    ranged = rng.random() < 0.5
                    offset, limit = (rng.randrange(1, 20), 5) if ranged else (None, None)
                    s.read(path, offset=offset, limit=limit, call_id=f"r{idx}-{n}")
                    counts["reads"] += 1
                elif op < 0.8:
                    line = rng.randrange(40)
                    text = (Path(root) / path).read_text()
                    a, b = f"line {line} of", f"LINE {line} of"
                    old, new = (a, b) if a in text else (b, a)
                    try:
                        s.edit(path, old, new, call_id=f"e{idx}-{n}")
                    except EditError:
                        pass  # another process edited that line in between
                    counts["edits"] += 1
                else:
                    held = sorted(s.held_call_ids())
                    if held:
                        s.forget([rng.choice(held)])
                    counts["forgets"] += 1
            except StoreConflictError:
                counts["conflicts_to_caller"] += 1
    return {**counts, "reruns": reruns}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--worker", nargs=4, metavar=("ROOT", "STORE", "IDX", "SECONDS"))
    args = parser.parse_args()
    if args.worker:
        root, store, idx, seconds = args.worker
        print(json.dumps(worker(root, store, int(idx), float(seconds))))
        return 0
    base = Path(tempfile.mkdtemp())
    root = base / "root"
    root.mkdir()
    for i in range(3):
        lines = "".join(f"line {k} of file {i} with words\n" for k in range(40))
        (root / f"f{i}.txt").write_text(lines)
    store = str(base / "s.db")
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(root), store, str(i), str(args.seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in range(args.procs)
    ]
    totals: dict[str, int] = {}
    for proc in procs:
        out, _ = proc.communicate()
        for key, value in json.loads(out.strip().splitlines()[-1]).items():
            totals[key] = totals.get(key, 0) + int(value)
    sys.path.insert(0, str(REPO))
    from filecache import FileCache

    with FileCache(root, store=store) as cache:
        events = cache.engine.store.events("s")
    forgotten: set[str] = set()
    relying = 0
    for e in events:
        if e.tool == "forget":
            forgotten |= set(e.deps)
        elif e.tool == "read" and (set(e.deps) & forgotten or e.base_call_id in forgotten):
            relying += 1
    print(f"{args.procs} processes x 2 objects, one session, {args.seconds:g} s")
    print(f"reads {totals['reads']}, edits {totals['edits']}, forgets {totals['forgets']}")
    print(f"reads rerun after a refused commit: {totals['reruns']}")
    print(f"StoreConflictError reaching a caller (must be 0): {totals['conflicts_to_caller']}")
    print(f"reads relying on a forgotten result (must be 0): {relying} of {len(events)} events")
    return 1 if totals["conflicts_to_caller"] or relying else 0


if __name__ == "__main__":
    sys.exit(main())
