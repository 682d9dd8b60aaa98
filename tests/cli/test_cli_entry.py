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


ENDED = """
import dataclasses, json, os, sys
sys.argv = ["filecache", *json.loads(sys.argv[1])]

def end(code, _exit=os._exit):  # the entry ends read/edit/write with os._exit: look first
    ours = [m for name, m in sorted(sys.modules.items()) if name.startswith("filecache.")]
    compiled = sorted(  # dataclasses compiled by the stdlib (a record's __init__ is not <string>)
        f"{m.__name__}.{c.__qualname__}" for m in ours for c in vars(m).values()
        if isinstance(c, type) and c.__module__ == m.__name__ and dataclasses.is_dataclass(c)
        and c.__init__.__code__.co_filename == "<string>"
    )
    print(json.dumps({"code": code, "modules": sorted(sys.modules), "compiled": compiled}),
          file=sys.stderr)
    sys.stderr.flush()
    _exit(code)

os._exit = end
from filecache.entry import main
main()
"""


@pytest.mark.parametrize(
    "args", [["read", "small.py"], ["edit", "small.py", "--old", "x + 1", "--new", "x + 2"]]
)
def test_a_call_loads_only_what_it_uses_and_leaves_the_log_for_the_next(
    tmp_path: Path, args: list[str]
) -> None:
    """A read or an edit loads no tokenizer, pruning or outlines, and a read neither click,
    replay, the edit planner nor the ledger; the only dataclasses built by compiling code
    are the settings'; the process ends through os._exit, leaving the store's WAL unmerged."""
    text = "def f(x):\n    return x + 1\n" + "".join(f"\nv{i} = {i}\n" for i in range(20))
    (tmp_path / "small.py").write_text(text, encoding="utf-8")
    args = [*args, "--session", "s"]
    for _ in range(2 if args[0] == "read" else 1):  # the second read is a FileRef
        proc = subprocess.run(
            [sys.executable, "-c", ENDED, json.dumps(args)],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
    seen = json.loads(proc.stderr.strip().splitlines()[-1])
    assert seen["code"] == 0
    modules = set(seen["modules"])
    heavy = {"toktok", "asyncio", "filecache.prune", "filecache.outline", "filecache.stats"}
    if args[0] == "read":  # an edit goes through click (which registers the hosts' replays)
        heavy |= {"click", "filecache.cli", "filecache.replay", "filecache.core.edits",
                  "filecache.ledger"}  # fmt: skip
        assert "unchanged since your result" in proc.stdout
    assert not {m for m in modules for h in heavy if m == h or m.startswith(h + ".")}
    if args[0] == "read":
        assert seen["compiled"] == ["filecache.settings.Settings"]
    else:  # click's command also builds the tool tables' (filecache.tools)
        assert {c.rsplit(".", 1)[0] for c in seen["compiled"]} <= {
            "filecache.settings", "filecache.tools"
        }  # fmt: skip
    assert (tmp_path / ".filecache" / "cache.db-wal").stat().st_size > 0
