"""The one invariant through a host: the model's reconstructed view always equals disk.

A host (Claude Code, Codex, opencode) runs its own tools and hands filecache each call after
it ran: reads (whose content the host showed, sometimes clipped), the host's own edits and
writes already on disk, outside changes, and what its context dropped (``keep_only``,
``reset``). The simulated model of ``test_invariant`` rebuilds every answer from what it was
shown: content as the host showed it, FileRefs from earlier results, diffs applied with
``unidiff``, and its own edits replayed on what it knew. It must never hold a line that differs
from disk, nor be pointed at a result its context dropped.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from filecache.adapters.hosts.base import HostSession
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariant import (
    LINE,
    PATHS,
    Model,
    absorb_diff,
    absorb_own_change,
    absorb_unchanged,
    contents,
    disk_lines,
    edit_pieces,
    short,
)

READ = st.tuples(
    st.just("read"),
    st.sampled_from(PATHS),
    st.one_of(st.none(), st.integers(1, 30)),
    st.integers(0, 25),
    st.sampled_from(["faithful"] * 5 + ["clipped"]),
)
EDIT = st.tuples(
    st.just("edit"), st.sampled_from(PATHS), st.integers(0, 2000), st.integers(1, 60), LINE,
    st.booleans(),
)  # fmt: skip
OPS = st.one_of(
    READ,
    READ,
    READ,
    EDIT,
    EDIT,
    st.tuples(st.just("write"), st.sampled_from(PATHS), contents()),
    st.tuples(st.just("outside"), st.sampled_from(PATHS), contents()),
    st.tuples(st.just("tweak"), st.sampled_from(PATHS), st.integers(0, 60), LINE),
    st.tuples(st.just("delete"), st.sampled_from(PATHS)),
    st.tuples(st.just("drop"), st.integers(0, 2**16)),
    st.tuples(st.just("reset")),
)


def absorb_shown(model: Model, result: SimpleNamespace, disk: list[str]) -> None:
    """Content as the host showed it: the raw lines start..end."""
    rows = result.text.split("\n")
    last = rows.pop()
    if last:
        assert result.end == result.total, "only the file's last line may lack its newline"
        rows.append(last + "<noeol>")
    assert len(rows) == result.end - result.start + 1
    for n, text in enumerate(rows, result.start):
        assert text == disk[n - 1], f"content line {n} differs from disk"
        model.add(result.path, short(result.version), n, text, frozenset([result.call_id]))


def run_host_ops(root: Path, ops: list[tuple]) -> dict[str, int]:
    model = Model()
    issued: list[str] = []
    kinds: dict[str, int] = {}
    with HostSession.open("prop-host", "ctx", root, store=":memory:") as host:
        for number, op in enumerate(ops):
            cid = f"toolu_{number}"
            kind = op[0]
            path = root / op[1] if len(op) > 1 and isinstance(op[1], str) else None
            if kind == "read":
                _, rel, start, span, shown = op
                if not path.exists():
                    continue
                disk_text = path.read_bytes().decode()
                lines = [line + "\n" for line in disk_text.split("\n")]  # \r stays in its line
                lines[-1] = lines[-1][:-1]
                if not lines[-1]:
                    lines.pop()
                first = start or 1
                if first > len(lines):
                    continue
                end = None if start is None else min(len(lines), first + span)
                host_text = "".join(lines[first - 1 : end])
                if shown == "clipped" and host_text:
                    host_text = host_text[:-1] + "…" + host_text[-1:]
                answer = host.read(rel, cid, start=start, end=end, host_text=host_text)
                if answer is None:
                    assert shown == "clipped" and host_text, "a faithful read is served"
                    issued.append(cid)  # forgotten by the session: the model has other text
                    model.forgotten.add(cid)
                    continue
                issued.append(cid)
                kinds[answer.kind] = kinds.get(answer.kind, 0) + 1
                result = SimpleNamespace(**vars_of(answer), call_id=cid)
                disk = disk_lines(path)
                if answer.kind in ("full", "partial"):
                    assert answer.same_as_host
                    absorb_shown(model, result, disk)
                elif answer.kind == "unchanged":
                    assert answer.base_call_id not in model.forgotten
                    absorb_unchanged(model, result, disk)
                else:
                    assert answer.kind == "diff"
                    absorb_diff(model, result, disk)
            elif kind == "edit":
                _, rel, at, length, new, replace_all = op
                if not path.exists():
                    continue
                before = path.read_bytes().decode()
                old = before[at % (len(before) or 1) :][:length]
                if not old or old == new or (before.count(old) > 1 and not replace_all):
                    continue  # the host's own tool refuses these
                after = before.replace(old, new)
                path.write_bytes(after.encode())  # the host's Edit tool, before the hook
                host.edited(rel, cid, [(old, new)], replace_all=replace_all)
                issued.append(cid)
                absorb_own_change(model, rel, before, after, cid, edit_pieces(before, old, new))
            elif kind == "write":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(op[2].encode())
                host.wrote(op[1], cid, op[2])
                issued.append(cid)
                absorb_own_change(model, op[1], None, op[2], cid, None)
            elif kind == "outside":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(op[2].encode())
            elif kind == "tweak":
                if not path.exists():
                    continue
                lines = path.read_bytes().decode().split("\n")
                lines[op[2] % len(lines)] = op[3]
                path.write_bytes("\n".join(lines).encode())
            elif kind == "delete":
                if path.exists():
                    path.unlink()
                    host.deleted(op[1], cid)
            elif kind == "drop":  # the host's context lost some results (cleared, compacted)
                chosen = {c for i, c in enumerate(issued) if (op[1] >> (i % 16)) & 1}
                host.keep_only(set(issued) - chosen - model.forgotten)
                model.forgotten |= chosen
            elif kind == "reset":
                host.reset()
                model.forgotten |= set(issued)
    return kinds


def vars_of(answer: object) -> dict[str, object]:
    return {name: getattr(answer, name) for name in answer.__dataclass_fields__}  # type: ignore[attr-defined]


@settings(
    max_examples=int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")) // 4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(initial=st.tuples(contents(), contents()), ops=st.lists(OPS, min_size=6, max_size=30))
def test_a_hosts_model_view_equals_disk(tmp_path_factory, initial, ops) -> None:
    root = tmp_path_factory.mktemp("root")
    for rel, text in zip(PATHS, initial, strict=True):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode())
    run_host_ops(root, ops)


def test_the_property_reaches_every_answer_kind(tmp_path: Path) -> None:
    """The harness is not vacuous: a fixed run meets content, FileRefs and diffs."""
    text = "".join(f"{'alpha ' * 6}{i}\n" for i in range(40))
    (tmp_path / "a.txt").write_text(text)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text(text)
    ops = [
        ("read", "a.txt", None, 0, "faithful"),
        ("read", "a.txt", 5, 10, "faithful"),
        ("tweak", "a.txt", 20, "changed outside"),
        ("read", "a.txt", None, 0, "faithful"),
        ("edit", "a.txt", 7, 5, "EDITED", False),
        ("read", "a.txt", None, 0, "faithful"),
    ]
    kinds = run_host_ops(tmp_path, ops)
    assert {"full", "unchanged", "diff"} <= set(kinds), kinds
