"""The gateway's rows in its store: idle conversations deleted, a bound on the rows of one
conversation, and the report of what is held (real SQLite; PostgreSQL too when
``FILECACHE_TEST_PG`` names a server). Explicit request times, no sleeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pg_server import GIVEN_URL

from filecache.cli import main
from filecache.gateway import Api, open_memory, rewrite_payload
from filecache.gateway.memory import GatewayMemory

DAY = 86_400.0
LINES = [f"    value_{i} = compute({i}, 'the quick brown fox jumps')" for i in range(1, 61)]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "gateway.db")
    if not GIVEN_URL:
        pytest.skip("FILECACHE_TEST_PG is not set")
    return str(request.getfixturevalue("pg_url"))


def _request(session: str, reads: int) -> dict[str, Any]:
    text = "\n".join(f"{n:>6}→{t}" for n, t in enumerate(LINES, 1))
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"work {session}"}]
    for k in range(reads):
        cid = f"toolu_{session}_{k}"
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": "Read",
                                               "input": {"file_path": "/p/a.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid,
                                          "content": text}]},
        ]  # fmt: skip
    return {"model": "m", "system": "Working directory: /p", "messages": messages,
            "metadata": {"user_id": f"user_a_account_b_session_{session}"}}  # fmt: skip


def _send(memory: GatewayMemory, session: str, now: float, reads: int = 3) -> int:
    _, rewrite = rewrite_payload(
        Api.ANTHROPIC_MESSAGES, _request(session, reads), memory=memory, now=now
    )
    return rewrite.counts.file_refs


def test_idle_conversations_are_deleted_and_active_ones_kept(store: str) -> None:
    memory = open_memory(store)
    try:
        assert _send(memory, "idle0001", now=0.0) == 1
        assert _send(memory, "busy0001", now=40 * DAY) == 1
        before = memory.report()
        assert before.conversations == 2 and before.rows >= 2 * 4  # 3 decisions + time each
        assert memory.gc(30, now=41 * DAY) == 1
        after = memory.report()
        assert after.conversations == 1 and after.rows == before.rows // 2
        assert memory.gc(30, now=41 * DAY) == 0
    finally:
        memory.close()
    again = open_memory(store)  # another process: nothing of the idle one is left
    try:
        conversation = next(
            c for k, c in [(k, again.conversation(k)) for k in _keys(again)] if "busy" in k
        )
        assert conversation.get("toolu_busy0001_1", "x") is None  # digest differs: no hit
        assert conversation.decisions  # read back from the store
        assert conversation.seen(41 * DAY) == 40 * DAY + 30  # another process wrote it
        assert _send(again, "idle0001", now=42 * DAY) == 1  # comes back: afresh, same answer
    finally:
        again.close()


def _keys(memory: GatewayMemory) -> list[str]:
    assert memory.store is not None
    return [s.session_id.removeprefix("gateway:") for s in memory.store.sessions()
            if s.session_id.startswith("gateway:")]  # fmt: skip


def test_a_conversation_holds_at_most_max_rows(store: str) -> None:
    memory = open_memory(store)
    memory.max_rows = 4
    try:
        assert _send(memory, "long0001", now=0.0, reads=12) == 6
        assert memory.report().rows <= 4 + 1  # the decisions it may store, and its time
        assert _send(memory, "long0001", now=1.0, reads=12) == 6  # in-process: the same
    finally:
        memory.close()


def test_the_cli_reports_and_collects(tmp_path: Path) -> None:
    store = str(tmp_path / "gateway.db")
    memory = open_memory(store)
    _send(memory, "cli00001", now=0.0)
    memory.close()
    runner = CliRunner()
    shown = runner.invoke(main, ["gateway", "--store", store, "--memory", "--json"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.output)
    assert report["conversations"] == 1 and report["rows"] >= 4 and report["store_bytes"] > 0
    collected = runner.invoke(main, ["gateway", "--store", store, "--gc", "30"])
    assert collected.exit_code == 0
    assert collected.output.startswith("deleted 1 idle conversations; now 0 conversations, 0 rows")


def test_the_report_of_a_store_never_made_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--memory`` and ``--gc`` only read: without a gateway store they say so and make none
    (neither the user's default one nor the one ``--store`` names)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    runner = CliRunner()
    for extra in ([], ["--store", str(tmp_path / "gone" / "gateway.db")]):
        shown = runner.invoke(main, ["gateway", *extra, "--memory", "--json"])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.output) == {"conversations": 0, "rows": 0, "store_bytes": None}
        collected = runner.invoke(main, ["gateway", *extra, "--gc", "30"])
        assert collected.exit_code == 0, collected.output
        assert collected.output.startswith("deleted 0 idle conversations; now 0 conversations")
    assert list(tmp_path.iterdir()) == []
