"""``SQLiteStore``: sessions in one SQLite file, safe for many threads and processes.

The file runs in WAL mode, so readers never block the writer; every ``append`` and
``new_window`` is one ``BEGIN IMMEDIATE`` transaction, so a crash keeps all of it or
none. Processes sharing the file (on a local disk) serialise writes through SQLite's
own lock, waiting up to ``timeout``. Messages are stored as codec JSON next to their wire
identity columns; no key is ever written.

The schema version lives in ``PRAGMA user_version``. ``MIGRATIONS[i]`` upgrades
version ``i`` to ``i + 1``; opening a file runs the missing steps in one transaction,
and a file from a newer navi_core is refused rather than misread.

``lock(session_id)`` takes ``flock(LOCK_EX | LOCK_NB)`` on ``<path>.locks/<id>.lock``,
``<path>`` resolved (symlinks followed), so every name of one file shares one lock.
The kernel drops it when the holding process dies, so a crash never leaves a session
stuck. Two locks in one process conflict too (one open file description each).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Final, Literal, TypeAlias

from .. import codec
from ..conversation import Conversation, Message
from ..errors import AmbiguousSession, SessionBusy, SessionError, SessionNotFound
from .base import SessionInfo
from .memory import session_summary

__all__ = ["SQLiteLock", "SQLiteStore", "SQLiteMigration"]

SQLiteMigration: TypeAlias = Callable[[sqlite3.Connection], None]
_Windows: TypeAlias = "list[list[Message]]"

_SESSION_COLUMNS: Final = (
    "id, created_at, modified_at, message_count, last_user_message, model"
)


def _schema_v1(conn: sqlite3.Connection) -> None:
    """Sessions with denormalised listing columns; messages keyed by (session, seq)."""
    conn.execute(
        """CREATE TABLE navi_sessions (
            id TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            modified_at REAL NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0,
            window_count INTEGER NOT NULL DEFAULT 1,
            window_start INTEGER NOT NULL DEFAULT 0,
            last_user_message TEXT,
            model TEXT
        )"""
    )
    conn.execute("CREATE INDEX navi_sessions_recent ON navi_sessions (modified_at, id)")
    conn.execute(
        """CREATE TABLE navi_messages (
            session_id TEXT NOT NULL REFERENCES navi_sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            window_no INTEGER NOT NULL,
            created_at REAL NOT NULL,
            role TEXT NOT NULL,
            api_style TEXT,
            base_url TEXT,
            model TEXT,
            body TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) WITHOUT ROWID"""
    )


def _info(row: tuple[str, float, float, int, str | None, str | None]) -> SessionInfo:
    return SessionInfo(*row)


class SQLiteLock:
    """An exclusive ``flock`` on one session's lock file; closing the file frees it."""

    __slots__ = ("__weakref__", "_finalizer", "session_id")

    def __init__(self, session_id: str, fd: int) -> None:
        self.session_id = session_id
        self._finalizer = weakref.finalize(self, os.close, fd)

    def release(self) -> None:
        """Give the session up (idempotent); closing the descriptor drops the flock."""
        self._finalizer()

    def __enter__(self) -> SQLiteLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self._finalizer.alive else "released"
        return f"<SQLiteLock {self.session_id} {state}>"


class SQLiteStore:
    """Sessions in the SQLite file ``path``; the embedded default store.

    Args:
        path: the database file, created when missing.
        timeout: seconds a write waits for another process's transaction.
        synchronous: ``"FULL"`` syncs every commit to disk (survives power loss);
            ``"NORMAL"`` survives process crashes only, and is faster.

    Raises:
        SessionError: the file cannot be opened, is not a database, or was written
            by a newer navi_core.
    """

    #: schema steps; ``MIGRATIONS[i]`` takes version ``i`` to ``i + 1``
    MIGRATIONS: ClassVar[tuple[SQLiteMigration, ...]] = (_schema_v1,)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(
                f"synchronous must be 'FULL' or 'NORMAL', not {synchronous!r}"
            )
        self.path = Path(path)
        if str(path) == ":memory:" or str(path).startswith("file:"):
            raise ValueError(
                "SQLiteStore needs a file path; use MemoryStore for memory"
            )
        self._mutex = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        with self._errors():
            conn = sqlite3.connect(
                self.path,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA synchronous = {synchronous}")
                conn.execute("PRAGMA foreign_keys = ON")
                self._migrate(conn)
            except BaseException:
                conn.close()
                raise
        self._conn = conn
        # After connecting, so the file exists: a symlink to it, or a path through a
        # symlinked directory, must lock where every other name of the file does.
        real = self.path.resolve()
        self._lock_dir = real.with_name(real.name + ".locks")

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn sqlite3 and codec failures into a ``SessionError`` naming the file."""
        try:
            yield
        except sqlite3.Error as exc:
            raise SessionError(f"SQLite database {str(self.path)!r}: {exc}") from exc
        except codec.CodecError as exc:
            raise SessionError(f"SQLite database {str(self.path)!r}: {exc}") from exc

    def _migrate(self, conn: sqlite3.Connection) -> None:
        target = len(self.MIGRATIONS)
        conn.execute("BEGIN IMMEDIATE")
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > target:
                raise SessionError(
                    f"SQLite database {str(self.path)!r} has schema v{version}, newer "
                    f"than this navi_core knows (v{target}); upgrade navi_core"
                )
            for step in self.MIGRATIONS[version:]:
                step(conn)
            if version != target:
                conn.execute(f"PRAGMA user_version = {target}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _tx(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction: the writer lock at once when ``write``, else a snapshot."""
        with self._mutex, self._errors():
            conn = self._conn
            if conn is None:
                raise SessionError(
                    f"SQLite database {str(self.path)!r}: store is closed"
                )
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _resolve(conn: sqlite3.Connection, id_or_prefix: str) -> str:
        if conn.execute(
            "SELECT 1 FROM navi_sessions WHERE id = ?", (id_or_prefix,)
        ).fetchone():
            return id_or_prefix
        rows = (
            conn.execute(
                "SELECT id FROM navi_sessions WHERE substr(id, 1, ?) = ? LIMIT 2",
                (len(id_or_prefix), id_or_prefix),
            ).fetchall()
            if id_or_prefix
            else []
        )
        if not rows:
            raise SessionNotFound(f"no session matches {id_or_prefix!r}")
        if len(rows) > 1:
            raise AmbiguousSession(
                f"{id_or_prefix!r} matches several sessions; give more characters"
            )
        return str(rows[0][0])

    # -- SessionStore -----------------------------------------------------------

    def create(self) -> SessionInfo:
        now = time.time()
        info = SessionInfo(uuid.uuid4().hex, now, now, 0, None, None)
        with self._tx(write=True) as conn:
            conn.execute(
                "INSERT INTO navi_sessions (id, created_at, modified_at) "
                "VALUES (?, ?, ?)",
                (info.id, now, now),
            )
        return info

    def list(self) -> list[SessionInfo]:
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM navi_sessions "
                "ORDER BY modified_at DESC, id DESC"
            ).fetchall()
        return [_info(r) for r in rows]

    def get(self, id_or_prefix: str) -> SessionInfo:
        with self._tx() as conn:
            sid = self._resolve(conn, id_or_prefix)
            row = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM navi_sessions WHERE id = ?", (sid,)
            ).fetchone()
        return _info(row)

    def latest(self) -> SessionInfo | None:
        with self._tx() as conn:
            row = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM navi_sessions "
                "ORDER BY modified_at DESC, id DESC LIMIT 1"
            ).fetchone()
        return None if row is None else _info(row)

    def load(self, session_id: str) -> Conversation:
        with self._tx() as conn:
            sid = self._resolve(conn, session_id)
            rows = conn.execute(
                "SELECT body FROM navi_messages WHERE session_id = ? AND seq >= "
                "(SELECT window_start FROM navi_sessions WHERE id = ?) ORDER BY seq",
                (sid, sid),
            ).fetchall()
        with self._errors():
            return Conversation([codec.decode(r[0]) for r in rows], sid)

    def history(self, session_id: str) -> _Windows:
        with self._tx() as conn:
            sid = self._resolve(conn, session_id)
            (count,) = conn.execute(
                "SELECT window_count FROM navi_sessions WHERE id = ?", (sid,)
            ).fetchone()
            rows = conn.execute(
                "SELECT window_no, body FROM navi_messages "
                "WHERE session_id = ? ORDER BY seq",
                (sid,),
            ).fetchall()
        windows: _Windows = [[] for _ in range(count)]
        with self._errors():
            for window_no, body in rows:
                windows[window_no].append(codec.decode(body))
        return windows

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        self._write(session_id, messages, new_window=False)

    def new_window(self, session_id: str, messages: Sequence[Message]) -> None:
        self._write(session_id, messages, new_window=True)

    def _write(
        self, session_id: str, messages: Sequence[Message], *, new_window: bool
    ) -> None:
        with self._errors():  # encode first: a bad message writes nothing
            rows = [codec.stored_row(m) for m in messages]
        last_user, model = (
            None if v is None else codec.valid_text(v)
            for v in session_summary(messages)
        )
        n, now = len(rows), time.time()
        with self._tx(write=True) as conn:
            sid = self._resolve(conn, session_id)
            if new_window:
                sql = (
                    "UPDATE navi_sessions SET window_start = message_count, "
                    "window_count = window_count + 1, "
                    "message_count = message_count + ?, "
                    "modified_at = max(modified_at, ?), "
                    "last_user_message = ?, model = ? "
                    "WHERE id = ? RETURNING message_count, window_count"
                )
            else:
                sql = (
                    "UPDATE navi_sessions SET message_count = message_count + ?, "
                    "modified_at = max(modified_at, ?), "
                    "last_user_message = coalesce(?, last_user_message), "
                    "model = coalesce(?, model) "
                    "WHERE id = ? RETURNING message_count, window_count"
                )
            total, windows = conn.execute(
                sql, (n, now, last_user, model, sid)
            ).fetchone()
            first, window_no = total - n, windows - 1
            conn.executemany(
                "INSERT INTO navi_messages (session_id, seq, window_no, created_at, "
                "role, api_style, base_url, model, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (sid, first + i, window_no, now, *row[:4], row.body.decode())
                    for i, row in enumerate(rows)
                ],
            )

    def lock(self, session_id: str) -> SQLiteLock:
        sid = self.get(session_id).id
        try:
            self._lock_dir.mkdir(exist_ok=True)
            fd = os.open(self._lock_dir / f"{sid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SessionError(
                f"cannot create the lock file for session {sid}: {exc}"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionBusy(f"session {sid} is driven by another agent") from None
        except BaseException:
            os.close(fd)
            raise
        return SQLiteLock(sid, fd)

    def close(self) -> None:
        with self._mutex:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
