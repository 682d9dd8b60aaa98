"""Definitions from source code with tree-sitter and one tags-style query file per language.

A query file ``queries/<language>.scm`` marks each definition with ``@definition.<kind>`` (or
``@declaration.<kind>`` for one without a body) and its name with ``@name``. Optional
captures: ``@body`` (the signature ends where it starts; a Python docstring is read from
it), ``@scope`` (qualifiers the source spells outside any enclosing definition, such as a Go
receiver or a C++ ``Class::``). A first line ``; inherits: <language>`` appends that
language's query, so the inheriting file's patterns come first. When two patterns capture the
same definition, name or body node, the earlier pattern wins.

Invariants: ``extract`` is pure and never raises for any input bytes (tree-sitter recovers
from syntax errors; every slice is decoded with replacement); each query is compiled at most
once per process, on first use; the result is in source order with ``depth`` and
``qualified_name`` derived from node containment.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from filecache.outline.outline_model import Definition
from filecache.outline.outline_text import (
    count_lines,
    doc_first_line,
    one_line,
    shorten_signature_at,
)

if TYPE_CHECKING:  # tree-sitter is imported on first parse, not with the package
    from tree_sitter import Language, Node, Query

# Kinds whose function members are methods.
_CLASSLIKE = frozenset(
    {"class", "struct", "interface", "trait", "impl", "enum", "extension", "object",
     "record", "protocol", "actor", "union"}
)  # fmt: skip
# Name node types whose dots separate scopes (a TOML ``[server.tls]`` table).
_DOTTED_NAMES = frozenset({"dotted_key"})
# A name, its opening parenthesis, then the first parameter and its comma (if any).
_FIRST_PARAMETER = re.compile(r"([\w$]+\s*\(\s*)(\w+)\s*(?:,\s*|(?=\)))")


@dataclass(frozen=True)
class LanguageSpec:
    """How one language is outlined, beside its query file.

    Attributes:
        grammar: The tree-sitter-language-pack name of its grammar.
        wrappers: Parent node types that belong to a definition (decorators, ``export``, a
            Go ``type`` keyword), unless they group it with siblings of its own type.
        leading: Preceding sibling node types that belong to it (Rust ``#[...]``).
        docs: ``"docstring"`` (first string of the body), ``"comment"`` (the comment block
            right above), or ``""`` (none).
        implicit: First parameter names of a method that carry no information (Python's
            ``self``/``cls``); signatures leave them out to save tokens.
    """

    grammar: str
    wrappers: frozenset[str] = field(default_factory=frozenset)
    leading: frozenset[str] = field(default_factory=frozenset)
    docs: str = "comment"
    implicit: frozenset[str] = field(default_factory=frozenset)


_JS_LIKE = frozenset({"export_statement"})
SPECS: dict[str, LanguageSpec] = {
    "python": LanguageSpec(
        "python",
        frozenset({"decorated_definition"}),
        docs="docstring",
        implicit=frozenset({"self", "cls"}),
    ),
    "javascript": LanguageSpec("javascript", _JS_LIKE),
    "typescript": LanguageSpec("typescript", _JS_LIKE, frozenset({"decorator"})),
    "tsx": LanguageSpec("tsx", _JS_LIKE, frozenset({"decorator"})),
    "go": LanguageSpec(
        "go", frozenset({"type_declaration", "const_declaration", "var_declaration"})
    ),
    "rust": LanguageSpec("rust", leading=frozenset({"attribute_item"})),
    "java": LanguageSpec("java"),
    "c": LanguageSpec("c"),
    "cpp": LanguageSpec("cpp", frozenset({"template_declaration"})),
    "csharp": LanguageSpec("csharp"),
    "ruby": LanguageSpec("ruby"),
    "php": LanguageSpec("php"),
    "kotlin": LanguageSpec("kotlin"),
    "swift": LanguageSpec("swift"),
    "bash": LanguageSpec("bash"),
    "markdown": LanguageSpec("markdown", docs=""),
    "json": LanguageSpec("json", docs=""),
    "yaml": LanguageSpec("yaml", docs=""),
    "toml": LanguageSpec("toml", docs=""),
}


def query_source(language: str) -> str:
    """The query text for ``language``, followed by that of any ``; inherits:`` parents."""
    import importlib.resources  # on first use: it costs a few ms of every CLI start

    text = (
        importlib.resources.files("filecache.outline")
        .joinpath("queries", f"{language}.scm")
        .read_text(encoding="utf-8")
    )
    first = text.split("\n", 1)[0]
    if first.startswith("; inherits:"):
        parents = [name.strip() for name in first.split(":", 1)[1].split(",") if name.strip()]
        text = "\n".join([text, *(query_source(parent) for parent in parents)])
    return text


def queries_digest() -> str:
    """A digest of every language's query text, for cache keys."""
    digest = hashlib.sha256()
    for language in sorted(SPECS):
        digest.update(language.encode() + b"\0" + query_source(language).encode() + b"\0")
    return digest.hexdigest()


@functools.cache
def _language(grammar: str) -> Language:
    from tree_sitter_language_pack import get_language

    # get_language takes a Literal of the pack's names; ours are SPECS' runtime strings.
    return get_language(grammar)  # type: ignore[arg-type]


@functools.cache
def _query(language: str) -> Query:
    from tree_sitter import Query

    return Query(_language(SPECS[language].grammar), query_source(language))


def parse(source: bytes, language: str) -> Node:
    """Parse ``source`` and return the root node (no query run)."""
    from tree_sitter import Parser

    return Parser(_language(SPECS[language].grammar)).parse(source).root_node


@dataclass
class _Raw:
    """One definition as captured, before nesting is known."""

    kind: str
    declaration: bool
    node: Node
    name: Node
    body: Node | None
    scopes: list[Node]
    start: Node  # first node of the definition: itself, a wrapper or a leading sibling

    @property
    def start_byte(self) -> int:
        return self.start.start_byte


def _text(source: bytes, start: int, end: int) -> str:
    return source[start:end].decode("utf-8", "replace")


def _end_row(node: Node) -> int:
    """0-based last row of ``node``; a node ending at column 0 ends on the row before."""
    row, column = node.end_point
    if column == 0 and row > node.start_point.row:
        return int(row) - 1
    return int(row)


def _key(node: Node) -> tuple[int, int, int]:
    return (node.start_byte, node.end_byte, node.kind_id)


def _captured(matches: Iterable[tuple[int, dict[str, list[Node]]]]) -> list[_Raw]:
    """One ``_Raw`` per definition; a node already claimed by an earlier pattern is skipped."""
    seen: set[tuple[int, int, int]] = set()
    raws: list[_Raw] = []
    for _pattern, captures in sorted(matches, key=lambda match: match[0]):
        for capture, nodes in captures.items():
            prefix, _, kind = capture.partition(".")
            if prefix not in ("definition", "declaration") or not nodes or not kind:
                continue
            node = nodes[0]
            names = captures.get("name")
            bodies = captures.get("body")
            if not names:
                continue
            keys = {_key(node), _key(names[0])} | ({_key(bodies[0])} if bodies else set())
            if keys & seen:
                continue
            seen.update(keys)
            raws.append(
                _Raw(kind, prefix == "declaration", node, names[0],
                     bodies[0] if bodies else None, list(captures.get("scope", [])), node)
            )  # fmt: skip
    return raws


def _has_peer(parent: Node, child: Node) -> bool:
    """Whether ``parent`` groups ``child`` with siblings of its type (Go ``const ( ... )``)."""
    return any(
        peer.type == child.type and peer.start_byte != child.start_byte
        for peer in parent.named_children
    )


def _extend(raw: _Raw, spec: LanguageSpec) -> None:
    """Widen a definition to its wrappers (decorators, ``export``) and leading attributes."""
    start = raw.node
    parent = start.parent
    while parent is not None and parent.type in spec.wrappers and not _has_peer(parent, start):
        start, parent = parent, parent.parent
    previous = start.prev_named_sibling
    while previous is not None and previous.type in spec.leading:
        start, previous = previous, previous.prev_named_sibling
    raw.start = start


def _strip_comments(source: bytes, raw: _Raw, start: int, end: int) -> str:
    """The text of ``start:end`` with the comment nodes inside it removed."""
    text = _text(source, start, end)
    if "#" not in text and "//" not in text and "/*" not in text:
        return text
    pieces: list[str] = []
    at = start
    stack = [raw.start] if raw.start is not raw.node else [raw.start, raw.node]
    comments: list[tuple[int, int]] = []
    while stack:
        node = stack.pop()
        if node.end_byte <= start or node.start_byte >= end:
            continue
        if "comment" in node.type and node.start_byte >= start:
            comments.append((node.start_byte, node.end_byte))
            continue
        stack.extend(node.children)
    for c_start, c_end in sorted(set(comments)):
        if c_start >= at:
            pieces.append(_text(source, at, c_start))
            at = c_end
    pieces.append(_text(source, at, end))
    return " ".join(pieces)


def _container_mark(body: Node) -> str:
    node = body
    if node.type == "block_node" and node.named_child_count:
        node = node.named_child(0)
    return "[…]" if "sequence" in node.type or "array" in node.type else "{…}"


def _drop_implicit(tail: str, implicit: frozenset[str]) -> str:
    """Leave out an uninformative first parameter: ``pop(self, n)`` becomes ``pop(n)``."""
    match = _FIRST_PARAMETER.match(tail)
    if match is None or match.group(2) not in implicit:
        return tail
    return tail[: match.end(1)] + tail[match.end() :]


def _broken_header(node: Node, body_start: int) -> bool:
    """Whether a syntax error sits in ``node`` before its body (so the header is unsure)."""
    for child in node.children:
        if child.start_byte >= body_start:
            return False
        if child.has_error or child.is_missing:
            return True
    return False


def _line_end(source: bytes, at: int, limit: int) -> int:
    """Where the line holding ``at`` ends, but not past ``limit``."""
    newline = source.find(b"\n", at)
    return limit if newline < 0 else min(newline, limit)


def _signature(source: bytes, raw: _Raw, name: str, implicit: frozenset[str]) -> tuple[str, int]:
    """The definition's one-line signature, and where its name starts in it."""
    start = raw.start_byte
    if raw.kind == "heading":
        if raw.node.type == "setext_heading":
            underline = raw.node.child_by_field_name("underline") or raw.node.children[-1]
            marker = "#" if "h1" in underline.type else "##"
            return shorten_signature_at(f"{marker} {name}", len(marker) + 1)
        end = _line_end(source, raw.node.start_byte, raw.node.end_byte)
        heading = one_line(_text(source, raw.node.start_byte, end))
        return shorten_signature_at(heading, len(heading) - len(heading.lstrip("# ")))
    if raw.body is not None and raw.body.end_byte <= raw.name.start_byte:
        # The name follows the body (C ``typedef struct {...} name``).
        before = one_line(_strip_comments(source, raw, start, raw.body.start_byte))
        end = _line_end(source, raw.name.end_byte, raw.node.end_byte)
        after = one_line(_text(source, raw.body.end_byte, end)).rstrip(" ;,")
        before = f"{before} {_container_mark(raw.body)} "
        return shorten_signature_at(before + after, len(before))
    name_line_end = _line_end(source, raw.name.end_byte, raw.node.end_byte)
    if raw.body is not None and raw.body.start_byte >= raw.name.end_byte:
        end = raw.body.start_byte
        if raw.node.has_error and _broken_header(raw.node, raw.body.start_byte):
            end = min(end, name_line_end)  # a broken header: its first line is all we trust
    else:
        end = name_line_end
    name_start = min(max(raw.name.start_byte, start), end)
    head_text = _strip_comments(source, raw, start, name_start)
    head = one_line(head_text)
    tail = one_line(_strip_comments(source, raw, name_start, end))
    if implicit:
        tail = _drop_implicit(tail, implicit)
    if head and head_text[-1:].isspace():
        head += " "
    signature = (head + tail).rstrip(" \t{:;,")
    name_at = len(head)
    if raw.kind in ("key", "table") and raw.body is not None:
        signature = signature.rstrip(" =") + " " + _container_mark(raw.body)
    if not signature:
        return shorten_signature_at(name, 0)
    return shorten_signature_at(signature, name_at)


def _docstring(source: bytes, raw: _Raw) -> str | None:
    body = raw.body
    if body is None or body.named_child_count == 0:
        return None
    first = body.named_child(0)
    if first.type == "expression_statement" and first.named_child_count:
        first = first.named_child(0)
    if first.type not in ("string", "concatenated_string"):
        return None
    return doc_first_line(_text(source, first.start_byte, first.end_byte))


def _doc_comment(source: bytes, raw: _Raw) -> str | None:
    """First line of the comment block that ends on the line right above the definition."""
    below = raw.start
    while below.prev_sibling is None and below.parent is not None:
        if below.parent.start_byte != below.start_byte:
            break
        below = below.parent  # a body node that starts with the definition (Ruby)
    block: list[Node] = []
    previous = below.prev_sibling
    while previous is not None and "comment" in previous.type:
        if _end_row(previous) < below.start_point.row - 1:
            break
        before = previous.prev_sibling
        if before is not None and _end_row(before) == previous.start_point.row:
            break  # a trailing comment of the code before it
        block.append(previous)
        below, previous = previous, before
    for node in reversed(block):
        line = doc_first_line(_text(source, node.start_byte, node.end_byte))
        if line:
            return line
    return None


def _name_parts(source: bytes, raw: _Raw) -> tuple[list[str], str]:
    """(scope parts, name) of a captured definition, normalised to dot-separated parts."""
    text = one_line(_text(source, raw.name.start_byte, raw.name.end_byte))
    if raw.kind == "heading":
        return [], text.strip("# ") or text
    if raw.kind in ("impl", "extension"):
        text = text.split("<", 1)[0]
    text = text.strip("\"'` ")
    if "::" in text or raw.name.type in _DOTTED_NAMES:
        parts = [part.strip() for part in text.replace("::", ".").split(".") if part.strip()]
    else:
        parts = [text] if text else []
    scopes: list[str] = []
    for scope in raw.scopes:
        scope_text = _text(source, scope.start_byte, scope.end_byte).split("<", 1)[0]
        scopes.extend(part for part in scope_text.replace("::", ".").split(".") if part.strip())
    if not parts:
        return scopes, ""
    return scopes + parts[:-1], parts[-1]


def extract(source: bytes, language: str) -> tuple[tuple[Definition, ...], bool]:
    """Outline ``source`` in ``language`` (a key of ``SPECS``).

    Args:
        source: The file's bytes (any bytes; syntax errors are tolerated).
        language: The language to parse it as.

    Returns:
        The definitions in source order, and whether the parse met syntax errors.
    """
    from tree_sitter import QueryCursor

    spec = SPECS[language]
    root = parse(source, language)
    raws = _captured(QueryCursor(_query(language)).matches(root))
    for raw in raws:
        _extend(raw, spec)
    raws.sort(key=lambda raw: (raw.start_byte, -raw.node.end_byte))
    line_count = count_lines(source)
    stack: list[tuple[_Raw, Definition]] = []
    definitions: list[Definition] = []
    for raw in raws:
        scopes, name = _name_parts(source, raw)
        if not name:
            continue
        while stack and not (
            stack[-1][0].start_byte <= raw.start_byte
            and raw.node.end_byte <= stack[-1][0].node.end_byte
        ):
            stack.pop()
        parent = stack[-1][1] if stack else None
        kind = raw.kind
        if kind == "function" and (scopes or (parent is not None and parent.kind in _CLASSLIKE)):
            kind = "method"
        prefix = [parent.qualified_name] if parent is not None else []
        doc = None
        if spec.docs == "docstring":
            doc = _docstring(source, raw)
        elif spec.docs == "comment":
            doc = _doc_comment(source, raw)
        start_line = raw.start.start_point.row + 1
        end_line = max(start_line, min(_end_row(raw.node) + 1, line_count))
        signature, name_at = _signature(
            source, raw, name, spec.implicit if kind == "method" else frozenset()
        )
        definition = Definition(
            kind=kind,
            name=name,
            qualified_name=".".join([*prefix, *scopes, name]),
            signature=signature,
            doc=doc,
            start_line=start_line,
            end_line=end_line,
            depth=len(stack),
            declaration=raw.declaration,
            name_at=name_at,
        )
        definitions.append(definition)
        stack.append((raw, definition))
    return tuple(definitions), root.has_error
