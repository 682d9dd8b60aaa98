"""Count the hops: the filecache modules one read, one edit and one prune run code in, and
how often the path comes back into a module it is still inside.

On a warm session (every module imported, the store open, the tokenizer loaded, each operation
done once before), each operation runs once under ``sys.setprofile``; every Python frame that
starts ("call" events) in a file under ``filecache/`` or ``adapters/`` counts its module. A
*re-entry* is a call into a module of ours that is still on the stack below another of our
modules (``a -> b -> a``: ``b`` calls back into ``a``, as a callback, a template method or a
helper passed in does); a call within one module (``a -> a``) is none. The table gives the
number of modules, of calls, and of re-entries (distinct pairs: the module re-entered and the
module that called back into it) per operation; ``--list`` names the modules and the
re-entries. Counts, not times: the same on any machine for the same code and inputs. Usage::

    .venv/bin/python bench/bench_hops.py [--list] [--json]

Operations (one ``Session`` over a temp root with a 449-line Python file, a SQLite store):
- ``read (content)``: the first read of a file, answered with its content;
- ``read (unchanged)``: the same read again, answered with a FileRef;
- ``edit``: one ``Session.edit`` (plan, write, commit, the confirmation);
- ``prune``: one ``prune_messages`` pass over a chat transcript of those calls that clears the
  superseded read (archive, projections, forget).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import filecache.adapters

import filecache
from filecache import FileCache, PrunePolicy, prune_messages

ROOTS = {
    "filecache": Path(filecache.__file__).resolve().parent,
    "filecache.adapters": Path(filecache.adapters.__file__).resolve().parent,
}
EAGER = PrunePolicy(
    context_window=2_000, prune_at=0.0, target=0.0, protect_recent=0, min_reclaim=0,
    cache_aware=False,
)  # fmt: skip


RECORDS = Path(filecache.__file__).resolve().parent / "core" / "records.py"
"""Not counted: the methods ``record`` gives a class (``__init__``, ``__eq__``...) are part of
that class, as ``dataclasses`` compiles them from a string (``<string>``, not counted either)."""


def module_of(filename: str, cache: dict[str, str | None]) -> str | None:
    """The dotted module name of a source file of ours, or None."""
    if filename in cache:
        return cache[filename]
    found = None
    path = Path(filename).resolve()
    if path == RECORDS:
        cache[filename] = None
        return None
    for package, root in sorted(ROOTS.items(), key=lambda kv: -len(str(kv[1]))):
        if path.is_relative_to(root) and path.suffix == ".py":
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found = ".".join(parts)
            break
    cache[filename] = found
    return found


class Trace:
    """What one operation ran: calls per module of ours, and its re-entries, as
    (module re-entered, module that called back into it) -> calls."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.reentries: Counter[tuple[str, str]] = Counter()


def trace(operation: Callable[[], Any]) -> Trace:
    """The calls and re-entries of ``operation`` (this thread)."""
    out = Trace()
    names: dict[str, str | None] = {}

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        name = module_of(frame.f_code.co_filename, names)
        if name is None:
            return
        out.calls[name] += 1
        caller = None  # the nearest module of ours below this frame
        below = frame.f_back
        while below is not None:
            found = module_of(below.f_code.co_filename, names)
            if found is not None:
                if caller is None:
                    if found == name:
                        return  # a call within one module
                    caller = found
                elif found == name:
                    out.reentries[(name, caller)] += 1
                    return
            below = below.f_back

    sys.setprofile(profile)
    try:
        operation()
    finally:
        sys.setprofile(None)
    return out


def hops(operation: Callable[[], Any]) -> Counter[str]:
    """Calls per module of ours while ``operation`` runs (this thread)."""
    return trace(operation).calls


def source(n: int) -> str:
    body = [f"def f{i}(x):\n    return x + {i}\n" for i in range(n // 2)]
    return "\n".join(body)


def chat(read_a: str, edit_text: str, read_b: str, ids: tuple[str, str, str]) -> list[Any]:
    """A chat transcript: read a.py, edit it, read it again (the first read is superseded)."""

    def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        function = {"name": name, "arguments": json.dumps(args)}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": function}],
        }

    r1, e1, r2 = ids
    edit = {"path": "a.py", "old_string": "return x + 1\n", "new_string": "return x + 100\n"}
    return [
        {"role": "user", "content": "fix a.py"},
        call(r1, "read_file", {"path": "a.py"}),
        {"role": "tool", "tool_call_id": r1, "content": read_a},
        call(e1, "edit_file", edit),
        {"role": "tool", "tool_call_id": e1, "content": edit_text},
        call(r2, "read_file", {"path": "a.py", "fresh": True}),
        {"role": "tool", "tool_call_id": r2, "content": read_b},
    ]


def run(root: Path, store: Path) -> dict[str, Trace]:
    with FileCache(root, store=store) as cache:
        session = cache.session("hops")

        def one_round(tag: str, path: str, measure: bool) -> dict[str, Trace]:
            """Each operation once (profiled when ``measure``); the reads the transcript needs
            around the edit are not part of any row."""
            (root / path).write_text(source(300), encoding="utf-8")
            (root / "a.py").write_text(source(300), encoding="utf-8")
            ids = (f"{tag}-r1", f"{tag}-e1", f"{tag}-r2")
            texts: dict[str, str] = {}

            def step(operation: Callable[[], Any]) -> Trace:
                if measure:
                    return trace(operation)
                operation()
                return Trace()

            out = {
                "read (content)": step(lambda: session.read(path, call_id=f"{tag}-x1")),
                "read (unchanged)": step(lambda: session.read(path, call_id=f"{tag}-x2")),
            }
            texts["r1"] = session.read("a.py", call_id=ids[0], fresh=True).text

            def edit() -> None:
                result = session.edit("a.py", "return x + 1\n", "return x + 100\n", call_id=ids[1])
                texts["e1"] = result.text

            out["edit"] = step(edit)
            texts["r2"] = session.read("a.py", call_id=ids[2], fresh=True).text

            def prune() -> None:
                messages = chat(texts["r1"], texts["e1"], texts["r2"], ids)
                result = prune_messages(messages, session=session, policy=EAGER)
                assert result.plan.replacements, "the pass must clear the superseded read"

            out["prune"] = step(prune)
            return out

        one_round("warm", "b.py", measure=False)  # imports, the tokenizer, the store's SQL
        return one_round("run", "c.py", measure=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--list", action="store_true", help="name the modules and re-entries of each row"
    )
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "root")
        root.mkdir()
        counts = run(root.resolve(), Path(tmp, "store.db"))
    if args.json:
        payload = {
            op: {
                "modules": len(t.calls), "calls": sum(t.calls.values()),
                "reentries": len(t.reentries), "by_module": dict(t.calls),
                "reentered": sorted(f"{a} <- {b}" for a, b in t.reentries),
            }
            for op, t in counts.items()
        }  # fmt: skip
        print(json.dumps(payload, indent=2, sort_keys=True))
        return
    print(f"{'operation':<18} {'modules':>7} {'calls':>7} {'re-entries':>10}")
    for op, t in counts.items():
        print(f"{op:<18} {len(t.calls):>7} {sum(t.calls.values()):>7} {len(t.reentries):>10}")
        if args.list:
            for name, n in sorted(t.calls.items()):
                print(f"    {name:<40} {n:>6}")
            for (name, via), n in sorted(t.reentries.items()):
                print(f"    re-entered: {name} <- {via} ({n} calls)")


if __name__ == "__main__":
    main()
