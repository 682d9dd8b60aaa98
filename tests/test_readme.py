"""The README's Python examples run, in order, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_has_the_examples() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 2
    assert "@session.read_tool" in blocks[0]
    assert len(blocks[0].strip().splitlines()) <= 45


def test_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), {"__name__": "__readme__"})
    assert (tmp_path / ".filecache" / "cache.db").exists()
