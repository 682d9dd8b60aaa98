"""Moved: the tool decorators are ``filecache.decorators`` (below the session, so that
``Session.read_tool`` needs no upward import). This module re-exports them for one release."""

from filecache.decorators import edit_tool, read_tool, write_tool

__all__ = ["edit_tool", "read_tool", "write_tool"]
