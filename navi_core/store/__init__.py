"""Session stores: the protocol, null, memory, SQLite (default on disk) and PostgreSQL.

SQLite and PostgreSQL share one SQL core, ``sql.SQLStore``; each adds its dialect.
A store author finds here the ``SessionStore`` protocol and its value types.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import (
    MAX_PAGE,
    Approval,
    ApprovalState,
    HistoryPage,
    SessionInfo,
    SessionLock,
    SessionStore,
    check_page_limit,
    parse_cursor,
    same_call,
)
from .memory import MemoryStore
from .null import NullStore

if TYPE_CHECKING:  # imported on first use at run time (see __getattr__)
    from .postgres import PostgresStore
    from .sqlite import SQLiteStore

__all__ = [
    # the protocol and its value types
    "MAX_PAGE",
    "Approval",
    "ApprovalState",
    "HistoryPage",
    "SessionInfo",
    "SessionLock",
    "SessionStore",
    "check_page_limit",
    "parse_cursor",
    "same_call",
    # the stores
    "MemoryStore",
    "NullStore",
    "PostgresStore",
    "SQLiteStore",
]

#: stores whose modules import sqlite3 or psycopg (an optional extra): loaded on
#: first use, so ``import navi_core`` imports neither
_LAZY = {
    "SQLiteStore": "navi_core.store.sqlite",
    "PostgresStore": "navi_core.store.postgres",
}


def __getattr__(name: str) -> Any:
    """The lazy stores: their modules are imported on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value
