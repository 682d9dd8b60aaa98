"""``filecache.store.sql_store``: the store's SQL is one text, and the dialects differ only where
``filecache.store.dialect`` names a difference."""

from __future__ import annotations

from dataclasses import fields

from filecache.store.dialect import POSTGRESQL, SQLITE
from filecache.store.sql_store import Statements, statements

# The statements whose text may differ beyond placeholders, each by a named Dialect field.
_NAMED = {
    "delete_unreferenced_blobs": "delete_unreferenced_blobs",
    "lock_session": "lock_rows",
    "old_sessions": "lock_rows",
    "delete_sessions": "arrays",
}


def _all_text(s: Statements) -> list[str]:
    out: list[str] = []
    for f in fields(s):
        value = getattr(s, f.name)
        out.extend(value if isinstance(value, tuple) else [value])
    return out


def test_each_dialect_has_its_own_placeholders_only() -> None:
    assert not any("%s" in sql for sql in _all_text(statements(SQLITE)))
    assert not any("?" in sql for sql in _all_text(statements(POSTGRESQL)))


def test_the_sql_is_one_text_but_for_the_named_differences() -> None:
    sqlite, pg = statements(SQLITE), statements(POSTGRESQL)
    for f in fields(Statements):
        ours, theirs = getattr(sqlite, f.name), getattr(pg, f.name)
        if f.name in _NAMED:
            assert getattr(SQLITE, _NAMED[f.name]) != getattr(POSTGRESQL, _NAMED[f.name])
            continue
        assert POSTGRESQL.sql(ours) == theirs, f.name


def test_statements_are_built_once_per_dialect() -> None:
    assert statements(SQLITE) is statements(SQLITE)
    assert statements(POSTGRESQL) is not statements(SQLITE)
