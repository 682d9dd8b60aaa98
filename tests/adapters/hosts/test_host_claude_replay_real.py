"""The replay predicts what the real Claude Code sends the model with the hook installed.

The scripted session of ``claude_record`` runs twice on the pinned binary against a scripted
Messages API: plain (its session file is what a user would import) and with ``filecache install
claude-code``. The plain session file, imported and replayed through the hook
(``claude_replay``), must give every tool result exactly as the hooked run's requests carried it
(the project root and the stores' seals aside): reads, parallel reads, a read after the model's
own Edit, Bash ``cat`` re-reads, a diff after ``sed -i``, a second prompt.

The binary: ``FILECACHE_TEST_CLAUDE`` (as ``tests/adapters/hosts/test_host_claude_code.py``):
skipped without
it, failed under ``CI``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from claude_record import fixture_text, normalized, record

pytestmark = pytest.mark.hosts

CLAUDE = os.environ.get("FILECACHE_TEST_CLAUDE", "")  # read before conftest clears FILECACHE_*
if not CLAUDE or not os.access(CLAUDE, os.X_OK):
    message = f"FILECACHE_TEST_CLAUDE={CLAUDE!r} is not an executable claude binary"
    if os.environ.get("CI"):
        pytest.fail(f"under CI the Claude Code binary must be installed: {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def test_the_replay_of_a_plain_session_gives_what_the_hooked_session_sent(tmp_path: Path) -> None:
    from filecache.adapters.hosts.claude_replay import replay_claude_code

    from filecache.importers import import_logs

    plain, recorded = record(CLAUDE, tmp_path / "plain", hooked=False)
    log = tmp_path / "session.jsonl"
    log.write_text(fixture_text(plain, tmp_path / "plain"))
    _, live = record(CLAUDE, tmp_path / "hooked", hooked=True)
    import_logs("claude-code", [log], tmp_path / "traces")
    replay = replay_claude_code(tmp_path / "traces" / "session")
    predicted = {
        str(m["tool_call_id"]): str(m["content"])
        for m in replay.filecache_messages
        if m.get("role") == "tool"
    }
    assert set(live) == set(predicted) == set(recorded) and len(live) == 10
    root = str(tmp_path / "hooked" / "project")
    for cid, sent in live.items():
        assert normalized(predicted[cid], "/home/user/proj") == normalized(sent, root), cid
    assert sum(live[c] != recorded[c] for c in live) >= 6  # the hook changed most of them
    assert (replay.stale_views, replay.dangling_refs) == (0, 0), replay.problems
