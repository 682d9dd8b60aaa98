"""docs/mcp.md's examples of the frameworks' MCP clients run as they are (offline, scripted
models), each in a fresh directory, starting ``filecache serve`` by its console script.

An example whose client is not installed is skipped (under CI: fails); one whose client needs the
other ``mcp`` major version is skipped: CI runs the 1.x ones in its ``mcp1`` step."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from needs import need

DOC = Path(__file__).parents[3] / "docs" / "mcp.md"
SECTION = DOC.read_text(encoding="utf-8").split("## From an agent framework's MCP client\n")[1]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION.split("\n## ")[0], re.S)
# the framework an example imports -> (the module its client needs, the mcp major it needs)
CLIENTS = {
    "pydantic_ai": ("pydantic_ai.mcp", None),
    "agents": ("agents.mcp", None),
    "smolagents": ("mcpadapt.smolagents_adapter", 1),
    "langchain_mcp_adapters": ("langchain_mcp_adapters.client", 1),
}


def client_of(block: str) -> str:
    (name,) = [n for n in CLIENTS if re.search(rf"^from {n}[. ]", block, re.M)]
    return name


def test_the_doc_has_an_example_per_client() -> None:
    assert [client_of(b) for b in BLOCKS] == list(CLIENTS)


@pytest.mark.frameworks
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = BLOCKS[index]
    module, mcp_major = CLIENTS[client_of(block)]
    need(module, mcp_major=mcp_major)
    monkeypatch.chdir(tmp_path)
    # `filecache` on PATH: this environment's console script
    monkeypatch.setenv(
        "PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    )
    exec(compile(block, f"{DOC}#client-example{index}", "exec"), {"__name__": "__doc_example__"})
