"""The store package's shape: one SQL core under both SQL stores.

(Module size and private names are checked for the whole package in
tests/test_structure.py.)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import navi_core.store
from navi_core.store import SQLiteStore
from navi_core.store.sql import Dialect, SQLStore, Statements

STORE_DIR = Path(navi_core.store.__file__).parent


def test_sqlite_and_postgres_share_the_core() -> None:
    assert issubclass(SQLiteStore, SQLStore)
    pytest.importorskip("psycopg")
    from navi_core.store.postgres import PostgresStore

    assert issubclass(PostgresStore, SQLStore)
    for name in ("create", "get", "load", "history", "append", "new_window"):
        assert getattr(PostgresStore, name) is getattr(SQLiteStore, name)
    # Each dialect's statements carry its own placeholder only.
    for store, other in ((SQLiteStore, "%s"), (PostgresStore, "?")):
        for field in dataclasses.fields(Statements):
            assert other not in getattr(store.STATEMENTS, field.name)


def test_statements_use_the_dialect_placeholder() -> None:
    dialect = Dialect(
        param=":p",
        now="now()",
        greatest="greatest",
        prefix_match="starts_with(id, ?)",
        body_columns=("body",),
        body_values="?",
    )
    built = Statements.build(dialect)
    assert (
        built.prefix == "SELECT id FROM navi_sessions WHERE starts_with(id, :p) LIMIT 2"
    )
    assert built.insert.count(":p") == 9
    assert "greatest(modified_at, now())" in built.append
