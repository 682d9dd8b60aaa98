"""Tests for ``filecache.decorators``: an agent's own tools wrapped by a session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from filecache import FileCache, Session

Patch = Callable[[str | bytes, str], bytes]


def numbered(text: str) -> str:
    return "".join(f"{n:6d}\t{line}" for n, line in enumerate(text.splitlines(True), 1))


def untag(answer: str) -> str:
    """A content answer without the tag line naming its generated call id (there is one)."""
    tag, _, body = answer.partition("\n")
    assert tag.startswith("[filecache] result fc-"), tag
    return body


@pytest.fixture
def session(cache: FileCache) -> Session:
    return cache.session("decorated")


@pytest.fixture
def read_file(session: Session, root: Path) -> Callable[..., str]:
    """An agent's own read tool: the file's text with ``cat -n`` line numbers."""

    @session.read_tool
    def read_file(path: str, offset: int = 1) -> str:
        """Read a file."""
        lines = (root / path).read_text(encoding="utf-8").splitlines(True)
        return numbered("".join(lines[offset - 1 :]))

    return read_file


def test_first_call_returns_output_second_a_fileref(
    read_file: Callable[..., str], notes: str
) -> None:
    first = untag(read_file("notes.txt"))
    assert first == numbered(notes)
    second = read_file("notes.txt")
    assert "unchanged" in second and "notes.txt" in second
    assert len(second) < len(first) / 10


def test_changed_file_gives_a_diff_that_patches_the_first_output(
    read_file: Callable[..., str], root: Path, notes: str, gnu_patch: Patch
) -> None:
    first = untag(read_file("notes.txt"))
    changed = notes.replace("line 30:", "line thirty:").replace("line 59:", "LINE 59:")
    (root / "notes.txt").write_text(changed, encoding="utf-8")
    answer = read_file("notes.txt")
    assert "changed since your result" in answer and "@@" in answer
    second = gnu_patch(first, answer)
    assert second == numbered(changed).encode("utf-8")
    again = changed.replace("line 2:", "line two:")
    (root / "notes.txt").write_text(again, encoding="utf-8")
    answer = read_file("notes.txt")  # relies on the first output and the diff since
    assert gnu_patch(second, answer) == numbered(again).encode("utf-8")


def test_fresh_returns_the_output(read_file: Callable[..., str], notes: str) -> None:
    read_file("notes.txt")
    assert untag(read_file("notes.txt", fresh=True)) == numbered(notes)


def test_a_function_taking_fresh_gets_it(session: Session, root: Path) -> None:
    seen: list[bool] = []

    @session.read_tool
    def read_file(path: str, fresh: bool = False) -> str:
        seen.append(fresh)
        return numbered((root / path).read_text(encoding="utf-8"))

    read_file("notes.txt")
    assert "unchanged" in read_file("notes.txt")
    assert "unchanged" not in read_file("notes.txt", fresh=True)
    assert "unchanged" not in read_file("notes.txt", True)  # by position too
    assert seen == [False, False, True, True]


def test_same_arguments_positional_or_keyword_share_a_view(
    read_file: Callable[..., str],
) -> None:
    read_file("notes.txt")
    assert "unchanged" in read_file(path="notes.txt")
    assert "unchanged" in read_file("notes.txt", offset=1)
    other = untag(read_file("notes.txt", offset=50))
    assert other.startswith("     1\tline 50:")


def test_call_id_is_recorded_in_the_ledger(read_file: Callable[..., str], session: Session) -> None:
    read_file("notes.txt", call_id="call_1")
    answer = read_file("notes.txt", call_id="call_2")
    calls = session.ledger().calls
    assert {"call_1", "call_2"} <= set(calls)
    assert calls["call_1"].tool == "read" and calls["call_1"].kind == "full"
    assert calls["call_2"].kind == "unchanged"
    assert calls["call_2"].base_call_id == "call_1"
    assert calls["call_1"].path == "notes.txt"
    assert "call_1" in answer


def test_forgotten_result_makes_the_next_call_send_output(
    read_file: Callable[..., str], session: Session, notes: str
) -> None:
    read_file("notes.txt", call_id="call_1")
    session.forget(["call_1"])
    assert read_file("notes.txt", call_id="call_2") == numbered(notes)


def test_edit_tool_records_an_edit(session: Session, root: Path) -> None:
    @session.edit_tool
    def edit_file(file_path: str, old_string: str, new_string: str) -> str:
        """Edit a file."""
        path = root / file_path
        path.write_text(path.read_text(encoding="utf-8").replace(old_string, new_string))
        return f"edited {file_path}"

    assert edit_file("src/app.py", "return 1", "return 2", call_id="call_e") == "edited src/app.py"
    assert edit_file.__name__ == "edit_file" and edit_file.__doc__ == "Edit a file."
    writes = session.ledger().writes
    assert [(w.call_id, w.tool) for w in writes["src/app.py"]] == [("call_e", "edit")]
    assert session.ledger().calls["call_e"].tool == "edit"


def test_write_tool_records_a_write(session: Session, root: Path) -> None:
    @session.write_tool
    def write_file(path: str, content: str) -> str:
        (root / path).write_text(content, encoding="utf-8")
        return "ok"

    write_file(path="new.txt", content="hello\n")
    [record] = session.ledger().writes["new.txt"]
    assert record.tool == "write"
    [event] = [e for e in session.engine.store.events(session.id) if e.path == "new.txt"]
    assert event.kind == "written"  # once "writeed" (built as tool + "ed")


def test_edit_tool_records_the_kind_edited(session: Session, root: Path) -> None:
    @session.edit_tool
    def edit_file(path: str, old: str, new: str) -> str:
        (root / path).write_text((root / path).read_text().replace(old, new))
        return "ok"

    edit_file("notes.txt", "line", "LINE", call_id="e1")
    [event] = [e for e in session.engine.store.events(session.id) if e.call_id == "e1"]
    assert (event.tool, event.kind) == ("edit", "edited")


def test_failing_edit_tool_records_nothing(session: Session) -> None:
    @session.edit_tool
    def edit_file(path: str) -> str:
        raise FileNotFoundError(path)

    with pytest.raises(FileNotFoundError):
        edit_file("gone.txt", call_id="call_x")
    assert "call_x" not in session.ledger().calls


@pytest.mark.parametrize("value", [42, None, b"bytes", {"lines": ["a"]}])
def test_non_str_output_is_passed_through(session: Session, value: object) -> None:
    @session.read_tool
    def tool(path: str) -> object:
        return value

    assert tool("notes.txt") is value
    assert tool("notes.txt") is value
    assert session.ledger().calls == {}


def test_output_with_nul_is_passed_through_never_diffed(session: Session, notes: str) -> None:
    outputs = [notes.replace("line 7:", "line 7:\x00"), notes.replace("line 7:", "line 7:\x00!")]

    @session.read_tool
    def tool(path: str) -> str:
        return outputs[0]

    assert tool("notes.txt") == outputs[0]
    outputs.pop(0)
    assert tool("notes.txt") == outputs[0]  # a diff would render the NUL as a line end
