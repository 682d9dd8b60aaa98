"""``read_tool(offset=..., limit=...)``: a range inside a held whole output is a FileRef, and
only when the tool's own output for the range is exactly those lines of its whole output.

The property: a simulated model (``test_invariant``'s, which applies diffs with ``unidiff``)
rebuilds every answer from the results it still holds, and what it rebuilds equals the tool's
true output for that call, through random reads (whole, ranged, fresh), file changes and
``forget``s, for a tool whose ranges are slices of its whole output (absolute ``cat -n``
numbers) and one whose ranges are not (numbered from 1 again).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariant import LINE, Model, absorb_diff, absorb_unchanged, short

from filecache import FileCache
from filecache.core.hashing import version_of


def cat_n(lines: list[str], first: int) -> str:
    return "".join(f"{n:6d}\t{line}" for n, line in enumerate(lines, first))


def true_output(root: Path, path: str, offset: int, limit: int | None, absolute: bool) -> str:
    lines = (root / path).read_text(encoding="utf-8").splitlines(True)
    chosen = lines[offset - 1 : None if limit is None else offset - 1 + limit]
    return cat_n(chosen, offset if absolute else 1)


def tools(cache: FileCache, root: Path):  # type: ignore[no-untyped-def]
    session = cache.session("ranges")

    @session.read_tool(offset="offset", limit="limit")
    def read_abs(path: str, offset: int = 1, limit: int | None = None) -> str:
        return true_output(root, path, offset, limit, True)

    @session.read_tool(offset="offset", limit="limit")
    def read_rel(path: str, offset: int = 1, limit: int | None = None) -> str:
        return true_output(root, path, offset, limit, False)

    return session, read_abs, read_rel


def test_a_range_inside_a_held_whole_read_is_a_fileref(cache: FileCache, root: Path) -> None:
    session, read_abs, read_rel = tools(cache, root)
    whole = read_abs("notes.txt", call_id="w")
    assert whole == true_output(root, "notes.txt", 1, None, True)
    answer = read_abs("notes.txt", offset=20, limit=5, call_id="r")
    assert answer.startswith("[filecache] notes.txt unchanged since your result w")
    assert "(lines 20-24, " in answer
    record = session.ledger().calls["r"]
    assert (record.kind, record.base_call_id, record.start, record.end) == (
        "unchanged",
        "w",
        20,
        24,
    )
    # A tool whose range output is not a slice of its whole output gets no such FileRef.
    read_rel("notes.txt", call_id="w2")
    assert read_rel("notes.txt", offset=20, limit=5, call_id="r2") == true_output(
        root, "notes.txt", 20, 5, False
    )


def test_a_range_first_then_the_whole_output_sends_content(cache: FileCache, root: Path) -> None:
    session, read_abs, _ = tools(cache, root)
    part = read_abs("notes.txt", offset=3, limit=10, call_id="p")
    assert part == true_output(root, "notes.txt", 3, 10, True)
    assert session.ledger().calls["p"].kind == "partial"
    assert read_abs("notes.txt", call_id="w") == true_output(root, "notes.txt", 1, None, True)
    assert "unchanged since your result" in read_abs("notes.txt", offset=3, limit=10, call_id="p2")
    assert session.ledger().calls["p2"].base_call_id in ("p", "w")  # both show lines 3-12


def disk_of(text: str) -> list[str]:
    """``test_invariant``'s line form: no '\\n'; an unterminated last line marked."""
    rows = text.split("\n")
    last = rows.pop()
    return rows + ([last + "<noeol>"] if last else [])


READ = st.tuples(
    st.just("read"),
    st.booleans(),  # the absolute-numbered tool (ranges are slices) or the renumbering one
    st.one_of(st.none(), st.none(), st.integers(1, 70)),
    st.one_of(st.none(), st.integers(1, 25)),
    st.sampled_from([False, False, False, True]),  # fresh
)
OPS = st.lists(
    st.one_of(
        READ,
        READ,
        st.tuples(st.just("tweak"), st.integers(0, 80), LINE, st.booleans()),
        st.tuples(st.just("forget"), st.integers(0, 2**16)),
    ),
    min_size=3,
    max_size=25,
)


@settings(
    max_examples=int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    lines=st.lists(LINE, min_size=10, max_size=60),
    ops=OPS,
    ratio=st.sampled_from([0.5, 50.0]),  # 50: a diff even when it is not smaller (more diffs)
)
def test_the_reconstructed_view_equals_the_true_output(tmp_path_factory, lines, ops, ratio) -> None:
    root = tmp_path_factory.mktemp("root")
    (root / "a.txt").write_text("\n".join(lines) + "\n")
    model, issued = Model(), []
    with FileCache(root, store=":memory:", diff_max_ratio=ratio) as cache:
        session, read_abs, read_rel = tools(cache, root)
        for n, op in enumerate([("read", True, None, None, False), *ops]):
            if op[0] == "tweak":
                _, at, line, insert = op
                rows = (root / "a.txt").read_text().split("\n")
                at %= len(rows)
                rows[at : at + (0 if insert else 1)] = [line]
                (root / "a.txt").write_text("\n".join(rows))
                continue
            if op[0] == "forget":
                if issued:
                    gone = issued[op[1] % len(issued)]
                    session.forget([gone])
                    model.forgotten.add(gone)
                continue
            _, absolute, offset, limit, fresh = op
            tool, cid = (read_abs if absolute else read_rel), f"c{n}"
            answer = tool("a.txt", offset=offset or 1, limit=limit, fresh=fresh, call_id=cid)
            truth = true_output(root, "a.txt", offset or 1, limit, absolute)
            issued.append(cid)
            record = session.ledger().calls[cid]
            whole = true_output(root, "a.txt", 1, None, absolute)
            # Answered as lines of the whole output, or as the call's own output.
            disk = disk_of(whole if record.version == version_of(whole.encode()) else truth)
            result = SimpleNamespace(
                text=answer, version=record.version, base_call_id=record.base_call_id,
                start=record.start, end=record.end, call_id=cid, path=record.path,
            )  # fmt: skip
            if record.kind in ("full", "partial"):
                assert answer == truth, "content must be the tool's own output"
                for i, text in enumerate(disk_of(answer)):
                    assert text == disk[record.start - 1 + i]
                    model.add(
                        record.path, short(record.version), record.start + i, text, frozenset([cid])
                    )
            elif record.kind == "unchanged":
                absorb_unchanged(model, result, disk)
            else:
                assert record.kind == "diff", record.kind
                absorb_diff(model, result, disk)
            shown = [
                model.get(record.path, short(record.version), i)
                for i in range(record.start, record.end + 1)
            ]
            assert all(s is not None for s in shown)
            rebuilt = "\n".join(s[0] for s in shown if s is not None)
            expected = "\n".join(disk_of(truth))
            assert rebuilt == expected, "the model's view differs from the tool's true output"
