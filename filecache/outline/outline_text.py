"""Text helpers for outlines: one-line signatures, their shortening, doc first lines.

Invariants: every function here is pure, total on any ``str`` (it never raises), and returns
a single line (no ``\\n``). ``shorten_signature`` returns its input unchanged when it fits,
and otherwise something no longer than ``limit`` characters.
"""

from __future__ import annotations

import functools
import re

from filecache.core.tokens import TokenCounter

SIGNATURE_LIMIT = 120
DOC_LIMIT = 64
ELLIPSIS = "…"

_WHITESPACE = re.compile(r"\s+")
_OPEN_BREAK = re.compile(r"([(\[])[ \t]*\r?\n\s*")
_CLOSE_BREAK = re.compile(r",?[ \t]*\r?\n\s*([)\]])")
_CLOSE_BRACE = re.compile(r",[ \t]*\r?\n\s*}")
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)\.\s+(?=[A-Z])")
_OPENERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSERS = {")", "]", "}", ">"}
# Comment markers and string prefixes stripped from the start/end of doc lines.
_DOC_LEAD = re.compile(r"^\s*(?:/\*\*+|/\*!?|///?!?|#+!?|--|\*+(?!/))?\s?")
_DOC_TAIL = re.compile(r"\s*\*+/\s*$")
_STRING_PREFIX = re.compile(r"^[rRbBuUfF]{0,2}(\"\"\"|'''|\"|')")
_XML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*[^>]*>")


def one_line(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space and strip.

    Line breaks just inside brackets go, with a trailing comma before a closing one:
    ``f(\n    a,\n)`` becomes ``f(a)``.
    """
    if "\n" in text:
        text = _OPEN_BREAK.sub(r"\1", text)
        text = _CLOSE_BREAK.sub(r"\1", text)
        text = _CLOSE_BRACE.sub(" }", text)
    return _WHITESPACE.sub(" ", text).strip()


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters, marking a cut with an ellipsis."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + ELLIPSIS


def _matching_close(text: str, start: int) -> int:
    """Index of the bracket closing ``text[start]``, or -1 if it is never closed.

    Quotes are skipped; ``>`` only counts inside ``<``, and ``->``/``=>`` never do.
    """
    stack = [_OPENERS[text[start]]]
    quote = ""
    i = start + 1
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch in _OPENERS and (ch != "<" or stack[-1] == ">"):
            stack.append(_OPENERS[ch])
        elif ch in _CLOSERS and not (ch == ">" and text[i - 1 : i] in ("-", "=")):
            if ch == stack[-1]:
                stack.pop()
                if not stack:
                    return i
            elif ch != ">":
                return -1
        i += 1
    return -1


def _split_unnested(text: str, sep: str) -> list[str]:
    """Split on ``sep`` where it is not nested in brackets or quotes (the pieces as they are)."""
    parts: list[str] = []
    depth = 0
    quote = ""
    start = 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1 : i] != "\\":
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth <= 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not nested in brackets or quotes."""
    parts = [part.strip() for part in _split_unnested(text, ",")]
    return parts if parts[-1] else parts[:-1]


def _collapse_groups(text: str, min_len: int = 8) -> str:
    """Replace every parenthesised group longer than ``min_len`` with ``(…)``."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "(":
            close = _matching_close(text, i)
            if close > i + min_len:
                out.append(f"({ELLIPSIS})")
                i = close + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _parameters_start(sig: str, after: int) -> int:
    """Index of the first ``(`` at or after ``after`` outside ``<>``/``[]``/``{}``, or -1."""
    i = after
    while i < len(sig):
        ch = sig[i]
        if ch == "(":
            return i
        if ch in "<[{":
            close = _matching_close(sig, i)
            if close < 0:
                return -1
            i = close
        i += 1
    return -1


def _words(text: str) -> list[str]:
    """Split on spaces that are not inside brackets or quotes (``#[a = "b c"]`` is one word)."""
    return [word for word in _split_unnested(text, " ") if word]


def _cut_head(head: str, room: int) -> str:
    """Shorten the text before a name (decorators, modifiers, a keyword) to ``room`` characters.

    Its last word (the keyword right before the name: ``def``, ``fn``, ``class``) stays when it
    fits, with as many whole words from its start as fit and an ellipsis between.
    """
    if len(head) <= room:
        return head
    gap = head[len(head.rstrip()) :]
    words = _words(head.rstrip())
    last = words.pop() + gap if words else ""
    if len(last) + len(ELLIPSIS) + 1 > room:
        last = ""  # one long word (an unclosed quote swallows the rest): drop it, keep the name
    keep = room - len(last) - len(ELLIPSIS) - 2  # the spaces around the ellipsis
    front: list[str] = []
    used = 0
    for word in words:
        used += len(word) + (1 if front else 0)
        if used > keep:
            break
        front.append(word)
    return " ".join([*front, ELLIPSIS, last]) if last else " ".join([*front, ELLIPSIS]) + " "


def shorten_signature_at(sig: str, name_at: int, limit: int = SIGNATURE_LIMIT) -> tuple[str, int]:
    """``shorten_signature``, and where the name starts in the result.

    The name is never cut away: the text before it (decorators, attributes, annotations,
    modifiers) is shortened first, to at most half of ``limit`` when the whole does not fit.
    """
    name_at = min(max(name_at, 0), len(sig))
    if len(sig) <= limit:
        return sig, name_at
    if name_at > 0:
        head = _collapse_groups(sig[:name_at])
        if len(head) + len(sig) - name_at > limit:
            head = _cut_head(head, max(limit // 2, limit - (len(sig) - name_at)))
        sig, name_at = head + sig[name_at:], len(head)
        if len(sig) <= limit:
            return sig, name_at
    start = _parameters_start(sig, name_at)
    close = _matching_close(sig, start) if start >= 0 else -1
    if close > start:
        head, params, tail = sig[: start + 1], sig[start + 1 : close], sig[close:]
        budget = limit - len(head) - len(tail) - len(ELLIPSIS) - 2
        kept: list[str] = []
        used = 0
        split = _split_top_level(params)
        for param in split:
            cost = len(param) + (2 if kept else 0)
            if used + cost > budget:
                break
            kept.append(param)
            used += cost
        if not kept and split and budget >= 24:
            # One long parameter (a destructured object): show its start rather than nothing.
            sig = head + truncate(split[0], budget + len(ELLIPSIS)) + tail
        else:
            sig = head + ", ".join([*kept, ELLIPSIS]) + tail
    return truncate(sig, limit), min(name_at, limit)


def shorten_signature(sig: str, name_at: int, limit: int = SIGNATURE_LIMIT) -> str:
    """Shorten a one-line signature sensibly to at most ``limit`` characters.

    In order, until it fits: long decorator/attribute arguments before the name become
    ``(…)``; the text before the name is cut (its last word, the keyword, stays) so that the
    name fits; trailing parameters are dropped for ``…``; finally the end is cut.

    Args:
        sig: The signature, already on one line.
        name_at: Where the definition's name starts in ``sig`` (0 when unknown); the
            parameter list is the first parenthesised group after it.
        limit: The longest result wanted.

    Returns:
        ``sig`` itself when it fits, else a shortened form no longer than ``limit``.
    """
    return shorten_signature_at(sig, name_at, limit)[0]


def doc_first_line(text: str, limit: int = DOC_LIMIT) -> str | None:
    """The first meaningful line of a docstring or doc comment, without its markers.

    Only its first sentence is kept when the line holds several.

    Handles Python strings (any quotes and prefixes), ``/** */``, ``/* */``, ``///``,
    ``//!``, ``//``, ``#`` and ``--`` comments, and C# ``<summary>`` tags.

    Args:
        text: The raw docstring or comment text (markers included).
        limit: The longest result wanted.

    Returns:
        The line, trimmed and shortened, or ``None`` when there is nothing but markers.
    """
    text = _STRING_PREFIX.sub("", text.lstrip(), count=1)
    for raw in text.splitlines():
        line = _DOC_TAIL.sub("", _DOC_LEAD.sub("", raw, count=1))
        line = line.strip().rstrip("\"'").strip()
        line = _XML_TAG.sub("", line).strip()
        if line and not line.startswith("@") and line.strip("*/#=-") != "":
            line = one_line(line)
            sentence_end = _SENTENCE_END.search(line)
            if sentence_end is not None:
                line = line[: sentence_end.start() + 1]
            return truncate(line, limit)
    return None


def count_lines(source: bytes) -> int:
    """Lines of ``source`` split on ``\\n``; a last line without ``\\n`` counts."""
    if not source:
        return 0
    return source.count(b"\n") + (0 if source.endswith(b"\n") else 1)


def summarize(source: bytes, line_count: int, first: int = 5, width: int = 100) -> str:
    """A short structural summary: size and the first few non-empty lines, numbered.

    Args:
        source: The file's bytes (decoded with replacement).
        line_count: Its line count, as ``count_lines`` gives it.
        first: How many non-empty lines to show.
        width: The longest line shown.

    Returns:
        ``"N lines, B bytes; first lines:"`` and then ``"<line>: <text>"`` lines.
    """
    shown: list[str] = []
    at, number = 0, 0
    while len(shown) < first and at <= len(source):
        end = source.find(b"\n", at)
        end = len(source) if end < 0 else end
        number += 1
        text = source[at : min(end, at + 4 * width)].decode("utf-8", "replace").rstrip()
        if text.strip():
            shown.append(f"{number}: {truncate(text.expandtabs(4), width)}")
        at = end + 1
    head = f"{line_count} {'line' if line_count == 1 else 'lines'}, {len(source)} bytes"
    if not shown:
        return head + ", all blank" if source else head
    return "\n".join([head + "; first lines:", *shown])


@functools.cache
def _o200k() -> TokenCounter:
    return TokenCounter("o200k")  # on first use: importing the BPE package costs import time


def count_tokens_encoding() -> str:
    """The encoding ``count_tokens`` uses: ``o200k``, or ``estimate`` without the BPE package."""
    return _o200k().encoding


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in o200k_base (``TokenCounter``: exact offline, or an estimate)."""
    return _o200k().count(text)
