"""filecache's own tools for an agent loop: schemas, dispatch, errors as tool results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from filecache import FileCache
from filecache.pruner import prune_messages
from filecache.pruning import PrunePolicy
from filecache.tools import run_tool, schemas

TEXT = "".join(f"def handler_{i}(event):\n    return compute({i}, event)\n\n" for i in range(40))


@pytest.mark.parametrize("style", ["openai", "responses", "anthropic"])
def test_schemas_name_the_three_tools_and_carry_the_instructions(style: str) -> None:
    tools = schemas(style)
    names = [t.get("name") or t["function"]["name"] for t in tools]
    assert names == ["read_file", "write_file", "edit_file"]
    blob = json.dumps(tools)
    assert "fresh=true" in blob and "unchanged" in blob


def test_run_tool_reads_edits_and_reports_errors(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(TEXT)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        first = run_tool(session, "read_file", '{"path": "app.py"}', "c1")
        assert not first.is_error and first.text.startswith("[app.py: 120 lines")
        again = run_tool(session, "read_file", {"path": "app.py"}, "c2")
        assert "unchanged since your result c1" in again.text
        edit = {"path": "app.py", "old_string": "compute(7,", "new_string": "compute(70,"}
        assert not run_tool(session, "edit_file", edit, "c3").is_error
        symbol = run_tool(session, "read_file", {"path": "app.py", "symbol": "handler_7"}, "c4")
        # the model holds these two lines from its edit, and a one-line FileRef costs less
        assert symbol.text.startswith("[filecache] app.py unchanged since your result c3 (lines")
        assert "(lines 22-23, " in symbol.text and symbol.text.count("\n") == 1
        args = {"path": "app.py", "symbol": "handler_7", "fresh": True}
        symbol = run_tool(session, "read_file", args, "c5")
        assert symbol.text.startswith("[app.py: handler_7, lines 22-23 of 120")
        assert "compute(70, event)" in symbol.text
        for name, args in [
            ("read_file", {"path": "../outside.txt"}),
            ("read_file", {"path": "missing.py"}),
            ("read_file", {"path": "app.py", "offset": "ten"}),
            ("read_file", "{not json"),
            ("edit_file", {"path": "app.py", "old_string": "nope", "new_string": "x"}),
            ("delete_file", {"path": "app.py"}),
            ("read_file", {}),
        ]:
            out = run_tool(session, name, args, "bad")
            assert out.is_error and out.text.startswith("Error: "), (name, args, out)


def test_an_agent_loop_with_pruning_never_relies_on_a_cleared_result(tmp_path: Path) -> None:
    """The README's loop: tools from filecache, prune before every request."""
    (tmp_path / "app.py").write_text(TEXT)
    # cache_aware=False: at this size the cost gate (rightly) finds no cut that pays
    policy = PrunePolicy(
        context_window=2_000,
        protect_recent=300,
        min_reclaim=50,
        small_result=200,
        cache_aware=False,
    )
    messages: list[dict[str, object]] = [{"role": "user", "content": "tidy app.py"}]
    pruned = 0
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        for turn in range(8):
            if turn == 4:  # an outside change: the next reads are diffs or content again
                (tmp_path / "app.py").write_text(TEXT.replace("compute(3,", "compute(33,"))
            result = prune_messages(messages, session=session, policy=policy)
            pruned += len(result.plan.actions)
            sent = result.messages
            call_id = f"call_{turn}"
            args = {"path": "app.py"} if turn % 3 else {"path": "app.py", "offset": 5, "limit": 20}
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "read_file", "arguments": json.dumps(args)},
                        }
                    ],
                }
            )
            out = run_tool(session, "read_file", args, call_id)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": out.text})
            record = session.ledger().calls[call_id]
            if record.base_call_id is not None:
                base = next(m for m in sent if m.get("tool_call_id") == record.base_call_id)
                assert not str(base["content"]).startswith("[cleared tool result")
    assert pruned > 0  # the window is small enough that pruning did happen
