"""Session.sync (a transcript changed elsewhere) and Session.rehash (changes seen via bash)."""

from __future__ import annotations

import json
from pathlib import Path

from filecache import FileCache
from filecache.prune.transcript import parse_transcript

TEXT = "".join(f"value_{i} = compute({i})  # long enough for a FileRef\n" for i in range(40))


def chat(*results: tuple[str, str]) -> list[dict[str, object]]:
    """An OpenAI chat transcript: one assistant call and one tool result per (id, text)."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "fix it"}]
    for call_id, text in results:
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return messages


def test_sync_forgets_results_missing_or_changed_in_the_transcript(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TEXT)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        first = session.read("a.py", call_id="c1")
        # the transcript still has c1 exactly as answered: nothing to forget
        assert session.sync(parse_transcript(chat(("c1", first.text)))) == set()
        assert session.read("a.py", call_id="c2").kind == "unchanged"
        # a client compacted c1 into a summary: its text no longer matches
        compacted = parse_transcript(chat(("c1", "[summary of the file]")))
        assert session.sync(compacted) == {"c1"}
        assert session.read("a.py", call_id="c3").kind == "full"
        # a rewind dropped c3 altogether
        assert session.sync(parse_transcript(chat())) == {"c3"}
        assert session.read("a.py", call_id="c4").kind == "full"


def test_sync_keeps_edits_only_while_their_confirmation_holds(tmp_path: Path) -> None:
    """The confirmation says where an edit landed: a model without it may not place the edit."""
    (tmp_path / "a.py").write_text(TEXT)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        first = session.read("a.py", call_id="c1")
        confirmation = session.edit("a.py", "compute(3)", "compute(33)", call_id="e1").text
        messages = chat(("c1", first.text))
        args = {"path": "a.py", "old_string": "compute(3)", "new_string": "compute(33)"}
        edit = {
            "id": "e1",
            "type": "function",
            "function": {"name": "edit_file", "arguments": json.dumps(args)},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [edit]})
        messages.append({"role": "tool", "tool_call_id": "e1", "content": confirmation})
        assert session.sync(parse_transcript(messages)) == set()
        assert session.read("a.py").kind == "unchanged"
        cleared_inputs = json.loads(json.dumps(messages))  # a client that clears tool inputs
        cleared_inputs[-2]["tool_calls"][0]["function"]["arguments"] = "{}"
        assert session.sync(parse_transcript(cleared_inputs)) == {"e1"}
        messages[-1] = {"role": "tool", "tool_call_id": "e1", "content": "[cleared tool result]"}
        assert session.sync(parse_transcript(messages)) == set()  # e1 already forgotten
        after = session.read("a.py")  # c1's text is still there: a diff of the edit from it
        assert after.kind == "diff" and after.base_call_id == "c1"
        assert "+value_3 = compute(33)" in after.text


def test_rehash_records_changes_made_outside_file_tools(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TEXT)
    (tmp_path / "b.py").write_text(TEXT)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        session.read("a.py", call_id="r1")
        session.read("b.py", call_id="r2")
        assert session.rehash("bash_1") == []
        (tmp_path / "a.py").write_text(TEXT.replace("compute(7)", "compute(70)"))  # sed -i
        (tmp_path / "b.py").unlink()  # rm
        assert sorted(session.rehash("bash_2")) == ["a.py", "b.py"]
        assert session.rehash("bash_3") == []  # each change is recorded once
        writes = session.ledger().writes
        assert [(w.call_id, w.tool) for w in writes["a.py"]] == [("bash_2", "change")]
        assert writes["b.py"][0].after is None
        assert session.read("a.py").kind == "diff"


def test_stale_calls_is_sync_s_decision_without_a_session() -> None:
    """``ledger.stale_calls``, pure: a held result must be in the transcript with the text the
    ledger hashed, and a write/edit call must still carry every string it wrote."""
    from filecache.core.hashing import KEYED
    from filecache.ledger import CallRecord, stale_calls

    def tag(text: str, keyed: bool) -> str:
        return (KEYED if keyed else "xxh3:") + text

    def record(cid: str, text_hash: str | None, args: tuple[str, ...] = ()) -> CallRecord:
        tool = "edit" if args else "read"
        return CallRecord(cid, 1, tool, "a.py", None, None, None, None, "", None, 0, 0,
                          text_hash, (), args)  # fmt: skip

    calls = {
        "same": record("same", tag("A", False)),
        "changed": record("changed", tag("B", False)),
        "secret": record("secret", tag("S", True)),
        "e-kept": record("e-kept", tag("ok", False), (tag("new", False),)),
        "e-cleared": record("e-cleared", tag("ok", False), (tag("new", False),)),
    }
    texts = {"same": "A", "changed": "B2", "secret": "S", "e-kept": "ok", "e-cleared": "ok"}
    arguments = {"e-kept": {"path": "a.py", "edits": [{"new_string": "new"}]}, "e-cleared": {}}
    held = [*calls, "missing", "unknown-but-present"]
    texts["unknown-but-present"] = "whatever"  # no ledger row: kept while its text is there
    gone = stale_calls(held, calls, texts, arguments, tag, tag)
    assert gone == {"changed", "e-cleared", "missing"}
