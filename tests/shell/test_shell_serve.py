"""Served shell reads after the first: FileRefs in the one FileRef form, diffs after ``sed -i``.

Real bash runs every command that is not served (``sed -i`` included), as in an agent's loop.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from filecache import FileCache
from filecache.core.render import render_file_ref, render_sealed
from filecache.shell.bash_reads import answer_shell_read, serve_bash
from filecache.shell.shell_parse import parse_shell_read

TEXT = "".join(f"line {i}: some text long enough to be worth caching here\n" for i in range(1, 61))


def shell(root: Path) -> Callable[[str], str]:
    def run(command: str) -> str:
        out = subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, check=False)
        return out.stdout.decode("utf-8")

    return run


def test_a_reread_of_held_lines_is_the_one_line_fileref(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TEXT)
    run = shell(tmp_path)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        first = serve_bash(session, "nl -ba a.py | sed -n '10,40p'", run, "c1")
        assert first == run("nl -ba a.py | sed -n '10,40p'")
        again = serve_bash(session, "sed -n '20,30p' a.py", run, "c2")
        version = session.ledger().calls["c1"].version
        assert version is not None
        assert again == render_sealed(
            render_file_ref("a.py", version, 20, 30, 60, "c1"), cache.engine.secrets.ref_seal
        )
        # Lines the model never saw are content again, byte for byte the shell's.
        assert serve_bash(session, "cat -n a.py | sed -n '35,50p'", run, "c3") == run(
            "cat -n a.py | sed -n '35,50p'"
        )


def test_a_change_by_sed_i_is_a_diff_from_the_lines_held(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TEXT)
    run = shell(tmp_path)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        serve_bash(session, "cat a.py", run, "c1")
        assert serve_bash(session, "sed -i '15s/line 15:/LINE 15:/' a.py", run, "c2") == ""
        assert [w.call_id for w in session.ledger().writes["a.py"]] == ["c2"]
        changed = serve_bash(session, "cat a.py", run, "c3")
        assert changed.startswith("[filecache] a.py changed since your result c1")
        assert "-line 15: some" in changed and "+LINE 15: some" in changed
        assert session.ledger().calls["c3"].kind == "diff"
        # After the diff the model holds the new version: the next read is a FileRef.
        assert serve_bash(session, "head -n 20 a.py", run, "c4").startswith(
            "[filecache] a.py unchanged since your result"
        )


def test_reads_of_several_runs_or_files_are_content_and_recorded(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TEXT)
    (tmp_path / "b.py").write_text("one\ntwo\n")
    run = shell(tmp_path)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        command = "sed -n -e '1,3p' -e '30,50p' a.py"
        assert serve_bash(session, command, run, "c1") == run(command)
        assert serve_bash(session, "cat a.py b.py", run, "c2") == run("cat a.py b.py")
        # Both runs of c1 are held: a read inside one is a FileRef.
        assert serve_bash(session, "sed -n '35,48p' a.py", run, "c3").startswith(
            "[filecache] a.py unchanged since your result"
        )


def test_what_cannot_be_served_exactly_runs_in_the_shell(tmp_path: Path) -> None:
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01binary\n")
    (tmp_path / "empty.txt").write_text("")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("outside the root\n")
    run = shell(tmp_path)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        for command in ("cat bin.dat", "cat empty.txt", f"cat {outside}", "cat missing.txt"):
            assert serve_bash(session, command, run) == run(command)
        assert not session.ledger().reads()
    read = parse_shell_read("cat a.py")
    assert read is not None
    (tmp_path / "a.py").write_text("x\n")
    with FileCache(tmp_path, store=":memory:") as cache:
        answer = answer_shell_read(cache.session(), read, "c9")
        assert (answer.text, answer.kind, answer.start, answer.end) == ("x\n", "full", 1, 1)


def test_a_path_the_kernel_does_not_resolve_to_the_file_runs_in_the_shell(tmp_path: Path) -> None:
    """The kernel resolves a path one name at a time: ``a.py/`` and ``a.py/.`` are not folders,
    ``gone/../a.py`` needs ``gone``. ``locate`` read them as ``a.py``, and the file was served
    where bash prints only an error."""
    (tmp_path / "a.py").write_text(TEXT)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("b\n")
    run = shell(tmp_path)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        for command in ("cat a.py/", "head -n 3 a.py/.", "cat -n gone/../a.py", "cat sub/b.py/"):
            assert serve_bash(session, command, run) == run(command) == "", command
        assert not session.ledger().reads()
        for command in ("cat sub/../a.py", "cat ./sub//b.py"):  # what the kernel resolves alike
            assert serve_bash(session, command, run) == run(command) != ""
        assert len(session.ledger().reads()) == 2
