"""Fit ``fast_estimate``'s coefficients (``filecache.core.tokens._FAST``) to exact BPE counts.

The read path estimates a text's tokens from three numbers it already has: characters (newlines
not counted), the extra bytes of non-ASCII characters in UTF-8, and lines. This fits the three
coefficients per encoding, for raw text and for content answers (``render_lines``: numbered
lines under a header), by least squares on the relative error, over the UTF-8 text files under
the given directories (default: this Python's ``site-packages``, whose sources, docs and data
files stand for what agents read), and prints them with the spread of exact / estimate.
Usage::

    .venv/bin/python bench/fit_fast_counts.py [DIR ...] [--files 5001]
"""

from __future__ import annotations

import argparse
import statistics
import sysconfig
from pathlib import Path

from filecache.core.text import render_lines, split_lines
from filecache.core.tokens import TokenCounter, fast_estimate
from filecache.sources import _shape_of

SUFFIXES = {".py", ".pyi", ".md", ".rst", ".txt", ".json", ".toml", ".cfg", ".ini", ".yaml",
            ".yml", ".c", ".h", ".js", ".ts", ".html", ".css", ".csv", ".xml", ".sh"}  # fmt: skip
MAX_BYTES = 200_000


def corpus(dirs: list[Path], limit: int) -> list[list[str]]:
    """Up to ``limit`` UTF-8 text files under ``dirs``, evenly spread over their sorted paths."""
    paths = sorted(
        p for d in dirs for p in d.rglob("*")
        if p.suffix in SUFFIXES and p.is_file() and 0 < p.stat().st_size <= MAX_BYTES
    )  # fmt: skip
    step = max(1, len(paths) // limit)
    out = []
    for path in paths[::step]:
        try:
            out.append(split_lines(path.read_text(encoding="utf-8")))
        except (UnicodeDecodeError, OSError):
            continue
        if len(out) == limit:
            break
    return out


def solve(rows: list[tuple[float, float, float]], ys: list[float]) -> tuple[float, ...]:
    """Least squares on the relative error: each row and target divided by the target."""
    m = [[0.0] * 3 for _ in range(3)]
    v = [0.0] * 3
    for x, y in zip(rows, ys, strict=True):
        w = [xi / y for xi in x]
        for i in range(3):
            v[i] += w[i]
            for j in range(3):
                m[i][j] += w[i] * w[j]
    for col in range(3):  # Gauss-Jordan on the 3x3 normal equations
        pivot = max(range(col, 3), key=lambda r: abs(m[r][col]))
        m[col], m[pivot], v[col], v[pivot] = m[pivot], m[col], v[pivot], v[col]
        for r in range(3):
            if r != col and m[col][col]:
                f = m[r][col] / m[col][col]
                m[r] = [a - f * b for a, b in zip(m[r], m[col], strict=True)]
                v[r] -= f * v[col]
    return tuple(v[i] / m[i][i] for i in range(3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--files", type=int, default=5001)
    args = parser.parse_args()
    dirs = args.dirs or [Path(sysconfig.get_paths()["purelib"])]
    files = [lines for lines in corpus(dirs, args.files) if lines]
    shapes = [_shape_of(lines) for lines in files]
    print(f"{len(files):,} files under {', '.join(map(str, dirs))}")
    for encoding in ("o200k", "cl100k"):
        counter = TokenCounter(encoding)
        for numbered in (False, True):
            ys, rows = [], []
            for lines, shape in zip(files, shapes, strict=True):
                text = render_lines("x", lines, 1, len(lines), numbered=numbered)
                ys.append(float(max(1, counter.count(text))))
                rows.append((float(shape.chars), float(shape.extra), float(len(lines))))
            coef = solve(rows, ys)
            ratios = sorted(
                y / max(1, round(sum(c * x for c, x in zip(coef, row, strict=True))))
                for row, y in zip(rows, ys, strict=True)
            )
            now = sorted(
                y
                / fast_estimate(
                    int(r[0]), int(r[1]), int(r[2]), numbered=numbered, encoding=encoding
                )  # fmt: skip
                for r, y in zip(rows, ys, strict=True)
            )

            def spread(rs: list[float]) -> str:
                q = statistics.quantiles(rs, n=100)
                return f"median {statistics.median(rs):.2f}, 1st pct {q[0]:.2f}, 99th {q[98]:.2f}"

            kind = "content answers" if numbered else "raw text"
            print(f"{encoding} {kind}: ({', '.join(f'{c:.4f}' for c in coef)})")
            print(f"    exact/estimate with these: {spread(ratios)}; with _FAST now: {spread(now)}")


if __name__ == "__main__":
    main()
