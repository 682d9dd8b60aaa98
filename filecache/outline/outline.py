"""Outlines of source files: definitions with signatures and line ranges, and symbol lookup.

The read cache calls ``build_outline`` (or ``cached_outline``) on the bytes it read, renders
the result with ``render_outline`` for an ``outline`` answer, and resolves ``symbol=NAME``
with ``find_symbol``.

Invariants:

- ``build_outline`` is pure and total: any bytes and any language give an ``Outline``, never
  an exception. Code with syntax errors outlines what parses (``Outline.errors`` is set).
- Languages with a query file are outlined by tree-sitter (``outline_ts``); any other text
  gets a generic summary (line count and first non-empty lines).
- ``OUTLINE_VERSION`` (``outline_version()``, computed on first use, not at import) changes
  whenever the query files, this code's or the renderer's revision or the grammar package
  change, so outlines cached under ``(content version, OUTLINE_VERSION)`` stay true.
- ``cached_outline`` returns the same ``Outline`` object for the same (version, language)
  without parsing again; it holds at most ``CACHE_SIZE`` outlines.
- ``find_symbol`` returns exactly one definition or raises ``RequestError`` naming the
  candidates (ambiguous) or the closest names (unknown).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from filecache.errors import RequestError
from filecache.outline.outline_model import Definition, Outline
from filecache.outline.outline_render import RENDER_REVISION, SMALL_FILE_LINES, render_outline
from filecache.outline.outline_text import count_lines, count_tokens, summarize
from filecache.outline.outline_ts import SPECS, extract, queries_digest

__all__ = [
    "CACHE_SIZE",
    "Definition",
    "OUTLINE_VERSION",
    "Outline",
    "build_outline",
    "cached_outline",
    "find_symbol",
    "language_for_path",
    "outline_version",
    "render_outline",
    "supported_languages",
]

# Bump when a change to this code (not to a query file) changes what an outline contains.
_CODE_REVISION = "2"
CACHE_SIZE = 256

_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp",
    ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".h++": "cpp", ".ipp": "cpp", ".inl": "cpp",
    ".cs": "csharp",
    ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby", ".ru": "ruby",
    ".php": "php",
    ".kt": "kotlin", ".kts": "kotlin",
    ".swift": "swift",
    ".sh": "bash", ".bash": "bash",
    ".md": "markdown", ".markdown": "markdown",
    ".json": "json",
    ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml",
}  # fmt: skip
_FILENAMES: dict[str, str] = {
    "Gemfile": "ruby", "Rakefile": "ruby", "Podfile": "ruby", "Vagrantfile": "ruby",
    ".bashrc": "bash", ".bash_profile": "bash", ".profile": "bash",
    "Pipfile": "toml", "Cargo.lock": "toml", "poetry.lock": "toml",
}  # fmt: skip
# Kinds that add to a definition found elsewhere; a lookup prefers that definition.
_SECONDARY_KINDS = frozenset({"impl", "extension"})


def _grammar_version() -> str:
    import importlib.metadata  # here, not at the top: it costs ~15 ms of every CLI start

    try:
        return importlib.metadata.version("tree-sitter-language-pack")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed as dist
        return "unknown"


@functools.cache
def outline_version() -> str:
    """The outline revision for cache keys: this code's and the renderer's revisions, the
    grammar package's version and a digest of the query files (computed once, on first use)."""
    parts = (_CODE_REVISION, RENDER_REVISION, _grammar_version(), queries_digest())
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return f"outline/{_CODE_REVISION}:{digest[:16]}"


OUTLINE_VERSION: str  # no value here: ``__getattr__`` computes it on first access


if not TYPE_CHECKING:  # mypy sees the declaration above, not a __getattr__ typing any name str

    def __getattr__(name: str) -> str:
        if name == "OUTLINE_VERSION":
            return outline_version()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def supported_languages() -> tuple[str, ...]:
    """The languages ``build_outline`` outlines structurally, sorted."""
    return tuple(sorted(SPECS))


def language_for_path(path: str) -> str | None:
    """The outline language for a path, from its file name or extension.

    Args:
        path: A file path (POSIX or Windows separators).

    Returns:
        A key of ``supported_languages()`` (``.jsx`` is ``javascript``, whose grammar parses
        JSX; ``.tsx`` is ``tsx``; ``.h`` is ``c``), or ``None`` for anything else.
    """
    name = PurePosixPath(path.replace("\\", "/")).name
    if name in _FILENAMES:
        return _FILENAMES[name]
    dot = name.rfind(".")
    if dot <= 0 and not name.startswith("."):
        return None
    return _EXTENSIONS.get(name[dot:].lower())


def build_outline(source: bytes, language: str | None) -> Outline:
    """Outline ``source`` as ``language``.

    Args:
        source: The file's bytes, exactly as read.
        language: A key of ``supported_languages()``; anything else (or ``None``) gives the
            generic summary.

    Returns:
        The outline. Never raises: broken code outlines what parses, and when nothing is
        found the outline carries a summary instead.
    """
    line_count = count_lines(source)
    # Only a file over SMALL_FILE_LINES is sized against its tokens (``default_budget``): a
    # smaller one never loads the BPE vocabulary (filecache outline of a small file did).
    large = line_count > SMALL_FILE_LINES
    tokens = count_tokens(source.decode("utf-8", "replace")) if large else 0
    if language not in SPECS:
        return Outline(None, line_count, (), summarize(source, line_count), False, tokens)
    try:
        definitions, errors = extract(source, language)
    except Exception:  # noqa: BLE001 - an outline is a convenience; a read must never fail on it
        definitions, errors = (), True
    summary = None if definitions else summarize(source, line_count)
    return Outline(language, line_count, definitions, summary, errors, tokens)


_cache: OrderedDict[tuple[str, str | None], Outline] = OrderedDict()
_cache_lock = threading.Lock()


def cached_outline(
    version: str, source: bytes | Callable[[], bytes], language: str | None
) -> Outline:
    """``build_outline`` memoised in-process by (content version, language).

    Args:
        version: The content version of ``source`` (its ``xxh3:`` hash); the caller
            guarantees that equal versions mean equal bytes.
        source: The file's bytes, or a function giving them, used only on a miss.
        language: As for ``build_outline``.

    Returns:
        The outline; the same object on every hit.
    """
    key = (version, language)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    outline = build_outline(source() if callable(source) else source, language)
    with _cache_lock:
        _cache[key] = outline
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return outline


def _normalise(name: str) -> str:
    parts = name.strip().replace("::", ".").replace("#", ".").split(".")
    return ".".join(part for part in parts if part)


def _best_of_group(group: list[Definition]) -> list[Definition]:
    """Among definitions sharing one qualified name, those a lookup should prefer."""

    def rank(definition: Definition) -> tuple[bool, bool]:
        return (definition.kind in _SECONDARY_KINDS, definition.declaration)

    best = min(rank(definition) for definition in group)
    return [definition for definition in group if rank(definition) == best]


def _describe(definition: Definition) -> str:
    noun = "line" if definition.start_line == definition.end_line else "lines"
    return f"{definition.qualified_name} ({definition.kind}, {noun} {definition.line_range})"


def find_symbol(outline: Outline, name: str) -> Definition:
    """Find the one definition ``name`` refers to.

    ``name`` may be bare (``Pop``) when that is unique, or qualified by enclosing names
    (``Queue.Pop``, ``Class.method``; ``::`` and ``#`` separators work too). Where one name
    has several definitions, a definition with a body beats its declaration, and a type
    beats its ``impl``/``extension`` blocks.

    Args:
        outline: The outline to search.
        name: The symbol asked for.

    Returns:
        The definition.

    Raises:
        RequestError: when no definition matches (the message lists the closest names) or
            several do (the message lists them with their line ranges).
    """
    wanted = _normalise(name)
    definitions = outline.definitions
    matches = [d for d in definitions if d.qualified_name == wanted]
    if not matches:
        suffix = "." + wanted
        matches = [d for d in definitions if d.qualified_name.endswith(suffix)]
    groups: dict[str, list[Definition]] = {}
    for definition in matches:
        groups.setdefault(definition.qualified_name, []).append(definition)
    candidates = [d for group in groups.values() for d in _best_of_group(group)]
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        listed = "; ".join(_describe(d) for d in candidates[:10])
        more = f"; and {len(candidates) - 10} more" if len(candidates) > 10 else ""
        raise RequestError(
            f"symbol {name!r} is ambiguous, {len(candidates)} definitions match: {listed}{more}."
            " Pass a qualified name, or read one of these line ranges with offset/limit"
        )
    known = sorted({d.qualified_name for d in definitions} | {d.name for d in definitions})
    close = difflib.get_close_matches(wanted, known, n=5, cutoff=0.5)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise RequestError(
        f"no definition named {name!r}{hint}; use mode='outline' to list definitions"
    )
