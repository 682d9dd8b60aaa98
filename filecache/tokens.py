"""Token counting: exact offline BPE when available, a char-class estimate otherwise.

Invariants: counting never touches the network (the BPE vocabularies of ``toktok-rs`` are
compiled into its extension module), and ``count`` of the same text is deterministic.

The estimator follows the seeds' char classes: a CJK glyph is about one token, an ASCII letter
or digit about a quarter of one, whitespace about a sixth, and code punctuation about one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import ConfigError

__all__ = ["ENCODINGS", "TokenCounter", "estimate_tokens"]

ENCODINGS = {"o200k": "o200k_base", "cl100k": "cl100k_base"}


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
        if encoding != "estimate":
            try:
                import toktok

                self._toktok = toktok
            except ImportError:  # pragma: no cover - toktok-rs is a dependency
                self.encoding = "estimate"

    @property
    def exact(self) -> bool:
        """Whether counts are exact BPE counts rather than estimates."""
        return self._toktok is not None

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        if not text:
            return 0
        if self._toktok is None:
            return estimate_tokens(text)
        return int(self._toktok.batch_count([text], ENCODINGS[self.encoding])[0])

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each of ``texts`` (one batched call for BPE)."""
        if self._toktok is None:
            return [estimate_tokens(t) for t in texts]
        return [int(n) for n in self._toktok.batch_count(list(texts), ENCODINGS[self.encoding])]
