"""What a warm pruning pass runs code in (issue 22's hops; ``bench/bench_hops.py`` counts them).

A pass over plain message dicts of file tools runs none of the parts it has no use for: no
``settings`` (the deny-list is one pattern compiled once), no SDK dispatch (``sdk_messages``),
no re-run pass without two command outputs (``shell_outputs``); and the ledger is built without
a Python frame per event. Counts of frames (``bench_hops.hops``: ``sys.setprofile``), never times.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from prune_chat import Chat

from filecache import FileCache, PrunePolicy, prune_messages

SOURCE = "".join(f"def handler_{i}(event):\n    return compute({i}, event)\n\n" for i in range(40))
EAGER = PrunePolicy(
    context_window=2_000, prune_at=0.0, target=0.0, protect_recent=0, min_reclaim=0,
    cache_aware=False,
)  # fmt: skip


def test_a_pass_over_plain_dicts_runs_no_code_it_has_no_use_for(
    tmp_path: Path, bench_hops: ModuleType
) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "app.py").write_text(SOURCE)
    with FileCache(root.resolve(), store=tmp_path / "store.db") as cache:
        session = cache.session("s1")
        chat = Chat()
        chat.read("app.py", session.read("app.py", call_id="r1").text, call_id="r1")
        edit = session.edit("app.py", "compute(3,", "compute(33,", call_id="e1")
        chat.edit("app.py", edit.text, call_id="e1")
        again = session.read("app.py", call_id="r2", fresh=True)
        chat.read("app.py", again.text, call_id="r2")
        calm = PrunePolicy(context_window=10**9)
        prune_messages(chat.messages, session=session, policy=calm)  # warm: imports, tokenizer
        results: list[Any] = []
        ran = bench_hops.hops(
            lambda: results.append(prune_messages(chat.messages, session=session, policy=EAGER))
        )
    assert "r1" in results[0].plan.replacements  # the pass did its work: the stale read cleared
    assert "filecache.prune.pruning" in ran and "filecache.ledger" in ran
    unused = {"filecache.settings", "filecache.prune.sdk_messages", "filecache.prune.shell_outputs"}
    assert not unused & ran.keys()
    assert ran["filecache.ledger"] <= 2  # build_ledger and its writes' dict: none per event
