"""Properties of pruning over generated transcripts in all three formats.

Transcripts are built as abstract turns (``test_transcript_properties``' shape) from file reads
(content, FileRefs and diffs naming earlier reads, outlines), edits, writes, bash and grep
output of random sizes, bodies as strings or block lists (images too), ``is_error`` results and
an unanswered last turn; policies have small windows so that pruning triggers. Sizes are words.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prune_chat import filler, numbered, tier, words
from test_transcript_properties import BUILDERS, positions, strip_bodies

from filecache.prune.codecs.base import ToolResult, render_inputs
from filecache.prune.input_pruning import INPUT_SUFFIX
from filecache.prune.pruner import PruneResult, prune_messages
from filecache.prune.pruning import TIERS, PrunePolicy
from filecache.prune.transcript import parse_transcript
from filecache.store.memory_store import MemoryStore

PATHS = ("a.py", "src/b.py", "/repo/src/b.py", "notes.md")
USER = ("go on", "the bug is in notes.md", "run pytest", filler(300, "talk"), filler(900, "long"))
COMMANDS = ("pytest -q", "ls -la", "git diff", "sed -i s/x/y/ a.py", "cat notes.md")


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@st.composite
def _read(draw: st.DrawFn, cid: str, reads: dict[str, list[str]]) -> tuple[dict[str, Any], str]:
    path = draw(st.sampled_from(PATHS))
    args: dict[str, Any] = {"path": path}
    offset = draw(st.none() | st.integers(1, 40))
    limit = draw(st.none() | st.integers(1, 60))
    if offset is not None:
        args["offset"] = offset
    if limit is not None:
        args["limit"] = limit
    earlier = reads.get(path, [])
    style = draw(st.sampled_from(["content"] * 3 + ["ref", "diff", "outline"]))
    if style in ("ref", "diff") and earlier:
        base = draw(st.sampled_from(earlier))
        verb = "unchanged" if style == "ref" else "changed"
        body = f"[filecache] {path} {verb} since your result {base} (all lines).\n"
        if style == "diff":
            body += "@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    elif style == "outline":
        body = f"[filecache] {path} outline:\n" + filler(draw(st.integers(5, 60)), "def")
    elif path.endswith(".py"):
        first, n = offset or 1, draw(st.integers(0, 90))
        source = [
            f"def f{i}(x):" if i % 2 else f"    return x + {i}" for i in range(first, first + n)
        ]
        body = "".join(f"{i:6}\t{line}\n" for i, line in enumerate(source, first))
    else:
        body = numbered(draw(st.integers(0, 90)), offset or 1, draw(st.sampled_from("xyz")))
    reads.setdefault(path, []).append(cid)
    return args, body


@st.composite
def _call(draw: st.DrawFn, cid: str, reads: dict[str, list[str]]) -> tuple[str, Any, str]:
    kind = draw(st.sampled_from(["read"] * 4 + ["edit", "write", "bash", "bash", "grep"]))
    if kind == "read":
        args, body = draw(_read(cid, reads))
        return "read_file", args, body
    if kind in ("edit", "write"):
        path = draw(st.sampled_from(PATHS))
        args = {"path": path, "old_string": "x = 1", "new_string": "x = 2"}
        if kind == "write":
            # up to 600 characters: a superseded one is long enough to be cleared (inputs)
            args = {"path": path, "content": filler(draw(st.integers(0, 120)), "line")}
        return f"{kind}_file", args, f"[filecache] {kind} {path}: 3 lines (xxh3 0011aabb).\n"
    size = draw(st.integers(0, 400))
    if kind == "bash":
        return "bash", {"command": draw(st.sampled_from(COMMANDS))}, filler(size, "out")
    return "grep", {"query": "compute"}, filler(size, "hit")


@st.composite
def turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Abstract turns for ``BUILDERS``: every call answered except maybe in the last turn."""
    out: list[dict[str, Any]] = []
    reads: dict[str, list[str]] = {}
    serial = 0
    count = draw(st.integers(1, 16))
    for number in range(count):
        calls, results = [], []
        for _ in range(draw(st.integers(1, 3))):
            serial += 1
            cid = f"call_{serial}"
            name, args, body = draw(_call(cid, reads))
            calls.append({"id": cid, "name": name, "args": args})
            if draw(st.integers(0, 3)) == 0:  # a block list: text parts, maybe an image
                cut = draw(st.integers(0, len(body)))
                parts = [(True, body[:cut]), (True, body[cut:])]
                if draw(st.booleans()):
                    parts.insert(1, (False, ""))
                results.append({"id": cid, "body": parts, "error": draw(st.booleans())})
            else:
                error = draw(st.integers(0, 5)) == 0
                results.append({"id": cid, "body": body, "error": error})
        if number == count - 1:
            results = results[: draw(st.integers(0, len(results)))]
        user = draw(st.none() | st.sampled_from(USER))
        out.append(
            {
                "text": draw(st.none() | st.just("let me look")),
                "calls": calls,
                "results": results,
                "user": user,
                "split": draw(st.booleans()),
                "extra": {},
            }
        )
    return out


@st.composite
def policies(draw: st.DrawFn, tokens: int) -> PrunePolicy:
    """A policy whose window is near ``tokens``, so that most passes trigger."""
    ratio = draw(st.floats(0.5, 2.0))
    return PrunePolicy(
        context_window=max(1, int(tokens * ratio)),
        protect_recent=draw(st.integers(0, 300)),
        min_reclaim=draw(st.integers(0, 60)),
        small_result=draw(st.integers(0, 120)),
        head_lines=draw(st.integers(1, 6)),
        tail_lines=draw(st.integers(1, 4)),
        cache_aware=draw(st.booleans()),
        turns_left=draw(st.none() | st.integers(1, 40)),
        output_first=draw(st.booleans()),  # and the other knobs of the context preset
        in_use_turns=draw(st.integers(0, 6)),
        keep_edited=draw(st.booleans()),
        degrade=draw(st.booleans()),
        **draw(st.sampled_from([{}, {"prune_at": 0.05, "target": 0.0}])),  # context's trigger
    )


def prune(messages: Any, policy: PrunePolicy, store: MemoryStore | None = None) -> PruneResult:
    return prune_messages(messages, store=store, policy=policy, count=words, session_id="s")


def size(messages: list[Any]) -> int:
    return prune(messages, PrunePolicy(context_window=10**9)).plan.prompt_tokens


def raw(messages: list[Any], result: ToolResult) -> Any:
    """The JSON of one result: its message, or its block of an Anthropic message."""
    message = messages[result.message_index]
    return message if result.block_index is None else message["content"][result.block_index]


def bodies(messages: list[Any]) -> dict[str, str]:
    return {r.call_id: r.text for r in parse_transcript(messages).results()}


PROPERTY = settings(
    max_examples=max(100, int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")) // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
FORMATS = st.sampled_from(list(BUILDERS))


@PROPERTY
@given(fmt=FORMATS, conversation=turns(), data=st.data())
def test_only_result_bodies_change_and_every_call_keeps_its_result(
    fmt: str, conversation: list[dict[str, Any]], data: st.DataObject
) -> None:
    messages = BUILDERS[fmt](conversation)
    before = copy.deepcopy(messages)
    policy = data.draw(policies(size(messages)))
    store = MemoryStore()
    result = prune(messages, policy, store)
    assert messages == before, "the input was mutated"
    originals = bodies(messages)
    transcript, out = parse_transcript(messages), parse_transcript(result.messages)
    calls = transcript.calls_by_id()
    for action in result.plan.actions:  # every original is archived before it is replaced
        if action.target == "input":
            raw = calls[action.call_id].raw_arguments
            assert store.archive_get(action.call_id + INPUT_SUFFIX, "s") == raw
        else:
            assert store.archive_get(action.call_id, "s") == originals[action.call_id]
    inputs = set(result.plan.inputs)
    assert inputs == {a.call_id for a in result.plan.actions if a.target == "input"}
    for cid in inputs:  # the same keys, the path, every value's JSON type: the schema holds
        new, old = out.calls_by_id()[cid].arguments, calls[cid].arguments
        assert new.keys() == old.keys() and new["path"] == old["path"]
        assert all(type(new[k]) is type(old[k]) for k in old)
        assert calls[cid].name in ("write_file", "edit_file")
    # apart from the replaced inputs, only result bodies changed: put the inputs back, compare
    restored = render_inputs(out, result.messages, {c: calls[c].raw_arguments for c in inputs})
    assert positions(parse_transcript(restored)) == positions(transcript)
    ids = {r.call_id for r in transcript.results()}
    assert dumps(strip_bodies(restored, fmt, ids)) == dumps(strip_bodies(messages, fmt, ids))
    changed = {
        cid for cid, text in bodies(result.messages).items() if text != bodies(messages)[cid]
    }
    assert changed == {a.call_id for a in result.plan.actions if a.target == "result"}
    assert result.plan.reclaimed == sum(
        a.tokens_before - a.tokens_after for a in result.plan.actions
    )
    assert all(a.tokens_after < a.tokens_before for a in result.plan.actions)


@PROPERTY
@given(fmt=FORMATS, conversation=turns(), data=st.data())
def test_the_newest_protect_recent_tokens_are_byte_identical(
    fmt: str, conversation: list[dict[str, Any]], data: st.DataObject
) -> None:
    messages = BUILDERS[fmt](conversation)
    policy = data.draw(policies(size(messages)))
    result = prune(messages, policy)
    transcript = parse_transcript(messages)
    used = 0
    for old in reversed(transcript.results()):
        used += words(old.text)
        if used > policy.protect_recent:
            break
        assert old.call_id not in result.plan.replacements
        assert dumps(raw(result.messages, old)) == dumps(raw(messages, old))


def test_a_read_degraded_to_its_outline_is_no_map_on_the_next_pass() -> None:
    """Found by ``test_pruning_twice_equals_pruning_once``: a whole read the first pass
    degraded to its outline reads, on the next pass, like an outline answer (its head line
    says "outline"), and a later read of one line then cleared it as a used map; the first
    pass had kept it (one line does not cover the read). Both passes must decide alike."""
    source = "".join(f"def f{n}(x):\n    return x + {n + 1}\n" for n in range(1, 14, 2))
    content = "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(source.splitlines(), 1))

    def call(cid: str, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
        function = {"name": name, "arguments": json.dumps(args)}
        return [
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": cid, "type": "function", "function": function}]},
            {"role": "tool", "tool_call_id": cid, "content": result},
        ]  # fmt: skip

    messages = [
        {"role": "system", "content": "sys"},
        *call("r1", "read_file", {"path": "a.py"}, content),
        *call("r2", "read_file", {"path": "a.py", "limit": 1}, "     1\tdef f1(x):\n"),
        *call("r3", "read_file", {"path": "b.py"}, "     1\tx = 1\n"),
    ]
    policy = PrunePolicy(
        context_window=300, prune_at=0.05, target=0.0, protect_recent=0, min_reclaim=0,
        small_result=0, head_lines=1, tail_lines=1, cache_aware=False,
    )  # fmt: skip
    for store in (MemoryStore(), None):
        once = prune(messages, policy, store)
        assert {a.call_id: a.tier for a in once.plan.actions} == {"r1": "outline"}
        twice = prune(once.messages, policy, store)
        assert dumps(twice.messages) == dumps(once.messages) and twice.plan.actions == ()


@PROPERTY
@given(fmt=FORMATS, conversation=turns(), data=st.data())
def test_pruning_twice_equals_pruning_once(
    fmt: str, conversation: list[dict[str, Any]], data: st.DataObject
) -> None:
    messages = BUILDERS[fmt](conversation)
    policy = data.draw(policies(size(messages)))
    store = MemoryStore()
    once = prune(messages, policy, store)
    twice = prune(once.messages, policy, store)
    assert dumps(twice.messages) == dumps(once.messages)
    assert twice.plan.actions == ()
    # sticky: the original history again, with the store's projections, renders the same bytes
    again = prune(messages, policy, store)
    assert dumps(again.messages) == dumps(once.messages)
    # without a store, on its own output
    alone = prune(messages, policy)
    assert dumps(prune(alone.messages, policy).messages) == dumps(alone.messages)


@PROPERTY
@given(fmt=FORMATS, conversation=turns(), data=st.data())
def test_higher_pressure_only_escalates(
    fmt: str, conversation: list[dict[str, Any]], data: st.DataObject
) -> None:
    messages = BUILDERS[fmt](conversation)
    policy = data.draw(policies(size(messages)))
    smaller = max(1, int(policy.context_window * data.draw(st.floats(0.3, 1.0))))
    low = bodies(prune(messages, policy).messages)
    pressed = prune(messages, PrunePolicy(**{**vars(policy), "context_window": smaller}))
    high = bodies(pressed.messages)
    # The one exception: the cost gate may decline a cut under the smaller window, where the
    # prompt passes hard_at sooner (the forced pass clears then anyway, so the cut saves less
    # than its cache rewrite costs). Such a result is named in the plan's dropped_by_gate;
    # with the gate off (cache_aware False) that is empty, and nothing ever de-escalates.
    declined = set(pressed.plan.dropped_by_gate) if policy.cache_aware else set()
    for cid, text in low.items():
        assert TIERS[tier(high[cid])] >= TIERS[tier(text)] or cid in declined, cid


@PROPERTY
@given(fmt=FORMATS, conversation=turns(), more=turns(), data=st.data())
def test_projections_stick_as_the_conversation_grows(
    fmt: str, conversation: list[dict[str, Any]], more: list[dict[str, Any]], data: st.DataObject
) -> None:
    messages = BUILDERS[fmt](conversation)
    policy = data.draw(policies(size(messages)))
    store = MemoryStore()
    first = prune(messages, policy, store)
    every = store.projections("s")
    projected = {c: v for c, v in every.items() if not c.endswith(INPUT_SUFFIX)}
    cleared = {c.removesuffix(INPUT_SUFFIX): t for c, (_, t) in every.items() if c not in projected}
    assert projected.keys() == {a.call_id for a in first.plan.actions if a.target == "result"}
    assert cleared.keys() == {a.call_id for a in first.plan.actions if a.target == "input"}
    longer = BUILDERS[fmt](conversation + json.loads(json.dumps(more).replace("call_", "more_")))
    # no pressure: every projection renders the same bytes; pressure: they only escalate
    quiet = prune(longer, PrunePolicy(context_window=10**9), store)
    calm = bodies(quiet.messages)
    assert {cid: calm[cid] for cid in projected} == {
        cid: text for cid, (_, text) in projected.items()
    }
    pressure = prune(longer, policy, store)
    pressed = bodies(pressure.messages)
    for cid, (was, text) in projected.items():
        now = tier(pressed[cid])
        assert pressed[cid] == text or TIERS[now] > TIERS[was], cid
    for run in (quiet, pressure):  # a cleared input stays cleared, as it was
        sent = parse_transcript(run.messages).calls_by_id()
        assert {c: dict(sent[c].arguments) for c in cleared} == {
            c: json.loads(text) for c, text in cleared.items()
        }


def _turn(cid: str, name: str, args: dict[str, Any], body: str | None) -> dict[str, Any]:
    results = [] if body is None else [{"id": cid, "body": body, "error": False}]
    call = {"id": cid, "name": name, "args": args}
    return {"text": None, "calls": [call], "results": results, "user": None, "split": False,
            "extra": {}}  # fmt: skip


def test_a_cleared_outline_does_not_supersede_the_read_an_edit_builds_on() -> None:
    # keep_edited keeps the read the edit builds on and clears the outline answer the edit
    # supersedes; on the next pass, the outline's placeholder read as a content answer of the
    # whole file, so it superseded the read "by a later read" and the read cleared too
    source = "".join(f"{i:6}\tdef f{i}(x):\n" for i in range(1, 41))
    conversation = [
        _turn("call_1", "read_file", {"path": "src/b.py"}, source),
        _turn(
            "call_2",
            "read_file",
            {"path": "src/b.py"},
            "[filecache] src/b.py outline:\n" + filler(20, "def"),
        ),  # fmt: skip
        _turn(
            "call_3",
            "edit_file",
            {"path": "src/b.py", "old_string": "f1", "new_string": "g"},
            "[filecache] edit src/b.py: 40 lines (xxh3 0011aabb).\n",
        ),  # fmt: skip
        _turn("call_4", "read_file", {"path": "a.py"}, None),
    ]
    policy = PrunePolicy(
        context_window=100, protect_recent=0, min_reclaim=0, small_result=0, cache_aware=False,
        keep_edited=True, degrade=False,
    )  # fmt: skip
    for fmt in BUILDERS:
        store = MemoryStore()
        once = prune(BUILDERS[fmt](conversation), policy, store)
        assert [(a.call_id, a.tier) for a in once.plan.actions] == [("call_2", "clear")]
        twice = prune(once.messages, policy, store)
        assert twice.plan.actions == (), fmt
