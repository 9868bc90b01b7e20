"""Session stores: the protocol, null, memory, SQLite (default on disk) and PostgreSQL.

SQLite and PostgreSQL share one SQL core, ``sql.SQLStore``; each adds its dialect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import SessionInfo, SessionLock, SessionStore
from .memory import MemoryStore
from .null import NullStore
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "MemoryStore",
    "NullStore",
    "PostgresStore",
    "SQLiteStore",
    "SessionInfo",
    "SessionLock",
    "SessionStore",
]


def __getattr__(name: str) -> Any:
    # PostgresStore imports psycopg, an optional extra: load it on first use only.
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
