"""Store fixtures: one contract suite runs against memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from storekit import fresh_schema

from navi_core.store import MemoryStore, SessionStore, SQLiteStore

__all__ = ["StoreFactory"]


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A DSN whose search_path is a fresh schema, dropped after the test."""
    with fresh_schema() as dsn:
        yield dsn


StoreFactory = Callable[[], SessionStore]


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def open_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[StoreFactory]:
    """Opens stores on one backend (all sharing its data); closes them after the test."""
    opened: list[SessionStore] = []
    memory = MemoryStore()

    if request.param == "memory":
        factory: StoreFactory = lambda: memory  # noqa: E731
    elif request.param == "sqlite":
        factory = lambda: SQLiteStore(tmp_path / "navi.db")  # noqa: E731
    else:
        from navi_core.store.postgres import PostgresStore

        dsn = request.getfixturevalue("pg_dsn")
        factory = lambda: PostgresStore(dsn, max_size=4)  # noqa: E731

    def open_one() -> SessionStore:
        store = factory()
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: StoreFactory) -> SessionStore:
    return open_store()
