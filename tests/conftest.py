"""Shared fixtures: a temp tree, caches over it (in memory and SQLite), a CLI runner, GNU patch;
the system-test markers (tests/README.md) and hypothesis' profile (no deadline: no test times the
machine)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from filecache import FileCache

# The tests are laid out by the package they test (tests/core/, tests/store/, ...); they import
# the shared helpers here (needs, pg_server, ...) and each other (``from test_invariant import
# ...``) by name: every folder that holds test modules is on sys.path, whichever runs first.
for _folder in sorted({p.parent for p in Path(__file__).parent.rglob("test_*.py")}, reverse=True):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

pytest_plugins = ["pg_server"]  # the PostgreSQL fixtures: pg_server, pg_url, pg_cluster

try:  # the [dev] extra's; .ci/run's mcp1 step runs the MCP tests without it
    from hypothesis import HealthCheck, settings
except ImportError:
    pass
else:
    # Hypothesis' default deadline (200 ms an example) and its too-slow health check time the
    # machine: under load they fail a correct test. Examples are bounded by count instead.
    settings.register_profile(
        "filecache", deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile("filecache")

SYSTEM = ("pg", "hosts", "frameworks", "soak")
"""The system-test markers; each implies ``slow`` (deselected by the default ``pytest``)."""
PG_FIXTURES = {"pg_server", "pg_url", "pg_cluster"}


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses a PostgreSQL fixture is ``pg``; a system test is ``slow``."""
    for item in items:
        if PG_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.pg)
        if any(item.get_closest_marker(name) for name in SYSTEM):
            item.add_marker(pytest.mark.slow)


NOTES = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 61))
"""60 lines: large enough that a FileRef or a one-line diff is clearly smaller than the content."""


@pytest.fixture(autouse=True)
def _no_filecache_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Tests do not see the developer's ``FILECACHE_*`` settings (session, store, limits), nor
    their keys: the run's own key file and config folder, under the run's temp folder
    (subprocesses and servers the tests start inherit them)."""
    for name in [n for n in os.environ if n.startswith("FILECACHE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "config"))


@pytest.fixture(scope="session")
def bench_hops() -> ModuleType:
    """``bench/bench_hops.py`` as a module: what counts the modules an operation runs code in
    (``hops``, ``run``) for ``tests/test_layout.py`` and the pruning pass's own test."""
    spec = importlib.util.spec_from_file_location(
        "bench_hops", Path(__file__).parent.parent / "bench" / "bench_hops.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A temp tree: ``notes.txt`` (60 lines), ``src/app.py``, ``empty.txt``."""
    tree = tmp_path / "root"
    (tree / "src").mkdir(parents=True)
    (tree / "notes.txt").write_text(NOTES, encoding="utf-8")
    (tree / "src" / "app.py").write_text("def main():\n    return 1\n", encoding="utf-8")
    (tree / "empty.txt").write_bytes(b"")
    return tree


@pytest.fixture
def notes() -> str:
    """The text of ``notes.txt`` in the ``root`` tree."""
    return NOTES


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the root (not inside it), holding ``secret.txt``."""
    there = tmp_path / "outside"
    there.mkdir()
    (there / "secret.txt").write_text("outside the root\n", encoding="utf-8")
    return there


@pytest.fixture
def cache(root: Path) -> Iterator[FileCache]:
    """A ``FileCache`` over ``root`` with an in-memory store, closed after the test."""
    with FileCache(root, store=":memory:") as fc:
        yield fc


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A SQLite store path outside the root (its folder does not exist yet)."""
    return tmp_path / "store" / "cache.db"


@pytest.fixture
def sqlite_cache(root: Path, store_path: Path) -> Iterator[FileCache]:
    """A ``FileCache`` over ``root`` with a real SQLite store file, closed after the test."""
    with FileCache(root, store=store_path) as fc:
        yield fc


@pytest.fixture
def runner() -> CliRunner:
    """A click ``CliRunner`` (stdout and stderr are kept apart)."""
    return CliRunner()


def _diff_of(answer: str) -> str:
    """The unified diff inside a ``diff`` answer: from the ``---`` line to before the hint.

    Split on ``\\n`` only: a ``\\r`` belongs to its line (CRLF files).
    """
    lines = answer.split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("--- "))
    last = max(i for i, line in enumerate(lines) if line.startswith(("@@", " ", "-", "+", "\\")))
    return "\n".join(lines[first : last + 1]) + "\n"


@pytest.fixture
def gnu_patch(tmp_path: Path) -> Callable[[str | bytes, str], bytes]:
    """``gnu_patch(old, answer)``: apply the diff inside ``answer`` to ``old`` with GNU patch."""
    if shutil.which("patch") is None:
        pytest.skip("GNU patch is not installed")
    work = tmp_path / "patch-work"
    work.mkdir()

    def apply(old: str | bytes, answer: str) -> bytes:
        base = work / "old"
        base.write_bytes(old.encode("utf-8") if isinstance(old, str) else old)
        (work / "diff").write_bytes(_diff_of(answer).encode("utf-8"))
        out = work / "new"
        proc = subprocess.run(
            [
                "patch",
                "--binary",
                "--force",
                "--silent",
                "-o",
                str(out),
                str(base),
                str(work / "diff"),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 0, f"patch failed: {proc.stdout}{proc.stderr}\n{answer}"
        return out.read_bytes()

    return apply
