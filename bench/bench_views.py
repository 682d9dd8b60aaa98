"""Cost of a path's view along long edit and diff chains, and of its JSON (the stored form).

Prints a table: per scenario, the time of the last calls, the view's runs and JSON size, and
to_json / from_json times. Runs against whichever ``filecache`` is importable, so the same
script measures an older checkout (``PYTHONPATH=/path/to/old .venv/bin/python bench/...``).

    .venv/bin/python bench/bench_views.py [--edits 300] [--lines 400] [--repeat 20]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from filecache import FileCache
from filecache.core.views import PathView


def _views_of(session: Any) -> Any:
    """A session's views: ``_state.views`` now, ``_views`` in checkouts before the split."""
    state = getattr(session, "_state", None)
    return state.views if state is not None else session._views


def _long_lines(n: int) -> list[str]:
    return [f"line {i}: some text that makes the line long enough to matter\n" for i in range(n)]


def _json_times(view: PathView, repeat: int) -> tuple[int, float, float]:
    """JSON size, and the fastest of ``repeat`` to_json and from_json runs (ms): the machine
    is shared, the minimum is the cost."""
    text = view.to_json()
    dump = min(timeit.repeat(view.to_json, number=1, repeat=repeat))
    load = min(timeit.repeat(lambda: PathView.from_json(text, view.max_versions), number=1,
                             repeat=repeat))  # fmt: skip
    return len(text), dump * 1e3, load * 1e3


def _row(name: str, per_call: float, view: PathView, repeat: int) -> str:
    size, dump, load = _json_times(view, repeat)
    runs = sum(len(f.spans) for f in view.versions.values())
    alts = sum(len(a) for f in view.versions.values() for _, _, a in f.spans)
    return f"{name:<28} {per_call:>9.2f} {runs:>7} {alts:>7} {size:>10,} {dump:>9.2f} {load:>9.2f}"


def edit_chain(root: Path, edits: int, lines: int, repeat: int) -> str:
    """A full read, then ``edits`` edits each inserting a line (every line carries the chain)."""
    (root / "a.py").write_text("".join(f"x{i} = {i}\n" for i in range(lines)))
    with FileCache(root, store=":memory:") as cache:
        s = cache.session("s")
        s.read("a.py", mode="full", call_id="r0")
        last: list[float] = []
        for k in range(edits):
            i = (k * 37) % lines
            t = time.perf_counter()
            s.edit("a.py", f"x{i} = {i}\n", f"x{i} = {i}\nm{k} = {k}\n", call_id=f"e{k}")
            last.append(time.perf_counter() - t)
        per = sum(last[-20:]) / 20 * 1e3
        return _row(f"{edits} edits, {lines} lines", per, _views_of(s)["a.py"], repeat)


def mixed_chain(root: Path, rounds: int, lines: int, repeat: int) -> str:
    """Edits, outside changes (diffs) and ranged re-reads interleaved: many runs and
    alternatives in every held version."""
    text = _long_lines(lines)
    path = root / "b.py"
    path.write_text("".join(text))
    with FileCache(root, store=":memory:") as cache:
        s = cache.session("s")
        s.read("b.py", mode="full", call_id="r0")
        last: list[float] = []
        for k in range(rounds):
            t = time.perf_counter()
            i = (k * 53) % lines
            if k % 3 == 0:
                now = path.read_text().splitlines(keepends=True)
                now[i] = f"changed {k}: some text that makes the line long enough\n"
                path.write_text("".join(now))
                s.read("b.py", mode="full", call_id=f"d{k}")
            elif k % 3 == 1:
                s.read("b.py", offset=1 + i, limit=7, fresh=True, mode="full", call_id=f"p{k}")
            else:
                old = path.read_text().splitlines(keepends=True)[i]
                s.edit("b.py", old, old.replace("text", f"text{k}"), call_id=f"e{k}")
            last.append(time.perf_counter() - t)
        per = sum(last[-20:]) / 20 * 1e3
        return _row(f"{rounds} mixed, {lines} lines", per, _views_of(s)["b.py"], repeat)


def diff_chain(root: Path, diffs: int, lines: int, repeat: int) -> str:
    """A full read, then ``diffs`` outside changes of the same line, each read back as a diff."""
    text = _long_lines(lines)
    path = root / "c.py"
    path.write_text("".join(text))
    with FileCache(root, store=":memory:") as cache:
        s = cache.session("s")
        s.read("c.py", mode="full", call_id="r0")
        last: list[float] = []
        for k in range(diffs):
            text[lines // 2] = f"changed {k}\n"  # the same line: its context overlaps
            path.write_text("".join(text))
            t = time.perf_counter()
            s.read("c.py", mode="full", call_id=f"d{k}")
            last.append(time.perf_counter() - t)
        per = sum(last[-3:]) / 3 * 1e3
        return _row(f"{diffs} diffs, {lines} lines", per, _views_of(s)["c.py"], repeat)


def synthetic(kind: str, repeat: int) -> str:
    """A view built directly: 4 versions of 4,000 lines; ``distinct``: a read per two lines and
    wider overlapping reads (8,320 runs, one id each); ``chains``: runs backed by random sets
    of up to 90 of 200 ids (few ranges to share)."""
    rng = random.Random(1)
    view = PathView(4)
    for v in range(4):
        facts = view.facts_for(f"xxh3:{v:032x}", 4000, v)
        if kind == "distinct":
            for i in range(1, 4000, 2):
                facts.add(i, i + 1, frozenset({f"toolu_{v}_{i:05d}_abcdefgh"}))
            for i in range(1, 4000, 50):
                facts.add(i, i + 30, frozenset({f"toolu_w{v}_{i}", f"toolu_e{v}_{i}"}))
        else:
            pool = [f"toolu_{k:04d}_abcdefgh" for k in range(200)]
            for i in range(1, 4000, 5):
                facts.add(i, i + 4, frozenset(rng.sample(pool, rng.randint(1, 90))))
    return _row(f"synthetic {kind}", 0.0, view, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=300)
    parser.add_argument("--lines", type=int, default=400)
    parser.add_argument("--diffs", type=int, default=14)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(
        f"{'scenario':<28} {'ms/call':>9} {'runs':>7} {'alts':>7} {'json bytes':>10} "
        f"{'dump ms':>9} {'load ms':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        print(edit_chain(Path(tmp), args.edits, args.lines, args.repeat))
    with tempfile.TemporaryDirectory() as tmp:
        print(mixed_chain(Path(tmp), args.edits, 4 * args.lines, args.repeat))
    with tempfile.TemporaryDirectory() as tmp:
        print(diff_chain(Path(tmp), args.diffs, args.lines // 4, args.repeat))
    print(synthetic("distinct", args.repeat))
    print(synthetic("chains", args.repeat))


if __name__ == "__main__":
    main()
