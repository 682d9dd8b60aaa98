"""Optional dependencies: a guarded import that says in one line what to install.

The agent frameworks filecache speaks to (pydantic-ai, the OpenAI Agents SDK, LangChain,
smolagents) are never dependencies of the distribution; the modules that need one import it
inside ``requires`` so that a missing framework reads as the pip command that fixes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["DISTRIBUTION", "EXTRA_HINT", "install_hint", "requires"]

DISTRIBUTION = "filecache-agent"
"""The name filecache is installed by (``pip install filecache-agent``; it imports as
``filecache``; ``filecache`` on the package index is an unrelated project). Every install hint
names it."""
EXTRA_HINT = f"pip install {{dist}}  (or pip install '{DISTRIBUTION}[frameworks]')"


def install_hint(extra: str) -> str:
    """The pip command that adds ``extra``: by the distribution's name, and from a clone (the
    distribution is not on the package index yet, so a clone is how most users have it)."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (from a clone: pip install '.[{extra}]')"


@contextmanager
def requires(
    module: str, dist: str, what: str = "this adapter", extra: str | None = None
) -> Iterator[None]:
    """Around a framework's imports: when ``module`` is missing, say what to install.

    ``extra`` names the extra of filecache's own that brings ``module`` (the hint is then that
    extra's, ``install_hint``); else the hint names ``dist`` or the ``frameworks`` extra.
    Only ``module`` itself (or one of its submodules) missing is rewritten; any other
    ``ModuleNotFoundError`` (a broken install of something it imports) goes through as it is.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != module:
            raise
        hint = install_hint(extra) if extra else EXTRA_HINT.format(dist=dist)
        raise ModuleNotFoundError(f"{what} needs {dist}: {hint}", name=module) from exc
