"""A command's old output once the same command ran again (``prune/shell_outputs.py``)."""

from __future__ import annotations

from prune_chat import Chat, filler, words

from filecache.prune.pruner import prune_messages
from filecache.prune.pruning import PrunePolicy, collect
from filecache.prune.shell_outputs import command_of, superseded_outputs
from filecache.prune.transcript import parse_transcript


def _policy(**changes: object) -> PrunePolicy:
    """Triggered, but no pressure to clear what is merely old (``target`` is the window)."""
    base: dict[str, object] = dict(
        context_window=20_000, prune_at=0.05, target=1.0, protect_recent=10, min_reclaim=0,
        cache_aware=False,
    )  # fmt: skip
    return PrunePolicy(**(base | changes))  # type: ignore[arg-type]


def test_a_rerun_command_supersedes_its_older_output_and_only_that() -> None:
    chat = Chat()
    chat.bash("python -m pytest   tests/test_a.py", filler(900, "FAILED"), call_id="t1")
    chat.bash("ls src", filler(300, "a.py"), call_id="l1")
    chat.bash("python -m pytest tests/test_a.py", filler(900, "PASSED"), call_id="t2")
    chat.bash("ls src", "error: no such dir", call_id="l2")
    chat.bash("git diff", filler(50, "+x"), call_id="d1")
    transcript = parse_transcript(chat.messages)
    infos = collect(transcript, None, words)
    found = superseded_outputs(infos, transcript.calls_by_id())
    assert found == {
        "t1": "superseded by a later run of the same command t2",
        "l1": "superseded by a later run of the same command l2",
    }
    assert command_of(transcript.calls_by_id()["t1"]) == "python -m pytest tests/test_a.py"
    result = prune_messages(chat.messages, policy=_policy(), count=words)
    assert {a.call_id: a.reason for a in result.plan.actions} == found
    off = prune_messages(chat.messages, policy=_policy(rerun_outputs=False), count=words)
    assert not off.plan.actions  # nothing else is old enough to go at this window


def test_the_gate_decides_whether_clearing_a_rerun_output_pays() -> None:
    chat = Chat()
    chat.bash("pytest", filler(3_000, "FAILED"), call_id="t1")
    for n in range(6):
        chat.bash(f"cat notes{n}.txt", filler(2_000, f"n{n}"), call_id=f"c{n}")
    chat.bash("pytest", filler(300, "PASSED"), call_id="t2")
    ungated = prune_messages(chat.messages, policy=_policy(), count=words)
    assert [a.call_id for a in ungated.plan.actions] == ["t1"]
    gated = prune_messages(
        chat.messages, policy=_policy(cache_aware=True, turns_left=0), count=words
    )
    assert not gated.plan.actions and "t1" in gated.plan.dropped_by_gate
