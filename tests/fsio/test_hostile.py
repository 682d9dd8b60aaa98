"""Hostile input: absurd paths, FIFOs and devices, NUL content, huge files, deep JSON.

Each case gets a one-line error of the right class (the CLI: its exit code, no traceback),
in bounded time and memory, and nothing is written or consumed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import xxhash
from click.testing import CliRunner

from filecache import (
    BinaryFileError,
    EncodingError,
    FileCache,
    FileTooLargeError,
    InvalidContentError,
    NotARegularFileError,
    PathError,
    RangeError,
    TranscriptError,
    prune_messages,
)
from filecache.cli import main
from filecache.core.hashing import version_of
from filecache.core.text import MAX_LINE_CHARS
from filecache.fsio import NAME_MAX, PATH_MAX, locate


def one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message and len(message) < 400, message
    return message


# -- paths ------------------------------------------------------------------------------------


def _file_system_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the ``os`` calls made from now on (the list grows as they happen)."""
    calls: list[str] = []

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return call

    for name in ("open", "stat", "lstat", "readlink", "scandir"):
        monkeypatch.setattr(os, name, spy(name, getattr(os, name)))
    return calls


def test_a_1_mb_path_is_refused_before_any_file_system_call(
    cache: FileCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused as text, in time linear in its length: nothing is resolved or opened."""
    session = cache.session()
    calls = _file_system_calls(monkeypatch)
    for path in ["a/" * 500_000, "x" * 1_000_000, "../" * 333_333]:
        with pytest.raises(PathError) as info:
            session.read(path)
        assert f"over the {PATH_MAX:,}-byte limit" in one_line(info.value)
    assert calls == []


def test_path_checks_are_linear_up_to_the_limit(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path just under the limit (2,000 components) resolves with a bounded number of file
    system calls per component (no quadratic walk): counted, not timed."""
    components = PATH_MAX // 2 - 10
    path = "a/" * components + "f.txt"
    calls = _file_system_calls(monkeypatch)
    loc = locate(root, path)
    assert loc.rel.endswith("a/f.txt")
    assert len(calls) <= 4 * (components + 1) + 20, len(calls)


@pytest.mark.parametrize("op", ["read", "write", "edit"])
def test_a_256_byte_file_name_is_a_clear_path_error(cache: FileCache, root: Path, op: str) -> None:
    name = "n" * (NAME_MAX + 1)
    session = cache.session()
    with pytest.raises(PathError) as info:
        if op == "read":
            session.read(f"src/{name}")
        elif op == "write":
            session.write(f"src/{name}", "x\n")
        else:
            session.edit(f"src/{name}", "a", "b")
    message = one_line(info.value)
    assert f"over the {NAME_MAX}-byte limit" in message and "shorter name" in message
    session.write("n" * NAME_MAX, "the longest name works\n")  # the limit itself is fine
    assert (root / ("n" * NAME_MAX)).read_text() == "the longest name works\n"


def test_a_multibyte_name_is_measured_in_bytes(cache: FileCache) -> None:
    with pytest.raises(PathError, match="a file or folder name of 258 bytes"):
        cache.session().write("é" * 129, "x")  # 129 characters, 258 bytes


def test_a_path_with_a_lone_surrogate_is_a_path_error(cache: FileCache) -> None:
    with pytest.raises(PathError, match="not valid text"):
        cache.session().read("bad\ud800.txt")


def test_a_name_too_long_for_the_whole_path_maps_to_path_error(root: Path) -> None:
    """ENAMETOOLONG from the OS (a total length over PATH_MAX once under the root) is mapped."""
    from filecache.fsio import _os_error

    err = _os_error("x", OSError(36, "File name too long"))
    assert type(err) is PathError and "too long" in str(err)


# -- FIFOs and devices ------------------------------------------------------------------------


def test_a_fifo_is_refused_from_stat_and_its_blocked_writer_stays_blocked(
    cache: FileCache, root: Path
) -> None:
    fifo = root / "pipe"
    os.mkfifo(fifo)
    done = threading.Event()

    def writer() -> None:
        with open(fifo, "wb") as fh:  # blocks until a reader opens the FIFO
            fh.write(b"the writer's data\n")
        done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    session = cache.session()
    for call in (
        lambda: session.read("pipe"),
        lambda: session.read("pipe", offset=1, limit=1),
        lambda: session.write("pipe", "x\n"),
        lambda: session.edit("pipe", "a", "b"),
    ):
        with pytest.raises(NotARegularFileError, match="is a FIFO, not a regular file"):
            call()
    time.sleep(0.2)
    assert not done.is_set() and thread.is_alive()  # never opened, so never released
    fd = os.open(fifo, os.O_RDONLY)  # release it ourselves: its data is all there
    with os.fdopen(fd, "rb") as fh:
        assert fh.read() == b"the writer's data\n"
    thread.join()  # our read saw the end: the writer has closed the FIFO
    assert done.is_set()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_is_refused_from_stat(cache: FileCache, root: Path) -> None:
    try:
        os.mknod(root / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs privileges")
    with pytest.raises(NotARegularFileError, match="is a device"):
        cache.session().read("null")


# -- content that a later read would refuse ---------------------------------------------------


@pytest.mark.parametrize(
    ("content", "words"), [("a\x00b\n", "a NUL byte at character 1"), ("x\ud800\n", "surrogate")]
)
def test_write_and_edit_refuse_content_a_read_would_not_serve(
    cache: FileCache, root: Path, content: str, words: str
) -> None:
    session = cache.session()
    before = (root / "notes.txt").read_bytes()
    with pytest.raises(InvalidContentError) as info:
        session.write("notes.txt", content, call_id="w1")
    assert words in one_line(info.value)
    with pytest.raises(InvalidContentError):
        session.edit("notes.txt", "line 1:", content, call_id="e1")
    with pytest.raises(InvalidContentError):
        session.write("new.txt", content, call_id="w2")
    assert (root / "notes.txt").read_bytes() == before
    assert not (root / "new.txt").exists()
    assert not {"w1", "e1", "w2"} & set(session.ledger().calls)  # nothing recorded
    mine = session.read("notes.txt", fresh=True)  # the session serves what a new process does
    theirs = FileCache(root, store=":memory:").session().read("notes.txt")
    assert (mine.kind, mine.version, mine.text) == (theirs.kind, theirs.version, theirs.text)


# -- huge files ---------------------------------------------------------------------------------


def _xxh3_file(path: Path) -> str:
    h = xxhash.xxh3_128()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return "xxh3:" + h.hexdigest()


def test_a_one_line_5_mb_file_read_one_line_is_cut_with_a_marker(
    cache: FileCache, root: Path
) -> None:
    data = b"v" * (5 * 1024 * 1024) + b"\n"
    (root / "min.js").write_bytes(data)
    result = cache.session().read("min.js", offset=1, limit=1)
    assert result.kind == "partial" and result.line_count == 1  # streamed: always partial
    assert result.version == version_of(data)  # the hash of all of it
    line = result.text.split("\n")[1]
    assert (
        line == f"1\t{'v' * MAX_LINE_CHARS}… [line truncated: 5,242,880 chars; first 2,000 shown]"
    )
    assert len(result.text) < MAX_LINE_CHARS + 200


def test_a_streamed_range_answers_as_the_whole_read_does(tmp_path: Path, root: Path) -> None:
    """Over ``max_file_bytes`` the range is streamed; the answer is the one a whole read gives."""
    text = "".join(f"line {i} " + "é" * (i % 7) + "\r\n" * (i % 3 == 0) + "\n" for i in range(400))
    (root / "big.txt").write_text(text + "no newline at the end", encoding="utf-8")
    small = FileCache(root, store=":memory:", max_file_bytes=1000).session()
    whole = FileCache(root, store=":memory:").session()
    for offset, limit in [(1, 3), (398, 5), (130, 40), (500, None), (1, None)]:
        if limit is None and offset == 1:
            with pytest.raises(FileTooLargeError, match="read fewer lines"):
                FileCache(root, store=":memory:", max_file_bytes=1000).session().read(
                    "big.txt", offset=1, limit=100_000
                )
            continue
        for numbered in (True, False):
            got = small.read("big.txt", offset=offset, limit=limit, numbered=numbered, fresh=True)
            want = whole.read("big.txt", offset=offset, limit=limit, numbered=numbered, fresh=True)
            assert (got.text, got.version, got.start, got.end, got.line_count) == (
                want.text, want.version, want.start, want.end, want.line_count
            )  # fmt: skip
            assert got.kind == "partial"
    total = whole.read("big.txt").line_count
    with pytest.raises(RangeError, match=f"offset 600 is past the end; the file has {total} lines"):
        small.read("big.txt", offset=600)


@pytest.mark.parametrize(
    ("tail", "error", "words"),
    [
        (b"\x00\n", BinaryFileError, "NUL bytes, the first at byte 5,000,000"),
        (b"caf\xe9\n", EncodingError, "byte 0xe9 at offset 5,000,003"),
    ],
)
def test_a_streamed_range_refuses_what_a_whole_read_refuses(
    cache: FileCache, root: Path, tail: bytes, error: type[Exception], words: str
) -> None:
    (root / "big.txt").write_bytes(b"a" * 4_999_999 + b"\n" + tail)
    with pytest.raises(error) as info:
        cache.session().read("big.txt", offset=1, limit=1)
    assert words in one_line(info.value)


RSS_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    from filecache import FileCache
    session = FileCache(sys.argv[1], store=":memory:").session()
    session.read("small.txt")  # imports and first-use costs, before the baseline
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = session.read("huge.log", offset=1_000_000, limit=2)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"kb": after - before, "version": result.version, "text": result.text,
                      "lines": result.line_count}))
    """
)


def test_a_ranged_read_of_a_200_mb_file_stays_under_64_mb(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "small.txt").write_text("x\n")
    line = b"%09d the quick brown fox jumps over the lazy dog, again and again and again\n"
    block = b"".join(line % i for i in range(10_000))
    with open(root / "huge.log", "wb") as fh:
        for _ in range(250):  # 250 blocks of 10,000 lines: 2,500,000 lines, 202.5 MB
            fh.write(block)
    size = (root / "huge.log").stat().st_size
    assert size > 200_000_000
    proc = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["kb"] < 64 * 1024, f"peak RSS grew by {out['kb'] / 1024:.0f} MB"
    assert out["lines"] == 2_500_000
    assert out["version"] == _xxh3_file(root / "huge.log")
    body = out["text"].split("\n")[1:3]
    assert body == [
        f"1000000\t{(line % 9999).decode().rstrip()}",  # line 1,000,000 is block line 9,999
        f"1000001\t{(line % 0).decode().rstrip()}",
    ]


# -- the command line ---------------------------------------------------------------------------


def _cli(runner: CliRunner, root: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    result = runner.invoke(main, [*args, "--root", str(root), "--store", ":memory:"], input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr


def test_each_hostile_case_is_one_line_and_its_exit_code_in_the_cli(
    runner: CliRunner, root: Path
) -> None:
    os.mkfifo(root / "pipe")
    (root / "min.js").write_bytes(b"v" * (5 * 1024 * 1024) + b"\n")
    cases = [
        (("read", "x" * 1_000_000), 2, "over the 4,096-byte limit"),
        (("write", "n" * 256, "--content", "x"), 2, "over the 255-byte limit"),
        (("edit", "n" * 256, "--old", "a", "--new", "b"), 2, "over the 255-byte limit"),
        (("read", "pipe"), 2, "is a FIFO"),
        (("write", "notes.txt", "--content", "a\x00b"), 2, "NUL byte"),
        (("read", "min.js"), 3, "over the 4,194,304-byte limit; read a part with --offset/--limit"),
    ]
    for args, code, words in cases:
        exit_code, err = _cli(runner, root, *args)
        assert exit_code == code, (args[:1], err)
        assert err.count("\n") == 1 and err.startswith("filecache: ") and words in err, err
    exit_code, err = _cli(runner, root, "write", "notes.txt", stdin="a\x00b")
    assert exit_code == 2 and "NUL byte" in err
    result = runner.invoke(
        main, ["read", "min.js", "--offset", "1", "--limit", "1", "--root", str(root)]
    )
    assert result.exit_code == 0 and len(result.stdout) < 2200
    assert "[line truncated: 5,242,880 chars" in result.stdout


@pytest.fixture
def bad_transcripts(tmp_path: Path) -> dict[str, Path]:
    files = {
        "latin1.json": b'[{"role": "user", "content": "caf\xe9"}]',
        "deep.json": b"[" * 100_000 + b"]" * 100_000,
        "deep_object.json": b'{"messages": [' + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"]}",
        "not_json.json": b'[{"role": "user"',
        "surrogate.json": b'[{"role": "user", "content": "bad \\ud800 here"}]',
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return {name: tmp_path / name for name in files}


EXPECTED = {
    "latin1.json": (3, "not valid UTF-8 (byte 0xe9 at offset 33)"),
    "deep.json": (2, "JSON nested more than 128 levels deep"),
    "deep_object.json": (2, "JSON nested more than 128 levels deep"),
    "not_json.json": (2, "not JSON"),
    "surrogate.json": (2, "a string holds a lone surrogate (U+D800)"),
}


def test_prune_of_bad_json_is_one_line_with_its_exit_code(
    runner: CliRunner, tmp_path: Path, bad_transcripts: dict[str, Path]
) -> None:
    for name, path in bad_transcripts.items():
        code, words = EXPECTED[name]
        result = runner.invoke(main, ["prune", str(path), "--store", str(tmp_path / "s.db")])
        assert result.exit_code == code, (name, result.stderr, result.exception)
        assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr


def test_prune_to_an_unwritable_output_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    source = tmp_path / "chat.json"
    source.write_text('[{"role": "user", "content": "hi"}]')
    (tmp_path / "out").mkdir()
    args = [
        "prune",
        str(source),
        "-o",
        str(tmp_path / "out" / "x" / "y.json"),
        "--store",
        ":memory:",
    ]
    result = runner.invoke(main, args)
    assert result.exit_code == 2 and "cannot write the output" in result.stderr
    assert result.stderr.count("\n") == 1


def test_prune_of_bad_json_in_a_real_process_prints_no_traceback(
    tmp_path: Path, bad_transcripts: dict[str, Path]
) -> None:
    for name, path in bad_transcripts.items():
        code, words = EXPECTED[name]
        proc = subprocess.run(
            [sys.executable, "-m", "filecache", "prune", str(path), "--store", ":memory:"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert proc.returncode == code, (name, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert words in proc.stderr


def test_prune_messages_refuses_deep_and_cyclic_structures() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(TranscriptError, match="nested more than 128"):
        prune_messages(deep)
    cyclic: list[object] = [{"role": "user", "content": "hi"}]
    cyclic.append(cyclic)
    with pytest.raises(TranscriptError, match="nested more than 128"):
        prune_messages(cyclic)
    with pytest.raises(TranscriptError, match="lone surrogate"):
        prune_messages([{"role": "user", "content": "x\udcff"}])


@pytest.mark.parametrize(
    "args",
    ["[" * 100_000 + "]" * 100_000, '{"path": "a\\ud800.txt", "x": "\\udcff"}'],
    ids=["deep", "surrogates"],
)
def test_hostile_call_arguments_are_kept_as_raw_text(args: str, cache: FileCache) -> None:
    """A call's ``arguments`` string holding JSON 100,000 deep, or lone surrogates once parsed,
    is kept as raw text: no crash in parsing, pruning or a session's sync."""
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": args}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    result = prune_messages(messages)
    assert result.messages == messages
    session = cache.session()
    assert prune_messages(messages, session=session).messages == messages
    from filecache import parse_transcript

    assert session.sync(parse_transcript(messages)) == set()


def test_run_tool_answers_each_hostile_case_with_an_error_result(
    cache: FileCache, root: Path
) -> None:
    from filecache.tools import run_tool

    os.mkfifo(root / "pipe")
    session = cache.session()
    cases = [
        ("read_file", {"path": "x" * 1_000_000}, "over the 4,096-byte limit"),
        ("write_file", {"path": "n" * 256, "content": "x"}, "over the 255-byte limit"),
        ("edit_file", {"path": "n" * 256, "old_string": "a", "new_string": "b"}, "255-byte"),
        ("read_file", {"path": "pipe"}, "is a FIFO"),
        ("write_file", {"path": "notes.txt", "content": "a\x00b"}, "NUL byte"),
        ("write_file", '{"path": "notes.txt", "content": "\\ud800"}', "lone surrogate"),
        ("read_file", "[" * 100_000 + "]" * 100_000, "nested too deep"),
    ]
    for name, args, words in cases:
        out = run_tool(session, name, args)
        assert out.is_error and words in out.text and "\n" not in out.text, out.text
