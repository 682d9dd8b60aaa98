"""What the package declares: every third-party import has a dependency (or an extra), and the
distribution's name is the one the install lines use. (.ci/run checks the built wheel itself.)"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from filecache.adapters.mcp_sessions import DISTRIBUTION, MCP_INSTALL_HINT

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> set[str]:
    project = PYPROJECT["project"]
    names = {_name(r) for r in project["dependencies"]}
    for requirements in project["optional-dependencies"].values():
        names |= {_name(r) for r in requirements}
    return names


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> the files of filecache/ and adapters/ that import it."""
    found: dict[str, set[str]] = {}
    for folder in ("filecache", "adapters"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top not in sys.stdlib_module_names and top != "filecache":
                        found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


# Import names that differ from the distribution's, for a package this environment may lack
# (an extra's). Installed packages are looked up in their metadata instead.
DISTRIBUTIONS = {
    "toktok": "toktok-rs",
    "agents": "openai-agents",
    "minisweagent": "mini-swe-agent",
    "yaml": "pyyaml",
}


def test_every_third_party_import_is_declared() -> None:
    declared = _declared()
    installed = importlib.metadata.packages_distributions()
    undeclared = {}
    for module, files in _third_party_imports().items():
        dists = {d.lower().replace("_", "-") for d in installed.get(module, [])}
        guess = DISTRIBUTIONS.get(module, module.lower().replace("_", "-"))
        if not dists & declared and not any(d.startswith(guess) for d in declared):
            undeclared[module] = sorted(files)
    assert undeclared == {}, "declare these in pyproject.toml (dependencies or an extra)"
    assert {"anyio", "pydantic", "mcp"} <= set(_third_party_imports())  # the check sees them


def test_the_distribution_name_is_used_everywhere() -> None:
    assert PYPROJECT["project"]["name"] == DISTRIBUTION == "filecache-agent"
    assert f"pip install '{DISTRIBUTION}[mcp]'" in MCP_INSTALL_HINT
    assert PYPROJECT["project"]["scripts"] == {"filecache": "filecache.entry:main"}
    mcp = PYPROJECT["project"]["optional-dependencies"]["mcp"]
    assert any(r.startswith("mcp>=1.") and r.endswith("<3") for r in mcp), mcp
    for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        text = doc.read_text(encoding="utf-8")
        # an install line names the distribution: `pip install filecache` is someone else's
        assert not re.search(r"pip install[^\n`]*['\" ]filecache(\[|['\" `]|$)", text), doc.name
