"""The package layout: the layers of docs/design.md's Layers section, and no import cycle among
filecache's modules (``adapters/`` included).

Every import counts: ``import`` / ``from ... import`` anywhere in a file (at module level, under
``if TYPE_CHECKING:``, inside functions: a lazy import is still a dependency), and a module named
by a string: the literal argument of ``importlib.import_module`` / ``__import__`` /
``importlib.util.find_spec`` (a relative one resolved against the module's own package), and a
string in a dict, list, tuple or set literal that is exactly one of our modules' dotted names (a
lookup table of modules to import later, as ``prune/transcript.py`` once held). ``from pkg
import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``. An import whose
module is computed (``import_module(f".{x}")``) is refused unless ``DYNAMIC`` lists it with the
check that covers it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
SOURCES = {"filecache": REPO / "filecache", "filecache.adapters": REPO / "adapters"}

# The layers, lowest first: a module may import the modules of its own unit (a subpackage, or a
# top-level module on its own) and of any lower layer, never of its own layer or a higher one.
# docs/design.md's Layers section draws the same list (tests/test_readme.py checks it).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "extras", "cli_errors"),
    ("core", "settings", "report_html"),
    ("fsio", "outline"),
    ("watch",),
    ("store",),
    ("ledger", "turns", "secrecy"),
    ("prune", "sources"),
    ("tool_shape", "figures", "engine"),
    ("conversations",),
    ("outside", "decorators"),
    ("session",),
    ("cache", "tools", "shell"),
    ("stats",),
    ("gateway",),
    ("replay",),
    ("importers",),
    ("filecache", "cli_reports", "cli_read"),  # "filecache": the package's __init__
    ("adapters",),  # adapters/, installed as filecache.adapters (hosts/ included)
    ("cli",),
    ("entry",),  # the console script: --version/--help without click, the rest to cli
    ("__main__",),
)

# Upward edges still allowed, each with the reason; nothing may be added here without one.
# (None left: issue 22 moved the tool decorators below the session.)
UPWARD: set[tuple[str, str]] = set()

# The pure packages: never the adapters, the CLI or the session (issue 22's acceptance).
PURE = ("core", "prune", "outline")
NOT_FROM_PURE = ("adapters", "cli", "cli_reports", "session", "cache")

# Imports whose module is computed, and the test that checks what they can reach.
DYNAMIC = {
    "filecache": "test_the_lazy_names_of_filecache_are_static_imports_too",
    "filecache.adapters.hosts.registry": "test_the_host_registry_imports_only_the_specs_modules",
}

_IMPORTERS = {"import_module", "__import__", "find_spec"}


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


def _resolve(name: str, package: str, level: int) -> str:
    """A relative module name (``level`` leading dots) against ``package``."""
    base = package.split(".")
    base = base[: len(base) - (level - 1)]
    rest = name[level:]
    return ".".join([*base, *([rest] if rest else [])])


def _string_import(node: ast.Call, package: str) -> str | None | bool:
    """The module a call imports by string; None: not such a call; False: a computed name."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in _IMPORTERS or not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return False
    target = first.value
    level = len(target) - len(target.lstrip("."))
    return _resolve(target, package, level) if level else target


def imports_of(name: str, path: Path, known: dict[str, Path]) -> tuple[set[str], bool]:
    """(the modules of ``known`` that module ``name`` imports, whether it computes a name)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    edges: set[str] = set()
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [_known(alias.name, known) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = (
                _resolve("." * node.level + (node.module or ""), package, node.level)
                if node.level
                else node.module or ""
            )
            targets = [
                f"{source}.{alias.name}"
                if f"{source}.{alias.name}" in known
                else _known(source, known)
                for alias in node.names
            ]
        elif isinstance(node, ast.Call):
            found = _string_import(node, package)
            if found is False:
                dynamic = True
            targets = [_known(found, known)] if isinstance(found, str) else []
        elif isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
            items = [*node.keys, *node.values] if isinstance(node, ast.Dict) else node.elts
            targets = [
                item.value
                for item in items
                if isinstance(item, ast.Constant)
                and isinstance(item.value, str)
                and "." in item.value
                and item.value in known
            ]
        else:
            continue
        edges.update(t for t in targets if t is not None and t != name)
    return edges, dynamic


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``known`` it imports (itself excluded)."""
    return {name: imports_of(name, path, known)[0] for name, path in known.items()}


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


def unit(module: str) -> str:
    """The layer unit of one of our modules: its subpackage, or the top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every edge that goes sideways or up in ``LAYERS`` and is not in ``UPWARD``."""
    level = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    found = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = unit(source), unit(target)
            if a == b or (source, target) in UPWARD:
                continue
            if a not in level or b not in level:
                found.append(f"{source} -> {target}: {a if a not in level else b} has no layer")
            elif level[b] >= level[a]:
                found.append(f"{source} -> {target} (layer {level[a]} imports layer {level[b]})")
    return found


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(modules(SOURCES))
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_every_import_goes_down_the_layers() -> None:
    known = modules(SOURCES)
    assert {unit(m) for m in known} - {u for layer in LAYERS for u in layer} == set()
    assert layer_violations(import_graph(known)) == []


def test_the_pure_packages_import_no_adapter_cli_or_session() -> None:
    graph = import_graph(modules(SOURCES))
    found = [
        f"{source} -> {target}"
        for source, targets in sorted(graph.items())
        if unit(source) in PURE
        for target in sorted(targets)
        if unit(target) in NOT_FROM_PURE
    ]
    assert found == []


def test_no_module_computes_the_name_it_imports() -> None:
    known = modules(SOURCES)
    computed = {name for name, path in known.items() if imports_of(name, path, known)[1]}
    assert computed == set(DYNAMIC)


def test_the_lazy_names_of_filecache_are_static_imports_too() -> None:
    import filecache

    graph = import_graph(modules(SOURCES))
    lazy = {f"filecache.{module}" for module in filecache._MODULES.values()}
    assert lazy <= graph["filecache"]


def test_the_host_registry_imports_only_the_specs_modules() -> None:
    """``registry.host_module`` imports ``f"{__package__}.{spec.module}"``: a module of the
    hosts package (its own unit), one per spec, each a file there."""
    import ast as _ast

    from filecache.adapters.hosts.host_specs import SPECS

    known = modules(SOURCES)
    for spec in SPECS:
        assert f"filecache.adapters.hosts.{spec.module}" in known, spec.module
    source = (SOURCES["filecache.adapters"] / "hosts" / "registry.py").read_text()
    computed = [
        node for node in _ast.walk(_ast.parse(source))
        if isinstance(node, _ast.Call) and getattr(node.func, "id", "") == "import_module"
    ]  # fmt: skip
    assert [_ast.unparse(c.args[0]) for c in computed] == ["f'{__package__}.{spec(name).module}'"]


def test_the_walk_sees_every_kind_of_import() -> None:
    graph = import_graph(modules(SOURCES))
    assert len(graph) > 70
    assert "filecache.session" in graph["filecache.cache"]  # module level
    assert "filecache.watch" in graph["filecache.cache"]  # TYPE_CHECKING and lazy
    assert "filecache.store.sqlite_store" in graph["filecache.store.opening"]  # in a function
    assert "filecache.adapters.hosts.registry" in graph["filecache.cli"]  # into adapters/
    assert "filecache.adapters.mcp_compat" in graph["filecache.adapters.mcp_server"]  # relative
    assert "filecache.decorators" in graph["filecache.session"]  # lazy, in a method
    # a package imported by the codecs it holds: the edge is to its module, not to its parent
    assert "filecache.prune.codecs.base" in graph["filecache.prune.codecs.openai_chat"]
    assert "filecache.prune.codecs.langchain_messages" in graph["filecache.prune.sdk_messages"]


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


def test_a_module_named_by_a_string_is_an_edge(tmp_path: Path) -> None:
    """The cycle the old transcript -> adapters lookup hid: each way of naming a module."""
    pkg = tmp_path / "pkg"
    (pkg / "codecs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "codecs" / "__init__.py").write_text("")
    (pkg / "codecs" / "chat.py").write_text("from pkg.core import Transcript\n")
    (pkg / "core.py").write_text(
        '"""Docstrings may name pkg.codecs.chat freely."""\n'
        "import importlib\n"
        "Transcript = object\n"
        "def load():\n"
        '    return importlib.import_module("pkg.codecs.chat")\n'
    )
    known = modules({"pkg": pkg})
    assert "pkg.codecs.chat" in import_graph(known)["pkg.core"]
    assert find_cycle(import_graph(known)) == ["pkg.codecs.chat", "pkg.core", "pkg.codecs.chat"]
    for body in (
        '_TABLE = {"chat": "pkg.codecs.chat"}\n',  # a table of modules to import later
        'def load():\n    return __import__("pkg.codecs.chat")\n',
        "import importlib\ndef load():\n"
        '    return importlib.import_module(".codecs.chat", __package__)\n',
    ):
        (pkg / "core.py").write_text("Transcript = object\n" + body)
        assert import_graph(known)["pkg.core"] == {"pkg.codecs.chat"}, body
    for body in (
        '"""Names pkg.codecs.chat in its docstring only."""\n',
        'import logging\nlogging.getLogger("pkg.codecs.chat").warning("a logger name")\n',
    ):
        (pkg / "core.py").write_text(body)
        assert import_graph(known)["pkg.core"] == set(), body
    (pkg / "core.py").write_text(
        "import importlib\ndef load(x):\n    return importlib.import_module(f'pkg.{x}')\n"
    )
    assert imports_of("pkg.core", pkg / "core.py", known)[1] is True


def test_the_layer_check_refuses_an_upward_edge() -> None:
    assert layer_violations({"filecache.prune.pruner": {"filecache.cache"}}) == [
        "filecache.prune.pruner -> filecache.cache (layer 6 imports layer 11)"
    ]
    assert layer_violations({"filecache.prune.pruner": {"filecache.ledger"}}) == []
    assert layer_violations({"filecache.ledger": {"filecache.turns"}}) == [
        "filecache.ledger -> filecache.turns (layer 5 imports layer 5)"
    ]
    assert layer_violations({"filecache.newmod": {"filecache.errors"}}) == [
        "filecache.newmod -> filecache.errors: newmod has no layer"
    ]


# The hops of issue 22 (docs/design.md, "Hops"; the counts: docs/benchmarks.md): how many
# modules of ours one warm operation runs code in, as ``bench/bench_hops.py`` counts them
# (calls, not times: the same on any machine). A ratchet: a change that adds a module to a path
# fails here; one that removes one lowers the number here.
HOPS_MAX = {"read (content)": 13, "read (unchanged)": 13, "edit": 14, "prune": 21}

# Re-entries (issue 32): a module called back while it is still on the stack, as (the module
# re-entered, the module that called back into it). None on a read or an edit; on a prune only
# these named injections.
REENTRIES_ALLOWED: dict[tuple[str, str], str] = {
    ("filecache.store.sql_store", "filecache.store.sqlite_store"): (
        "the SQL template method: _transaction(work) runs SqlStore's work in the dialect's "
        "transaction (PostgreSQL retries it)"
    ),
    ("filecache.prune.codecs.base", "filecache.prune.codecs.openai_chat"): (
        "the codec template: a codec renders its messages with base's render_replaced"
    ),
}
REENTRIES_MAX = {"read (content)": 0, "read (unchanged)": 0, "edit": 0, "prune": 2}


def test_a_warm_operation_runs_code_in_few_modules(tmp_path: Path, bench_hops: ModuleType) -> None:
    root = tmp_path / "root"
    root.mkdir()
    traces = bench_hops.run(root.resolve(), tmp_path / "store.db")
    assert set(traces) == set(HOPS_MAX)
    over = {op: sorted(t.calls) for op, t in traces.items() if len(t.calls) > HOPS_MAX[op]}
    assert not over, f"more modules than HOPS_MAX allows: {over}"


def test_a_warm_operation_never_calls_back_into_a_module_it_is_inside(
    tmp_path: Path, bench_hops: ModuleType
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    traces = bench_hops.run(root.resolve(), tmp_path / "store.db")
    for op, trace in traces.items():
        found = set(trace.reentries)
        if REENTRIES_MAX[op] == 0:
            assert found == set(), f"{op}: re-entries {sorted(found)}"
        else:
            assert found <= set(REENTRIES_ALLOWED), (
                f"{op}: {sorted(found - set(REENTRIES_ALLOWED))}"
            )
            assert len(found) <= REENTRIES_MAX[op]


def test_the_reentry_count_sees_a_callback(tmp_path: Path, bench_hops: ModuleType) -> None:
    """The counter itself: a module of ours that hands another a function of its own, which
    the other calls, is re-entered (the SQL template method: ``SqlStore.delete_session`` runs
    its work in ``SqliteStore._transaction``); calls within one module are not."""
    from filecache.core.text import split_lines
    from filecache.store.sqlite_store import SqliteStore

    assert bench_hops.trace(lambda: split_lines("a\nb\n")).reentries == {}
    with SqliteStore(tmp_path / "store.db") as store:
        store.touch_session("s")
        found = bench_hops.trace(lambda: store.delete_session("s"))
    assert ("filecache.store.sql_store", "filecache.store.sqlite_store") in found.reentries


def test_filecache_keeps_a_small_surface() -> None:
    """``FileCache`` builds the engine and its sessions; its parts are reached through
    ``cache.engine`` (issue 32): no one-line forwarders."""
    from filecache import FileCache

    public = [n for n in dir(FileCache) if not n.startswith("_")]
    assert len(public) <= 12, public
    assert {"session", "conversation", "watch", "recover", "close"} <= set(public)
    assert {"read_tool", "edit_tool", "write_tool"} <= set(public)


def test_no_runtime_checkable_protocol() -> None:
    """Dispatch is by a resolver or a concrete class, never ``isinstance`` on a protocol."""
    found = [
        str(path.relative_to(REPO))
        for folder in SOURCES.values()
        for path in sorted(folder.rglob("*.py"))
        if "runtime_checkable" in path.read_text(encoding="utf-8")
    ]
    assert found == []
