"""``prune_messages`` with a real session and SQLite store, and the ``prune``/``archive`` CLI.

Token counts here are real (o200k): windows are set from the transcript's own prompt size.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prune_chat import Chat, bodies, filler, tier

from filecache import FileCache, Session
from filecache.cli import main
from filecache.prune.pruner import prune_messages
from filecache.prune.pruning import PrunePolicy
from filecache.prune.transcript import parse_transcript
from filecache.store.memory_store import MemoryStore

SOURCE = "".join(f"def handler_{i}(event):\n    return compute({i}, event)\n\n" for i in range(40))
NOTES = "".join(f"note {i}: the quick brown fox jumps over the lazy dog\n" for i in range(60))
CALM = PrunePolicy(context_window=10**9)
LISTING = filler(7_000, "app.py")


def prompt_tokens(messages: Any) -> int:
    return prune_messages(messages, policy=CALM).plan.prompt_tokens


def pressing(messages: Any, **changes: Any) -> PrunePolicy:
    """Over ``prune_at`` and under ``hard_at``; no cost gate, no minimum reclaim."""
    base: dict[str, Any] = dict(
        context_window=int(prompt_tokens(messages) / 0.8),
        protect_recent=200,
        min_reclaim=0,
        cache_aware=False,
    )
    return PrunePolicy(**(base | changes))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "app.py").write_text(SOURCE)
    (root / "notes.txt").write_text(NOTES)
    return root


def agent(session: Session) -> Chat:
    """A short session: read app.py and notes.txt, edit app.py, run the tests, re-read notes."""
    chat = Chat()
    chat.read("app.py", session.read("app.py", call_id="r1").text, call_id="r1")
    chat.read("notes.txt", session.read("notes.txt", call_id="r2").text, call_id="r2")
    edit = session.edit("app.py", "compute(3,", "compute(33,", call_id="e1")
    chat.edit("app.py", edit.text, call_id="e1")
    chat.bash("pytest -q", filler(600, "FAILED"), call_id="b1")
    session.rehash("b1")
    ref = session.read("notes.txt", offset=1, limit=10, call_id="r3")
    assert (ref.kind, ref.base_call_id) == ("unchanged", "r2")
    chat.read("notes.txt", ref.text, offset=1, limit=10, call_id="r3")
    return chat


def test_prune_messages_archives_records_forgets_and_sticks_after_a_restart(
    tree: Path, store_path: Path
) -> None:
    with FileCache(tree, store=store_path) as cache:
        session = cache.session("s1")
        chat = agent(session)
        before = copy.deepcopy(chat.messages)
        result = prune_messages(chat.messages, session=session, policy=pressing(chat.messages))
        assert chat.messages == before
        actions = {a.call_id: a for a in result.plan.actions}
        assert actions["r1"].reason == "superseded by edit e1"
        assert "r2" not in actions  # the FileRef r3 relies on it
        assert actions.keys() <= {"r1", "e1", "b1"} and "b1" in actions
        for cid, action in actions.items():
            assert cache.engine.store.archive_get(cid, "s1") == bodies(chat.messages)[cid]
            assert cache.engine.store.projections("s1")[cid] == (action.tier, action.text)
            assert bodies(result.messages)[cid] == action.text
        # the view forgot r1: app.py comes as content; notes.txt is still held
        assert session.sync(parse_transcript(result.messages)) == set()
        assert session.read("app.py", call_id="r4").kind == "full"
        assert session.read("notes.txt", call_id="r5").kind == "unchanged"
    with FileCache(tree, store=store_path) as cache:  # a new process, the same store
        session = cache.session("s1")
        again = prune_messages(chat.messages, session=session, policy=CALM)
        assert not again.plan.triggered
        assert json.dumps(again.messages) == json.dumps(result.messages)
        assert cache.engine.store.archive_get("r1") == bodies(chat.messages)["r1"]


def test_a_second_pass_on_the_pruned_list_changes_nothing(tree: Path) -> None:
    with FileCache(tree, store=":memory:") as cache:
        session = cache.session()
        chat = agent(session)
        policy = pressing(chat.messages)
        first = prune_messages(chat.messages, session=session, policy=policy)
        second = prune_messages(first.messages, session=session, policy=policy)
        assert first.plan.actions and not second.plan.actions
        assert json.dumps(second.messages) == json.dumps(first.messages)


@pytest.mark.parametrize("key", ["messages", "input"])
def test_the_wrapper_keeps_its_shape_and_other_keys(tree: Path, key: str) -> None:
    with FileCache(tree, store=":memory:") as cache:
        chat = agent(cache.session())
    messages: Any = chat.messages
    if key == "input":  # the same conversation as Responses input items
        messages = [_item(m) for m in chat.messages]
    wrapped = {"model": "gpt-5", key: messages, "temperature": 0, "tools": []}
    before = copy.deepcopy(wrapped)
    result = prune_messages(wrapped, policy=pressing(messages))
    assert wrapped == before
    assert list(result.messages) == ["model", key, "temperature", "tools"]
    assert {k: v for k, v in result.messages.items() if k != key} == {
        "model": "gpt-5",
        "temperature": 0,
        "tools": [],
    }
    assert result.format == ("openai" if key == "messages" else "responses")
    assert result.plan.actions and result.messages[key] != messages


def _item(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] == "tool":
        return {
            "type": "function_call_output",
            "call_id": message["tool_call_id"],
            "output": message["content"],
        }
    if "tool_calls" in message:
        (call,) = message["tool_calls"]
        return {"type": "function_call", "call_id": call["id"], **call["function"]}
    return {"role": message["role"], "content": message["content"]}


# -- the CLI --------------------------------------------------------------------------------


def deep_chat() -> Chat:
    """An old superseded read and old bash output, a long talk after them, then 7,000 words of
    tool output: over ``prune``'s default ``protect_recent``, ``min_reclaim`` and
    ``small_result`` (6,000 / 2,000 / 2,000 tokens)."""
    chat = Chat()
    chat.read("app.py", SOURCE, call_id="r1")
    chat.edit("app.py", call_id="e1")
    chat.bash("pytest -q", filler(3_000, "FAILED"), call_id="b1")
    chat.say(filler(20_000, "talk"))
    chat.bash("ls", LISTING, call_id="b2")
    return chat


def run(runner: CliRunner, *args: str | Path) -> Any:
    return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def transcript(tmp_path: Path) -> tuple[Path, list[Any]]:
    messages = deep_chat().messages
    path = tmp_path / "in.json"
    path.write_text(json.dumps(messages))
    return path, messages


def test_prune_writes_the_output_file_and_reports_as_json(
    runner: CliRunner, tmp_path: Path, transcript: tuple[Path, list[Any]]
) -> None:
    source, messages = transcript
    out, store = tmp_path / "out.json", tmp_path / "store.db"
    window = int(prompt_tokens(messages) / 0.8)
    args = ["prune", source, "-o", out, "--window", window, "--store", store, "--json"]
    result = run(runner, *args, "--no-cache-aware", "--preset", "seeds")
    assert result.exit_code == 0, result.stderr
    expected = prune_messages(
        messages, store=MemoryStore(), policy=PrunePolicy(context_window=window, cache_aware=False)
    )
    assert json.loads(out.read_text()) == expected.messages
    report = json.loads(result.stdout)
    assert report["format"] == "openai" and report["triggered"] is True
    assert [a["call_id"] for a in report["actions"]] == [a.call_id for a in expected.plan.actions]
    assert report["reclaimed"] == expected.plan.reclaimed > 0
    assert set(report["actions"][0]) == {
        "call_id",
        "tier",
        "reason",
        "tokens_before",
        "tokens_after",
    }
    shown = run(runner, "archive", "show", "r1", "--store", store)
    assert (shown.exit_code, shown.stdout) == (0, SOURCE)


def test_prune_to_stdout_with_the_window_and_format_given(
    runner: CliRunner, tmp_path: Path, transcript: tuple[Path, list[Any]]
) -> None:
    source, messages = transcript
    store = tmp_path / "store.db"
    calm = run(runner, "prune", source, "--store", store, "--format", "openai", "--preset", "seeds")
    assert calm.exit_code == 0 and json.loads(calm.stdout) == messages  # 128k: no pressure
    window = str(prompt_tokens(messages) // 2)
    pressed = run(
        runner, "prune", source, "--window", window, "--store", store, "--preset", "seeds"
    )
    out = json.loads(pressed.stdout)
    assert tier(bodies(out)["r1"]) == "clear" and bodies(out)["b2"] == LISTING
    wrong = run(runner, "prune", source, "--window", window, "--format", "anthropic")
    assert wrong.exit_code == 2 and "message 2" in wrong.stderr


def test_prune_json_without_output_keeps_messages_on_stdout(
    runner: CliRunner, tmp_path: Path, transcript: tuple[Path, list[Any]]
) -> None:
    source, messages = transcript
    window = str(prompt_tokens(messages) // 2)
    both = run(
        runner, "prune", source, "--window", window, "--store", tmp_path / "s.db", "--json",
        "--preset", "seeds",
    )  # fmt: skip
    assert both.exit_code == 0
    assert tier(bodies(json.loads(both.stdout))["r1"]) == "clear"  # the messages: stdout
    assert json.loads(both.stderr)["reclaimed"] > 0  # the report: stderr


@pytest.mark.parametrize(
    ("flag", "gate"),
    [
        # at this session's growth (about 8,000 tokens a turn) the prompt passes hard_at next
        # turn, where the planner clears anyway: a deep cut now saves one request and rewrites
        # the cache, so the gate declines it (a deep cut that pays: tests/prune/test_presets.py)
        ("--cache-aware", "cost gate: no cut pays over 4 turns"),
        ("--no-cache-aware", ""),
    ],
)
def test_cache_awareness_decides_whether_a_deep_cut_is_made(
    runner: CliRunner,
    tmp_path: Path,
    transcript: tuple[Path, list[Any]],
    flag: str,
    gate: str,
) -> None:
    source, messages = transcript
    window = str(int(prompt_tokens(messages) / 0.8))
    args = ["prune", source, "--window", window, "--store", tmp_path / "s.db", flag, "--json"]
    result = run(runner, *args, "-o", tmp_path / "out.json", "--preset", "seeds")
    report = json.loads(result.stdout)
    assert (json.loads((tmp_path / "out.json").read_text()) != messages) is not gate
    assert bool(report["actions"]) is not gate
    assert report["gate"] == gate


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("{not json", "not JSON"),
        ("42", "expected a list of messages, got int"),
        (json.dumps({"model": "x"}), 'one "messages" or "input" list'),
        (
            json.dumps([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c9"}]),
            "message 1: tool result for c9, but no earlier assistant message calls it",
        ),
        (
            json.dumps([{"role": "assistant", "tool_calls": [{"id": "c1", "function": 3}]}]),
            "message 0: tool call 0: function must be an object",
        ),
    ],
)
def test_malformed_input_exits_non_zero_names_the_message_and_writes_nothing(
    runner: CliRunner, tmp_path: Path, content: str, error: str
) -> None:
    source, out = tmp_path / "in.json", tmp_path / "out.json"
    source.write_text(content)
    result = run(runner, "prune", source, "-o", out, "--store", tmp_path / "s.db")
    assert result.exit_code == 2
    assert error in result.stderr and result.stderr.startswith("filecache: ")
    assert result.stdout == "" and not out.exists()


def test_archive_show_of_an_unknown_call_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "archive", "show", "nope", "--store", tmp_path / "s.db")
    assert result.exit_code == 2 and result.stdout == ""
    assert "no store at" in result.stderr and not (tmp_path / "s.db").exists()  # makes none
    with FileCache(tmp_path, store=tmp_path / "s.db"):
        pass  # the store exists now
    result = run(runner, "archive", "show", "nope", "--store", tmp_path / "s.db")
    assert result.exit_code == 2 and result.stdout == ""
    assert "no archived result for nope" in result.stderr


def test_prune_reads_stdin_and_archives_under_the_session_given(
    runner: CliRunner, tmp_path: Path, transcript: tuple[Path, list[Any]]
) -> None:
    _, messages = transcript
    store, window = tmp_path / "s.db", str(prompt_tokens(messages) // 2)
    args = ["prune", "-", "--window", window, "--store", store, "--session", "mine"]
    result = runner.invoke(main, [str(a) for a in args], input=json.dumps(messages))
    assert result.exit_code == 0, result.stderr
    shown = run(runner, "archive", "show", "b1", "--store", store, "--session", "mine")
    assert shown.stdout == filler(3_000, "FAILED")
    other = run(runner, "archive", "show", "b1", "--store", store, "--session", "other")
    assert other.exit_code == 2


def test_projections_of_another_conversation_with_the_same_opening_are_not_applied(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Without --session the id is derived from the opening and the first call id: two runs
    of one task can share it. What was projected for one must not replace the other's results."""
    store = tmp_path / "s.db"
    for word, window in [("alpha", "20000"), ("beta", "1000000")]:
        chat = deep_chat()
        chat.messages[7]["content"] = filler(3_000, word)  # b1's output differs
        (tmp_path / f"{word}.json").write_text(json.dumps(chat.messages))
        out = run(runner, "prune", tmp_path / f"{word}.json", "--store", store, "--window", window)
        assert out.exit_code == 0, out.stderr
    # beta has no pressure at 1M; alpha's projection of b1 (other text) is not applied to it
    assert bodies(json.loads(out.stdout))["b1"] == filler(3_000, "beta")
    assert run(runner, "archive", "show", "b1", "--store", store).stdout == filler(3_000, "alpha")
