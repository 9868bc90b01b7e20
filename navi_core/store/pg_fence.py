"""Fencing of PostgreSQL session locks, and telling a dead connection from a failure.

An advisory lock lives on its connection: when a restart, a failover or
``pg_terminate_backend`` ends that connection the server frees the lock and another
driver may take it, while the first one still runs. ``lock_holder`` records who took
a lock (the backend's pid and start time, so a reused pid does not pass); ``FENCE`` is the condition every write of that session
reads right after its ``UPDATE`` has locked the session row, in the same statement
(no extra round trip), and a write that finds it false raises ``lock_lost``'s
``SessionLockLost`` inside its transaction, which is rolled back. ``is_dead_connection`` says whether a driver error means the connection ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import psycopg

from ..errors import SessionLockLost

__all__ = [
    "FENCE",
    "LockHolder",
    "fence_params",
    "is_dead_connection",
    "lock_holder",
    "lock_lost",
]

#: SQLSTATEs of a connection that ended, besides class 08 (connection exception)
_DEAD_STATES: Final = ("57P01", "57P02", "57P03")  # admin/crash shutdown, starting
FENCE: Final = "(SELECT backend_start FROM pg_stat_get_activity(?)) = ?"
"""The fence (``Dialect.fence``): true while the backend that took the lock lives.

A lock leaves its backend only by ``PostgresLock.release`` (which stops the fencing
first) or with the backend itself, so the backend's identity (pid and start time: a
pid can be reused, a start time cannot) stands for the lock, and reading it from the
backend status array is cheaper than scanning ``pg_locks``."""


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who holds a session lock: the backend's pid and start time."""

    pid: int
    started: Any


def lock_holder(conn: psycopg.Connection[Any]) -> LockHolder:
    """The holder of an advisory lock just taken on ``conn``: its backend."""
    row = conn.execute(
        "SELECT pid, backend_start FROM pg_stat_get_activity(pg_backend_pid())"
    ).fetchone()
    assert row is not None
    return LockHolder(int(row[0]), row[1])


def fence_params(holder: LockHolder) -> tuple[Any, ...]:
    """The parameters of ``FENCE`` for a lock held by ``holder``."""
    return (holder.pid, holder.started)


def lock_lost(session_id: str) -> SessionLockLost:
    """The error of a write whose session lock was taken away."""
    return SessionLockLost(
        f"session {session_id}: this agent lost its session lock (its connection "
        "to PostgreSQL ended: a restart, a failover or pg_terminate_backend); "
        "another agent may drive the session now, so nothing more is written. "
        "Open the session again to go on."
    )


def is_dead_connection(exc: BaseException) -> bool:
    """True when the driver error ``exc`` means the connection itself ended."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _DEAD_STATES
