"""Stores: the protocol and the memory store, SQLite and PostgreSQL stores, store URLs, locks and
the background blob writer.
"""
