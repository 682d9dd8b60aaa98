"""Outlines: the tree-sitter extraction (``queries/*.scm``), the text fallback, the model and its
rendering.
"""
