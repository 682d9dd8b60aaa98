"""Token counting: exact offline BPE when available, a char-class estimate otherwise.

Invariants: counting never touches the network (the BPE vocabularies of ``toktok-rs`` are
compiled into its extension module), and ``count`` of the same text is deterministic.

Two estimators, for when no vocabulary is loaded:

- ``estimate_tokens`` follows the seeds' char classes: a CJK glyph is about one token, an ASCII
  letter or digit about a quarter of one, whitespace about a sixth, and code punctuation about
  one (a Python loop: ~60 ns a character).
- ``fast_estimate`` is what the read path uses by default (``Settings.exact_counts`` off): a
  linear model over three numbers the read path already has — characters, the extra bytes of
  non-ASCII characters in UTF-8, and lines — so it costs nothing per character. Its
  coefficients were fitted per encoding (least squares on relative error) to the exact BPE
  counts of 5,001 text files: for raw text, of source, docs and data (1,188 with non-ASCII
  text; exact/estimate median 1.03, 1st percentile 0.77, 99th 1.99); for content answers
  (numbered lines, ``render_lines``), of the 5,001 text files of a ``site-packages``
  (``bench/fit_fast_counts.py``: median 0.99, 1st percentile 0.82, 99th 1.91).
  ``ESTIMATE_MARGIN`` is about the 1st percentile: decisions that compare an estimated answer
  with an estimated content require the answer to be smaller by that margin too.
  Known bias: text that is mostly CJK (three UTF-8 bytes a glyph, about one token each) is
  overestimated about 2.2 times: FileRefs, diffs and outlines (each as correct as content) then
  clear their bars more easily, and ``filecache stats`` overstates what they saved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from filecache.errors import ConfigError

__all__ = [
    "ENCODINGS",
    "ESTIMATE_MARGIN",
    "TokenCounter",
    "TokenMemo",
    "estimate_tokens",
    "fast_estimate",
    "fast_estimate_text",
]

ENCODINGS = {"o200k": "o200k_base", "cl100k": "cl100k_base"}

# (per character, per extra UTF-8 byte, per line): raw text, then content answers (numbered
# lines under a header; ``bench/fit_fast_counts.py`` fits them).
_FAST: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "o200k": ((0.2126, 1.0087, 1.5151), (0.1921, 0.2971, 3.5417)),
    "cl100k": ((0.2086, 1.4751, 1.5754), (0.1906, 0.3539, 3.5508)),
}
ESTIMATE_MARGIN = 0.8
"""An estimated answer replaces estimated content only when at most this fraction of it."""


def fast_estimate(
    chars: int, extra_bytes: int, lines: int, *, numbered: bool = False, encoding: str = "o200k"
) -> int:
    """Estimated tokens of text with ``chars`` characters (newlines not counted), ``extra_bytes``
    bytes beyond one per character in UTF-8, over ``lines`` lines; ``numbered``: rendered as a
    content answer (``render_lines``: each line behind its number and a TAB, under a header)."""
    if chars <= 0 and lines <= 0:
        return 0
    per_char, per_byte, per_line = _FAST.get(encoding, _FAST["o200k"])[numbered]
    return max(1, int(per_char * chars + per_byte * extra_bytes + per_line * lines + 0.5))


def fast_estimate_text(text: str, encoding: str = "o200k") -> int:
    """``fast_estimate`` of one text (one encode for non-ASCII text, no per-character loop)."""
    if not text:
        return 0
    newlines = text.count("\n")
    extra = 0 if text.isascii() else len(text.encode("utf-8")) - len(text)
    return fast_estimate(len(text) - newlines, extra, newlines + 1, encoding=encoding)


def _is_cjk(cp: int) -> bool:
    return (
        0x3040 <= cp <= 0x30FF  # kana
        or 0x3400 <= cp <= 0x4DBF
        or 0x4E00 <= cp <= 0x9FFF
        or 0xAC00 <= cp <= 0xD7AF  # hangul
        or 0xF900 <= cp <= 0xFAFF
        or 0x20000 <= cp <= 0x2FA1F
    )


def estimate_tokens(text: str) -> int:
    """Estimate tokens by character class (no vocabulary needed)."""
    letters = spaces = punct = cjk = other = 0
    for ch in text:
        if ch.isascii():
            if ch.isalnum() or ch == "_":
                letters += 1
            elif ch.isspace():
                spaces += 1
            else:
                punct += 1
        elif _is_cjk(ord(ch)):
            cjk += 1
        else:
            other += 1
    estimate = letters / 4 + spaces / 6 + punct + cjk + other / 2
    return int(estimate + 0.999) if text else 0


class TokenCounter:
    """Counts tokens with one encoding.

    Args:
        encoding: ``"o200k"`` (default, GPT-4o/4.1/5 family), ``"cl100k"``, or ``"estimate"``
            for the dependency-free char-class estimator. If the BPE package is missing, the
            counter falls back to the estimate and says so in ``exact``.
    """

    def __init__(self, encoding: str = "o200k") -> None:
        if encoding != "estimate" and encoding not in ENCODINGS:
            choices = ", ".join([*ENCODINGS, "estimate"])
            raise ConfigError(f"unknown tokenizer {encoding!r}; choose one of {choices}")
        self.encoding = encoding
        self._toktok: Any = None
        self._loaded = encoding == "estimate"

    def _bpe(self) -> Any:
        """The BPE package, imported on first use (the vocabulary loads on the first count)."""
        if not self._loaded:
            self._loaded = True
            try:
                import toktok

                self._toktok = toktok
            except ImportError:  # pragma: no cover - toktok-rs is a dependency
                self.encoding = "estimate"
        return self._toktok

    @property
    def loaded(self) -> bool:
        """Whether a count has needed the BPE package yet (its vocabulary loads on first use)."""
        return self._loaded and self._toktok is not None

    @property
    def exact(self) -> bool:
        """Whether counts are exact BPE counts rather than estimates."""
        return self._bpe() is not None

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        if not text:
            return 0
        bpe = self._bpe()
        if bpe is None:
            return estimate_tokens(text)
        # one thread: a pool's start-up costs more than it saves on one text (2-core machine)
        return int(bpe.batch_count([text], ENCODINGS[self.encoding], threads=1)[0])

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each of ``texts`` (one batched call for BPE)."""
        bpe = self._bpe()
        if bpe is None:
            return [estimate_tokens(t) for t in texts]
        return [int(n) for n in bpe.batch_count(list(texts), ENCODINGS[self.encoding])]


class TokenMemo:
    """Counts each distinct text once (a transcript re-sends the same messages every turn).

    ``counter``: a ``TokenCounter``, or a function of one text (``fast_estimate_text``, as the
    gateway's transform counts). At ``limit`` distinct texts the memo starts again empty, so a
    long-lived process holds a bounded amount. Used from one thread at a time, or from several
    when losing a count to a race costs only its recount (each entry is one dict operation).
    """

    def __init__(self, counter: TokenCounter | Callable[[str], int], limit: int = 200_000) -> None:
        self.counter = counter
        self.limit = limit
        self._count = counter.count if isinstance(counter, TokenCounter) else counter
        self._memo: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            if len(self._memo) >= self.limit:
                self._memo.clear()
            n = self._memo[text] = self._count(text)
        return n
