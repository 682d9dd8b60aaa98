"""Shell edits replay redoes (``shell_edit``) equal what bash does, and ``LineMap`` follows them.

The ``sed -i`` commands are every distinct one the mini-swe-agent trajectories of the corpus ran
(``fixtures/shell/recorded_commands.json``); bash runs each on one copy of a made-up file and
``apply_edit`` redoes it on another, and the two must be byte-identical.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from filecache.importers.line_map import LineMap
from filecache.shell.shell_edit import apply_edit, parse_shell_edit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "shell"
RECORDED = json.loads((FIXTURES / "recorded_commands.json").read_text(encoding="utf-8"))


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _made_up(lines: int) -> str:
    row = "    line {}: return variable_attrs[0]  # dup_mul, S(14)/15\n"
    return "".join(row.format(n) for n in range(1, lines + 1))


@pytest.mark.parametrize("command", RECORDED["edits"])
def test_recorded_edits_are_redone_as_bash_does_them(tmp_path: Path, command: str) -> None:
    steps = parse_shell_edit(command)
    assert steps is not None
    top = max([int(x) for x in re.findall(r"\d+", command)] + [20])
    bash_root, redo_root = tmp_path / "bash", tmp_path / "redo"
    for step in steps:
        for path in (step.path, step.source):
            if path and not (bash_root / path).exists():
                (bash_root / path).parent.mkdir(parents=True, exist_ok=True)
                (bash_root / path).write_text(_made_up(top + 10))
    shutil.copytree(bash_root, redo_root)
    subprocess.run(["bash", "-c", command], cwd=bash_root, capture_output=True, check=False)
    apply_edit(steps, redo_root)
    assert _tree(redo_root) == _tree(bash_root)


@pytest.mark.parametrize(
    "command",
    [
        "cat <<'EOF' > new.py\nprint('$HOME')\nEOF",
        "cat > a.txt <<'EOF'\nreplaced\nEOF",
        "cat <<EOF >> a.txt\nappended line\nEOF",
        "cat a.txt >> b.txt && cat b.txt > c.txt",
        "sed -i '2d' a.txt && sed -i '1r new.txt' a.txt",
        "# a comment\nsed -i -e '1s/one/ONE/' -e '3a\\  after three' a.txt",
    ],
)
def test_heredocs_cat_and_sed_chains_are_redone_as_bash_does_them(
    tmp_path: Path, command: str
) -> None:
    steps = parse_shell_edit(command)
    assert steps is not None, command
    bash_root, redo_root = tmp_path / "bash", tmp_path / "redo"
    bash_root.mkdir()
    (bash_root / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    (bash_root / "b.txt").write_text("bee\n")
    (bash_root / "new.txt").write_text("new 1\nnew 2\n")
    shutil.copytree(bash_root, redo_root)
    subprocess.run(["bash", "-c", command], cwd=bash_root, capture_output=True, check=False)
    apply_edit(steps, redo_root)
    assert _tree(redo_root) == _tree(bash_root)


@pytest.mark.parametrize(
    "command",
    [
        "sed -i 's/a/b/' a.txt | tee x",
        "sed -i.bak '1d' a.txt",
        "sed -i '1w /tmp/out' a.txt",
        "sed -i '1e rm -rf /' a.txt",
        'sed -i "s/$X/y/" a.txt',
        "cat <<EOF > a.txt\n$HOME\nEOF",
        "git checkout HEAD~1 && sed -i '1d' a.txt",
        "sed -i '1d' a.txt || true",
        "python fix.py",
    ],
)
def test_other_commands_are_opaque(command: str) -> None:
    assert parse_shell_edit(command) is None


@pytest.mark.parametrize(
    "command",
    [
        "sed -i '5a\\    inserted' f",
        "sed -i '3,6d' f",
        "sed -i '4s/line/LINE/' f",
        "sed -i '8c\\    changed\\n    twice' f",
        "sed -i '2i\\    before' f && sed -i '10,12d' f",
        "sed -i '32d;34d;35d' f",
    ],
)
def test_line_map_follows_line_addressed_edits(tmp_path: Path, command: str) -> None:
    """Each line the map calls original k is line k of the file before (tokens are unique)."""
    before = [f"original line {k}" for k in range(1, 41)]
    (tmp_path / "f").write_text("\n".join(before) + "\n")
    steps = parse_shell_edit(command)
    assert steps is not None
    line_map = LineMap()
    for step in steps:
        assert line_map.through(step, {}, None)  # the length need not be known
    subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True)
    after = (tmp_path / "f").read_text().split("\n")[:-1]
    for n, text in enumerate(after, 1):
        k = line_map.original(n)
        if k is not None:
            assert text == before[k - 1], (n, k)
        else:
            assert text not in before, n  # new or rewritten text
    assert not LineMap().through(parse_shell_edit("sed -i 's/a/b/' f")[0], {}, None)


def test_git_checkout_of_files_restores_them_as_git_does(tmp_path: Path) -> None:
    repo, originals = tmp_path / "repo", tmp_path / "files"
    repo.mkdir()
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("one\ntwo\n")
    (repo / "b.txt").write_text("bee\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)
    shutil.copytree(repo, originals, ignore=shutil.ignore_patterns(".git"))
    redo = tmp_path / "redo"
    shutil.copytree(originals, redo)
    command = "sed -i '1s/one/ONE/' src/a.py && git checkout src/a.py b.txt && sed -i '1d' b.txt"
    steps = parse_shell_edit(command)
    assert steps is not None and [s.op for s in steps] == ["sed", "restore", "restore", "sed"]
    subprocess.run(["bash", "-c", command], cwd=repo, check=True)
    apply_edit(steps, redo, originals)
    assert _tree(redo) == {k: v for k, v in _tree(repo).items() if not k.startswith(".git/")}
    assert parse_shell_edit("git checkout main") is None  # a branch: anything may change
    line_map = LineMap()
    assert line_map.through(parse_shell_edit("sed -i '1d' f")[0], {}, None)
    assert line_map.through(parse_shell_edit("git checkout f.py")[0], {}, None)
    assert line_map.original(1) == 1 and not line_map.changed()
