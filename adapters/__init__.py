"""Integrations, installed as ``filecache.adapters``: message-list adapters, MCP, tool decorators."""
