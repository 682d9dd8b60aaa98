"""Read-path benchmarks: unchanged re-reads, diffs of a 10,000-line file, FileRef token savings.

Prints markdown tables; not a timed test. The timing benchmarks read the installed ``click``
package's sources in sorted order; the delta benchmark (FileRef token savings) reads the 20
real source files copied into ``fixtures/delta/``, so its figures are the same everywhere.
Usage::

    .venv/bin/python bench/bench_read.py [--reads 2000] [--diff-runs 200] [--tokens-only]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import click
import xxhash

from filecache import FileCache, Session
from filecache.core.diffing import diff_lines, render_hunks, unified_hunks
from filecache.core.text import split_lines
from filecache.core.tokens import TokenCounter

CHANGED = 10  # scattered changed lines in the diff benchmark
DIFF_LINES = 10_000
REREAD_BYTES = 100_000


def source_lines(package: Path) -> list[str]:
    """Every line of the package's top-level ``.py`` files, in sorted file order."""
    lines: list[str] = []
    for path in sorted(package.glob("*.py")):
        lines.extend(path.read_text(encoding="utf-8").splitlines(keepends=True))
    return lines


def first_bytes(lines: list[str], limit: int) -> str:
    """The longest prefix of whole lines whose UTF-8 size is at most ``limit``."""
    out, size = [], 0
    for line in lines:
        size += len(line.encode("utf-8"))
        if size > limit:
            break
        out.append(line)
    return "".join(out)


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    """Wall times of ``runs`` calls, in milliseconds."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return times


def stats(times: list[float]) -> tuple[float, float]:
    """Median and p90 of ``times``."""
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def ms(x: float) -> str:
    return f"{x:.3f} ms"


def bench_reread(tmp: Path, reads: int) -> None:
    text = first_bytes(source_lines(Path(click.__file__).parent), REREAD_BYTES)
    root = tmp / "reread"
    root.mkdir()
    target = root / "big.py"
    target.write_text(text, encoding="utf-8")
    size, line_count = len(text.encode("utf-8")), len(split_lines(text))
    print(f"### Unchanged re-read of a {size:,}-byte, {line_count:,}-line file ({reads:,} reads)\n")
    print(row("path", "median", "p90", "× floor (median)"))
    print(row("---", "---:", "---:", "---:"))

    def floor() -> None:
        with open(target, "rb") as fh:
            xxhash.xxh3_128_hexdigest(fh.read())

    floor_med, floor_p90 = stats(timed(floor, reads))
    print(row("floor: `open().read()` + `xxh3_128_hexdigest`", ms(floor_med), ms(floor_p90), "1.0"))
    for label, store in (
        ("SQLite store (temp dir)", tmp / "reread.db"),
        ("`:memory:`", ":memory:"),
    ):
        with FileCache(root, store=store) as cache:
            session = cache.session("bench")
            session.read("big.py", mode="full")  # the full read the re-reads refer to
            kinds: set[str] = set()
            med, p90 = stats(timed(rereader(session, "big.py", kinds), reads))
            assert kinds == {"unchanged"}, kinds
            print(row(f"`Session.read`, {label}", ms(med), ms(p90), f"{med / floor_med:.1f}"))
    print("\nTarget: median ≤ 1 ms.\n")


def rereader(session: Session, path: str, kinds: set[str]) -> Callable[[], None]:
    """A re-read of ``path`` that notes the answer's kind in ``kinds``."""
    return lambda: kinds.add(session.read(path).kind)


def changed_version(lines: list[str], tag: str) -> list[str]:
    """``lines`` with ``CHANGED`` scattered lines modified (the last line untouched)."""
    out = list(lines)
    step = len(lines) // CHANGED
    for k in range(CHANGED):
        i = step // 2 + k * step
        out[i] = out[i].rstrip("\n") + f"  # changed {tag}\n"
    return out


def bench_diff(tmp: Path, runs: int) -> None:
    lines = source_lines(Path(click.__file__).parent)[:DIFF_LINES]
    assert len(lines) == DIFF_LINES, "click's sources have fewer than 10,000 lines"
    old = "".join(lines)
    new = "".join(changed_version(lines, "x"))
    work = tmp / "diff"
    work.mkdir()
    (work / "old.py").write_text(old, encoding="utf-8")
    (work / "new.py").write_text(new, encoding="utf-8")
    size = len(old.encode("utf-8"))
    print(f"### Diff of a {DIFF_LINES:,}-line ({size:,}-byte) file, {CHANGED} lines changed\n")

    def ours() -> str:
        a, b = split_lines(old), split_lines(new)
        return render_hunks("a/f.py", "b/f.py", unified_hunks(a, b, diff_lines(a, b)))

    def gnu() -> bytes:
        proc = subprocess.run(
            ["diff", "-u", str(work / "old.py"), str(work / "new.py")],
            capture_output=True,
            check=False,
        )
        assert proc.returncode == 1, proc.stderr
        return proc.stdout

    hunks = sum(line.startswith("@@ ") for line in ours().splitlines())
    assert hunks == gnu().count(b"\n@@ ") == CHANGED, hunks

    root = tmp / "diff-root"
    root.mkdir()
    (root / "f.py").write_text(old, encoding="utf-8")
    ours_times: list[float] = []
    gnu_times: list[float] = []
    session_times: list[float] = []
    profile = cProfile.Profile()
    with FileCache(root, store=tmp / "diff.db") as cache:
        for i in range(2 * runs):  # timed runs, then the same under the profiler
            # A new session holds the old version; each run changes the file to a version the
            # cache has never seen (as an edit outside the agent would): nothing is precomputed.
            session = cache.session(f"bench-{i}")
            (root / "f.py").write_text(old, encoding="utf-8")
            session.read("f.py", mode="full")
            (root / "f.py").write_text("".join(changed_version(lines, str(i))), encoding="utf-8")
            if i >= runs:
                profile.enable()
            t0 = time.perf_counter()
            answer = session.read("f.py", mode="full")
            elapsed = (time.perf_counter() - t0) * 1000
            profile.disable()
            assert answer.kind == "diff", answer.kind
            if i < runs:  # the floor and the pure diff in the same iteration: same conditions
                session_times.append(elapsed)
                gnu_times.extend(timed(gnu, 1))
                ours_times.extend(timed(ours, 1))
        memory = cache.engine.versions.memory_used
    rows = [
        ("`filecache.core.diffing`: split + diff_lines + unified_hunks + render_hunks", ours_times),
        ("GNU `diff -u` as a subprocess (files already written)", gnu_times),
        ("`Session.read` answering the diff (SQLite store, new version)", session_times),
    ]
    gnu_med = stats(rows[1][1])[0]
    print(row("path", "median", "p90", "× GNU diff (median)"))
    print(row("---", "---:", "---:", "---:"))
    for label, times in rows:
        med, p90 = stats(times)
        print(row(label, ms(med), ms(p90), f"{med / gnu_med:.2f}"))
    print(
        f"\nTarget: no slower than GNU diff. Runs: {runs}, interleaved (`Session.read`, GNU diff "
        f"and the diff alone in each iteration). Versions held in memory at the end: "
        f"{memory / 2**20:.0f} MiB (memory_mb {cache.engine.settings.memory_mb:g}; older versions' "
        "blobs are written by the background thread).\n"
    )
    breakdown(profile, runs)


def breakdown(profile: cProfile.Profile, runs: int) -> None:
    """Where the time of ``Session.read`` answering a diff goes: self time per function."""
    entries = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in entries.values())
    top = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:10]
    print(f"Where the `Session.read` diff path spends its time (cProfile, {runs} reads):\n")
    print(row("function (self time)", "per read", "share"))
    print(row("---", "---:", "---:"))
    for (file, _line, name), (_, _, tt, _, _) in top:
        where = name if file == "~" else f"{Path(file).parent.name}/{Path(file).name}:{name}"
        print(row(f"`{where}`", ms(tt / runs * 1000), f"{100 * tt / total:.0f}%"))
    print(row("**all**", f"**{ms(total / runs * 1000)}**", "100%"))
    print()


DELTA = Path(__file__).resolve().parent.parent / "fixtures" / "delta"


def delta_files() -> list[str]:
    """The delta benchmark's 20 source files (10 of click, 10 of pytest), relative to DELTA."""
    names = sorted(str(p.relative_to(DELTA)) for p in DELTA.glob("*/*.py"))
    assert len(names) == 20, f"fixtures/delta holds {len(names)} source files, not 20"
    return names


def bench_tokens() -> dict[str, str]:
    """The seeds' delta benchmark: 20 source files read, every other one re-read unchanged.
    Returns the 20 whole-file answers (``bench_numbering`` counts their line numbers)."""
    counter = TokenCounter("o200k")
    names = delta_files()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in names:
            (root / name).parent.mkdir(exist_ok=True)
            (root / name).write_bytes((DELTA / name).read_bytes())
        # exact_counts: this table reports exact o200k counts (by default answers carry estimates)
        with FileCache(root, store=":memory:", exact_counts=True) as cache:
            session = cache.session("bench")
            full = {name: session.read(name, mode="full") for name in names}
            again = {name: session.read(name) for name in names[::2]}
    print("### Re-reading 10 of 20 source files unchanged (o200k tokens)\n")
    print("Inputs: `fixtures/delta/` (click 8.4.0 and pytest 9.0.3 modules, copied unmodified).\n")
    print(row("file", "lines", "full read", "re-read", "kind", "saved"))
    print(row("---", "---:", "---:", "---:", "---", "---:"))
    for name, result in again.items():
        first = full[name]
        saved = 100 * (1 - result.tokens / first.tokens) if first.tokens else 0.0
        lines = first.line_count
        print(row(name, lines, first.tokens, result.tokens, result.kind, f"{saved:.1f}%"))
    total_full = sum(full[n].tokens for n in again)
    total_again = sum(r.tokens for r in again.values())
    print(
        row(
            "**10 re-reads**",
            "",
            f"**{total_full:,}**",
            f"**{total_again:,}**",
            "",
            f"**{100 * (1 - total_again / total_full):.1f}%**",
        )
    )
    all_full = sum(r.tokens for r in full.values())
    refs = [r.tokens for r in again.values() if r.kind == "unchanged"]
    example = next(r.text for r in again.values() if r.kind == "unchanged")
    print(
        f"\nAll 20 full reads: {all_full:,} tokens; 20 reads + 10 re-reads: "
        f"{all_full + total_again:,} with filecache vs {all_full + total_full:,} plain "
        f"({100 * total_full / (all_full + total_full):.1f}% of the plain total was re-reads). "
        f"A FileRef costs {min(refs)}–{max(refs)} tokens "
        f"(tokenizer exact: {counter.exact}), e.g. `{example.strip()}`.\n"
    )
    print("Target: re-reads ≥ 99% fewer tokens than their full reads; a FileRef ≤ 32 tokens.\n")
    return {name: result.text for name, result in full.items()}


def bench_numbering(answers: dict[str, str]) -> None:
    """What the line numbers of a content answer cost: the whole-file ``answers`` of the 20
    files of ``fixtures/delta/`` (``bench_tokens``), against their raw lines and ``cat -n``'s
    six-column numbers."""
    texts = {name: (DELTA / name).read_text(encoding="utf-8") for name in answers}
    lines = sum(len(t.splitlines()) for t in texts.values())
    print(f"### What line numbers cost (20 whole files of `fixtures/delta/`, {lines:,} lines)\n")
    print(row("encoding", "raw lines", "`cat -n` (6 columns)", "filecache's answers", "saved",
              "saved a line"))  # fmt: skip
    print(row("---", "---:", "---:", "---:", "---:", "---:"))
    for encoding in ("o200k", "cl100k"):
        counter = TokenCounter(encoding)
        raw = sum(counter.count(t) for t in texts.values())
        cat = sum(
            counter.count("".join(f"{n:6d}\t{line}" for n, line in enumerate(rows, 1)))
            for rows in (t.splitlines(keepends=True) for t in texts.values())
        )
        ours = sum(counter.count(a) for a in answers.values())
        saved = f"{100 * (1 - ours / cat):.1f}%"
        print(
            row(encoding, f"{raw:,}", f"{cat:,}", f"{ours:,}", saved, f"{(cat - ours) / lines:.1f}")
        )
    print(
        "\nfilecache's answers carry a one-line header each and number lines right-aligned to "
        "the width of the last number shown, then a TAB.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=2000, help="re-reads timed (default 2000)")
    parser.add_argument("--diff-runs", type=int, default=200, help="diff runs (default 200)")
    parser.add_argument(
        "--tokens-only", action="store_true", help="only the delta benchmark (no timings)"
    )
    args = parser.parse_args()
    if args.tokens_only:
        print("$ .venv/bin/python bench/bench_read.py --tokens-only\n")
        bench_numbering(bench_tokens())
        return
    print(
        f"$ .venv/bin/python bench/bench_read.py --reads {args.reads} --diff-runs {args.diff_runs}"
    )
    print(
        f"\nPython {sys.version.split()[0]}, click {metadata.version('click')}, {_diff_version()}\n"
    )
    with tempfile.TemporaryDirectory(prefix="filecache-bench-") as tmp:
        bench_reread(Path(tmp), args.reads)
        bench_diff(Path(tmp), args.diff_runs)
    bench_numbering(bench_tokens())


def _diff_version() -> str:
    out = subprocess.run(["diff", "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else "diff (unknown version)"


if __name__ == "__main__":
    main()
