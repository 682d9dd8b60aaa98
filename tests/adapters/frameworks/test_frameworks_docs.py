"""docs/frameworks.md's examples run as they are (offline: each uses its framework's scripted
model), in order, in a fresh directory; an example whose framework is not installed is skipped
(under CI: fails)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from needs import need

DOC = Path(__file__).parents[3] / "docs" / "frameworks.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
FRAMEWORKS = ("pydantic_ai", "agents", "langchain_core", "smolagents")


def needs(block: str) -> str | None:
    for name in FRAMEWORKS:
        if re.search(rf"^from {name}[. ]", block, re.M):
            return name
    return None


def test_the_doc_has_an_example_per_framework() -> None:
    assert [needs(b) for b in BLOCKS] == [*FRAMEWORKS, None]
    assert "filecache.adapters.mini_swe_agent" in BLOCKS[-1]


@pytest.mark.frameworks
@pytest.mark.filterwarnings("ignore:Function '.*' has decorators other than @tool")
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = BLOCKS[index]
    framework = needs(block)
    if framework is not None:
        need(framework)  # a skip, or a failure under CI
    monkeypatch.chdir(tmp_path)
    exec(compile(block, f"{DOC}#example{index}", "exec"), {"__name__": "__doc_example__"})
