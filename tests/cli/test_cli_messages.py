"""The CLI's error messages name its own flags (``--replace-all``, ``--fresh``, ``--store``,
``--offset``...), never the tool arguments the library's messages name for agents
(``replace_all=true``, ``fresh=true``, ``store=':memory:'``), which stay as they are."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from filecache import FileCache
from filecache.cli import main
from filecache.errors import FileCacheError

TOOL_WORDS = ("replace_all=true", "fresh=true", "store=':memory:'", "mode='outline'",
              "offset/limit", "old_string", "new_string", "use write to")  # fmt: skip
TWO_POPS = "".join(f"class {c}:\n    def pop(self):\n        pass\n\n" for c in "AB")


@pytest.fixture
def tree(root: Path) -> Path:
    (root / "dup.txt").write_text("x\nx\n", encoding="utf-8")
    (root / "two.py").write_text(TWO_POPS, encoding="utf-8")
    (root / "long.txt").write_text(("y" * 80 + "\n") * 50, encoding="utf-8")
    (root / "old_string.txt").write_text("a\n", encoding="utf-8")
    (root / "afile").write_text("a regular file\n", encoding="utf-8")
    return root


CASES = [
    (["edit", "dup.txt", "--old", "x", "--new", "y"],
     "dup.txt: --old occurs 2 times; pass --replace-all or include more context"),
    (["edit", "dup.txt", "--old", "absent", "--new", "y"],
     "dup.txt: --old not found; read the file again ('filecache read --fresh') and copy"),
    (["edit", "dup.txt", "--old", "", "--new", "y"],
     "dup.txt: --old is empty; use 'filecache write' to create or replace a file"),
    (["edit", "dup.txt", "--old", "x", "--new", "x"],
     "dup.txt: --old and --new are the same; nothing to change"),
    (["edit", "old_string.txt", "--old", "absent", "--new", "y"],  # the path is left alone
     "old_string.txt: --old not found;"),
    (["write", "new.txt", "--content", "[filecache] new.txt unchanged since your result c1\n"],
     "write the file's real content ('filecache read --fresh' shows it)"),
    (["read", "notes.txt", "--store", "{root}/afile/x.db"],
     "pass --store with a writable path or :memory: (or set FILECACHE_STORE)"),
    (["stats", "--store", "{root}"],
     "pass --store with a writable path or :memory: (or set FILECACHE_STORE)"),
    (["read", "long.txt", "--env-max-bytes"],
     "read a part with --offset/--limit, or raise max_file_bytes (FILECACHE_MAX_FILE_BYTES=BYTES"
     " in the environment, or max_file_bytes = BYTES under [tool.filecache] in the root's "
     "pyproject.toml)"),
    (["read", "long.txt", "--offset", "1", "--limit", "40", "--env-max-bytes"],
     "read fewer lines (a smaller --limit)"),
    (["read", "notes.txt", "--symbol", "foo"], "; use --mode outline to list definitions"),
    (["read", "two.py", "--symbol", "pop", "--offset", "1"],
     "pass --symbol alone, without --offset/--limit or --mode outline"),
    (["read", "two.py", "--symbol", "pop"],
     "read one of these line ranges with --offset/--limit"),
    (["read", "notes.txt", "--offset", "0"], "notes.txt: --offset must be 1 or more"),
    (["read", "notes.txt", "--offset", "99"], "notes.txt: --offset 99 is past the end"),
    (["read", "notes.txt", "--limit", "0"], "notes.txt: --limit must be 1 or more"),
    (["outline", "two.py", "--symbol", "nosuch"],
     "run 'filecache outline' without --symbol to list definitions"),
    (["outline", "two.py", "--symbol", "pop"],
     "read one of these line ranges with 'filecache read --offset/--limit'"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "needle"), CASES, ids=[" ".join(c[0][:3]) for c in CASES])
def test_errors_name_the_cli_flags(
    tree: Path, tmp_path: Path, args: list[str], needle: str
) -> None:
    env = {"FILECACHE_MAX_FILE_BYTES": "100"} if "--env-max-bytes" in args else {}
    argv = [a.format(root=tree) for a in args if a != "--env-max-bytes"]
    if "--store" not in argv and argv[0] != "outline":
        argv += ["--store", str(tmp_path / "cache.db")]
    if argv[0] != "stats":
        argv += ["--root", str(tree)]
    result = CliRunner().invoke(main, argv, env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code != 0 and result.stderr.count("\n") == 1, result.output
    assert needle in result.stderr, result.stderr
    shown = result.stderr.replace("old_string.txt", "")  # the file's own name
    assert not [w for w in TOOL_WORDS if w in shown], result.stderr


def test_the_library_keeps_the_tool_arguments_in_its_messages(tree: Path) -> None:
    """Agents calling the tools read these: they name the tools' arguments."""
    with FileCache(tree, store=":memory:") as cache:
        session = cache.session()
        for call, word in [
            (lambda: session.edit("dup.txt", "x", "y"), "pass replace_all=true"),
            (lambda: session.edit("dup.txt", "absent", "y"), "(fresh=true)"),
            (lambda: session.read("notes.txt", symbol="foo"), "use mode='outline'"),
            (lambda: session.read("two.py", symbol="pop", offset=1), "without offset/limit"),
        ]:
            with pytest.raises(FileCacheError) as raised:
                call()
            assert word in str(raised.value)
