"""Bad input: every kind of file, path and argument an agent can throw at ``Session``.

Each case shows its clear error (the right class, a message naming the path and what to do) or
its correct handling, and that nothing was written or lost.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from filecache import FileCache, ReadResult
from filecache.core.hashing import version_of
from filecache.errors import (
    AccessDeniedError,
    BinaryFileError,
    EditError,
    EncodingError,
    FileTooLargeError,
    MarkerError,
    MissingFileError,
    NotARegularFileError,
    OutsideRootError,
    PathError,
    RangeError,
)

Patch = Callable[[str | bytes, str], bytes]


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every regular file under ``directory`` with its bytes (symlinks not followed), except
    filecache's own folder (its lock file appears on the first write attempt)."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not p.is_symlink() and ".filecache" not in p.relative_to(directory).parts
    }


def no_temp_files(*directories: Path) -> bool:
    return not [p for d in directories for p in d.rglob(".fc-*.tmp")]


# -- content ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "error", "summary"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, BinaryFileError, "PNG image, 1,032 bytes"),
        (b"text then \x00 a NUL byte\n", BinaryFileError, "binary data (NUL bytes)"),
        (b"text\n" * 5000 + b"NUL past 8 KiB\x00\n", BinaryFileError, "binary data (NUL"),
        (b"caf\xe9\n", EncodingError, "not valid UTF-8 (byte 0xe9 at offset 3)"),
    ],
)
def test_binary_and_non_utf8_files_are_refused_with_a_one_line_summary(
    cache: FileCache, root: Path, data: bytes, error: type[Exception], summary: str
) -> None:
    (root / "blob.bin").write_bytes(data)
    with pytest.raises(error) as info:
        cache.session().read("blob.bin")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"blob.bin: {summary}")
    assert "text only" in message or "text files only" in message
    assert (root / "blob.bin").read_bytes() == data


def test_crlf_read_shows_cr_hashes_bytes_and_write_round_trips(
    cache: FileCache, root: Path
) -> None:
    data = b"first\r\nsecond\r\nthird\r\n"
    (root / "dos.txt").write_bytes(data)
    result = cache.session().read("dos.txt")
    assert "]\n1\tfirst\r\n2\tsecond\r\n3\tthird\r\n" in result.text
    assert result.version == version_of(data)
    raw = cache.session().read("dos.txt", numbered=False)
    assert raw.text.encode("utf-8") == data
    content = "one\r\ntwo\r\nmixed\nend"
    written = cache.session().write("dos.txt", content)
    assert (root / "dos.txt").read_bytes() == content.encode("utf-8")
    assert written.version == version_of(content.encode("utf-8"))
    assert cache.session().read("dos.txt", numbered=False).text == content


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("alpha\nbeta\n", "ALPHA\nBETA\nextra\n", b"ALPHA\r\nBETA\r\nextra\r\ngamma\r\n"),
        ("beta", "beta\nbeta 2", b"alpha\r\nbeta\r\nbeta 2\r\ngamma\r\n"),
        ("beta\r\n", "", b"alpha\r\ngamma\r\n"),
        ("\nbeta", "\nBETA\nmore", b"alpha\r\nBETA\r\nmore\r\ngamma\r\n"),
        ("\nbeta", " beta", b"alpha\r beta\r\ngamma\r\n"),
    ],
    ids=["lf-strings", "lf-only-in-new", "crlf-strings", "from-the-lf", "from-the-lf-no-cr"],
)
def test_crlf_edit_with_lf_strings_keeps_crlf(
    cache: FileCache, root: Path, old: str, new: str, expected: bytes
) -> None:
    (root / "dos.txt").write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    cache.session().edit("dos.txt", old, new)
    assert (root / "dos.txt").read_bytes() == expected


def test_missing_final_newline_is_marked_and_raw_is_exact(cache: FileCache, root: Path) -> None:
    (root / "tail.txt").write_text("one\ntwo", encoding="utf-8")
    session = cache.session()
    text = session.read("tail.txt").text
    assert text.endswith("]\n1\tone\n2\ttwo\n\\ No newline at end of file\n")
    assert session.read("tail.txt", numbered=False, fresh=True).text == "one\ntwo"


@pytest.mark.parametrize("change", ["adds-newline", "drops-newline", "extends-last-line"])
def test_diff_across_final_newline_applies_with_gnu_patch(
    cache: FileCache, root: Path, notes: str, gnu_patch: Patch, change: str
) -> None:
    before, after = {
        "adds-newline": (notes[:-1], notes),
        "drops-newline": (notes, notes[:-1]),
        "extends-last-line": (notes[:-1], notes[:-1] + " and more"),
    }[change]
    path = root / "notes.txt"
    path.write_text(before, encoding="utf-8")
    session = cache.session()
    seen = session.read("notes.txt", numbered=False).text
    assert seen == before
    path.write_text(after, encoding="utf-8")
    result = session.read("notes.txt", numbered=False)
    assert result.kind == "diff"
    assert "\\ No newline at end of file" in result.text
    assert gnu_patch(seen, result.text) == after.encode("utf-8")


def test_empty_file_reads_as_full(cache: FileCache) -> None:
    result = cache.session().read("empty.txt")
    assert (result.kind, result.line_count) == ("full", 0) and "empty.txt" in result.text
    assert cache.session().read("empty.txt", numbered=False).text == ""


def test_huge_file_whole_read_refused_ranged_read_works(root: Path) -> None:
    data = "".join(f"row {i:05d} of a large generated file\n" for i in range(1, 201))
    (root / "huge.txt").write_text(data, encoding="utf-8")
    with FileCache(root, store=":memory:", max_file_bytes=1000) as fc:
        session = fc.session()
        with pytest.raises(FileTooLargeError) as info:
            session.read("huge.txt")
        assert "huge.txt" in str(info.value) and "offset/limit" in str(info.value)
        part = session.read("huge.txt", offset=100, limit=3)
    assert (part.kind, part.start, part.end, part.line_count) == ("partial", 100, 102, 200)
    assert "]\n100\trow 00100 of a" in part.text and "\n103\t" not in part.text
    assert part.version == version_of(data.encode("utf-8"))


# -- paths -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "shown"), [("src", "src"), ("src/", "src"), (".", r"\.")])
def test_directory_is_not_a_regular_file(
    cache: FileCache, root: Path, path: str, shown: str
) -> None:
    with pytest.raises(NotARegularFileError, match=rf"^{shown}: is a directory; list it"):
        cache.session().read(path)
    with pytest.raises(NotARegularFileError):
        cache.session().write(path, "x\n")
    assert (root / "src" / "app.py").is_file()


def _record_error(outcome: list[BaseException], cache: FileCache, path: str) -> None:
    try:
        cache.session().read(path)
    except Exception as exc:
        outcome.append(exc)


def test_fifo_is_refused_promptly(cache: FileCache, root: Path) -> None:
    os.mkfifo(root / "pipe")
    outcome: list[BaseException] = []
    worker = threading.Thread(target=_record_error, args=(outcome, cache, "pipe"), daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive(), "reading a FIFO blocked"
    assert len(outcome) == 1 and isinstance(outcome[0], NotARegularFileError)
    assert "pipe: is a FIFO, not a regular file" in str(outcome[0])
    with pytest.raises(NotARegularFileError):
        cache.session().write("pipe", "data\n")


def test_symlink_escaping_root_is_refused_for_read_write_edit(
    cache: FileCache, root: Path, outside: Path
) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "dangling.txt").symlink_to(outside / "not-there.txt")
    before = snapshot(outside)
    session = cache.session()
    with pytest.raises(OutsideRootError, match=r"link\.txt: resolves to .*outside the root"):
        session.read("link.txt")
    with pytest.raises(OutsideRootError):
        session.write("link.txt", "overwritten\n")
    with pytest.raises(OutsideRootError):
        session.edit("link.txt", "outside", "inside")
    with pytest.raises(OutsideRootError):
        session.write("dangling.txt", "created\n")
    (root / "loop").symlink_to(root / "loop")
    with pytest.raises(PathError, match="loop: cannot resolve path"):
        session.read("loop")
    assert snapshot(outside) == before
    assert (root / "link.txt").is_symlink()
    assert no_temp_files(root, outside)


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "src/../../outside/secret.txt", "{outside}/secret.txt"]
)
def test_traversal_and_absolute_paths_outside_are_refused(
    cache: FileCache, root: Path, outside: Path, path: str
) -> None:
    path = path.format(outside=outside)
    with pytest.raises(OutsideRootError, match="outside the root"):
        cache.session().read(path)
    with pytest.raises(OutsideRootError):
        cache.session().write(path, "x\n")
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "outside the root\n"
    assert cache.session().read(str(root / "src" / "app.py")).path == "src/app.py"


def test_nul_byte_in_path_is_refused(cache: FileCache, root: Path) -> None:
    with pytest.raises(PathError, match="NUL"):
        cache.session().read("notes.txt\x00.py")
    with pytest.raises(PathError, match="NUL"):
        cache.session().write("new\x00.txt", "x\n")
    assert sorted(p.name for p in root.iterdir()) == ["empty.txt", "notes.txt", "src"]


def test_a_file_name_that_is_not_utf8_is_refused_with_one_line(
    cache: FileCache, root: Path
) -> None:
    """Python holds a name's non-UTF-8 bytes as lone surrogates; every header and store key is
    UTF-8, so read, outline, edit and write died with a UnicodeEncodeError traceback."""
    name = os.fsdecode(b"bad\xffname.txt")
    (root / name).write_text("1\n2\n", encoding="utf-8")
    (root / "src" / "link.txt").symlink_to(root / name)  # reached through a link: the same
    session = cache.session()
    calls = [
        lambda: session.read(name),
        lambda: session.read(name, mode="outline"),
        lambda: session.edit(name, "1\n", "one\n"),
        lambda: session.write(name, "x\n"),
        lambda: session.write(os.fsdecode(b"new\xfe.txt"), "x\n"),
        lambda: session.read("src/link.txt"),
    ]
    for call in calls:
        with pytest.raises(
            PathError, match=r"bad\\xffname.txt: the path is not valid UTF-8|new\\xfe"
        ):
            call()
    assert (root / name).read_text(encoding="utf-8") == "1\n2\n"
    assert not (root / os.fsdecode(b"new\xfe.txt")).exists()


def test_store_folder_is_refused(sqlite_cache: FileCache, root: Path) -> None:
    (root / ".filecache").mkdir(exist_ok=True)
    (root / ".filecache" / "notes.md").write_text("private\n", encoding="utf-8")
    session = sqlite_cache.session()
    for path in (".filecache", ".filecache/notes.md", "src/../.filecache/notes.md"):
        with pytest.raises(OutsideRootError, match="store folder"):
            session.read(path)
    with pytest.raises(OutsideRootError):
        session.write(".filecache/evil.txt", "x\n")
    assert not (root / ".filecache" / "evil.txt").exists()


def test_unreadable_file_is_access_denied(cache: FileCache, root: Path) -> None:
    path = root / "locked.txt"
    path.write_text("secret\n", encoding="utf-8")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: chmod 000 does not stop reads")
        with pytest.raises(AccessDeniedError, match=r"locked\.txt: permission denied"):
            cache.session().read("locked.txt")
    finally:
        path.chmod(0o644)


# -- files that change under the session ------------------------------------------------------


def reconstruct(seen: dict[str, str], result: ReadResult, gnu_patch: Patch) -> str:
    """What the model can rebuild from its context for a whole-file ``numbered=False`` read."""
    if result.kind == "full":
        return result.text
    base = seen[result.base_call_id or "?"]  # the result it relies on must be one it saw
    if result.kind == "unchanged":
        return base
    assert result.kind == "diff", result.kind
    return gnu_patch(base, result.text).decode("utf-8")


@pytest.mark.parametrize("how", ["same", "one-line-changed", "different"])
def test_file_deleted_then_recreated_mid_session(
    cache: FileCache, root: Path, notes: str, gnu_patch: Patch, how: str
) -> None:
    recreated = {
        "same": notes,
        "one-line-changed": notes.replace("line 30:", "line thirty:"),
        "different": "something else entirely\n",
    }[how]
    session = cache.session()
    seen: dict[str, str] = {}
    first = session.read("notes.txt", numbered=False)
    seen[first.call_id] = reconstruct(seen, first, gnu_patch)
    (root / "notes.txt").unlink()
    with pytest.raises(MissingFileError, match=r"notes\.txt: no such file.*deleted"):
        session.read("notes.txt", numbered=False)
    with pytest.raises(EditError, match="no such file; use write"):
        session.edit("notes.txt", "line 1:", "line one:")
    assert not (root / "notes.txt").exists()
    (root / "notes.txt").write_text(recreated, encoding="utf-8")
    again = session.read("notes.txt", numbered=False)
    assert reconstruct(seen, again, gnu_patch) == recreated


# -- edits ----------------------------------------------------------------------------------


def test_edit_old_string_not_found_says_reread(cache: FileCache, root: Path, notes: str) -> None:
    with pytest.raises(EditError, match=r"notes\.txt: old_string not found; read the file again"):
        cache.session().edit("notes.txt", "no such text", "x")
    assert (root / "notes.txt").read_text(encoding="utf-8") == notes


def test_edit_ambiguous_old_string_says_how_often(cache: FileCache, root: Path) -> None:
    (root / "dup.txt").write_text("x = 1\nx = 1\nx = 1\n", encoding="utf-8")
    with pytest.raises(EditError) as info:
        cache.session().edit("dup.txt", "x = 1", "x = 2")
    assert "dup.txt" in str(info.value)
    assert "3 times" in str(info.value) and "replace_all" in str(info.value)
    assert (root / "dup.txt").read_text(encoding="utf-8") == "x = 1\nx = 1\nx = 1\n"
    result = cache.session().edit("dup.txt", "x = 1", "x = 2", replace_all=True)
    assert (root / "dup.txt").read_text(encoding="utf-8") == "x = 2\nx = 2\nx = 2\n"
    assert "3 replacements" in result.text


def test_edits_list_is_atomic(cache: FileCache, root: Path) -> None:
    session = cache.session()
    session.edit("notes.txt", edits=[("line 1:", "line one:"), ("line 2:", "line two:")])
    after_first = (root / "notes.txt").read_bytes()
    assert after_first.startswith(b"line one: the quick") and b"line two: the" in after_first
    with pytest.raises(EditError, match="not found"):
        session.edit("notes.txt", edits=[("line 3:", "line three:"), ("missing", "x")])
    assert (root / "notes.txt").read_bytes() == after_first
    assert no_temp_files(root)


@pytest.mark.parametrize(
    ("path", "old", "new", "message"),
    [
        ("notes.txt", "line 1:", "line 1:", r"notes\.txt: old_string and new_string are the same"),
        ("notes.txt", "", "text", r"notes\.txt: old_string is empty; use write"),
        ("ghost.py", "a", "b", r"ghost\.py: no such file; use write to create it"),
    ],
)
def test_edit_refuses_no_op_empty_old_and_missing_file(
    cache: FileCache, root: Path, path: str, old: str, new: str, message: str
) -> None:
    before = snapshot(root)
    with pytest.raises(EditError, match=message):
        cache.session().edit(path, old, new)
    assert snapshot(root) == before


# -- markers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("marker", ["[filecache]", "[cleared tool result"])
def test_write_and_edit_adding_markers_refused(
    cache: FileCache, root: Path, notes: str, marker: str
) -> None:
    session = cache.session()
    with pytest.raises(MarkerError, match=r"notes\.txt: the new content contains"):
        session.write("notes.txt", f"{marker} notes.txt unchanged since your result c1\n")
    with pytest.raises(MarkerError, match="fresh=true"):
        session.edit("notes.txt", "line 7:", f"{marker} line 7:")
    with pytest.raises(MarkerError):
        session.write("new.txt", marker + "\n")
    assert (root / "notes.txt").read_text(encoding="utf-8") == notes
    assert not (root / "new.txt").exists()
    assert no_temp_files(root)


def test_editing_a_file_that_already_has_marker_text_is_allowed(
    cache: FileCache, root: Path
) -> None:
    doc = "# Answers look like this:\n[filecache] a.py unchanged since your result c1\nend\n"
    (root / "doc.md").write_text(doc, encoding="utf-8")
    session = cache.session()
    session.edit("doc.md", "end\n", "the end\n")
    assert (root / "doc.md").read_text(encoding="utf-8") == doc.replace("end\n", "the end\n")
    session.write("doc.md", doc)
    assert (root / "doc.md").read_text(encoding="utf-8") == doc


# -- writes ----------------------------------------------------------------------------------


def test_write_through_symlinked_directory_outside_is_refused(
    cache: FileCache, root: Path, outside: Path
) -> None:
    (root / "out").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    for path in ("out/new.txt", "out/deeper/new.txt", "out/secret.txt"):
        with pytest.raises(OutsideRootError):
            cache.session().write(path, "escaped\n")
    assert snapshot(outside) == before
    assert not (outside / "deeper").exists()
    assert no_temp_files(root, outside)


def test_write_creates_parent_directories_inside_root(cache: FileCache, root: Path) -> None:
    result = cache.session().write("pkg/sub/mod.py", "VALUE = 1\n")
    assert (root / "pkg" / "sub" / "mod.py").read_text(encoding="utf-8") == "VALUE = 1\n"
    assert result.kind == "written" and result.path == "pkg/sub/mod.py"
    assert no_temp_files(root)


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755])
def test_write_and_edit_preserve_file_mode(cache: FileCache, root: Path, mode: int) -> None:
    path = root / "src" / "app.py"
    path.chmod(mode)
    cache.session().write("src/app.py", "def main():\n    return 2\n")
    assert stat.S_IMODE(path.stat().st_mode) == mode
    cache.session().edit("src/app.py", "return 2", "return 3")
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert path.read_text(encoding="utf-8") == "def main():\n    return 3\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may give a file to another user")
def test_write_and_edit_as_root_keep_the_files_owner(cache: FileCache, root: Path) -> None:
    """The replacement is a new inode; made by root it was root's, so editing another user's
    file as root (a container, sudo) took it from them."""
    path = root / "src" / "app.py"
    os.chown(path, 65534, 65534)
    cache.session().write("src/app.py", "def main():\n    return 2\n")
    assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534)
    cache.session().edit("src/app.py", "return 2", "return 3")
    assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534)
    cache.session().write("src/new.py", "x = 1\n")
    assert (root / "src" / "new.py").stat().st_uid == 0  # a new file is the writer's


@pytest.mark.parametrize("old", [b"\x89PNG\r\n\x1a\n", b"x" * 2000], ids=["binary", "large"])
def test_write_replaces_a_binary_or_large_file(root: Path, old: bytes) -> None:
    (root / "old.dat").write_bytes(old)
    with FileCache(root, store=":memory:", max_file_bytes=1000) as fc:
        fc.session().write("old.dat", "now text\n")
    assert (root / "old.dat").read_bytes() == b"now text\n"


# -- ranges ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "limit", "message"),
    [
        (61, None, r"notes\.txt: offset 61 is past the end; the file has 60 lines"),
        (0, None, r"notes\.txt: offset must be 1 or more"),
        (-3, 5, "offset must be 1 or more"),
        (1, 0, r"notes\.txt: limit must be 1 or more"),
    ],
)
def test_bad_offset_or_limit(
    cache: FileCache, offset: int, limit: int | None, message: str
) -> None:
    session = cache.session()
    with pytest.raises(RangeError, match=message):
        session.read("notes.txt", offset=offset, limit=limit)
    assert session.read("notes.txt").kind == "full"  # the refused read left no view behind
