"""Checks that a generated HTML page renders: well-formed HTML, SVGs that parse as XML, and a
headless Chromium screenshot when ``/usr/bin/chromium`` is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

VOID = {"meta", "br", "hr", "img", "input", "link", "source", "wbr", "col", "area", "base"}
SVG_SELF_CLOSING = {"line", "polyline", "path", "rect", "circle"}
CHROMIUM = "/usr/bin/chromium"


class _Balance(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()


def check_page(page: str, tmp_path: Path) -> list[ET.Element]:
    """Assert ``page`` is a balanced, self-contained HTML document; return its parsed SVGs."""
    assert page.startswith("<!DOCTYPE html>")
    parser = _Balance()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.stack == [], (parser.errors, parser.stack)
    # self-contained: inline scripts only (no src), nothing fetched
    assert not re.search(r"<script[^>]*\bsrc=", page, flags=re.I)
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page and "<link" not in page.lower()
    svgs = [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", page, flags=re.S)]
    for svg in svgs:
        assert svg.tag == "{http://www.w3.org/2000/svg}svg"
        assert float(svg.get("width", "0")) > 0 and float(svg.get("height", "0")) > 0
    if Path(CHROMIUM).exists() and shutil.which(CHROMIUM):
        screenshot(page, tmp_path)
    return svgs


def screenshot(page: str, tmp_path: Path) -> Path:
    """Render ``page`` in headless Chromium; assert a non-trivial PNG came out."""
    html = tmp_path / "page.html"
    html.write_text(page, encoding="utf-8")
    png = tmp_path / "page.png"
    subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--screenshot={png}", "--window-size=1000,900", html.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert png.exists(), "chromium wrote no screenshot"
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000
    return png
