"""The HTML reports in a real browser: Debian's Chromium, driven by playwright.

Each page (replay, replay --compare, stats) is opened at an 800 px viewport: its first
sentence states the saving, the page does not scroll sideways, and a click on a table header
sorts the table (again: the other way), with the regressions first and marked before any
click. Without ``/usr/bin/chromium`` the test is skipped, under CI it fails (.ci/run installs
it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from needs import need, need_program

from filecache.replay.replay import replay_session
from filecache.replay.replay_compare import compare, comparison_html
from filecache.replay.replay_metrics import combine
from filecache.replay.replay_report import replay_html
from filecache.stats import collect_stats, stats_html
from filecache.store.sqlite_store import SqliteStore

SESSIONS = Path(__file__).parent.parent / "fixtures" / "sessions"
FIXTURE = SESSIONS / "lm32b__pytest-dev__pytest-7571"
SCRIPTED = SESSIONS / "scripted__polyglot-peek"
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
WIDTH = 800


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    need_program(CHROMIUM, "apt-get install chromium")
    sync_api = need("playwright.sync_api", "pip install -e '.[dev]'")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three pages, written as a user's --html would write them: the replay of two
    sessions (one made a regression), a comparison, and stats over a store replays wrote."""
    out = tmp_path_factory.mktemp("pages")
    store = out / "cache.db"
    good = replay_session(FIXTURE, store=store)
    pruned = replay_session(SCRIPTED, store=store, window=16_000)
    worse = dataclasses.replace(
        pruned, billed=dataclasses.replace(pruned.billed, filecache=10**9)
    )  # costs more than recorded, whatever the code does
    compared = compare(
        [SCRIPTED], replay=replay_session, window=16_000,
        peers=("none", "anthropic-clear-tool-uses"), presets=("cost",),
    )  # fmt: skip
    clear = "anthropic-clear-tool-uses"
    costly = dataclasses.replace(compared.totals[clear], billed=1e9)  # a regression
    compared = dataclasses.replace(
        compared,
        totals={**compared.totals, clear: costly},
        sessions=tuple((n, {**runs, clear: costly}) for n, runs in compared.sessions),
    )
    written = {
        "replay": replay_html([good, worse], combine([good, worse])),
        "compare": comparison_html(compared),
    }
    with SqliteStore(store) as opened:
        written["stats"] = stats_html(collect_stats(opened))
    paths = {}
    for name, text in written.items():
        paths[name] = out / f"{name}.html"
        paths[name].write_text(text, encoding="utf-8")
    return paths


def _column(page: Any, table: Any, col: int) -> list[str]:
    return page.evaluate(
        "([t, c]) => Array.from(t.tBodies[0].rows, r => r.cells[c].textContent.trim())",
        [table, col],
    )


def _number(text: str) -> float:
    cleaned = text.replace("\u2212", "-").replace(",", "").replace("$", "").replace("%", "")
    return float(cleaned.split()[0])


@pytest.mark.parametrize("name", ["replay", "compare", "stats"])
def test_a_page_opens_with_its_saving_sorts_and_fits_800_px(
    browser: Any, pages: dict[str, Path], name: str
) -> None:
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    try:
        page.goto(pages[name].as_uri())
        # the first thing after the title: one sentence with the saving, in tokens and money
        first = page.evaluate("document.querySelector('h1').nextElementSibling.outerHTML")
        assert first.startswith('<p class="lead">')
        lead = page.locator("p.lead").inner_text()
        assert "saved" in lead and "billed" in lead and "$" in lead and "prices" in lead, lead
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
        table = page.locator("table.sortable").first.element_handle()
        rows = page.evaluate("t => t.tBodies[0].rows.length", table)
        if name != "stats":  # replay and compare: the regression comes first, marked in words
            marked = page.evaluate("t => t.tBodies[0].rows[0].className", table)
            first_cell = _column(page, table, 0)[0]
            assert marked == "worse" and "costs more" in first_cell
        assert rows >= 2
        headers = page.evaluate(
            "t => Array.from(t.tHead.rows[0].cells, c => c.textContent.trim())", table
        )
        # a numeric column: the first one whose every cell holds a number
        col = next(
            c for c in range(1, len(headers))
            if all(_is_number(v) for v in _column(page, table, c))
        )  # fmt: skip
        header = page.locator("table.sortable").first.locator("thead tr").first.locator("th")
        header.nth(col).click()
        up = [_number(v) for v in _column(page, table, col)]
        assert up == sorted(up) and rows == len(up)
        header.nth(col).click()
        down = [_number(v) for v in _column(page, table, col)]
        assert down == sorted(down, reverse=True)
        assert header.nth(col).get_attribute("aria-sort") == "descending"
        header.nth(0).click()  # by name: text order
        names = _column(page, table, 0)
        assert names == sorted(names, key=str.lower)
        # the totals row (replay, stats) stays on top of every order
        pinned = page.evaluate("t => t.tHead.rows.length", table)
        assert pinned == (1 if name == "compare" else 2)
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    finally:
        page.close()


def _is_number(text: str) -> bool:
    try:
        _number(text)
    except (ValueError, IndexError):
        return False
    return True
