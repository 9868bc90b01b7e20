"""``SQLiteStore``: sessions in one SQLite file, safe for many threads and processes.

The file runs in WAL mode, so readers never block the writer; every ``append`` and
``new_window`` is one ``BEGIN IMMEDIATE`` transaction, so a crash keeps all of it or
none. Processes sharing the file (on a local disk) serialise writes through SQLite's
own lock, waiting up to ``timeout``. Messages are stored as codec JSON next to their wire
identity columns; no key is ever written. The shared logic lives in ``sql.SQLStore``;
this module holds the SQLite dialect, the connection and the session lock.

The schema version lives in ``PRAGMA user_version``. ``MIGRATIONS[i]`` upgrades
version ``i`` to ``i + 1``; opening a file runs the missing steps in one transaction,
and a file from a newer navi_core is refused rather than misread.

``lock(session_id)`` takes ``flock(LOCK_EX | LOCK_NB)`` on ``<path>.locks/<id>.lock``,
``<path>`` resolved (symlinks followed), so every name of one file shares one lock.
The kernel drops it when the holding process dies, so a crash never leaves a session
stuck. Two locks in one process conflict too (one open file description each).
``release()`` deletes the file and unlocks it with ``LOCK_UN`` (a forked child that
still has the descriptor does not keep the session), so the directory holds one file
per session being driven, not one per session ever driven.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Final, Literal, TypeAlias, get_type_hints

from .. import codec
from ..conversation import Message
from ..errors import SessionBusy, SessionError
from .sql import Dialect, SQLStore, Statements
from .sql_extras import ExtraStatements, approvals_schema, approvals_v3

__all__ = ["SQLiteLock", "SQLiteMigration", "SQLiteStore", "use_wal"]

SQLiteMigration: TypeAlias = Callable[[sqlite3.Connection], None]

#: the clock in SQL: SQLite's own reads milliseconds, so each connection gets time.time
_CLOCK: Final = "navi_now"
_DIALECT: Final = Dialect(
    param="?",
    now=f"{_CLOCK}()",
    greatest="max",
    prefix_match="instr(id, ?) = 1",
    body_columns=("body",),
    body_values="?",
)
_STATEMENTS: Final = Statements.build(_DIALECT)
_EXTRAS: Final = ExtraStatements.build(_DIALECT.param, _DIALECT.body_columns)


def use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode, waiting up to ``timeout`` seconds for other openers.

    Leaving rollback mode takes an exclusive lock, and while another process opens
    the same new file SQLite answers "database is locked" at once, without waiting
    for its busy timeout: several workers starting together on a new file hit that.
    """
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
            busy = (
                code == sqlite3.SQLITE_BUSY
                if code is not None
                else ("database is locked" in str(exc))
            )
            if not busy or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, 0.05)


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


def _release(fd: int, path: Path, owner: int) -> None:
    """Delete the lock file, unlock and close ``fd``; only close it in another process.

    The file goes first, while the lock is held, so a waiter that opened it before
    never holds a deleted file alone (``SQLiteStore.lock`` checks the path again).
    ``LOCK_UN`` frees the lock even while a forked child still has the descriptor;
    that child, closing its copy, leaves the parent's lock alone.
    """
    try:
        if os.getpid() == owner:
            try:
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    os.unlink(path)
            except OSError:
                pass  # already gone, or the directory is read-only: still unlock
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class SQLiteLock:
    """An exclusive ``flock`` on one session's lock file, removed on release."""

    __slots__ = ("__weakref__", "_finalizer", "session_id")

    def __init__(self, session_id: str, fd: int, path: Path) -> None:
        self.session_id = session_id
        self._finalizer = weakref.finalize(self, _release, fd, path, os.getpid())

    def release(self) -> None:
        """Give the session up (idempotent): delete the lock file and unlock it."""
        self._finalizer()

    def __enter__(self) -> SQLiteLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self._finalizer.alive else "released"
        return f"<SQLiteLock {self.session_id} {state}>"


class SQLiteStore(SQLStore[sqlite3.Connection]):
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
    MIGRATIONS: ClassVar[tuple[SQLiteMigration, ...]] = (
        _schema_v1,
        approvals_schema,
        approvals_v3,
    )
    STATEMENTS: ClassVar[Statements] = _STATEMENTS
    EXTRAS: ClassVar[ExtraStatements] = _EXTRAS
    DRIVER_ERRORS: ClassVar[tuple[type[Exception], ...]] = (sqlite3.Error,)

    # Its public path, navi_core.SQLiteStore, in reprs, docs and tracebacks. As
    # get_type_hints looks names up in the module __module__ names, the annotations
    # above are evaluated here, where their names are defined.
    __annotations__ = get_type_hints(
        type("SQLiteStore", (), {"__annotations__": __annotations__}),
        include_extras=True,
    )
    __module__ = "navi_core"

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
        super().__init__(f"SQLite database {str(self.path)!r}")
        self._mutex = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        with self._errors():
            conn = sqlite3.connect(
                self.path,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            self._conn = conn
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
                use_wal(conn, timeout)
                conn.execute(f"PRAGMA synchronous = {synchronous}")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.create_function(_CLOCK, 0, time.time)
                with self._transaction(write=True):
                    self._migrate(conn)
            except BaseException:
                self._conn = None
                conn.close()
                raise
        # After connecting, so the file exists: a symlink to it, or a path through a
        # symlinked directory, must lock where every other name of the file does.
        real = self.path.resolve()
        self._lock_dir = real.with_name(real.name + ".locks")

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- dialect ----------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        # One connection for every thread: the mutex gives it to one at a time.
        # BEGIN IMMEDIATE takes the writer lock at once; BEGIN reads a snapshot.
        with self._mutex:
            conn = self._conn
            if conn is None:
                raise self._closed_error()
            if conn.in_transaction:
                # a transaction an interrupted caller left open (a KeyboardInterrupt
                # that surfaced in contextlib's __enter__, past this generator)
                conn.execute("ROLLBACK")
            try:
                # inside the try: a signal's KeyboardInterrupt surfaces as BEGIN
                # returns, and the transaction it opened must be rolled back, or the
                # connection stays in it (every later call fails) holding the
                # database's write lock against every other process
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _schema_version(self, conn: sqlite3.Connection) -> int:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        return int(version)

    def _set_schema_version(
        self, conn: sqlite3.Connection, old: int | None, new: int
    ) -> None:
        conn.execute(f"PRAGMA user_version = {int(new)}")

    def _executemany(
        self, conn: sqlite3.Connection, sql: str, params: Sequence[Sequence[Any]]
    ) -> None:
        conn.executemany(sql, params)

    def _message_values(self, row: codec.StoredRow) -> tuple[Any, ...]:
        return (*row[:4], row.body.decode())

    def _message(self, body: Sequence[Any]) -> Message:
        return codec.decode(body[0])

    # -- locks ------------------------------------------------------------------

    def lock(self, session_id: str) -> SQLiteLock:
        sid = self.get(session_id).id
        path = self._lock_dir / _lock_name(sid)
        while True:
            fd = self._open_lock_file(sid, path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise SessionBusy(f"session {sid} is driven by another agent") from None
            except BaseException:
                os.close(fd)
                raise
            # The holder deletes the file before unlocking: a lock on a file that is
            # no longer at ``path`` guards nothing, so open the path again.
            try:
                current = os.stat(path).st_ino
            except FileNotFoundError:
                current = None
            if current == os.fstat(fd).st_ino:
                return SQLiteLock(sid, fd, path)
            os.close(fd)

    def _open_lock_file(self, sid: str, path: Path) -> int:
        try:
            self._lock_dir.mkdir(exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SessionError(
                f"cannot create the lock file for session {sid}: {exc}"
            ) from exc

    def close(self) -> None:
        with self._mutex:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


#: a session id that can name its lock file as it is (what ``new_id`` makes)
_PLAIN_ID: Final = re.compile(r"[0-9A-Za-z_-]{1,128}")


def _lock_name(sid: str) -> str:
    """The lock file's name for session ``sid``, always inside the locks folder.

    A database file from elsewhere may hold any text as an id (``../x``, a ``/``, a
    NUL): such an id is named by its SHA-256 instead, so no id reaches a path
    outside the folder, and ``release()`` never deletes a file there.
    """
    if _PLAIN_ID.fullmatch(sid):
        return f"{sid}.lock"
    digest = hashlib.sha256(sid.encode("utf-8", "surrogatepass")).hexdigest()
    return f"id-{digest}.lock"
