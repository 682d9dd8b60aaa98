"""The values an outline is made of: one frozen record per definition, one per file.

Invariants:

- ``start_line`` and ``end_line`` are 1-based and inclusive, with
  ``1 <= start_line <= end_line <= Outline.line_count`` for every definition.
- ``Outline.definitions`` is in source order (by start, the enclosing definition first), and a
  definition's ``depth`` is the number of definitions that enclose it.
- ``qualified_name`` is the dot-joined chain of enclosing names plus any scope the source
  spells out (a Go receiver, a C++ ``Class::``), ending in ``name``.
- ``signature`` is one line without newlines; ``doc`` is one trimmed line or ``None``;
  ``0 <= name_at <= len(signature)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Definition:
    """One definition of an outline.

    Attributes:
        kind: What it is: ``class``, ``function``, ``method``, ``struct``, ``interface``,
            ``enum``, ``trait``, ``impl``, ``module``, ``namespace``, ``type``, ``constant``,
            ``heading``, ``key``, ``table`` ...
        name: The bare name, e.g. ``Pop``.
        qualified_name: Enclosing names and the name, dot-joined, e.g. ``Queue.Pop``.
        signature: The header as one line (decorators, parameters, return type, bases),
            shortened past about 120 characters.
        doc: The first line of its docstring or doc comment, trimmed, or ``None``.
        start_line: First line (1-based), decorators and attributes included.
        end_line: Last line (1-based, inclusive).
        depth: How many definitions enclose it.
        declaration: True for a declaration without a body (a prototype, an abstract or
            interface method), so a lookup can prefer the definition that has one.
        name_at: Where the name (or what stands for it) starts in ``signature``: what comes
            before it (decorators, attributes, modifiers, a keyword) may be shortened, the name
            never.
    """

    kind: str
    name: str
    qualified_name: str
    signature: str
    doc: str | None
    start_line: int
    end_line: int
    depth: int
    declaration: bool = False
    name_at: int = 0

    @property
    def line_range(self) -> str:
        """``start-end``, or just ``start`` for a one-line definition."""
        if self.start_line == self.end_line:
            return str(self.start_line)
        return f"{self.start_line}-{self.end_line}"


@dataclass(frozen=True)
class Outline:
    """The outline of one file.

    Attributes:
        language: The language it was outlined as, or ``None`` for an unknown one.
        line_count: Lines of the file (split on ``\\n``; a last line without one counts).
        definitions: Every definition found, in source order.
        summary: A short structural summary when there are no definitions to list
            (unknown language, or nothing found); ``None`` otherwise.
        errors: True when the parser met syntax errors; the definitions are then what parsed.
        source_tokens: Tokens of the file's text (o200k_base) for a file over
            ``SMALL_FILE_LINES`` lines, which the renderer sizes the outline against; 0 for a
            smaller one (never counted).
    """

    language: str | None
    line_count: int
    definitions: tuple[Definition, ...]
    summary: str | None = None
    errors: bool = False
    source_tokens: int = 0
