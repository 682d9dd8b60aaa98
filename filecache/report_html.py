"""Self-contained HTML pages with inline SVG charts and sortable tables: no chart library, no
CDN, nothing fetched.

Pure: numbers in, text out. Every page is one file (inline CSS, SVG and one small inline script
that sorts a table by a click on its header) that any browser opens offline; every SVG is
well-formed XML, so ``xml.etree`` can parse it (the tests do).

Invariants:
- A page opens with its ``lead``: one sentence with the saving (``p.lead``).
- Readable at 800 px: charts scale down with the page (``viewBox``), a wide table scrolls inside
  its own box, long words wrap; the page itself never scrolls sideways.
- Colours are the Okabe-Ito palette (distinguishable with the common colour-vision
  deficiencies), and series that share a hue also differ in dash pattern.
- A row that costs more than its baseline is marked in words (``costs more``), not by colour
  alone, and the rows of a sortable table open in the order given (the callers put
  regressions first).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

__all__ = [
    "COLORS", "Cell", "html_page", "html_table", "line_chart", "nice_ticks", "sort_value",
    "sortable_table",
]  # fmt: skip

# Okabe & Ito (2008), "Color Universal Design": distinguishable for the common deficiencies
_OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky": "#56B4E9", "green": "#009E73",
    "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7", "grey": "#777777",
}  # fmt: skip
COLORS = {
    "recorded": _OKABE_ITO["grey"],
    "plain": _OKABE_ITO["blue"],
    "filecache": _OKABE_ITO["vermillion"],
    # replay --compare: one line per policy
    "none": _OKABE_ITO["grey"],
    "anthropic": _OKABE_ITO["orange"],
    "openclaw": _OKABE_ITO["purple"],
    "opencode": _OKABE_ITO["green"],
    "cc dedup": _OKABE_ITO["sky"],
    "cc dedup+anthr.": _OKABE_ITO["black"],
    "filecache cost": _OKABE_ITO["vermillion"],
    "filecache context": _OKABE_ITO["blue"],
}
_FALLBACK = ("#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000")
_DASH = {
    "recorded": "5 4", "none": "5 4", "anthropic": "8 3", "openclaw": "2 3",
    "cc dedup+anthr.": "8 3 2 3", "filecache context": "1 0",
}  # fmt: skip

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 980px; color: #222;
       padding: 0 1em; overflow-wrap: anywhere; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
p.lead { font-size: 1.1em; font-weight: 600; }
.wide { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: .6em 0; }
th, td { padding: .2em .6em; border-bottom: 1px solid #ddd; text-align: right;
         overflow-wrap: normal; }
th:first-child, td:first-child { text-align: left; overflow-wrap: anywhere; min-width: 8em; }
table.sortable thead th { cursor: pointer; user-select: none; }
table.sortable thead th[aria-sort="ascending"]::after { content: " \\25B2"; }
table.sortable thead th[aria-sort="descending"]::after { content: " \\25BC"; }
tr.total td { font-weight: bold; }
tr.worse td { background: #fde8e4; } .flag { color: #a33; font-weight: bold; }
p.note { color: #555; } svg { display: block; margin: .5em 0; max-width: 100%; height: auto; }
@media (max-width: 900px) { body { font-size: 13px; } th, td { padding: .2em .35em; } }
"""

# Sorts a table.sortable by the clicked header (again: the other way); the rows of its
# thead (the header, a totals row) stay on top. A cell's data-sort is its number.
_SORT_JS = """
function fcKey(td) {
  var v = td.getAttribute("data-sort");
  return v === null ? td.textContent.trim().toLowerCase() : Number(v);
}
function fcSort(table, col, th) {
  var asc = th.getAttribute("aria-sort") !== "ascending";
  table.querySelectorAll("thead th").forEach(function (o) { o.removeAttribute("aria-sort"); });
  th.setAttribute("aria-sort", asc ? "ascending" : "descending");
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = fcKey(a.cells[col]), y = fcKey(b.cells[col]);
    var nx = typeof x === "number", ny = typeof y === "number";
    var c = nx && ny ? x - y : nx ? -1 : ny ? 1 : x < y ? -1 : x > y ? 1 : 0;
    return asc ? c : -c;
  });
  rows.forEach(function (r) { body.appendChild(r); });
}
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead tr:first-child th").forEach(function (th, col) {
    th.tabIndex = 0;
    th.title = "sort by this column";
    th.addEventListener("click", function () { fcSort(table, col, th); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); fcSort(table, col, th); }
    });
  });
});
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
        color = COLORS.get(name, _FALLBACK[k % len(_FALLBACK)])
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
    out = ['<div class="wide"><table>']
    out.append("<tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in head) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>")
    out.append("</table></div>")
    return "\n".join(out)


_NUMBER = re.compile(r"[-+]?\$?(\d[\d,]*)?(\.\d+)?%?")


def sort_value(text: str) -> float | None:
    """The number a cell shows (``1,234``, ``−3.2%``, ``$0.0123``, ``+5.0%``), or None."""
    t = text.strip().replace("\u2212", "-")
    if not t or not _NUMBER.fullmatch(t) or not any(ch.isdigit() for ch in t):
        return None
    return float(t.replace(",", "").replace("$", "").replace("%", ""))


@dataclass(frozen=True)
class Cell:
    """A cell whose HTML is given (already escaped: a link), and the text it sorts by."""

    html: str
    text: str


def _td(cell: object) -> str:
    if isinstance(cell, Cell):
        html, text = cell.html, cell.text
    else:
        html, text = escape(str(cell)), str(cell)
    value = sort_value(text)
    attr = "" if value is None else f' data-sort="{value!r}"'
    return f"<td{attr}>{html}</td>"


def sortable_table(
    head: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    pinned: Sequence[Sequence[object]] = (),
    worse: Sequence[bool] = (),
    caption: str = "",
) -> str:
    """A table sorted by a click on a header (the page's inline script): ``pinned`` rows (a
    totals row) stay on top, ``rows`` open in the order given; a row whose ``worse`` flag is
    set is marked, in words and colour, as costing more than its baseline."""
    out = ['<div class="wide"><table class="sortable">']
    if caption:
        out.append(f"<caption>{escape(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in head) + "</tr>")
    for row in pinned:
        out.append('<tr class="total">' + "".join(_td(c) for c in row) + "</tr>")
    out.append("</thead><tbody>")
    for n, row in enumerate(rows):
        cells = [_td(c) for c in row]
        if n < len(worse) and worse[n]:
            cells[0] = cells[0].replace("</td>", ' <span class="flag">costs more</span></td>', 1)
            out.append('<tr class="worse">' + "".join(cells) + "</tr>")
        else:
            out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def html_page(title: str, body: Sequence[str], *, lead: str = "") -> str:
    """One self-contained HTML5 page; ``lead``: its first sentence (the saving)."""
    script = [f"<script>{_SORT_JS}</script>"] if any('class="sortable"' in b for b in body) else []
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            f"<h1>{escape(title)}</h1>",
            *([f'<p class="lead">{escape(lead)}</p>'] if lead else []),
            *body,
            *script,
            "</body>",
            "</html>",
            "",
        ]
    )
