"""The README and the docs say what is true: their Python examples run, their links resolve, every
figure names a command in the repository that prints it, and the claims that code can check
(the quick start's figures, the layers, the hop counts, CI's property examples) match the code.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from filecache.cli import main

REPO = Path(__file__).parent.parent
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
LIBRARY = REPO / "docs" / "library.md"
BENCHMARKS = REPO / "docs" / "benchmarks.md"
DESIGN = REPO / "docs" / "design.md"


def python_blocks(doc: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)


def test_readme_is_short_and_has_the_example() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250
    blocks = python_blocks(README)
    assert len(blocks) == 1 and "@session.read_tool" in blocks[0]
    assert len(blocks[0].strip().splitlines()) <= 45
    assert python_blocks(LIBRARY)


@pytest.mark.parametrize("doc", [README, LIBRARY], ids=lambda d: d.name)
def test_the_python_examples_run(
    doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for block in python_blocks(doc):
        exec(compile(block, str(doc), "exec"), {"__name__": "__readme__"})
    if doc == LIBRARY:
        assert (tmp_path / ".filecache" / "cache.db").exists()


# -- links -------------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def _without_code(text: str) -> str:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found: set[str] = set()
    for line in re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S).split("\n"):
        heading = re.match(r"#{1,6} (.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            base, n = slug, 1
            while slug in found:
                slug, n = f"{base}-{n}", n + 1
            found.add(slug)
    return found


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda d: d.name)
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in LINK.findall(_without_code(doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(target)
    assert broken == [], f"{doc.name}: links that do not resolve"


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda d: d.name)
def test_install_lines_install_from_a_clone(doc: Path) -> None:
    """``filecache-agent`` is not on the package index yet: no install line fetches it there."""
    text = doc.read_text(encoding="utf-8")
    assert not re.search(r"(?:pip|pipx|uv tool) install [-\w ]*['\"]?filecache-agent", text)


def test_the_long_description_is_the_readme() -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^readme = "README.md"$', text, re.M)


# -- figures and their commands ----------------------------------------------------------------

FIGURE = re.compile(r"\d(?:[\d,.]*\d)?\s?(?:%|×|ms\b|µs\b|s\b|min\b)")
SUBCOMMAND = re.compile(r"\bfilecache (?:--?\S+ )*([a-z][a-z-]*)")
SCRIPT = re.compile(r"(?<![\w/.])((?:bench|fixtures|\.ci|tests)/[\w./-]*\w)")


def commands(text: str) -> list[str]:
    """The commands a block names: a fenced shell block's lines, or inline code that runs
    ``filecache`` or a script of the repository."""
    found = re.findall(r"```sh\n(.*?)```", text, re.S)
    for code in re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S)):
        if SUBCOMMAND.search(code) or SCRIPT.search(code) or code.startswith(("pytest", ".venv")):
            found.append(code)
    return found


def broken_commands(command: str) -> list[str]:
    """What ``command`` names that the repository does not have."""
    known = set(main.list_commands(click.Context(main)))
    missing = [f"filecache {sub}" for sub in SUBCOMMAND.findall(command) if sub not in known]
    for script in SCRIPT.findall(command):
        if not any((REPO / script).parent.glob((REPO / script).name)):
            missing.append(script)
    return missing


def blocks(doc: Path) -> list[tuple[str, str]]:
    """(section heading, block) in order: fenced blocks, tables and paragraphs."""
    out: list[tuple[str, str]] = []
    heading = ""
    parts = re.split(r"(```.*?```)", doc.read_text(encoding="utf-8"), flags=re.S)
    for part in parts:
        if part.startswith("```"):
            out.append((heading, part))
            continue
        for chunk in re.split(r"\n\s*\n", part):
            for line in chunk.strip().split("\n"):
                if line.startswith("#"):
                    heading = line
            text = "\n".join(ln for ln in chunk.strip().split("\n") if not ln.startswith("#"))
            if text.strip():
                out.append((heading, text))
    return out


@pytest.mark.parametrize("doc", [README, BENCHMARKS], ids=lambda d: d.name)
def test_every_figure_names_a_command_that_exists(doc: Path) -> None:
    """A block (paragraph, table, code block) that states a figure names the command that
    prints it, or follows one in its section; every command a block names exists."""
    unbacked, missing = [], []
    current: dict[str, bool] = {}
    for heading, text in blocks(doc):
        named = commands(text)
        for command in named:
            missing += broken_commands(command)
        if named:
            current[heading] = True
        if FIGURE.search(re.sub(r"`[^`\n]*`", "", text)) and not current.get(heading):
            unbacked.append(text[:80])
    assert missing == [], f"{doc.name} names commands the repository does not have"
    assert unbacked == [], f"{doc.name}: figures with no command before them in their section"


def test_each_row_of_the_readme_table_names_its_command() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Measured") :].split("\n## ")[0]
    rows = [r for r in section.split("\n") if r.startswith("| ") and FIGURE.search(r)]
    assert len(rows) >= 5
    for row in rows:
        assert commands(row), row


def test_the_quick_start_prints_the_readme_figures() -> None:
    text = README.read_text(encoding="utf-8")
    assert (
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && "
        ".venv/bin/filecache replay fixtures/sessions/*"
    ) in text
    assert (
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev,mcp]' && .venv/bin/pytest"
    ) in text
    row = next(r for r in text.split("\n") if "`filecache replay fixtures/sessions/*`" in r)
    prompt, billed = (float(x) for x in re.findall(r"−(\d+\.\d)%", row))
    assert f"prompt tokens −{prompt}%, billed −{billed}%" in text  # the summary line quoted
    sessions = sorted(str(p) for p in (REPO / "fixtures" / "sessions").iterdir())
    result = CliRunner().invoke(main, ["replay", *sessions, "--json"])
    assert result.exit_code == 0, result.output
    totals = json.loads(result.stdout)["totals"]
    assert (round(totals["saved_pct"], 1), round(totals["billed_saved_pct"], 1)) == (prompt, billed)
    assert totals["stale_views"] == totals["dangling_refs"] == 0


# -- claims the code can check -----------------------------------------------------------------


def _assigned(path: Path, name: str) -> object:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign):
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not found in {path}")


def test_the_design_draws_the_layers_the_layout_test_enforces() -> None:
    layers = _assigned(REPO / "tests" / "test_layout.py", "LAYERS")
    assert isinstance(layers, tuple)
    text = DESIGN.read_text(encoding="utf-8")
    drawing = text[text.index("## Layers") :].split("```")[1]
    drawn = {}
    for line in drawing.strip().split("\n"):
        number, units = re.match(r"\s*(\d+)\s+(.*)", line).groups()  # type: ignore[union-attr]
        units = re.sub(r"\(.*?\)|prune/:.*|outline/:.*|core/:.*", "", units)
        drawn[int(number)] = {u.strip().rstrip("/") for u in units.split(",") if u.strip()}
    assert [drawn[i] for i in range(len(layers))] == [set(layer) for layer in layers]


def test_the_hop_table_has_the_module_counts_the_layout_test_holds() -> None:
    hops_max = _assigned(REPO / "tests" / "test_layout.py", "HOPS_MAX")
    text = BENCHMARKS.read_text(encoding="utf-8")
    section = text[text.index("## Hops") :].split("\n## ")[0]
    rows = re.findall(r"^\| ([a-z() ]+) \| (\d+) \| [\d,]+ \| (\d+) \|$", section, re.M)
    assert {op: int(modules) for op, modules, _ in rows} == hops_max
    most = _assigned(REPO / "tests" / "test_layout.py", "REENTRIES_MAX")
    assert isinstance(most, dict)
    assert all(int(found) <= most[op] for op, _, found in rows)


def test_the_docs_state_cis_property_examples() -> None:
    ci = re.search(r"FILECACHE_PROPERTY_EXAMPLES:-(\d+)", (REPO / ".ci" / "run").read_text())
    assert ci is not None
    count = f"{int(ci.group(1)):,}"
    assert f"{count} examples per test in CI" in DESIGN.read_text(encoding="utf-8")
    assert f"{count} property examples" in (REPO / "tests" / "README.md").read_text()
