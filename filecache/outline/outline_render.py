"""Render an outline as compact, line-numbered text for the model.

Invariants:

- The output is plain text: one header line, then one line per definition shown (or the
  summary's lines). Every definition line starts, after an indent of two spaces per depth
  level, with its line range ``start-end`` (or ``start`` for one line), so the model can
  follow with an exact ``offset``/``limit`` read.
- For a file over ``SMALL_FILE_LINES`` lines the text fits a token budget (o200k_base), by
  default ``BUDGET_RATIO`` of the file read with line numbers: a fifth of its tokens or less.
  To fit, detail goes in a fixed order (``LEVELS``): long docs, nested docs, all docs, long
  signatures, nested signatures (``kind name`` only), all signatures, nested definitions;
  the header says what was left out.
- Rendering is pure and deterministic: the same outline and arguments give the same text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from filecache.outline.outline_text import count_tokens, shorten_signature, truncate

if TYPE_CHECKING:
    from filecache.outline.outline_model import Definition, Outline

# Bump when a change to this code changes the rendered text (cached under OUTLINE_VERSION).
RENDER_REVISION = "2"
INDENT = "  "
DOC_SEPARATOR = " — "
# Tokens a line number adds to a numbered read: the padded "    12\t" of ``cat -n`` (the
# format before 7ea2a26) costs 3.0-3.9 tokens a line in o200k; a bare "12\t" 1.2-1.9.
NUMBER_PREFIX_TOKENS = 3.0
# Share of the numbered file's tokens an outline may cost.
BUDGET_RATIO = 0.2
# Files of at most this many lines keep every detail (their outlines are small anyway).
SMALL_FILE_LINES = 200


@dataclass(frozen=True)
class Level:
    """One step of detail: what an outline line shows.

    Attributes:
        doc_limit: Longest doc shown (0: no docs).
        docs_depth: Show docs of definitions at this depth or shallower.
        signature_limit: Longest signature shown.
        names_depth: Definitions at this depth or deeper show ``kind name`` only.
        max_depth: Deepest definitions shown (deeper ones are left out).
        note: What the header says was left out.
    """

    doc_limit: int
    docs_depth: int
    signature_limit: int
    names_depth: int
    max_depth: int
    note: str


_ALL = 1 << 30
LEVELS: tuple[Level, ...] = (
    Level(_ALL, _ALL, _ALL, _ALL, _ALL, ""),
    Level(40, _ALL, _ALL, _ALL, _ALL, "docs shortened"),
    Level(40, 0, _ALL, _ALL, _ALL, "nested docs omitted"),
    Level(0, 0, _ALL, _ALL, _ALL, "docs omitted"),
    Level(0, 0, 72, _ALL, _ALL, "signatures shortened"),
    Level(0, 0, 72, 1, _ALL, "nested: names only"),
    Level(0, 0, 72, 0, _ALL, "names only"),
    Level(0, 0, 72, 0, 0, "top-level names only"),
)


def default_budget(outline: Outline) -> int | None:
    """The token budget for ``outline``: a share of its file's numbered text.

    ``None`` (no limit) for files of at most ``SMALL_FILE_LINES`` lines.
    """
    if outline.line_count <= SMALL_FILE_LINES:
        return None
    numbered = outline.source_tokens + NUMBER_PREFIX_TOKENS * outline.line_count
    return int(BUDGET_RATIO * numbered)


def render_definition(definition: Definition, level: Level = LEVELS[0]) -> str:
    """One outline line: indent, line range, signature and (if shown) the doc's first line.

    A signature shortened to the level's limit keeps the definition's name (what ``symbol=``
    takes): decorators and modifiers before it are cut first.
    """
    head = f"{INDENT * definition.depth}{definition.line_range}"
    if definition.depth >= level.names_depth:
        return f"{head} {definition.kind} {definition.name}"
    signature = shorten_signature(definition.signature, definition.name_at, level.signature_limit)
    line = f"{head} {signature}"
    if definition.doc and level.doc_limit and definition.depth <= level.docs_depth:
        line += DOC_SEPARATOR + truncate(definition.doc, level.doc_limit)
    return line


def render_header(outline: Outline, path: str, note: str = "") -> str:
    """The first line: path, language, line count, parse errors and what was left out."""
    noun = "line" if outline.line_count == 1 else "lines"
    parts = [outline.language or "text", f"{outline.line_count} {noun}"]
    if outline.errors:
        parts.append("syntax errors: partial")
    if note:
        parts.append(note)
    return f"{path} outline ({', '.join(parts)})"


def _render_level(outline: Outline, path: str, level: Level) -> str:
    shown = [d for d in outline.definitions if d.depth <= level.max_depth]
    hidden = len(outline.definitions) - len(shown)
    note = f"{level.note}, {hidden} nested omitted" if hidden else level.note
    lines = [render_header(outline, path, note)]
    lines.extend(render_definition(definition, level) for definition in shown)
    if outline.summary:
        lines.append(outline.summary)
    return "\n".join(lines)


def render_outline(outline: Outline, path: str, max_tokens: int | None = None) -> str:
    """Render ``outline`` of the file at ``path`` as compact text.

    Args:
        outline: What ``build_outline`` returned.
        path: The path to name in the header (as the caller shows it to the model).
        max_tokens: The most tokens (o200k_base) the text may cost; ``None`` sizes it
            against the file (``default_budget``). Detail is dropped, in ``LEVELS`` order,
            until it fits (or until nothing more can go).

    Returns:
        A header line, then one line per definition indented by depth, each starting with
        its line range; or the header and the summary when there are no definitions.
    """
    budget = default_budget(outline) if max_tokens is None else max_tokens
    text = ""
    for level in LEVELS:
        text = _render_level(outline, path, level)
        if budget is None or count_tokens(text) <= budget:
            break
    return text
