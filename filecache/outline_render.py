"""Render an outline as compact, line-numbered text for the model.

Invariants: the output is plain text, one header line and then one line per definition (or
the summary's lines); every definition line starts, after its depth indent of two spaces per
level, with its line range ``start-end`` (or ``start`` for one line), so the model can follow
with an exact ``offset``/``limit`` read. Rendering is pure and deterministic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from filecache.outline_model import Definition, Outline

INDENT = "  "
DOC_SEPARATOR = " — "


def render_definition(definition: Definition) -> str:
    """One outline line: indent, line range, signature and the doc's first line."""
    line = f"{INDENT * definition.depth}{definition.line_range} {definition.signature}"
    if definition.doc:
        line += DOC_SEPARATOR + definition.doc
    return line


def render_header(outline: Outline, path: str) -> str:
    """The first line: path, language, line count and whether parsing met errors."""
    language = outline.language or "text"
    noun = "line" if outline.line_count == 1 else "lines"
    errors = ", syntax errors: partial" if outline.errors else ""
    return f"{path} outline ({language}, {outline.line_count} {noun}{errors})"


def render_outline(outline: Outline, path: str) -> str:
    """Render ``outline`` of the file at ``path`` as compact text.

    Args:
        outline: What ``build_outline`` returned.
        path: The path to name in the header (as the caller shows it to the model).

    Returns:
        A header line, then one line per definition indented by depth, each starting with
        its line range; or the header and the summary when there are no definitions.
    """
    lines = [render_header(outline, path)]
    lines.extend(render_definition(definition) for definition in outline.definitions)
    if outline.summary:
        lines.append(outline.summary)
    return "\n".join(lines)
