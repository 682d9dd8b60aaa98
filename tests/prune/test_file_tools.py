"""Tests for ``filecache.prune.file_tools``: which calls read, write or edit which lines of a
file."""

from __future__ import annotations

import json
from typing import Any

import pytest

from filecache.prune.file_tools import FILE_TOOLS, FileAccess, file_access
from filecache.prune.transcript import parse_transcript


def _access(name: str, args: dict[str, Any]) -> FileAccess | None:
    transcript = parse_transcript(
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
        ]
    )
    return file_access(transcript.calls()[0])


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("read_file", {"path": "a.py"}, ("read", "a.py", 1, None)),
        ("read_file", {"path": "a.py", "offset": 10, "limit": 5}, ("read", "a.py", 10, 14)),
        ("read_file", {"path": "a.py", "offset": "3", "limit": "2"}, ("read", "a.py", 3, 4)),
        ("read_file", {"path": "a.py", "offset": True, "limit": 0}, ("read", "a.py", 1, None)),
        ("read_file", {"path": "a.py", "limit": -4}, ("read", "a.py", 1, None)),
        (
            "read_file",
            {"absolute_path": "/r/a.py", "offset": 0, "limit": 2},
            ("read", "/r/a.py", 1, 2),
        ),
        ("write_file", {"path": "a.py", "content": "x"}, ("write", "a.py", 1, None)),
        (
            "edit_file",
            {"path": "a.py", "old_string": "a", "new_string": "b"},
            ("edit", "a.py", 1, None),
        ),
        ("replace", {"file_path": "/r/a.py"}, ("edit", "/r/a.py", 1, None)),
        ("Read", {"file_path": "/r/a.py", "offset": 5}, ("read", "/r/a.py", 5, None)),
        ("Read", {"file_path": "/r/a.py", "limit": 50}, ("read", "/r/a.py", 1, 50)),
        ("Write", {"file_path": "/r/a.py", "content": ""}, ("write", "/r/a.py", 1, None)),
        ("Edit", {"file_path": "/r/a.py"}, ("edit", "/r/a.py", 1, None)),
        ("MultiEdit", {"file_path": "/r/a.py", "edits": []}, ("edit", "/r/a.py", 1, None)),
        ("NotebookEdit", {"notebook_path": "/r/n.ipynb"}, ("edit", "/r/n.ipynb", 1, None)),
        (
            "str_replace_editor",
            {"command": "view", "path": "/t/a.py"},
            ("read", "/t/a.py", 1, None),
        ),
        (
            "str_replace_editor",
            {"command": "view", "path": "/t/a.py", "view_range": [3, 9]},
            ("read", "/t/a.py", 3, 9),
        ),
        (
            "str_replace_based_edit_tool",
            {"command": "view", "path": "/t/a.py", "view_range": [3, -1]},
            ("read", "/t/a.py", 3, None),
        ),
        (
            "str_replace_editor",
            {"command": "create", "path": "/t/a.py"},
            ("write", "/t/a.py", 1, None),
        ),
        (
            "str_replace_editor",
            {"command": "str_replace", "path": "/t/a"},
            ("edit", "/t/a", 1, None),
        ),
        ("str_replace_editor", {"command": "insert", "path": "/t/a"}, ("edit", "/t/a", 1, None)),
        ("str_replace_editor", {"command": "undo_edit", "path": "/t/a"}, ("edit", "/t/a", 1, None)),
        ("read", {"filePath": "/r/a.ts", "offset": 0, "limit": 10}, ("read", "/r/a.ts", 1, 10)),
        ("write", {"filePath": "/r/a.ts"}, ("write", "/r/a.ts", 1, None)),
        ("edit", {"filePath": "/r/a.ts"}, ("edit", "/r/a.ts", 1, None)),
        ("write_to_file", {"path": "a.py"}, ("write", "a.py", 1, None)),
        ("replace_in_file", {"path": "a.py"}, ("edit", "a.py", 1, None)),
    ],
)
def test_file_access(name: str, args: dict[str, Any], expected: tuple[Any, ...]) -> None:
    access = _access(name, args)
    assert access is not None
    assert (access.kind, access.path, access.start, access.end) == expected
    assert (access.call_id, access.tool, access.message_index) == ("c", name, 0)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("bash", {"command": "cat a.py"}),
        ("read_file", {}),
        ("read_file", {"path": ""}),
        ("Read", {"path": "a.py"}),
        ("str_replace_editor", {"command": "explode", "path": "a.py"}),
        ("read_file", {"path": 3}),
    ],
)
def test_not_a_file_access(name: str, args: dict[str, Any]) -> None:
    assert _access(name, args) is None


def test_file_tools_table_is_consistent() -> None:
    for row in FILE_TOOLS:
        assert row.paths
        assert (row.kind in ("read", "write", "edit")) != bool(row.command)
        assert set(row.commands.values()) <= {"read", "write", "edit"}
    seen = [(row.name, path) for row in FILE_TOOLS for path in row.paths]
    assert len(seen) == len(set(seen)), "a (name, path argument) pair matches two rows"
