"""The vocabularies of ``filecache.core.kinds``: members are their strings (what stores and JSON
hold), and the CLI's choices are generated from them and from the tool table."""

from __future__ import annotations

import json

import click

from filecache.cli import main
from filecache.core.kinds import CHANGES, FILE_ACCESSES, Format, Kind, Tier, Tool
from filecache.prune.codecs import (
    anthropic_messages,
    gemini_contents,
    openai_chat,
    openai_responses,
)
from filecache.prune.file_tools import FILE_TOOLS
from filecache.prune.pruning import TIERS
from filecache.prune.transcript import FORMATS, detect_format
from filecache.tools import READ_FILE


def test_members_are_their_strings() -> None:
    for enum in (Kind, Tool, Tier, Format):
        for member in enum:
            assert member == member.value and isinstance(member, str)
            assert f"{member}" == member.value and json.dumps(member) == f'"{member.value}"'
    assert {"clear": 1}[Tier.CLEAR] == 1 and TIERS["clear"] == TIERS[Tier.CLEAR]


def test_the_file_tool_table_speaks_tool() -> None:
    kinds = {row.kind for row in FILE_TOOLS} - {""}
    assert kinds <= set(FILE_ACCESSES) and all(isinstance(k, Tool) for k in kinds)
    assert set(CHANGES) == {Tool.WRITE, Tool.EDIT, Tool.CHANGE}


def test_formats_are_the_codecs_and_detection_answers_with_them() -> None:
    assert FORMATS == tuple(Format)
    codecs = (openai_chat, openai_responses, anthropic_messages, gemini_contents)
    assert tuple(codec.FORMAT for codec in codecs) == FORMATS
    found = detect_format([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}])
    assert found is Format.RESPONSES


def _choices(command: str, option: str) -> list[str]:
    cmd = main.commands[command] if isinstance(main, click.Group) else None
    assert cmd is not None
    param = next(p for p in cmd.params if p.name == option)
    assert isinstance(param.type, click.Choice)
    return list(param.type.choices)


def test_cli_choices_come_from_the_enums_and_the_tool_table() -> None:
    assert _choices("prune", "fmt") == [f.value for f in Format]
    assert tuple(_choices("read", "mode")) == READ_FILE.param("mode").enum
