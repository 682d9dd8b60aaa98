"""A scripted agent loop that prunes before every request never relies on what it cleared.

A real ``Session`` answers reads, edits, writes, bash calls (with ``rehash``) and outside
changes chosen by hypothesis, building an OpenAI chat message list. Before every request the
list is pruned with ``prune_messages(..., session=session)`` (a small window, cache-aware on or
off), either the full history every time (the store's projections keep it stable) or the pruned
list fed forward. After every prune:

- ``Session.sync`` of what is sent finds nothing left to forget (pruning already forgot it);
- no FileRef or diff the session gives relies on a result that is cleared or degraded in the
  messages as sent: its ``base_call_id``, and every call id its lines rely on (read from the
  session's view right after the answer), is still there verbatim for as long as the answer
  itself is.

Every edit and outside change makes content never seen before, so no version comes back (a
revert would let a view mix facts of two epochs, which the planner's walk-back does not model).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prune_chat import Chat, filler, tier, words

from filecache import FileCache, Session
from filecache.core.render import INPUT_MARKER
from filecache.prune.codecs.base import Transcript
from filecache.prune.pruner import prune_messages
from filecache.prune.pruning import PrunePolicy
from filecache.prune.transcript import parse_transcript

FILES = {
    "app.py": "".join(
        f"def handler_{i}(event):\n    return compute({i}, event)\n\n" for i in range(40)
    ),
    "lib/util.py": "".join(f"def util_{i}(x):\n    return x * {i}\n" for i in range(30)),
    "README.md": "".join(f"## Part {i}\n\nThe quick brown fox {i} jumps.\n" for i in range(15)),
}
PATHS = sorted(FILES)

READ = st.tuples(
    st.just("read"),
    st.sampled_from(PATHS),
    st.sampled_from([None, None, 1, 10, 25]),
    st.sampled_from([None, None, 10, 30]),
    st.integers(0, 9).map(lambda n: n == 0),  # fresh, now and then
)
OPS = st.one_of(
    READ,
    READ,
    READ,
    READ,
    st.tuples(st.just("edit"), st.sampled_from(PATHS), st.integers(0, 10**6)),
    st.tuples(st.just("write"), st.sampled_from(PATHS), st.integers(3, 60)),
    st.tuples(st.just("outside"), st.sampled_from(PATHS), st.integers(0, 10**6)),
    st.tuples(st.just("bash"), st.integers(0, 600)),
    st.tuples(st.just("talk"), st.integers(1, 300)),
    st.tuples(st.just("cycle"), st.sampled_from(PATHS), st.integers(0, 10**6)),
)


def expand(ops: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """A ``cycle`` is what agents do most: read a file, edit it, read it again."""
    out: list[tuple[Any, ...]] = []
    for op in ops:
        if op[0] == "cycle":
            read = ("read", op[1], None, None, False)
            out += [read, ("edit", op[1], op[2]), read]
        else:
            out.append(op)
    return out


class Loop:
    """The agent: a session over a temp tree, the history, and what the answers rely on."""

    def __init__(self, session: Session, root: Path) -> None:
        self.session, self.root = session, root
        self.chat = Chat()
        self.serial = 0
        self.relies: dict[str, frozenset[str]] = {}  # FileRef/diff call id -> what it needs
        self.tools: dict[str, str] = {}  # call id -> read / edit / write / bash

    def cid(self, tool: str) -> str:
        self.serial += 1
        self.tools[f"c{self.serial}"] = tool
        return f"c{self.serial}"

    def act(self, op: tuple[Any, ...], sent: list[Any]) -> None:
        kind, session, chat = op[0], self.session, self.chat
        if kind == "read":
            _, path, offset, limit, fresh = op
            lines = (self.root / path).read_text().count("\n")
            offset = None if offset is None else min(offset, max(lines, 1))
            cid = self.cid("read")
            answer = session.read(
                path, offset=offset, limit=limit, fresh=fresh, mode="full", call_id=cid
            )
            chat.read(path, answer.text, offset, limit, call_id=cid)
            if answer.kind in ("unchanged", "diff"):
                assert answer.base_call_id is not None
                self.check_intact(
                    parse_transcript(sent), answer.base_call_id, f"{cid} ({answer.kind})"
                )
                needs = set(session.ledger().calls[cid].deps)  # every result it relies on
                assert answer.base_call_id in needs
                self.relies[cid] = needs - {cid} | {answer.base_call_id}
        elif kind == "edit":
            _, path, n = op
            text = (self.root / path).read_text()
            old = text.split("\n")[n % text.count("\n")]
            new = f"{old}  # edit {self.serial}"
            cid = self.cid("edit")
            if old:
                edit = session.edit(path, old + "\n", new + "\n", replace_all=True, call_id=cid)
                args = {"path": path, "old_string": old + "\n", "new_string": new + "\n"}
                chat.call("edit_file", args, edit.text, cid)  # the arguments as the model sent them
            else:
                write = session.write(path, text + new + "\n", call_id=cid)
                args = {"path": path, "content": text + new + "\n"}
                chat.call("write_file", args, write.text, cid)
        elif kind == "write":
            _, path, n = op
            cid = self.cid("write")
            content = "".join(f"line {i} of write {self.serial}\n" for i in range(n))
            write = session.write(path, content, call_id=cid)
            chat.call("write_file", {"path": path, "content": content}, write.text, cid)
        elif kind in ("outside", "bash"):
            if kind == "outside":
                with (self.root / op[1]).open("a") as f:
                    f.write(f"# appended outside {op[2]} {self.serial}\n")
            cid = self.cid("bash")
            chat.bash("make" if kind == "bash" else f"touch {op[1]}", filler(op[-1] % 600), cid)
            session.rehash(cid)
        else:
            chat.say(filler(op[1], "talk"))

    def check_intact(self, transcript: Transcript, call_id: str, who: str) -> None:
        """``call_id``'s result is in the request ``transcript`` as answered (or, for a
        write/edit, its call)."""
        if self.tools.get(call_id) in ("edit", "write"):
            call = transcript.calls_by_id().get(call_id)
            assert call is not None, f"{who}: the call {call_id} is gone"
            # what the model wrote is in its call's arguments: they must be sent as written
            assert INPUT_MARKER not in call.raw_arguments, f"{who}: {call_id}'s input is cleared"
            return
        result = transcript.results_by_id().get(call_id)
        assert result is not None, f"{who} relies on {call_id}, which is not in the request"
        assert tier(result.text) == "keep", f"{who} relies on {call_id}: {result.text[:120]}"

    def check_sent(self, sent: list[Any]) -> None:
        assert self.session.sync(parse_transcript(sent)) == set()
        transcript = parse_transcript(sent)  # parsed once for every check below
        results = transcript.results_by_id()
        for cid, needs in self.relies.items():
            if cid in results and tier(results[cid].text) == "keep":
                for need in sorted(needs):
                    self.check_intact(transcript, need, f"the live answer {cid}")


def run_loop(
    ops: list[tuple[Any, ...]], policy: PrunePolicy, forward: bool, inputs: list[str] | None = None
) -> int:
    """Returns how many results (and inputs) were pruned along the way; ``inputs`` collects
    the calls whose input was cleared."""
    pruned = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for path, text in FILES.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        with FileCache(root, store=":memory:") as cache:
            loop = Loop(cache.session(), root)
            outgoing: list[Any] = list(loop.chat.messages)
            for op in ops:
                result = prune_messages(
                    outgoing if forward else loop.chat.messages,
                    session=loop.session,
                    policy=policy,
                    count=words,
                )
                pruned += len(result.plan.actions)
                if inputs is not None:
                    inputs += [a.call_id for a in result.plan.actions if a.target == "input"]
                sent = result.messages
                loop.check_sent(sent)
                before = len(loop.chat.messages)
                loop.act(op, sent)
                outgoing = list(sent) + loop.chat.messages[before:]
    return pruned


POLICIES = st.builds(
    PrunePolicy,
    context_window=st.integers(400, 3_000),
    protect_recent=st.integers(0, 600),
    min_reclaim=st.integers(0, 100),
    small_result=st.integers(20, 300),
    cache_aware=st.booleans(),
    output_first=st.booleans(),  # and the other knobs of the context preset
    in_use_turns=st.integers(0, 6),
    keep_edited=st.booleans(),
    degrade=st.booleans(),
    prune_at=st.sampled_from([0.65, 0.05]),  # the defaults' trigger and the context preset's
    target=st.sampled_from([0.5, 0.0]),
)


@pytest.mark.parametrize("forward", [False, True], ids=["full-history", "fed-forward"])
@settings(
    # a whole agent loop per example: a tenth of the property budget (2,000 in CI: 200)
    max_examples=max(80, int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")) // 10),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(ops=st.lists(OPS, min_size=8, max_size=50), policy=POLICIES)
def test_pruning_before_every_request_never_leaves_a_ref_without_its_base(
    forward: bool, ops: list[tuple[Any, ...]], policy: PrunePolicy
) -> None:
    run_loop(expand(ops), policy, forward)


@pytest.mark.parametrize("forward", [False, True])
@pytest.mark.parametrize("cache_aware", [False, True])
def test_a_scripted_session_prunes_and_stays_consistent(forward: bool, cache_aware: bool) -> None:
    """A fixed script long enough that pruning happens many times (hypothesis may not)."""
    script: list[tuple[Any, ...]] = []
    for n in range(12):
        path = PATHS[n % 3]
        script += [
            ("read", path, None, None, False),
            ("bash", 300 + n),
            ("read", path, 1, 20, False),
            ("edit", path, n * 7),
            ("read", path, None, None, False),
            ("outside", PATHS[(n + 1) % 3], n),
            ("read", PATHS[(n + 1) % 3], None, None, False),
            ("read", path, 5, 10, False),
            ("talk", 50),
        ]
    policy = PrunePolicy(
        context_window=2_500, protect_recent=300, min_reclaim=50, small_result=100,
        cache_aware=cache_aware, turns_left=40,
    )  # fmt: skip
    assert run_loop(script, policy, forward) >= 12  # at least once per round of the script
