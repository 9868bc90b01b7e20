"""The store package's shape: one SQL core, small modules, no foreign private names."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import navi_core.store
from navi_core.store import SQLiteStore
from navi_core.store.sql import Dialect, SQLStore, Statements

STORE_DIR = Path(navi_core.store.__file__).parent


def _modules() -> list[Path]:
    return sorted(STORE_DIR.glob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_module_is_small(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 400


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_module_reads_no_private_name_of_another(path: Path) -> None:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{ast.unparse(owner)}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom):
            found += [f"import {a.name}" for a in node.names if _private(a.name)]
    assert found == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


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
