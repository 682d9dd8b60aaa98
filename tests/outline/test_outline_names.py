"""Outline lines keep the definition's name when decorators, annotations or attributes are cut.

``symbol=`` takes the name an outline line shows, so no shortening (at extraction, 120
characters, or at a budget level, 72) may cut it: the text before the name goes first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filecache.outline.outline import build_outline, find_symbol, language_for_path, render_outline
from filecache.outline.outline_render import LEVELS, render_definition
from filecache.outline.outline_text import SIGNATURE_LIMIT, shorten_signature, shorten_signature_at

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "outline"

# Fixture -> (qualified name, the text the shortest signature level must still show).
DECORATED = {
    "cli_commands.py": [
        ("export_stock", "def export_stock("),
        ("prune", "def prune(dry_run, older_than)"),
        ("cli", "def cli() -> None"),
        ("Report.render_cell", "def render_cell(value: object, width: int) -> str"),
    ],
    "Annotated.java": [
        ("OrderController", "class OrderController"),
        ("OrderController.lines", "lines("),
        ("OrderController.toString", "public String toString()"),
    ],
    "decorated.ts": [
        ("OrderTableComponent", "export class OrderTableComponent"),
        ("OrderTableComponent.onArrowDown", "onArrowDown(event: KeyboardEvent): void"),
    ],
    "attributes.rs": [
        ("Event", "pub enum Event"),
        ("Counter", "pub struct Counter"),
        ("Counter.bump", "fn bump(&mut self) -> u64"),
    ],
}
_SHORTEST = min(level.signature_limit for level in LEVELS)


def _outline(name: str):  # type: ignore[no-untyped-def]
    return build_outline((FIXTURES / name).read_bytes(), language_for_path(name))


@pytest.mark.parametrize("name", sorted(DECORATED))
def test_a_decorated_definitions_line_keeps_its_name_at_every_level(name: str) -> None:
    outline = _outline(name)
    for qualified, shown in DECORATED[name]:
        definition = find_symbol(outline, qualified)
        assert len(definition.signature) <= SIGNATURE_LIMIT
        assert definition.signature[definition.name_at :].startswith(definition.name)
        for level in LEVELS:
            line = render_definition(definition, level)
            assert definition.name in line.split(" ", 1)[1], (level.note, line)
        short = render_definition(definition, LEVELS[4])  # signatures shortened to 72
        assert shown in short, short
        assert len(short.lstrip().split(" ", 1)[1]) <= _SHORTEST


@pytest.mark.parametrize("name", sorted(DECORATED))
def test_the_decorators_are_shown_when_they_fit(name: str) -> None:
    first = render_outline(_outline(name), name).splitlines()[1]
    assert first.split(" ", 1)[1][0] in "@#", first  # the file's first definition is decorated


def test_a_click_command_with_a_long_chain_shows_its_first_decorator_and_its_name() -> None:
    definition = find_symbol(_outline("cli_commands.py"), "export_stock")
    assert definition.signature.startswith("@cli.command(…) @click.option(…)")
    assert " … def export_stock(ctx, warehouse, " in definition.signature
    assert render_definition(definition, LEVELS[-2]) == "12-22 function export_stock"


def test_every_fixture_signature_holds_its_name_after_name_at() -> None:
    for path in sorted(FIXTURES.iterdir()):
        outline = build_outline(path.read_bytes(), language_for_path(path.name))
        for d in outline.definitions:
            assert 0 <= d.name_at <= len(d.signature), (path.name, d)
            assert d.name in d.signature[d.name_at :], (path.name, d)


@pytest.mark.parametrize(
    ("signature", "name", "limit", "expected"),
    [
        # The head is cut to whole words: a quoted string with spaces is one word.
        (
            '#[inline] #[must_use = "a long reason with spaces in it"] pub fn bump(&mut self)',
            "bump",
            40,
            "#[inline] … fn bump(&mut self)",
        ),
        ("@a @b @c @d @e @f @g @h def name(x, y)", "name", 24, "@a @b … def name(x, y)"),
        # Nothing before the name fits: only the keyword stays.
        ("@decorator_with_a_long_name def name(x)", "name", 16, "… def name(x)"),
        # A signature that fits is left alone.
        ("@a def name(x)", "name", 72, "@a def name(x)"),
    ],
)
def test_shorten_signature_cuts_the_head_before_the_name(
    signature: str, name: str, limit: int, expected: str
) -> None:
    at = signature.index(name + "(")
    short, name_at = shorten_signature_at(signature, at, limit)
    assert short == expected
    assert len(short) <= limit
    assert short[name_at:].startswith(name)
    assert shorten_signature(signature, at, limit) == short


_LOWER = "abcdefghijklmnopqrstuvwxyz"
_ARGUMENTS = st.text(_LOWER + ' =",', max_size=30)
_DECORATOR = st.builds(
    lambda name, args: "@" + name + ("" if args is None else f"({args})"),
    st.text(_LOWER + "_.", min_size=1, max_size=12),
    st.none() | _ARGUMENTS,  # quotes may be unbalanced: the name must survive that too
)


@settings(max_examples=int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "200")), deadline=None)
@given(
    decorators=st.lists(_DECORATOR, max_size=8),
    keyword=st.sampled_from(["def ", "pub fn ", "public static int ", "", "export class "]),
    name=st.text(_LOWER + "_ABCXYZ0123", min_size=1, max_size=16),
    params=st.lists(st.text(_LOWER, min_size=1, max_size=8), max_size=7),
    limit=st.integers(min_value=40, max_value=140),
)
def test_a_shortened_signature_always_keeps_the_name(
    decorators: list[str], keyword: str, name: str, params: list[str], limit: int
) -> None:
    head = " ".join([*decorators, keyword]) if decorators else keyword
    signature = f"{head}{name}({', '.join(params)})"
    short, name_at = shorten_signature_at(signature, len(head), limit)
    assert len(short) <= limit
    assert short[name_at:].startswith(name + "(")
    if len(signature) <= limit:
        assert short == signature
