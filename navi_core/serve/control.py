"""Requests for a running turn that may run in another worker: cancel and steer.

The worker that drives a session polls ``take(session_id)`` while its turn streams;
any worker, on any host, ``post``s to it. ``LocalControl`` serves one process (an app
embedded in another), ``SQLiteControl`` the workers of one host (a file beside the
session database), ``PostgresControl`` every host sharing a PostgreSQL database.
Requests are taken once, oldest first. ``post(..., limit=N)`` leaves one only while
fewer than N of its kind wait for the session, so what waits for a session that runs
no turn stays bounded (in PostgreSQL, posts at the same instant may each find room:
the bound is N plus those).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import defaultdict
from typing import Any, Protocol

from ..store.sqlite import use_wal

__all__ = ["ControlBus", "LocalControl", "PostgresControl", "SQLiteControl"]

#: control requests older than this are dropped unread (a turn that never came)
_MAX_AGE = 3600.0


class ControlBus(Protocol):
    """Where cancel and steer requests wait for the worker that drives a session."""

    def post(
        self, session_id: str, kind: str, text: str = "", *, limit: int | None = None
    ) -> bool:
        """Leave a request (``cancel`` or ``steer``) for the session's driver; False
        (and nothing left) when ``limit`` requests of that kind wait already."""
        ...

    def take(self, session_id: str) -> list[tuple[str, str]]:
        """Remove and return the session's requests, oldest first."""
        ...

    def close(self) -> None:
        """Release connections (idempotent)."""
        ...


class LocalControl:
    """Requests kept in memory: one process only."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiting: defaultdict[str, list[tuple[str, str]]] = defaultdict(list)

    def post(
        self, session_id: str, kind: str, text: str = "", *, limit: int | None = None
    ) -> bool:
        with self._mutex:
            waiting = self._waiting[session_id]
            if limit is not None and sum(k == kind for k, _ in waiting) >= limit:
                return False
            waiting.append((kind, text))
            return True

    def take(self, session_id: str) -> list[tuple[str, str]]:
        with self._mutex:
            return self._waiting.pop(session_id, [])

    def close(self) -> None:
        pass


_SQLITE_SCHEMA = """CREATE TABLE IF NOT EXISTS navi_serve_control (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at REAL NOT NULL)"""


class SQLiteControl:
    """Requests in a small SQLite file shared by the workers of one host."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mutex = threading.Lock()
        self._conn = sqlite3.connect(
            path, timeout=10.0, isolation_level=None, check_same_thread=False
        )
        use_wal(self._conn, 10.0)
        self._conn.execute(_SQLITE_SCHEMA)
        self._conn.execute(
            "CREATE INDEX IF NOT EXISTS navi_serve_control_session "
            "ON navi_serve_control (session_id)"
        )

    def post(
        self, session_id: str, kind: str, text: str = "", *, limit: int | None = None
    ) -> bool:
        now = time.time()
        with self._mutex:
            cur = self._conn.execute(  # one statement: counted and added atomically
                "INSERT INTO navi_serve_control (session_id, kind, body, created_at) "
                "SELECT ?, ?, ?, ? WHERE ? IS NULL OR (SELECT count(*) FROM "
                "navi_serve_control WHERE session_id = ? AND kind = ? "
                "AND created_at >= ?) < ?",
                (
                    session_id,
                    kind,
                    text,
                    now,
                    limit,
                    session_id,
                    kind,
                    now - _MAX_AGE,
                    limit,
                ),
            )
            return cur.rowcount == 1

    def take(self, session_id: str) -> list[tuple[str, str]]:
        with self._mutex:
            rows = self._conn.execute(
                "DELETE FROM navi_serve_control WHERE session_id = ? "
                "RETURNING seq, kind, body, created_at",
                (session_id,),
            ).fetchall()
        fresh = time.time() - _MAX_AGE
        return [(kind, body) for _, kind, body, at in sorted(rows) if at >= fresh]

    def close(self) -> None:
        with self._mutex:
            self._conn.close()

    def __repr__(self) -> str:
        return f"<SQLiteControl {self.path!r}>"


class PostgresControl:
    """Requests in a PostgreSQL table, for workers on every host (needs psycopg)."""

    def __init__(self, dsn: str) -> None:
        import psycopg  # the postgres extra, as for PostgresStore

        self._psycopg: Any = psycopg
        self._dsn = dsn
        self._mutex = threading.Lock()
        self._conn: Any = None
        with self._mutex:
            self._connection().execute(
                "CREATE TABLE IF NOT EXISTS navi_serve_control ("
                "seq bigserial PRIMARY KEY, session_id text NOT NULL, "
                "kind text NOT NULL, body text NOT NULL, "
                "created_at double precision NOT NULL "
                "DEFAULT extract(epoch FROM clock_timestamp()))"
            )

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = self._psycopg.connect(self._dsn, autocommit=True)
        return self._conn

    def _execute(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._mutex:
            for attempt in (1, 2):  # one reconnect when the server dropped us
                try:
                    cur = self._connection().execute(sql, params)
                    return list(cur.fetchall()) if cur.description else []
                except self._psycopg.OperationalError:
                    if attempt == 2:
                        raise
                    self._conn = None
        return []  # pragma: no cover

    def post(
        self, session_id: str, kind: str, text: str = "", *, limit: int | None = None
    ) -> bool:
        rows = self._execute(
            "INSERT INTO navi_serve_control (session_id, kind, body) "
            "SELECT %s, %s, %s WHERE %s::int IS NULL OR (SELECT count(*) FROM "
            "navi_serve_control WHERE session_id = %s AND kind = %s AND created_at "
            ">= extract(epoch FROM clock_timestamp()) - %s) < %s::int RETURNING seq",
            (session_id, kind, text, limit, session_id, kind, _MAX_AGE, limit),
        )
        return len(rows) == 1

    def take(self, session_id: str) -> list[tuple[str, str]]:
        rows = self._execute(
            "DELETE FROM navi_serve_control WHERE session_id = %s "
            "RETURNING seq, kind, body, created_at",
            (session_id,),
        )
        fresh = time.time() - _MAX_AGE
        return [(kind, body) for _, kind, body, at in sorted(rows) if at >= fresh]

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __repr__(self) -> str:
        return "<PostgresControl>"
