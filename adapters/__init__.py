"""Integrations, installed as ``filecache.adapters``: message adapters, MCP, tool decorators."""
