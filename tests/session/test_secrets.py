"""Secrets never stored in any form: the deny-list, case-insensitive, on paths and link targets.

After reads (full, ranged, outline, symbol-less auto outlines), edits, writes, rehash and
pruning (with and without a session), the SQLite store's bytes (the database, its WAL and
shared memory, and every compressed blob or archive row decompressed) hold none of a denied
file's content, while a plain file's content is there (so the scan can find what it looks for).
"""

from __future__ import annotations

import fnmatch
import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from filecache import FileCache, PrunePolicy, prune_messages
from filecache.cli import main
from filecache.settings import deny_pattern, is_denied


def secret_text(tag: str, lines: int = 80) -> str:
    return "".join(f"KEY_{i}=SECRET-{tag}-{i:04d}-value\n" for i in range(lines))


DENIED = {
    ".ENV": "ENV",
    "X.PEM": "PEM",
    "ID_RSA": "RSA",
    "k.KEY": "KEY",
    ".env.local": "LOCAL",
    "certs/Server.P12": "P12",
    ".env": "DOTENV",  # read only through the link config.txt -> .env
    "plain.txt": "ALIASED",  # read only through the link .Env.prod -> plain.txt
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "certs").mkdir(parents=True)
    for name, tag in DENIED.items():
        (root / name).write_text(secret_text(tag), encoding="utf-8")
    (root / "config.txt").symlink_to(".env")
    (root / ".Env.prod").symlink_to("plain.txt")
    (root / "notes.txt").write_text(secret_text("CONTROL"), encoding="utf-8")
    return root


def store_bytes(db: Path) -> bytes:
    """Everything the store holds: raw file bytes, and every blob column decompressed."""
    raw = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    out = [raw]
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes):
                        try:
                            out.append(zlib.decompress(value))
                        except zlib.error:
                            out.append(value)
                    elif isinstance(value, str):
                        out.append(value.encode("utf-8"))
    finally:
        conn.close()
    return b"\n".join(out)


def _chat(results: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """An OpenAI transcript: one read_file (or bash) call per (call id, path or command, text)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look at the config"}]
    for cid, target, text in results:
        name, args = ("bash", {"command": target}) if " " in target else ("read_file", {})
        args = args or {"path": target}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": cid, "content": text})
    messages.append({"role": "user", "content": "thanks " * 50})
    messages.append(
        {"role": "assistant", "content": None, "tool_calls": [{"id": "last", "type": "function",
         "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]}
    )  # fmt: skip
    messages.append({"role": "tool", "tool_call_id": "last", "content": "ok"})  # protected
    return messages


POLICY = PrunePolicy(
    context_window=2_000, protect_recent=0, min_reclaim=0, small_result=0, cache_aware=False
)


def test_no_form_of_a_denied_file_reaches_the_store(tree: Path, tmp_path: Path) -> None:
    db = tmp_path / "store" / "cache.db"
    asked = [n for n in DENIED if n not in (".env", "plain.txt")] + ["config.txt", ".Env.prod"]
    results: list[tuple[str, str, str]] = []
    with FileCache(tree, store=db, outline_threshold=10) as cache:
        session = cache.session("s1")
        for n, path in enumerate([*asked, "notes.txt"]):
            shown = session.read(path, call_id=f"r{n}")  # auto: an outline (threshold 10)
            assert shown.kind == "outline"
            full = session.read(path, mode="full", call_id=f"f{n}")
            assert "SECRET-" in full.text  # the model is shown what it reads
            results.append((f"f{n}", path, full.text))
            session.read(path, offset=3, limit=5, fresh=True)
            session.read(path, mode="outline")
            cache.engine.outlines.outline_text(full.version, full.path, max_tokens=100)
        session.read("plain.txt")  # the aliased file by its own name: its version is secret
        session.edit(".ENV", "SECRET-ENV-0001", "SECRET-ENV-EDITED")
        changed = (tree / ".ENV").read_text().replace("SECRET-ENV-0002", "SECRET-ENV-OUTSIDE")
        (tree / ".ENV").write_text(changed)
        assert session.read(".ENV", mode="full").kind == "diff"  # from memory, not the store
        session.write("new.pem", secret_text("WRITTEN"))
        session.write("Deploy.Key", secret_text("WRITTEN2"))
        session.rehash()
        results.insert(0, ("b1", "cat .ENV", secret_text("ENV")))  # a bash read of it
        pruned = prune_messages(_chat(results), session=session, policy=POLICY)
        cleared = {a.call_id for a in pruned.plan.actions if a.tier == "clear"}
        degraded = {a.call_id: a.tier for a in pruned.plan.actions if a.tier != "clear"}
        assert {f"f{n}" for n in range(len(asked))} | {"b1"} <= cleared
        assert set(degraded) == {f"f{len(asked)}"}  # only the plain file is outlined/truncated
        again_here = prune_messages(_chat(results), session=session, policy=POLICY)
        assert again_here.messages == pruned.messages  # sticky: the marker matches the text
        assert not again_here.plan.actions
        cache.engine.versions.flush()
    # without a session (the CLI's prune with --store), the deny-list still applies
    with FileCache(tree, store=db) as cache:
        again = prune_messages(
            _chat([(f"x{cid}", path, text) for cid, path, text in results]),
            store=cache.engine.store,
            policy=POLICY,
            session_id="anon",
            root=tree,
        )
        assert len(again.plan.actions) == len(results)
    held = store_bytes(db)
    for tag in [*DENIED.values(), "WRITTEN", "WRITTEN2", "ENV-EDITED", "ENV-OUTSIDE"]:
        assert f"SECRET-{tag}-".encode() not in held, tag
    assert b"SECRET-CONTROL-" in held  # the scan does find content that is stored


def test_archive_show_says_a_denied_result_was_not_stored(
    tree: Path, tmp_path: Path, runner: CliRunner
) -> None:
    db = tmp_path / "s.db"
    filler = [(f"fill{i}", f"ls dir{i}", "word " * 1500) for i in range(6)]  # newest: protected
    messages = _chat(
        [("c1", ".ENV", secret_text("ENV")), ("c2", "notes.txt", secret_text("CONTROL")), *filler]
    )
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(messages))
    result = runner.invoke(
        main,
        ["prune", str(source), "--store", str(db), "--window", "2000", "--root", str(tree),
         "--no-cache-aware", "--preset", "seeds", "-o", str(tmp_path / "out.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    assert "SECRET-ENV-" not in json.dumps(out)  # cleared, not truncated
    shown = runner.invoke(main, ["archive", "show", "c1", "--store", str(db)])
    assert shown.exit_code == 2
    assert ".ENV is on the deny-list, so this result was not stored" in shown.stderr
    assert shown.stderr.count("\n") == 1
    plain = runner.invoke(main, ["archive", "show", "c2", "--store", str(db)])
    assert plain.exit_code == 0 and plain.stdout == secret_text("CONTROL")
    assert b"SECRET-ENV-" not in store_bytes(db)


@pytest.mark.parametrize(
    ("path", "denied"),
    [
        (".ENV", True), (".Env.Local", True), ("sub/X.PEM", True), ("ID_RSA", True),
        ("id_rsa.pub", True), ("k.KEY", True), ("a/b/Cert.p12", True), ("./.env", True),
        ("env.txt", False), ("keys.txt", False), ("pem", False), ("src/app.py", False),
    ],
)  # fmt: skip
def test_the_deny_list_ignores_case(path: str, denied: bool) -> None:
    deny = (".env*", "*.pem", "*.key", "id_rsa*", "*.p12")
    assert is_denied(path, deny) is denied
    assert (deny_pattern(deny).match(path.lower()) is not None) is denied


@pytest.mark.parametrize(
    "deny",
    [
        (), ("private/*",), ("*",), ("a*b",), ("*.PY", "x?z/*"), ("[ab]*",), ("[!a]*",),
        (".*",), ("*/secret",), ("sub/*.key",), ("./x",),
    ],
)  # fmt: skip
def test_the_compiled_deny_list_matches_what_is_denied_matches(deny: tuple[str, ...]) -> None:
    """``Secrets`` matches the deny-list compiled once (``deny_pattern``): the same answer as
    ``is_denied`` on the path and on its name, with a leading ``./`` dropped once."""
    paths = [
        "x/a/yb", "ab", "a/b", "./x", "././.env", "./a.py", "private/notes.md", "Private/N.md",
        "q/private/notes.md", "xyz/a", "xAz/b/c", "sub/a.key", "q/sub/a.key", "a/secret",
        "secret", "a/b/secret", "dir/", "", "./", "a\nb/.env", ".env/x", "b", "ba/c", "B.PY",
    ]  # fmt: skip
    match = deny_pattern(deny).match
    for path in paths:
        assert (match(path.lower()) is not None) is is_denied(path, deny), path


def _is_denied_by_globs(path: str, deny: tuple[str, ...]) -> bool:
    """The deny-list's definition, one glob at a time: the path without a leading ``./``, or
    its file name, matches a glob, both lower-cased."""
    rel = path.removeprefix("./").lower()
    name = rel.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(rel, p) for p in map(str.lower, deny)
    )


_GLOB_CHARS = st.sampled_from(list("aEks./*?[]!"))
_PATH_CHARS = st.sampled_from(list("aAeE./\n[İſK"))  # ſ, Kelvin K: lowered before the match


@given(
    st.lists(st.text(_GLOB_CHARS, max_size=5), max_size=3).map(tuple),
    st.text(_PATH_CHARS, max_size=8),
)
@example(("e*",), "a/e/a")  # a glob may match past a "/" only from the path's start
@example(("./e",), "./e")  # one "./" is stripped, never given back to a glob
@example((".env*",), ".Env.Local/x/../y")
@example(("**",), "a/\nb")  # "*" matches "/" and a newline alike
@example(("k*", "[!s]"), "K/ſ")  # lower() maps the Kelvin sign to "k"; "ſ" stays itself
@example(("a/*",), "./a/\n/b")
def test_the_compiled_deny_list_matches_as_its_globs_do(deny: tuple[str, ...], path: str) -> None:
    """``is_denied`` (one regular expression for the whole list) answers as the globs do, one
    at a time, on the name and the relative path: ``./`` stripped once, any case."""
    assert is_denied(path, deny) is _is_denied_by_globs(path, deny)
    assert is_denied("./" + path, deny) is _is_denied_by_globs("./" + path, deny)


def test_a_configured_pattern_matches_the_relative_path_in_any_case(tree: Path) -> None:
    (tree / "Private").mkdir()
    (tree / "Private" / "notes.md").write_text("x\n")
    with FileCache(tree, store=":memory:", deny=("private/*",)) as cache:
        assert cache.engine.secrets.denied(cache.engine.paths.locate("Private/notes.md"))
        assert not cache.engine.secrets.denied(cache.engine.paths.locate("notes.txt"))


def test_a_link_to_a_denied_file_and_a_denied_link_are_both_denied(tree: Path) -> None:
    with FileCache(tree, store=":memory:") as cache:
        to_secret = cache.engine.paths.locate("config.txt")
        assert to_secret.rel == ".env" and cache.engine.secrets.denied(to_secret)
        denied_name = cache.engine.paths.locate(".Env.prod")
        assert denied_name.rel == "plain.txt" and denied_name.aliases == (".Env.prod",)
        assert cache.engine.secrets.denied(denied_name)
        assert not cache.engine.secrets.denied(
            cache.engine.paths.locate("plain.txt")
        )  # by its own name, before any read


def test_a_version_that_becomes_secret_while_its_blob_waits_is_never_stored(
    tmp_path: Path,
) -> None:
    """A version read under a plain name waits for its blob (written on flush, or when it
    leaves memory); once it is marked secret (a tool's output showed a denied file's lines with
    it) neither path stores it. ``Versions`` asks ``Secrets`` before it writes: nothing calls
    back into it when a version is marked."""
    body = "".join(f"line {i}: {'x' * 60}\n" for i in range(500))  # ~35 KB: a few fill 256 KiB
    (tmp_path / "a.txt").write_text(body)
    (tmp_path / "kept.txt").write_text("plain\n")
    with FileCache(tmp_path, store=tmp_path / "s.db", memory_mb=0.25) as cache:
        engine = cache.engine
        holder = cache.session("holder")
        first = holder.read("a.txt", mode="full").version
        kept = holder.read("kept.txt").version
        engine.secrets.mark(first)
        churn = cache.session("churn")
        for i in range(12):  # far over memory_mb: ``first`` leaves memory while held
            (tmp_path / "a.txt").write_text(body.replace("line 5:", f"line 5 v{i}:"))
            churn.read("a.txt", mode="full", fresh=True)
        assert engine.versions.held_lines(first) is None
        (tmp_path / "b.txt").write_text(body.replace("line 7:", "line 7!"))
        later = holder.read("b.txt", mode="full").version
        engine.secrets.mark(later)  # still in memory: pending until the flush
        engine.versions.flush()
        assert not engine.store.has_blob(first) and not engine.store.has_blob(later)
        assert engine.store.has_blob(kept)  # a plain one pending beside them is stored
