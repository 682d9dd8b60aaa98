"""The package layout: no import cycle among filecache's modules (``adapters/`` included).

Every ``import`` / ``from ... import`` anywhere in a file counts: at module level, under ``if
TYPE_CHECKING:``, inside functions (a lazy import is still a dependency). ``from pkg import
name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = {"filecache": REPO / "filecache", "filecache.adapters": REPO / "adapters"}


def modules(sources: dict[str, Path]) -> dict[str, Path]:
    """Every module's dotted name -> its file, for each (package name, folder)."""
    found: dict[str, Path] = {}
    for package, folder in sources.items():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _known(name: str, known: dict[str, Path]) -> str | None:
    """``name`` or its nearest enclosing module that is ours."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``known`` it imports (itself excluded)."""
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [_known(alias.name, known) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                targets = [
                    f"{source}.{alias.name}"
                    if f"{source}.{alias.name}" in known
                    else _known(source, known)
                    for alias in node.names
                ]
            else:
                continue
            edges.update(t for t in targets if t is not None and t != name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(modules(SOURCES))
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_walk_sees_every_kind_of_import() -> None:
    graph = import_graph(modules(SOURCES))
    assert len(graph) > 70
    assert "filecache.session" in graph["filecache.cache"]  # module level
    assert "filecache.outline.outline" in graph["filecache.cache"]  # TYPE_CHECKING and lazy
    assert "filecache.store.sqlite_store" in graph["filecache.store.opening"]  # in a function
    assert "filecache.adapters.decorators" in graph["filecache.session"]  # into adapters/
    assert "filecache.adapters.tool_shape" in graph["filecache.adapters.decorators"]  # relative


def test_a_cycle_through_type_checking_and_a_lazy_import_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import b\n"
    )
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import x\n")
    (pkg / "c.py").write_text("import pkg.a\nx = 1\n")
    graph = import_graph(modules({"pkg": pkg}))
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (pkg / "c.py").write_text("x = 1\n")
    assert find_cycle(import_graph(modules({"pkg": pkg}))) is None
