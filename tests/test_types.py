"""mypy sees across the adapters' seams: ``filecache.adapters.*`` is checked, not ``Any``.

The editable install maps the folder ``adapters/`` to the package ``filecache.adapters``
(``package-dir`` in pyproject.toml, ``setup.py``), an import hook mypy does not run. mypy follows
the same mapping through ``typecheck/filecache/adapters``, a link to ``adapters/`` below the
``mypy_path`` entry ``typecheck`` ([tool.mypy] in pyproject.toml, ``explicit_package_bases``): a
call from one adapter into another, or from the CLI into an adapter, is checked against the real
signature. The slow test proves it on a copy of the sources with wrong calls written into them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
LINK = REPO / "typecheck" / "filecache" / "adapters"
ADAPTERS = "typecheck/filecache/adapters"  # how mypy names the adapters' files

# Wrong calls across a seam, each where a right one stands: (file, right, wrong, what mypy says).
MUTANTS = [
    (  # an adapter calls another's method through a context manager (HostSession.open)
        "adapters/hosts/codex.py",
        "session.keep_only(rollout.present)\n",
        "session.keep_only(42)\n",
        'Argument 1 to "keep_only" of "HostSession" has incompatible type "int"',
    ),
    (  # the same through claude_code's own context manager (_Opened.__enter__)
        "adapters/hosts/claude_code.py",
        "host.keep_only(_held(event, site, among=host.relied_on()).ids)\n        return None\n",
        "host.keep_only(42)\n        return None\n",
        'Argument 1 to "keep_only" of "HostSession" has incompatible type "int"',
    ),
    (  # an adapter imports a name another adapter does not define
        "adapters/hosts/registry.py",
        "from filecache.adapters.hosts.host_specs import HOST_NAMES, spec\n",
        "from filecache.adapters.hosts.host_specs import HOST_NAMES, spec, specs\n",
        'Module "filecache.adapters.hosts.host_specs" has no attribute "specs"',
    ),
    (  # a relative import between adapters
        "adapters/mcp_middleware.py",
        "install, replace_params, wire_result\n",
        "install, replace_params, wire_result, wire_results\n",
        'Module "filecache.adapters.mcp_compat" has no attribute "wire_results"',
    ),
    (  # an adapter imports a name the package does not export (its lazy __getattr__ is
        # hidden from mypy: always_true = ["_TYPE_CHECKING"])
        "adapters/mcp_middleware.py",
        "from filecache import FileCache, Session\n",
        "from filecache import FileCache, Session, Sesion\n",
        'Module "filecache" has no attribute "Sesion"',
    ),
    (  # the CLI (filecache/) calls into an adapter
        "filecache/cli.py",
        "server.check_bind(host, token)\n",
        "server.check_bind(host, 42)\n",
        'Argument 2 to "check_bind" has incompatible type "int"',
    ),
]


def _mypy_config() -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    return config


def test_mypy_follows_the_installed_mapping() -> None:
    """The link names the folder the install maps, and mypy checks the package through it."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    mapped = pyproject["tool"]["setuptools"]["package-dir"]["filecache.adapters"]
    assert LINK.is_symlink() and LINK.resolve() == (REPO / mapped).resolve()
    assert os.readlink(LINK) == "../../adapters"  # relative: it holds in any clone
    config = _mypy_config()
    assert config["strict"] is True and config["explicit_package_bases"] is True
    assert config["mypy_path"] == "typecheck"
    assert config["files"] == ["filecache", ADAPTERS]


def test_no_import_of_the_project_is_ignored() -> None:
    """No override turns the project's own modules into ``Any`` (issue 32)."""
    for override in _mypy_config().get("overrides", []):
        modules = override["module"]
        for module in [modules] if isinstance(modules, str) else modules:
            assert module.split(".")[0] != "filecache", override


def _copy_sources(into: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("filecache", "adapters"):
        shutil.copytree(REPO / folder, into / folder, ignore=ignore)
    shutil.copytree(REPO / "typecheck", into / "typecheck", symlinks=True)
    shutil.copy(REPO / "pyproject.toml", into / "pyproject.toml")


def _mutate(root: Path, file: str, right: str, wrong: str) -> int:
    """Replace the one ``right`` in ``file`` by ``wrong``; the line number of the change."""
    path = root / file
    text = path.read_text()
    assert text.count(right) == 1, (file, right)
    path.write_text(text.replace(right, wrong))
    return text[: text.index(right)].count("\n") + 1


def _errors(root: Path, cache: Path) -> tuple[list[tuple[str, int, str]], str]:
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--no-error-summary"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.findall(r"^(\S+?):(\d+): error: (.*)$", run.stdout, re.MULTILINE)
    return [(f, int(n), message) for f, n, message in found], run.stdout + run.stderr


def _as_mypy_names(file: str) -> str:
    return file.replace("adapters/", f"{ADAPTERS}/", 1) if file.startswith("adapters/") else file


@pytest.mark.slow  # one mypy run over every source, cold: about 30 s of CPU
def test_wrong_calls_across_the_seams_fail_the_type_check(tmp_path: Path) -> None:
    """mypy --strict on a copy of the sources reports exactly the wrong calls written into it:
    each one, and nothing else (the rest of the tree passes)."""
    root = tmp_path / "tree"
    _copy_sources(root)
    expected = []
    for file, right, wrong, message in MUTANTS:
        line = _mutate(root, file, right, wrong)
        expected.append((_as_mypy_names(file), line, message))
    errors, output = _errors(root, tmp_path / "cache")
    assert len(errors) == len(expected), output
    for (file, line, message), (got_file, got_line, got) in zip(
        sorted(expected), sorted(errors), strict=True
    ):
        assert (got_file, got_line) == (file, line), output
        assert got.startswith(message), output
