"""Secrets under other names: hard links, shell output that never names the file, stored hashes.

Issue 19: the deny-list matched names only. A hard link to ``.env`` under another name, bash
output of ``cat .e*`` (or a link's name, or ``$(...)``), the xxh3 version of a short ``.env``
(recovered by guessing in about a second) and ``filecache import claude-code`` each put a
denied file's content in a store or a trace. Every check here scans the store's bytes
(``test_secrets.store_bytes``) or the trace's files for the secret, and checks that a plain
file's content is found by the same scan.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_secrets import POLICY, _chat, secret_text, store_bytes

from filecache import FileCache, prune_messages
from filecache.importers.claude_code import parse_claude_code
from filecache.importers.trace import write_trace
from filecache.prune.pruner import denied_results
from filecache.prune.transcript import parse_transcript
from filecache.secrecy import SecretIndex
from filecache.settings import DEFAULT_DENY


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / ".env").write_text(secret_text("DOTENV"), encoding="utf-8")
    (root / "notes.txt").write_text(secret_text("CONTROL"), encoding="utf-8")
    return root


def _events(db: Path) -> list[tuple[str | None, str | None]]:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return list(conn.execute("SELECT path, version FROM events"))
    finally:
        conn.close()


@pytest.mark.parametrize("first", ["link", "name"])
def test_a_hard_link_to_a_denied_file_is_denied(tree: Path, tmp_path: Path, first: str) -> None:
    os.link(tree / ".env", tree / "settings.txt")  # the same file under a name not denied
    db = tmp_path / "s.db"
    with FileCache(tree, store=db, outline_threshold=10) as cache:
        session = cache.session("s")
        if first == "name":
            session.read(".env", mode="full")  # its identity is learned from this read
        assert cache.engine.secrets.denied(cache.engine.paths.locate("settings.txt"))
        full = session.read("settings.txt", mode="full")
        assert "SECRET-DOTENV-" in full.text  # the model is shown what it reads
        assert full.version.startswith("keyed:")
        session.read("settings.txt", offset=2, limit=3, fresh=True)
        session.read("settings.txt", mode="outline")
        session.read("notes.txt", mode="full")
        cache.engine.versions.flush()
    held = store_bytes(db)
    assert b"SECRET-DOTENV-" not in held
    assert b"SECRET-CONTROL-" in held


def test_a_link_made_after_the_first_walk_is_found(tree: Path, tmp_path: Path) -> None:
    with FileCache(tree, store=tmp_path / "s.db") as cache:
        session = cache.session("s")
        os.link(tree / "notes.txt", tree / "other.txt")  # nlink 2, not denied: a walk runs
        assert not cache.engine.secrets.denied(cache.engine.paths.locate("other.txt"))
        os.link(tree / ".env", tree / "later.txt")  # made after that walk: its ctime says so
        assert cache.engine.secrets.denied(cache.engine.paths.locate("later.txt"))
        assert session.read("later.txt", mode="full").version.startswith("keyed:")


COMMANDS = [
    "cat .e*",
    "cat .en?",
    "cat config.txt",  # a symbolic link to .env under a name not denied
    'cat "$(ls -a | grep en)"',
    "cat -n $(printf .e; printf nv)",
    "grep -r SECRET .",
]


def _bash_output(tree: Path, command: str) -> str:
    done = subprocess.run(
        ["bash", "-c", command], cwd=tree, capture_output=True, text=True, check=True
    )
    assert "SECRET-DOTENV-" in done.stdout  # the command does print the secret
    return done.stdout


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("with_session", [True, False])
def test_shell_output_of_a_denied_file_is_never_stored(
    tree: Path, tmp_path: Path, command: str, with_session: bool
) -> None:
    (tree / "config.txt").symlink_to(".env")
    output = _bash_output(tree, command)
    filler = [(f"fill{i}", f"ls dir{i}", "word " * 300) for i in range(3)]
    chat = _chat([("b1", command, output), ("b2", "cat notes.txt", secret_text("CONTROL")),
                  *filler])  # fmt: skip
    db = tmp_path / "s.db"
    with FileCache(tree, store=db) as cache:
        if with_session:  # the session never read .env: the root's walk finds it
            pruned = prune_messages(chat, session=cache.session("s"), policy=POLICY)
        else:
            pruned = prune_messages(
                chat, store=cache.engine.store, policy=POLICY, session_id="anon", root=tree
            )
        tiers = {a.call_id: a.tier for a in pruned.plan.actions}
        assert tiers["b1"] == "clear"  # never outlined or truncated (a projection of it)
        assert "b2" in tiers
    assert "SECRET-DOTENV-" not in json.dumps(pruned.messages)
    held = store_bytes(db)
    assert b"SECRET-DOTENV-" not in held
    assert b"SECRET-CONTROL-" in held  # the plain file's result was archived


def test_a_transcripts_own_denied_read_teaches_its_lines_without_a_root(tmp_path: Path) -> None:
    """No session and no root: a result that repeats the lines of a result of a denied file
    (read_file .env, numbered) is not stored either."""
    secret = secret_text("DOTENV")
    numbered = "".join(f"{n:6d}\t{line}" for n, line in enumerate(secret.splitlines(True), 1))
    filler = [(f"fill{i}", f"ls dir{i}", "word " * 300) for i in range(3)]
    chat = _chat([("r1", ".env", numbered), ("b1", "cat .e*", secret), *filler])
    assert b"SECRET-DOTENV-" not in _pruned_without_a_root(tmp_path, chat)


def _pruned_without_a_root(tmp_path: Path, chat: list[dict[str, Any]]) -> bytes:
    """Prune ``chat`` with a store and no session, from a root that holds none of its files;
    ``b1`` must clear. Returns the store's bytes."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    db = tmp_path / "s.db"
    with FileCache(elsewhere, store=db) as cache:
        pruned = prune_messages(chat, store=cache.engine.store, policy=POLICY, session_id="anon")
        assert {a.call_id: a.tier for a in pruned.plan.actions}["b1"] == "clear"
    return store_bytes(db)


def _guesses(template: str, count: int) -> dict[str, str]:
    """Every hash an attacker would try for a short secret: xxh3-128 (the version, full and as
    shown), xxh3-64 (an edit's argument tag), of each guess."""
    out = {}
    for n in range(count):
        text = template % n
        data = text.encode()
        full = xxhash.xxh3_128_hexdigest(data)
        out[full] = text
        out[full[:8]] = text
        out[xxhash.xxh3_64_hexdigest(data)] = text
    return out


def test_a_low_entropy_denied_file_leaves_no_hash_to_guess(tree: Path, tmp_path: Path) -> None:
    """The file is known but for a 4-digit PIN (an .env.example in the repository tells the
    rest): each of its hashes in the store would give the PIN in 10,000 guesses."""
    known = "".join(f"SETTING_{i}=default-value-{i}\n" for i in range(30))
    (tree / ".env").write_text(known + "PIN=4711\n")
    db = tmp_path / "s.db"
    with FileCache(tree, store=db) as cache:
        session = cache.session("s")
        first = session.read(".env", call_id="r1")
        assert first.text.endswith("PIN=4711\n")
        assert session.read(".env", call_id="r2").kind == "unchanged"  # still answers
        session.edit(".env", "PIN=4711", "PIN=4712", call_id="e1")
        (tree / ".env").write_text(known + "PIN=4713\n")  # same length: only the hash tells
        changed = session.read(".env", call_id="r3")
        assert changed.kind != "unchanged" and "4713" in changed.text
        cache.engine.versions.flush()
    with FileCache(tree, store=db) as cache:  # another process: the key file is the same
        again = cache.session("s").read(".env", call_id="r4")
        assert again.kind == "unchanged" and again.base_call_id == "r3"
        (tree / ".env").write_text(known + "PIN=4714\n")
        assert "4714" in cache.session("s").read(".env", call_id="r5").text
    held = store_bytes(db).decode("utf-8", "replace").lower()
    guesses = _guesses(known.replace("%", "%%") + "PIN=%04d\n", 10_000)
    guesses.update(_guesses("PIN=%04d", 10_000))  # an edit's new_string
    found = {text for digest, text in guesses.items() if len(digest) >= 16 and digest in held}
    assert not found  # no full xxh3 of any guess (an 8-digit one would match by chance)
    versions = [v for path, v in _events(db) if path == ".env" and v]
    assert versions and all(v.startswith("keyed:") for v in versions)


def test_a_key_file_inside_the_root_is_refused(tree: Path) -> None:
    from filecache.errors import ConfigError

    with FileCache(tree, store=":memory:", key_file=str(tree / "k")) as cache:
        with pytest.raises(ConfigError, match="outside the repository"):
            cache.session("s").read(".env")


def _claude_log(tmp_path: Path, reads: dict[str, str]) -> Path:
    """A Claude Code project session file: one Read per path, with the result as shown."""
    cwd = "/home/me/proj"
    lines = [{"type": "user", "uuid": "u0", "parentUuid": None, "cwd": cwd, "sessionId": "x",
              "message": {"role": "user", "content": "look"}}]  # fmt: skip
    parent = "u0"
    for n, (path, text) in enumerate(reads.items()):
        shown = "".join(f"{i:6d}→{line}\n" for i, line in enumerate(text.splitlines(), 1))
        use = {"type": "assistant", "uuid": f"a{n}", "parentUuid": parent, "cwd": cwd,
               "sessionId": "x", "message": {"role": "assistant", "id": f"m{n}", "content": [
                   {"type": "tool_use", "id": f"t{n}", "name": "Read",
                    "input": {"file_path": f"{cwd}/{path}"}}]}}  # fmt: skip
        result = {"type": "user", "uuid": f"r{n}", "parentUuid": f"a{n}", "cwd": cwd,
                  "sessionId": "x", "message": {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": f"t{n}", "content": shown}]},
                  "toolUseResult": {"type": "text", "file": {
                      "filePath": f"{cwd}/{path}", "content": text,
                      "numLines": text.count("\n") + 1, "startLine": 1,
                      "totalLines": text.count("\n") + 1}}}  # fmt: skip
        lines += [use, result]
        parent = f"r{n}"
    log = tmp_path / "session.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return log


def test_import_never_copies_a_denied_file_into_files(tmp_path: Path) -> None:
    reads = {
        ".env": secret_text("DOTENV", 5),
        "config/settings.ini": secret_text("DOTENV", 5),  # a copy (or a link) of it
        "src/app.py": secret_text("CONTROL", 5),
    }
    [recorded] = parse_claude_code(_claude_log(tmp_path, reads))
    result = write_trace(recorded, tmp_path / "out")
    files = result.directory / "files"
    kept = {p.relative_to(files).as_posix(): p.read_text() for p in files.rglob("*") if p.is_file()}
    assert set(kept) == {"src/app.py"}
    assert "SECRET-CONTROL-" in kept["src/app.py"]
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / ".env").write_text(reads[".env"])
    (repo / "src" / "app.py").write_text(reads["src/app.py"])
    (repo / "config").mkdir()
    os.link(repo / ".env", repo / "config" / "settings.ini")
    from_repo = write_trace(recorded, tmp_path / "out2", repo=repo)
    assert set(from_repo.files) == {"src/app.py"}
    assert not any("SECRET-DOTENV" in p.read_text() for p in
                   (from_repo.directory / "files").rglob("*") if p.is_file())  # fmt: skip


_LINE = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=6, max_size=40
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    secret=st.lists(_LINE, min_size=1, max_size=8),
    pick=st.integers(min_value=0, max_value=7),
    before=st.text(max_size=200),
    after=st.text(max_size=200),
)
def test_any_output_holding_a_line_of_a_denied_file_is_revealed(
    tmp_path: Path, secret: list[str], pick: int, before: str, after: str
) -> None:
    """Whatever surrounds it (numbers, a grep prefix, other output), a line of a denied file
    that the root holds is found in a tool's output."""
    from filecache.secrecy import MIN_LINE, SecretIndex

    assert MIN_LINE <= 6
    root = tmp_path / "prop"
    root.mkdir(exist_ok=True)
    (root / ".env.prod").write_text("\n".join(secret) + "\n")
    line = secret[pick % len(secret)]
    assert SecretIndex(root, (".env*",)).reveals(before + line + after) == ".env.prod"


# A line of a denied file is what lies between two "\n" (as ``core.text.split_lines`` has it):
# form feeds, vertical tabs, \x1c-\x1e, \x85 and \u2028 do not split it, though
# ``str.splitlines`` does. Split there, this line is two pieces shorter than ``MIN_LINE``, and
# neither was looked for. Found by the property above with those characters added to its
# alphabet: its smallest failing example is the one-line file "0000\x1e0".
SPLIT_BY_SPLITLINES = "pass\x0cw0rd!\x1c\u2028x"


def test_a_denied_line_holding_a_form_feed_or_a_unicode_separator_is_found(
    tmp_path: Path,
) -> None:
    root = tmp_path / "prop"
    root.mkdir()
    (root / ".env.prod").write_text(f"A=1\n{SPLIT_BY_SPLITLINES}\n", encoding="utf-8")
    assert SecretIndex(root, (".env*",)).reveals(f"out: {SPLIT_BY_SPLITLINES}\n") == ".env.prod"


def test_a_transcripts_denied_line_holding_a_form_feed_is_found_in_other_output() -> None:
    """No root: the lines the pruner learns from a result of a denied file are split at
    newlines only, so another result that prints one of them is denied too."""
    secret = secret_text("DOTENV") + SPLIT_BY_SPLITLINES + "\n"
    chat = _chat([("r1", ".env", secret), ("b1", "tail -n 1 settings.txt", SPLIT_BY_SPLITLINES)])
    found = denied_results(parse_transcript(chat), None, DEFAULT_DENY)
    assert found == {"r1": ".env", "b1": ".env"}


def test_import_never_copies_a_file_holding_a_denied_line_with_a_form_feed(
    tmp_path: Path,
) -> None:
    reads = {
        ".env": f"A=1\n{SPLIT_BY_SPLITLINES}\n",
        "notes/pasted.txt": f"from the env:\n{SPLIT_BY_SPLITLINES}\n",
        "src/app.py": "x = 1\n",
    }
    [recorded] = parse_claude_code(_claude_log(tmp_path, reads))
    result = write_trace(recorded, tmp_path / "out")
    files = result.directory / "files"
    assert {p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file()} == {
        "src/app.py"
    }


@pytest.mark.parametrize(
    "command",
    ['cat "/etc/ssl/private/server.pem"', 'head -n 40 "my key.pem"', "cat server.pem\n",
     "cat server.key\t| head -n 5"],
)  # fmt: skip
def test_a_denied_name_quoted_or_before_a_newline_in_a_command_is_found(
    tmp_path: Path, command: str
) -> None:
    """A bash call's arguments are JSON: a quote, a tab or a newline in the command is an escape
    there (``cat \\"server.pem\\"``), and the words of that raw text were ``server.pem\\``
    or ``server.pem\\n``, which no glob of the deny-list matches. A file outside the root has
    no lines for the secret index to know: its name is all there is."""
    chat = _chat([("b1", command, secret_text("QUOTED")), *[
        (f"fill{i}", f"ls dir{i}", "word " * 300) for i in range(3)]])  # fmt: skip
    assert set(denied_results(parse_transcript(chat), None, DEFAULT_DENY)) == {"b1"}
    assert b"SECRET-QUOTED-" not in _pruned_without_a_root(tmp_path, chat)


def test_a_decorated_tools_output_of_a_denied_file_is_not_stored(
    tree: Path, tmp_path: Path
) -> None:
    """A read tool of the agent's own that prints a link's target (or any other way): its
    output holds the denied file's lines, so no blob of it is stored."""
    (tree / "config.txt").symlink_to(".env")
    db = tmp_path / "s.db"
    with FileCache(tree, store=db) as cache:
        session = cache.session("s")

        @session.read_tool
        def read_file(path: str) -> str:
            return (tree / path).read_text()

        assert "SECRET-DOTENV-" in read_file("config.txt")
        assert "SECRET-CONTROL-" in read_file("notes.txt")
        cache.engine.versions.flush()
    held = store_bytes(db)
    assert b"SECRET-DOTENV-" not in held
    assert b"SECRET-CONTROL-" in held


def test_a_shell_read_of_a_hard_link_stores_nothing(tree: Path, tmp_path: Path) -> None:
    from filecache.shell.bash_reads import serve_bash

    os.link(tree / ".env", tree / "vars.txt")
    db = tmp_path / "s.db"

    def run(command: str) -> str:
        return subprocess.run(
            ["bash", "-c", command], cwd=tree, capture_output=True, text=True
        ).stdout

    with FileCache(tree, store=db) as cache:
        session = cache.session("s")
        first = serve_bash(session, "cat vars.txt", run, call_id="c1")
        assert first == run("cat vars.txt")  # byte for byte what the shell prints
        assert serve_bash(session, "cat vars.txt", run, call_id="c2").startswith("[filecache]")
        serve_bash(session, "cat notes.txt", run, call_id="c3")
        cache.engine.versions.flush()
    held = store_bytes(db)
    assert b"SECRET-DOTENV-" not in held
    assert b"SECRET-CONTROL-" in held


def test_a_fleet_key_gives_every_machine_the_same_keyed_version(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``FILECACHE_KEY`` (one value across a fleet) decides the key, whatever key file each
    machine has; without it, two key files give two versions (content, never a FileRef)."""
    from filecache.secrecy import secret_key

    versions = []
    for n, fleet in [(1, "shared"), (2, "shared"), (3, None), (4, None)]:
        monkeypatch.setenv("FILECACHE_KEY_FILE", str(tmp_path / f"machine{n}.key"))
        if fleet:
            monkeypatch.setenv("FILECACHE_KEY", fleet)
        else:
            monkeypatch.delenv("FILECACHE_KEY", raising=False)
        with FileCache(tree, store=":memory:") as cache:
            versions.append(cache.session("s").read(".env").version)
        assert (tmp_path / f"machine{n}.key").exists() is (fleet is None)
    assert versions[0] == versions[1] != versions[2] != versions[3]
    assert all(v.startswith("keyed:") for v in versions)
    assert oct((tmp_path / "machine3.key").stat().st_mode & 0o777) == "0o600"
    assert len(secret_key(str(tmp_path / "machine3.key"), None)) == 32
