"""Costs on a session's own paths that grow with a file or a session: an edit's mapping of the
model's facts, the ledger a prune pass asks for, and the writes of one pruned result.

Prints one row per measurement, the fastest of ``--repeat`` runs (the machine is shared: the
minimum is the cost). Runs against whichever ``filecache`` is importable, so the same script
measures an older checkout (``PYTHONPATH=/path/to/old .venv/bin/python bench/...``)::

    .venv/bin/python bench/bench_session_paths.py [--lines 2000] [--events 2000] [--repeat 20]

- ``map_through_edit``: a one-line edit of a ``--lines`` file the model holds whole (two reads
  backing it, one of them ranged), as ``plan_edit`` maps the facts;
- ``Session.ledger``: of a session of ``--events`` reads, after one more read (what a prune
  pass finds: a few calls since the last pass); beside it, the same ledger folded from the
  store's rows read back (``build_ledger(store.events(...))``);
- ``prune writes``: one pruned result's archive, projection and seal tag on SQLite.
"""

from __future__ import annotations

import argparse
import tempfile
import timeit
from pathlib import Path

from filecache import FileCache
from filecache.core.edits import apply_edit
from filecache.core.text import split_lines
from filecache.core.views import Facts, map_through_edit
from filecache.ledger import build_ledger
from filecache.store.seal import default_seal


def _edit_mapping(lines: int, repeat: int) -> float:
    text = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(lines // 2))
    old = split_lines(text)
    facts = Facts("v", len(old))
    facts.add(1, len(old), frozenset({"r1"}))
    facts.add(len(old) // 4, len(old) // 2, frozenset({"r2"}))
    edited, pieces, _ = apply_edit("a.py", text, "return x + 1\n", "return x + 100\n", False)
    new = split_lines(edited)
    return min(
        timeit.repeat(
            lambda: map_through_edit(old, facts, new, pieces, "e1"), number=1, repeat=repeat
        )  # fmt: skip
    )


def _ledgers(events: int, repeat: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "root")
        root.mkdir()
        (root / "a.txt").write_text("x\n" * 50)
        with FileCache(root, store=Path(tmp, "store.db")) as cache:
            session = cache.session("s")
            for n in range(events):
                session.read("a.txt", call_id=f"c{n}", fresh=True)
            session.ledger()
            kept = []
            for n in range(repeat):
                session.read("a.txt", call_id=f"more{n}", fresh=True)
                kept.append(min(timeit.repeat(session.ledger, number=1, repeat=1)))
            store = cache.engine.store
            back = min(
                timeit.repeat(
                    lambda: build_ledger("s", store.events("s")), number=1, repeat=repeat
                )  # fmt: skip
            )
            return min(kept), back


def _prune_writes(repeat: int) -> float:
    with tempfile.TemporaryDirectory() as tmp, FileCache(Path(tmp), store=Path(tmp, "s.db")) as c:
        store, seal = c.engine.store, default_seal()
        original, text = "x" * 4000, "[filecache: cleared]"
        count = iter(range(10**9))

        def action() -> None:
            cid = f"c{next(count)}"
            store.archive_put("s", cid, original)
            store.projection_put("s", cid, "cleared", text, 1000, 10)
            seal.put_tag(store, "projection", f"s\0{cid}", "cleared", text)

        return min(timeit.repeat(action, number=1, repeat=max(repeat, 50)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    kept, back = _ledgers(args.events, args.repeat)
    rows = [
        (f"map_through_edit ({args.lines} lines)", _edit_mapping(args.lines, args.repeat)),
        (f"Session.ledger ({args.events} events)", kept),
        (f"  read back from the store ({args.events})", back),
        ("prune writes (one result, SQLite)", _prune_writes(args.repeat)),
    ]
    print(f"{'measurement':<42} {'ms':>8}")
    for name, seconds in rows:
        print(f"{name:<42} {seconds * 1000:>8.2f}")


if __name__ == "__main__":
    main()
