"""The one invariant with shell reads mixed in: the model's view never goes stale.

The random sequences of ``test_invariant`` (reads, edits, writes, outside changes, deletions,
``forget``) get shell reads (``cat``, ``nl -ba | sed -n``, ``sed -n`` with one or two ranges,
``head``, ``tail``) answered by ``bash_reads.answer_shell_read``, and ``sed -i`` run by real
bash through ``serve_bash``. A shell read's content answer must be byte-identical to what bash
prints; the lines it shows are learnt from bash's own numbering of the same selection
(``nl -ba F | …``), never from filecache; FileRefs and diffs are checked by the oracle of
``test_invariant`` against the lines the model holds.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariant import (
    LINE,
    OPS,
    PATHS,
    Model,
    absorb_content,
    absorb_diff,
    absorb_own_change,
    absorb_unchanged,
    contents,
    disk_lines,
    edit_pieces,
    short,
)

from filecache import EditError, FileCache, FileCacheError, MissingFileError, RangeError
from filecache.core.hashing import version_of
from filecache.shell.bash_reads import answer_shell_read, serve_bash
from filecache.shell.shell_parse import NotServable, parse_shell_read

FORMS = (
    ("cat {p}", "nl -ba {p}"),
    ("nl -ba {p} | sed -n '{a},{b}p'", "nl -ba {p} | sed -n '{a},{b}p'"),
    ("sed -n '{a},{b}p' {p}", "nl -ba {p} | sed -n '{a},{b}p'"),
    ("cat -n {p} | sed -n '{a},+{n}p'", "nl -ba {p} | sed -n '{a},+{n}p'"),
    ("sed -n -e '{a},{b}p' -e '{c},+{n}p' {p}", "nl -ba {p} | sed -n -e '{a},{b}p' -e '{c},+{n}p'"),
    ("head -n {n} {p}", "nl -ba {p} | head -n {n}"),
    ("tail -n {n} {p}", "nl -ba {p} | tail -n {n}"),
)
SHELL_READ = st.tuples(
    st.just("shell"), st.sampled_from(PATHS), st.integers(0, len(FORMS) - 1),
    st.integers(1, 40), st.integers(1, 40), st.integers(1, 60), st.integers(0, 25),
)  # fmt: skip
SED_I = st.tuples(st.just("sed_i"), st.sampled_from(PATHS), st.integers(1, 60), LINE)
WHOLE = st.tuples(
    st.just("shell"), st.sampled_from(PATHS), st.just(0), st.just(1), st.just(1), st.just(1),
    st.just(0),
)  # fmt: skip
MIXED = st.one_of(OPS, SHELL_READ, SHELL_READ, WHOLE, SED_I)
KINDS: dict[str, int] = {}  # shell answers by kind, over all examples


def bash(root: Path, command: str) -> str:
    out = subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, check=False)
    return out.stdout.decode("utf-8")


def shell_read(model: Model, session, root: Path, op: tuple, issued: list[str]) -> None:
    _, rel, form, a, b, c, n = op
    values = {"p": rel, "a": a, "b": max(a, b), "c": c, "n": n or 1}
    command, numbered = (f.format(**values) for f in FORMS[form])
    read = parse_shell_read(command)
    assert read is not None, command
    path = root / rel
    try:
        answer = answer_shell_read(session, read, None)
    except (NotServable, FileCacheError):
        return  # the shell answers (missing, empty output)
    issued.append(answer.call_id)
    KINDS[answer.kind] = KINDS.get(answer.kind, 0) + 1
    disk = disk_lines(path)
    record = session.ledger().calls[answer.call_id]
    if answer.kind in ("full", "partial"):
        assert answer.text == bash(root, command), "a content answer is what bash prints"
        h = short(version_of(path.read_bytes()))
        for row in bash(root, numbered).split("\n")[:-1]:  # nl ends every line
            number = int(row.split("\t", 1)[0])
            model.add(answer.path, h, number, disk[number - 1], frozenset([answer.call_id]))
        return
    result = SimpleNamespace(
        text=answer.text, version=answer.version, start=answer.start, end=answer.end,
        base_call_id=record.base_call_id, call_id=answer.call_id, path=answer.path,
    )  # fmt: skip
    if answer.kind == "unchanged":
        absorb_unchanged(model, result, disk)
    else:
        assert answer.kind == "diff", answer.kind
        absorb_diff(model, result, disk)


def run_mixed(root: Path, ops: list[tuple]) -> None:
    model = Model()
    issued: list[str] = []
    with FileCache(root, store=":memory:") as cache:
        session = cache.session("shell-prop")
        for op in ops:
            kind, rel = op[0], op[1] if len(op) > 1 else None
            path = root / rel if isinstance(rel, str) else None
            if kind == "shell":
                shell_read(model, session, root, op, issued)
            elif kind == "sed_i":  # bash changes the file; serve_bash re-hashes after it
                if path is not None and path.exists():
                    word = op[3].split(" ")[0] or "x"
                    command = f"sed -i '{op[2]}s/.*/{word} sed/' {rel}"
                    serve_bash(session, command, lambda c: bash(root, c))
            elif kind == "read":
                _, _, offset, limit, fresh = op
                try:
                    result = session.read(rel, offset=offset, limit=limit, fresh=fresh, mode="full")
                except (MissingFileError, RangeError):
                    continue
                issued.append(result.call_id)
                disk = disk_lines(path)
                {"full": absorb_content, "partial": absorb_content, "unchanged": absorb_unchanged,
                 "diff": absorb_diff}[result.kind](model, result, disk)  # fmt: skip
            elif kind == "edit":
                _, _, at, length, new, replace_all = op
                if not path.exists():
                    continue
                before = path.read_bytes().decode()
                old = before[at % (len(before) or 1) :][:length]
                if not old:
                    continue
                try:
                    result = session.edit(rel, old, new, replace_all=replace_all)
                except EditError:
                    continue
                issued.append(result.call_id)
                after = path.read_bytes().decode()
                pieces = edit_pieces(before, old, new)
                if not replace_all:
                    pieces = pieces[:1]
                absorb_own_change(model, rel, before, after, result.call_id, pieces)
            elif kind == "write":
                result = session.write(rel, op[2])
                issued.append(result.call_id)
                absorb_own_change(model, rel, None, op[2], result.call_id, None)
            elif kind == "outside":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(op[2].encode())
            elif kind == "tweak" and path.exists():  # one line replaced or inserted
                lines = path.read_bytes().decode().split("\n")
                i = op[2] % len(lines)
                lines[i : i + (0 if op[4] else 1)] = [op[3]]
                path.write_bytes("\n".join(lines).encode())
            elif kind == "delete":
                if path.exists():
                    path.unlink()
            elif kind == "forget" and issued:
                chosen = {c for i, c in enumerate(issued) if (op[1] >> (i % 16)) & 1}
                session.forget(chosen)
                model.forgotten |= chosen


@settings(
    # Every example runs real bash (dozens of processes): a fifth of the invariant's examples.
    max_examples=max(20, int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")) // 5),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(initial=st.tuples(contents(), contents()), ops=st.lists(MIXED, min_size=8, max_size=40))
def test_model_view_equals_disk_with_shell_reads(tmp_path_factory, initial, ops) -> None:
    root = tmp_path_factory.mktemp("root")
    for rel, text in zip(PATHS, initial, strict=True):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode())
    run_mixed(root, ops)


def teardown_module() -> None:
    print("shell answer kinds over all examples:", KINDS)
