"""Benchmark outlines: parse floor, build, cached hit, and outline size against the full file.

Run from the repository root::

    .venv/bin/python bench/bench_outline.py [--repeat 15]

It assembles a Python file of about 10,000 lines from real code (filecache's own modules and
the outline fixtures), then times, as medians over ``--repeat`` runs:

- a raw tree-sitter parse of it (the floor: no query, no signatures),
- ``build_outline`` (parse, query, signatures, docs, token count),
- ``cached_outline`` on a version it has already outlined (the target is 1 ms or less).

It also prints, for every fixture over 200 lines and for the assembled file, the outline's
tokens against the tokens of the file read with line numbers (``cat -n``), in o200k_base.
Output is markdown, ready for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import toktok
from tree_sitter import Parser
from tree_sitter_language_pack import get_language

from filecache.outline.outline import (
    OUTLINE_VERSION,
    build_outline,
    cached_outline,
    language_for_path,
    render_outline,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "outline"
TARGET_LINES = 10_000


def assemble_python(target_lines: int = TARGET_LINES) -> bytes:
    """Real Python code, repeated until it has at least ``target_lines`` lines."""
    sources = [path.read_text(encoding="utf-8") for path in sorted(ROOT.glob("filecache/*.py"))]
    sources.append((FIXTURES / "task_queue.py").read_text(encoding="utf-8"))
    chunks: list[str] = []
    lines = 0
    while lines < target_lines:
        for source in sources:
            chunks.append(source)
            lines += source.count("\n")
            if lines >= target_lines:
                break
    return "".join(chunks).encode()


def numbered(text: str) -> str:
    """The text as a numbered read shows it: ``cat -n`` style, number, tab, line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(f"{number:6}\t{line}" for number, line in enumerate(lines, start=1))


def tokens(text: str) -> int:
    """o200k_base tokens of ``text``."""
    return int(toktok.batch_count([text], "o200k_base")[0])


def median_ms(run: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``run`` in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    """Run the benchmark and print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per timing (median)")
    args = parser.parse_args()

    source = assemble_python()
    line_count = source.count(b"\n")

    start = time.perf_counter()
    first = build_outline(source, "python")  # compiles the query, loads the tokenizer
    cold_ms = (time.perf_counter() - start) * 1000

    language = get_language("python")
    parse_ms = median_ms(lambda: Parser(language).parse(source), args.repeat)
    build_ms = median_ms(lambda: build_outline(source, "python"), args.repeat)
    cached_outline("bench:v1", source, "python")
    cached_ms = median_ms(lambda: cached_outline("bench:v1", source, "python"), args.repeat * 100)
    render_ms = median_ms(lambda: render_outline(first, "big.py"), args.repeat)

    print(f"Outline benchmark ({OUTLINE_VERSION}), median of {args.repeat} runs\n")
    print(
        f"Assembled Python file: {line_count:,} lines, {len(source):,} bytes, "
        f"{len(first.definitions):,} definitions.\n"
    )
    print("| step | time (ms) |")
    print("|---|---:|")
    print(f"| raw tree-sitter parse (floor) | {parse_ms:.2f} |")
    print(f"| `build_outline`, first call in the process (query compile, tokenizer load) | "
          f"{cold_ms:.2f} |")  # fmt: skip
    print(f"| `build_outline` (parse + query + signatures + token count) | {build_ms:.2f} |")
    print(f"| `cached_outline`, second call for the same version | {cached_ms:.4f} |")
    print(f"| `render_outline` (with budget fitting) | {render_ms:.2f} |")
    print()

    rows: list[tuple[str, int, int, int, str]] = []
    for path in sorted(FIXTURES.iterdir()):
        data = path.read_bytes()
        if data.count(b"\n") <= 200:
            continue
        outline = build_outline(data, language_for_path(path.name))
        text = render_outline(outline, path.name)
        header = text.split("\n", 1)[0]
        detail = header[header.rfind("lines") + 5 :].strip(", )") or "full"
        rows.append(
            (path.name, outline.line_count, tokens(text), tokens(numbered(data.decode())), detail)
        )
    big = render_outline(first, "assembled.py")
    big_header = big.split("\n", 1)[0]
    big_detail = big_header[big_header.rfind("lines") + 5 :].strip(", )") or "full"
    rows.append(
        ("assembled.py", line_count, tokens(big), tokens(numbered(source.decode())), big_detail)
    )
    print("| file | lines | outline tokens | full tokens (numbered) | ratio | detail kept |")
    print("|---|---:|---:|---:|---:|---|")
    for name, lines, outline_tokens, full_tokens, detail in rows:
        ratio = outline_tokens / full_tokens
        print(
            f"| {name} | {lines:,} | {outline_tokens:,} | {full_tokens:,} | {ratio:.1%} "
            f"| {detail} |"
        )


if __name__ == "__main__":
    main()
