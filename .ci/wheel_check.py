"""Checks of the built wheel, for .ci/run (standard library only).

    python .ci/wheel_check.py contents DIST.whl   every module and data file of filecache/ and
                                                  adapters/ is in the wheel, where it imports from
    python .ci/wheel_check.py imports             (in a clean venv with the wheel, no extras) every
                                                  installed module imports, or needs an extra
    python .ci/wheel_check.py replay N OUT.json   `filecache replay --json` replayed N sessions
                                                  with 0 stale views and 0 dangling refs

An editable install hides a package missing from the wheel (filecache.importers once was); the
second check also finds a third-party import of the core that no dependency declares (an adapter
may need an extra: tests/test_packaging.py checks that every import is declared somewhere).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = ("py.typed", ".scm", ".js")  # .js: the opencode plugin


def expected() -> set[str]:
    """The paths inside the wheel that the source tree says must be there."""
    out: set[str] = set()
    for folder, prefix in (("filecache", "filecache"), ("adapters", "filecache/adapters")):
        base = REPO / folder
        for path in base.rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix == ".py" or path.name.endswith(DATA):
                out.add(f"{prefix}/{path.relative_to(base).as_posix()}")
    return out


def contents(wheel: str) -> int:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(expected() - names)
    for name in missing:
        print(f"wheel_check: {name} is not in {Path(wheel).name}", file=sys.stderr)
    if not missing:
        print(f"wheel_check: {Path(wheel).name} holds all {len(expected())} source files")
    return 1 if missing else 0


# Codecs of a framework's own message objects (pruning LangChain or pydantic-ai histories):
# they import that framework, which the [frameworks] extra brings.
FRAMEWORK_CODECS = {
    "filecache.prune.codecs.langchain_messages",
    "filecache.prune.codecs.pydantic_ai_messages",
}


def imports() -> int:
    import filecache

    failed = 0
    needs_extra: list[str] = []
    found = pkgutil.walk_packages(filecache.__path__, "filecache.")
    modules = [m.name for m in found if not m.name.endswith(".__main__")]  # that one runs the CLI
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            # An adapter, or the PostgreSQL store, may need an extra (tests/test_packaging.py
            # checks that one declares it); the core may not, and a filecache module missing
            # from the wheel never may.
            optional = (
                name.startswith("filecache.adapters.")
                or (name.startswith("filecache.store.pg_") and missing.startswith("psycopg"))
                or name in FRAMEWORK_CODECS  # another framework's own message objects
            )  # the PostgreSQL store needs the [postgres] extra
            if optional and not missing.startswith("filecache"):
                needs_extra.append(f"{name} ({missing.split('.')[0]})")
                continue
            print(f"wheel_check: import {name}: {exc}", file=sys.stderr)
            failed += 1
    print(
        f"wheel_check: {len(modules) - failed - len(needs_extra)} modules import, "
        f"{len(needs_extra)} need an extra: {', '.join(needs_extra) or '-'}"
    )
    return 1 if failed else 0


def replay(sessions: int, report: str) -> int:
    import json

    totals = json.loads(Path(report).read_text(encoding="utf-8"))["totals"]
    seen = (totals["sessions"], totals["stale_views"], totals["dangling_refs"])
    print(f"wheel_check: replay: {seen[0]} sessions, {seen[1]} stale, {seen[2]} dangling")
    return 0 if seen == (sessions, 0, 0) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["replay"] and len(sys.argv) == 4:
        sys.exit(replay(int(sys.argv[2]), sys.argv[3]))
    if sys.argv[1:2] == ["contents"] and len(sys.argv) == 3:
        sys.exit(contents(sys.argv[2]))
    if sys.argv[1:] == ["imports"]:
        sys.exit(imports())
    sys.exit(__doc__)
