"""Fencing of PostgreSQL session locks, and telling a dead connection from a failure.

An advisory lock lives on its connection: when a restart, a failover or
``pg_terminate_backend`` ends that connection the server frees the lock and another
driver may take it, while the first one still runs. ``lock_holder`` records who took
a lock (the key as ``pg_locks`` shows it, the backend's pid and start time, so a
reused pid does not pass), and ``check_held``, run inside every write after the
session row is locked, raises ``SessionLockLost`` once that backend no longer holds
it. ``is_dead_connection`` says whether a driver error means the connection ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import psycopg

from ..errors import SessionLockLost

__all__ = ["LockHolder", "check_held", "is_dead_connection", "lock_holder"]

#: SQLSTATEs of a connection that ended, besides class 08 (connection exception)
_DEAD_STATES: Final = ("57P01", "57P02", "57P03")  # admin/crash shutdown, starting
_HELD: Final = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND l.classid::bigint = %s AND l.objid::bigint = %s "
    "AND l.pid = %s AND a.backend_start = %s)"
)


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who holds a session lock: the key's halves, the backend's pid and start."""

    classid: int
    objid: int
    pid: int
    started: Any


def lock_holder(conn: psycopg.Connection[Any], key: int) -> LockHolder:
    """The holder of the advisory lock ``key`` just taken on ``conn``."""
    row = conn.execute(
        "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
    ).fetchone()
    assert row is not None
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF  # pg_locks shows a bigint key as two oids
    return LockHolder(unsigned >> 32, unsigned & 0xFFFF_FFFF, int(row[0]), row[1])


def check_held(
    conn: psycopg.Connection[Any], holder: LockHolder, session_id: str
) -> None:
    """Raise ``SessionLockLost`` unless ``holder`` still holds its lock.

    Raises:
        SessionLockLost: the lock's backend is gone or no longer holds it.
    """
    params = (holder.classid, holder.objid, holder.pid, holder.started)
    row = conn.execute(_HELD, params).fetchone()
    if row is None or not row[0]:
        raise SessionLockLost(
            f"session {session_id}: this agent lost its session lock (its "
            "connection to PostgreSQL ended: a restart, a failover or "
            "pg_terminate_backend); another agent may drive the session now, so "
            "nothing more is written. Open the session again to go on."
        )


def is_dead_connection(exc: BaseException) -> bool:
    """True when the driver error ``exc`` means the connection itself ended."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _DEAD_STATES
