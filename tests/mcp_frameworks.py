"""What the tests of the frameworks' own MCP clients share
(tests/adapters/frameworks/test_frameworks_mcp_*.py).

Each test starts ``filecache serve`` over stdio through its framework's MCP client, drives the
framework's real tool-calling loop with its scripted model through ``SCRIPT``, and hands what the
model saw to ``check``. The server runs on a named session in a SQLite store, so ``check`` can
compare the ids the FileRefs name with the ledger the server wrote.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from filecache import FileCache

SESSION = "mcp-client"
INSTALL_MCP1 = "pip install -e '.[mcp,frameworks-mcp1]' 'mcp<2'"

# One tool call per model step: (call id, tool, arguments). Before step 4 (0-based) the file is
# changed outside the agent, so that read is a diff. Step 5 is a tool error, step 6 shows the
# loop went on after it.
SCRIPT: list[tuple[str, str, dict[str, Any]]] = [
    ("c1", "read_file", {"path": "notes.txt"}),
    ("c2", "read_file", {"path": "notes.txt"}),
    ("c3", "edit_file", {"path": "notes.txt", "old_string": "line 5:", "new_string": "line five:"}),
    ("c4", "read_file", {"path": "notes.txt"}),
    ("c5", "read_file", {"path": "notes.txt"}),
    ("c6", "read_file", {"path": "../outside/secret.txt"}),
    ("c7", "read_file", {"path": "src/app.py"}),
]
CHANGED_OUTSIDE_BEFORE = 4


def serve_command(root: Path, store: Path) -> tuple[str, list[str]]:
    """``python -m filecache serve`` on ``root`` with ``store`` and the named session."""
    args = ["-m", "filecache", "serve", "--root", str(root), "--store", str(store)]
    return sys.executable, [*args, "--session", SESSION]


def before_step(index: int, root: Path) -> None:
    """Side effects of the world between model steps (call it as the model produces step N)."""
    if index == CHANGED_OUTSIDE_BEFORE:
        notes = root / "notes.txt"
        notes.write_text(notes.read_text().replace("line 40:", "line forty:"))


def check(seen: dict[str, str], root: Path, store: Path) -> None:
    """What the model saw for each call id of ``SCRIPT`` is what ``filecache serve`` answers.

    ``seen`` maps the framework's tool call ids to the text the model got back (the framework's
    own wrapping of a tool error included).
    """
    assert set(seen) == {cid for cid, _, _ in SCRIPT}, seen
    with FileCache(root, store=store) as cache:
        calls = sorted(cache.session(SESSION).ledger().calls.values(), key=lambda c: c.seq)
    assert [c.kind for c in calls] == ["full", "unchanged", "edited", "unchanged", "diff", "full"]
    first, _, edit, _, _, app = calls

    assert seen["c1"].startswith("[notes.txt: 60 lines, xxh3 ")
    assert "line 60: the quick brown fox" in seen["c1"]
    short = first.version.removeprefix("xxh3:")[:8] if first.version else "?"
    assert f"xxh3 {short}]" in seen["c1"].split("\n")[0]
    # The FileRef names the server's id of the first answer, and shows its hash (how the model
    # finds that answer: the server's instructions say so).
    assert seen["c2"].rstrip("\n") == (  # some frameworks strip the newline
        f"[filecache] notes.txt unchanged since your result {first.call_id} (60 lines, {short})"
    )
    assert seen["c3"].startswith("[filecache] edited notes.txt")
    assert seen["c4"].startswith(
        f"[filecache] notes.txt unchanged since your result {edit.call_id}"
    )
    assert seen["c5"].startswith(f"[filecache] notes.txt changed since your result {edit.call_id}")
    assert "-line 40: the quick" in seen["c5"] and "+line forty: the quick" in seen["c5"]
    assert "line five:" not in seen["c5"]  # a diff, not the content
    # The error reached the model as filecache's one line (inside the framework's wrapping) ...
    error = next(line for line in seen["c6"].splitlines() if "secret.txt" in line)
    assert "../outside/secret.txt: resolves to" in error and "outside the root" in error
    assert "Traceback" not in seen["c6"]
    # ... and the loop went on.
    assert seen["c7"].startswith("[src/app.py: 2 lines") and app.path == "src/app.py"
