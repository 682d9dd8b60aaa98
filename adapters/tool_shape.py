"""Moved: a decorated tool's shape is ``filecache.tool_shape``. This module re-exports it for
one release."""

from filecache.tool_shape import CallPlan, ToolShape, add_fresh_doc, fresh_parameter

__all__ = ["CallPlan", "ToolShape", "add_fresh_doc", "fresh_parameter"]
