"""How far pruning is from a pruner that knew the future: the read content of every request as
sent, split by what the recall over every line needs of it, and the bounds that follow.

Run from the repository root::

    .venv/bin/python bench/bench_headroom.py [CORPUS] [--window 64000] [--preset cost]
        [--read-mode auto|full]

``CORPUS`` is a directory of session traces or a ``.tar.gz`` of them (default: the dev corpus,
as ``bench_replay.py``). Each session is replayed as ``filecache replay`` replays it, and every
line of every read result in each request as sent (numbered lines: filecache's content, ``cat
-n``, SWE-agent's views; the tokens of each line counted alone) is put in one class:

- ``needed``: a line equal to disk now, of a file the session touches at or after this request,
  shown for the first time in this request: what the recall over every line counts;
- ``idle``: a line of a file the session never touches again (clearing it loses no recall, but
  a pruner cannot know that the agent will not come back); ``idle, named lately`` counts those
  of files one of the last 10 assistant turns names (by file name, as the pruner's rules do);
- ``stale``: a line that no longer equals disk;
- ``twice``: a line another result of the same request already shows;
- ``other``: the rest of the read results' text (headers, outlines, FileRefs, placeholders).

Two bounds follow, as savings against the recorded transcripts (the replay's baseline):

- ``reads cut``: the prompt as sent without the idle, stale and twice lines (a pruner of reads
  that knew the future; every other message as sent); and the same keeping the idle lines of
  files named lately (which no rule tells from a file in use);
- ``floor``: the conversation alone (system, user and assistant messages, the model's calls
  included) plus the needed lines: what recall over every line at 100% costs at the least, and
  at 90% (the needed lines cut by a tenth).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench_replay import DEFAULT, sessions_in

from filecache.core.tokens import TokenCounter
from filecache.prune.pruner import TokenMemo
from filecache.prune.pruning import PrunePolicy
from filecache.replay import replay
from filecache.replay.replay_check import _ABRIDGED, _SHOWN

CLASSES = ("needed", "idle", "stale", "twice", "other")
RECENT = 10  # turns: "named lately"


class Split:
    """The read content of each request as sent, by class (module docstring), and the
    conversation's own tokens (system, user, assistant text and calls)."""

    def __init__(self) -> None:
        self.memo = TokenMemo(TokenCounter("o200k"), limit=2_000_000)
        self.tokens: Counter[str] = Counter()

    def request(self, checker: Any, index: int, sent: Sequence[Any]) -> None:
        later = checker.later_paths[index]
        seen: set[tuple[str, int]] = set()
        turns = [m for m in sent if m.get("role") == "assistant"][-RECENT:]
        recent = "\n".join(
            str(m.get("content") or "")
            + " ".join(c["function"]["arguments"] for c in m.get("tool_calls") or ())
            for m in turns
        )
        for message in sent:
            role = message.get("role")
            if role != "tool":
                text = str(message.get("content") or "")
                calls = message.get("tool_calls") or ()
                self.tokens["conversation"] += self.memo(text) + sum(
                    self.memo(c["function"]["arguments"]) for c in calls
                )
                continue
            call = checker.calls.get(str(message.get("tool_call_id")))
            if call is None or call.tool != "read_file":
                continue
            text = str(message.get("content") or "")
            state = checker.current.get(call.path)
            lines = state[1] if state else ()
            abridged = not _SHOWN.search(text) and ("eliding lines" in text or "clipped>" in text)
            counted = 0
            for match in (_ABRIDGED if abridged else _SHOWN).finditer(text):
                n, shown = int(match.group(1)), match.group(2)
                tokens = self.memo(match.group(0))
                counted += tokens
                disk = lines[n - 1].rstrip("\n") if n <= len(lines) else None
                if call.path not in later:
                    kind = "idle"
                elif disk is None or shown not in (disk, disk.expandtabs()):
                    kind = "stale"
                elif (call.path, n) in seen:
                    kind = "twice"
                else:
                    kind = "needed"
                    seen.add((call.path, n))
                self.tokens[kind] += tokens
                if kind == "idle" and Path(call.path).name in recent:
                    self.tokens["idle, named lately"] += tokens
            self.tokens["other"] += max(0, self.memo(text) - counted)


@contextlib.contextmanager
def observing(split: Split) -> Iterator[None]:
    """Calls ``split.request`` with each request as sent (after the replay's checker saw it)."""
    original = replay._Checker.request

    def request(checker: Any, index: int, history: Any, sent: Any, pruned: Any) -> None:
        original(checker, index, history, sent, pruned)
        split.request(checker, index, sent)

    replay._Checker.request = request  # type: ignore[method-assign]
    try:
        yield
    finally:
        replay._Checker.request = original  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--window", type=int, default=64_000)
    parser.add_argument("--preset", default="cost")
    parser.add_argument("--read-mode", default="auto", choices=replay.READ_MODES)
    args = parser.parse_args()
    split = Split()
    recorded = sent = 0
    recall = pairs = 0.0
    with tempfile.TemporaryDirectory() as tmp, observing(split):
        for session in sessions_in(args.corpus, Path(tmp)):
            policy = PrunePolicy.preset(args.preset, context_window=args.window)
            result = replay.replay_session(session, policy=policy, read_mode=args.read_mode)
            recorded += result.prompt_tokens.recorded
            sent += result.prompt_tokens.filecache
            recall += result.recall_all * result.recall_all_pairs
            pairs += result.recall_all_pairs
    tokens = split.tokens
    reads = sum(tokens[k] for k in CLASSES)
    print(
        f"{args.preset} at {args.window:,}, --read-mode {args.read_mode}: prompt as sent "
        f"{sent:,} tokens ({saving(recorded, sent)} against the recorded {recorded:,}), "
        f"recall over every line {100 * recall / pairs if pairs else 100:.1f}%\n"
    )
    print("| read content as sent | tokens | share |\n| --- | ---: | ---: |")
    for kind in (*CLASSES[:2], "idle, named lately", *CLASSES[2:]):
        print(f"| {kind} | {tokens[kind]:,} | {100 * tokens[kind] / reads:.1f}% |")
    cut = sent - tokens["idle"] - tokens["stale"] - tokens["twice"]
    cut_old = cut + tokens["idle, named lately"]  # what a rule could tell idle: not named lately
    floor = tokens["conversation"] + tokens["needed"]
    floor_90 = tokens["conversation"] + 0.9 * tokens["needed"]
    print(
        "\n| bound | prompt | saving |\n| --- | ---: | ---: |\n"
        f"| as replayed | {sent:,} | {saving(recorded, sent)} |\n"
        f"| reads cut (idle, stale, twice) | {cut:,} | {saving(recorded, cut)} |\n"
        f"| the same, idle lines named lately kept | {cut_old:,} | "
        f"{saving(recorded, cut_old)} |\n"
        f"| floor: conversation + needed lines | {floor:,} | {saving(recorded, floor)} |\n"
        f"| floor at 90% of the needed lines | {floor_90:,.0f} | {saving(recorded, floor_90)} |"
    )


def saving(base: float, value: float) -> str:
    return f"{100 * (base - value) / base:.1f}%" if base else "n/a"


if __name__ == "__main__":
    main()
