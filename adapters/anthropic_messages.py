"""Moved to ``filecache.prune.codecs.anthropic_messages`` (pruning's own codec).

This path is kept for one release (0.2 removes it): import from the new module.
"""

from filecache.prune.codecs.anthropic_messages import CODEC, FORMAT, parse, render

__all__ = ["CODEC", "FORMAT", "parse", "render"]
