"""The console script's entry: ``--version`` and ``--help`` without click or the library, the
same words click prints; nothing loads what a command does not use (issue 34: every command,
``--version`` included, imported everything; ``outline`` loaded the o200k vocabulary)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from filecache.cli import main
from filecache.entry import HELP, VERSION
from filecache.extras import DISTRIBUTION

PROBE = """
import json, sys
sys.argv = ["filecache", *json.loads(sys.argv[1])]
from filecache.entry import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m in ("click", "toktok")
                        or m.startswith("filecache."))), file=sys.stderr)
"""


def _modules(args: list[str], cwd: Path) -> tuple[str, list[str]]:
    """What ``filecache ARGS`` prints, and the modules it loaded (click, toktok, filecache.*)."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return proc.stdout, json.loads(proc.stderr.strip().splitlines()[-1])


def test_the_help_is_clicks_own() -> None:
    ctx = click.Context(main, info_name="filecache", terminal_width=80, **main.context_settings)
    rendered = main.get_help(ctx)
    assert rendered == HELP, f"filecache/entry.py's HELP is stale; paste:\n{rendered}"


def test_the_version_is_the_distributions() -> None:
    assert VERSION == importlib.metadata.version(DISTRIBUTION)


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["-h"]])
def test_version_and_help_load_neither_click_nor_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    out, loaded = _modules(args, tmp_path)
    assert loaded == ["filecache.entry"]
    assert out == (f"filecache, version {VERSION}\n" if args == ["--version"] else HELP + "\n")


def test_a_narrow_terminal_gets_clicks_wrapping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    out, loaded = _modules(["--help"], tmp_path)
    assert "click" in loaded and out != HELP + "\n" and "Commands:" in out


def test_outline_of_a_small_file_loads_no_vocabulary(tmp_path: Path) -> None:
    (tmp_path / "small.py").write_text("def f(x):\n    return x + 1\n", encoding="utf-8")
    out, loaded = _modules(["outline", "small.py"], tmp_path)
    assert "1-2 def f(x)" in out
    assert "toktok" not in loaded
    assert not (tmp_path / ".filecache").exists()  # read-only: an in-memory store
