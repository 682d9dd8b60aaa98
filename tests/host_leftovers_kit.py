"""What the tests that run a host with filecache's leftovers (or its http hook down) share: a
throwaway install of filecache to remove afterwards, and Claude Code's messages without the
text that differs between any two runs.

Its own module so that importing it needs no host binary (``test_host_leftovers`` skips without
Codex's).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def throwaway_install(base: Path) -> tuple[Path, Path]:
    """A virtualenv with a copy of filecache in its site-packages (its dependencies from this
    interpreter's, by a ``.pth`` line); (its python, the copied package)."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    deps = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    (site / "deps.pth").write_text("".join(f"{p}\n" for p in deps))
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "filecache", site / "filecache", ignore=skip)
    shutil.copytree(REPO / "adapters", site / "filecache" / "adapters", ignore=skip)
    return venv / "bin" / "python", site / "filecache"


def without_reminders(messages: list[Any]) -> list[Any]:
    """Claude Code's messages without its ``<system-reminder>`` text blocks: their context (git
    status, or the attribution note when git status did not answer in time on a loaded machine)
    differs between any two runs."""
    out = []
    for each in messages:
        content = each.get("content")
        if isinstance(content, list):
            content = [
                b for b in content
                if not (b.get("type") == "text" and b.get("text", "").startswith("<system-"))
            ]  # fmt: skip
        out.append({**each, "content": content})
    return out
