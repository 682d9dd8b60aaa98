"""Checks of the built wheel, for .ci/run (standard library only).

    python .ci/wheel_check.py contents DIST.whl   every module and data file of filecache/ and
                                                  adapters/ is in the wheel, where it imports from
    python .ci/wheel_check.py imports             (in a clean venv with the wheel, no extras) every
                                                  installed module imports, or needs an extra
    python .ci/wheel_check.py replay N OUT.json   `filecache replay --json` replayed N sessions
                                                  with 0 stale views and 0 dangling refs

An editable install hides a package missing from the wheel (filecache.importers once was); the
second check also finds a third-party import that no dependency declares.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import re
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DISTRIBUTION = "filecache-agent"
DATA = ("py.typed", ".scm")


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


def _extra_modules() -> set[str]:
    """Import-style names of every requirement that only an extra brings in."""
    out: set[str] = set()
    for requirement in importlib.metadata.requires(DISTRIBUTION) or ():
        if "extra ==" in requirement:
            name = re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]
            out.add(name.lower().replace("-", "_"))
    return out


def imports() -> int:
    import filecache

    extras = _extra_modules()
    failed = 0
    needs_extra: list[str] = []
    found = pkgutil.walk_packages(filecache.__path__, "filecache.")
    modules = [m.name for m in found if not m.name.endswith(".__main__")]  # that one runs the CLI
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            if missing in extras or any(e.startswith(missing) for e in extras):
                needs_extra.append(f"{name} ({missing})")
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
