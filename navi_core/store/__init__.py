"""Session stores: the protocol, null, memory, SQLite (default on disk) and PostgreSQL."""

from __future__ import annotations

from .base import SessionInfo, SessionLock, SessionStore
from .memory import MemoryStore
from .null import NullStore

__all__ = ["MemoryStore", "NullStore", "SessionInfo", "SessionLock", "SessionStore"]
