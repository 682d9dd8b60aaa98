"""Self-contained HTML pages with inline SVG charts: no JavaScript, no chart library.

Pure: numbers in, text out. Every page is one file (inline CSS and SVG) that any browser opens
offline; every SVG is well-formed XML, so ``xml.etree`` can parse it (the tests do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["COLORS", "html_page", "html_table", "line_chart", "nice_ticks"]

COLORS = {
    "recorded": "#8c8c8c",
    "plain": "#3b6fb6",
    "filecache": "#e07b1a",
    # replay --compare: one line per policy
    "none": "#8c8c8c",
    "anthropic": "#c0392b",
    "openclaw": "#8e44ad",
    "opencode": "#16a085",
    "cc dedup": "#b8860b",
    "cc dedup+anthr.": "#e377c2",
    "filecache cost": "#e07b1a",
    "filecache context": "#3b6fb6",
}
_DASH = {"recorded": "5 4", "none": "5 4"}

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 980px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0; }
th, td { padding: .2em .7em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
p.note { color: #555; } svg { display: block; margin: .5em 0; }
"""


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``high`` (about ``count`` of them)."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [0.0]
    while ticks[-1] < high:
        ticks.append(ticks[-1] + step)
    return ticks


def _short(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def line_chart(
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    x_label: str = "request",
    y_label: str = "prompt tokens",
    width: int = 900,
    height: int = 280,
) -> str:
    """An SVG line chart of one or more series over their index (1-based on the x axis)."""
    left, right, top, bottom = 64, 150, 28, 42
    plot_w, plot_h = width - left - right, height - top - bottom
    n = max((len(v) for v in series.values()), default=0)
    ticks = nice_ticks(max((max(v) for v in series.values() if v), default=0))
    y_max = ticks[-1]

    def x(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h - plot_h * v / y_max

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="18" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for t in ticks:
        out.append(
            f'<line x1="{left}" y1="{y(t):.1f}" x2="{left + plot_w}" y2="{y(t):.1f}" '
            'stroke="#e4e4e4"/>'
            f'<text x="{left - 6}" y="{y(t) + 4:.1f}" font-size="11" text-anchor="end">'
            f"{_short(t)}</text>"
        )
    step = max(1, math.ceil(n / 10))
    for i in range(0, n, step):
        out.append(
            f'<text x="{x(i):.1f}" y="{top + plot_h + 16}" font-size="11" '
            f'text-anchor="middle">{i + 1}</text>'
        )
    out.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#888"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#888"/>'
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" font-size="12" '
        f'text-anchor="middle">{escape(x_label)}</text>'
        f'<text x="14" y="{top + plot_h / 2:.1f}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    for k, (name, values) in enumerate(series.items()):
        color = COLORS.get(name, "#2a9d5c")
        dash = f' stroke-dasharray="{_DASH[name]}"' if name in _DASH else ""
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        if points:
            out.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} '
                f'points="{points}"><title>{escape(name)}</title></polyline>'
            )
        ly = top + 14 + 20 * k
        lx = left + plot_w + 16
        out.append(
            f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 22}" y2="{ly - 4}" stroke="{color}" '
            f'stroke-width="2"{dash}/>'
            f'<text x="{lx + 28}" y="{ly}" font-size="12">{escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def html_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain HTML table; every cell is escaped."""
    out = ["<table>", "<tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in head) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def html_page(title: str, body: Sequence[str]) -> str:
    """One self-contained HTML5 page."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f"<title>{escape(title)}</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            f"<h1>{escape(title)}</h1>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )
