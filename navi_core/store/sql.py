"""The SQL store core: the ``SessionStore`` logic SQLite and PostgreSQL share, once.

Both databases hold the same two tables. ``navi_sessions`` has one row per session
with its listing columns (times, ``message_count``, last prompt, model) and its window
bookkeeping (``window_count``, ``window_start``: the ``seq`` where the latest window
begins). ``navi_messages`` has one row per message, keyed by ``(session_id, seq)``,
with its ``window_no``, wire identity columns and codec JSON body; no key is written.

``append`` and ``new_window`` are one transaction each: an ``UPDATE`` of the session
row (which makes concurrent writers to one session take turns) returns the new count,
the window and the time, then the message rows go in. Reads are one statement each,
so a concurrent ``new_window`` cannot split what they return.

``SQLStore`` holds that logic and leaves each store only its dialect: a ``Dialect``
value for the SQL text that differs, plus hooks for connections and transactions,
the schema version, body columns, and its lock. Driver and codec errors leave as a
``SessionError`` naming the database; lookups raise ``SessionNotFound`` and
``AmbiguousSession``.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar, Generic, Protocol, TypeAlias, TypeVar

from .. import codec
from .._ids import new_id
from ..conversation import Conversation, Message, valid_text
from ..errors import AmbiguousSession, SessionError, SessionNotFound
from .base import SessionInfo, SessionLock
from .memory import session_summary
from .sql_extras import SQLExtras
from .statements import Dialect, Statements

__all__ = ["Connection", "Cursor", "Dialect", "SQLStore", "Statements"]

_Windows: TypeAlias = "list[list[Message]]"


class Cursor(Protocol):
    """The part of a DB-API cursor the core reads results through."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> builtins.list[Any]: ...


class Connection(Protocol):
    """The part of a driver connection the core runs statements on."""

    def execute(self, sql: str, params: Sequence[Any], /) -> Cursor: ...


ConnT = TypeVar("ConnT", bound=Connection)
_T = TypeVar("_T")
_StoreT = TypeVar("_StoreT", bound="SQLStore[Any]")


class SQLStore(SQLExtras, abc.ABC, Generic[ConnT]):
    """``SessionStore`` over SQL; a subclass supplies the dialect and the lock.

    Subclasses set ``STATEMENTS`` and ``DRIVER_ERRORS``, open their database, call
    ``_migrate`` inside one transaction, and implement the abstract hooks.
    """

    #: schema steps; ``MIGRATIONS[i]`` takes version ``i`` to ``i + 1``
    MIGRATIONS: ClassVar[tuple[Callable[[Any], None], ...]] = ()
    #: the statements, built once per dialect with ``Statements.build``
    STATEMENTS: ClassVar[Statements]
    #: what the driver raises; translated into ``SessionError``
    DRIVER_ERRORS: ClassVar[tuple[type[Exception], ...]]

    def __init__(self, where: str) -> None:
        #: names the database in every error message
        self._where = where
        #: the failures ``_errors`` and ``_tx`` translate
        self._caught: tuple[type[Exception], ...] = (
            *self.DRIVER_ERRORS,
            codec.CodecError,
        )

    def __enter__(self: _StoreT) -> _StoreT:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- dialect hooks ----------------------------------------------------------

    @abc.abstractmethod
    def _transaction(self, *, write: bool) -> AbstractContextManager[ConnT]:
        """A connection in one transaction: committed, or rolled back on error.

        ``write`` asks for the writer's lock at once where the database has one.
        Raises ``self._closed_error()`` once the store is closed.
        """

    @abc.abstractmethod
    def _schema_version(self, conn: ConnT) -> int | None:
        """The stored schema version, None when none is recorded yet."""

    @abc.abstractmethod
    def _set_schema_version(self, conn: ConnT, old: int | None, new: int) -> None:
        """Record ``new`` as the schema version (``old`` as ``_schema_version`` said)."""

    @abc.abstractmethod
    def _executemany(
        self, conn: ConnT, sql: str, params: Sequence[Sequence[Any]]
    ) -> None:
        """Run ``sql`` once per parameter row."""

    @abc.abstractmethod
    def _message_values(self, row: codec.StoredRow) -> tuple[Any, ...]:
        """role, api_style, base_url, model, then the body columns, to insert."""

    @abc.abstractmethod
    def _message(self, body: Sequence[Any]) -> Message:
        """The message in the body columns of one row, as selected."""

    def _text(self, value: str | None) -> str | None:
        """A listing column value the database can hold."""
        return None if value is None else valid_text(value)

    def _scrub(self, exc: BaseException) -> None:
        """Remove secrets from a driver error before it is shown (none by default)."""

    def _dead_connection(self, exc: BaseException) -> bool:
        """True when ``exc`` says the connection died (a server restart, a failover):
        a transaction that failed so before committing is run again once."""
        return False

    def _fence(self, session_id: str) -> tuple[Any, ...] | None:
        """The parameters of ``Dialect.fence`` for a write to ``session_id``, None
        when this store holds no lock of it (the default: nothing is fenced)."""
        return None

    def _lock_lost(self, session_id: str) -> SessionError:
        """The error of a fenced write that found the lock gone."""
        return SessionError(f"{self._where}: the lock of session {session_id} is lost")

    @abc.abstractmethod
    def lock(self, session_id: str) -> SessionLock:
        """Become the session's only driver; raises ``SessionBusy`` when taken."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections and files (idempotent)."""

    # -- plumbing ---------------------------------------------------------------

    def _error(self, exc: Exception) -> SessionError:
        """A driver or codec failure as a ``SessionError`` naming the database."""
        self._scrub(exc)
        text = str(exc).strip() or type(exc).__name__
        return SessionError(f"{self._where}: {text}")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn driver and codec failures into a ``SessionError`` naming the database."""
        try:
            yield
        except self._caught as exc:
            raise self._error(exc) from exc

    def _closed_error(self) -> SessionError:
        return SessionError(f"{self._where}: store is closed")

    @contextmanager
    def _tx(self, *, write: bool = False) -> Iterator[ConnT]:
        """One transaction, its failures translated as ``_errors`` does."""
        try:
            with self._transaction(write=write) as conn:
                yield conn
        except self._caught as exc:
            raise self._error(exc) from exc

    def _run(self, body: Callable[[ConnT], _T], *, write: bool = False) -> _T:
        """``body`` in one transaction (as ``_tx``); run once more when the first try
        failed on a dead connection before it could commit."""
        for attempt in (1, 2):
            finished = False
            try:
                with self._tx(write=write) as conn:
                    result = body(conn)
                    finished = True
                return result
            except SessionError as exc:
                cause = exc.__cause__
                if attempt == 2 or finished or cause is None:
                    raise
                if not self._dead_connection(cause):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _migrate(self, conn: ConnT) -> None:
        """Run the missing ``MIGRATIONS`` in the caller's transaction; refuse newer."""
        target = len(self.MIGRATIONS)
        stored = self._schema_version(conn)
        version = stored or 0
        if version > target:
            raise SessionError(
                f"{self._where} has schema v{version}, newer than this navi_core "
                f"knows (v{target}); upgrade navi_core"
            )
        for step in self.MIGRATIONS[version:]:
            step(conn)
        if stored != target:
            self._set_schema_version(conn, stored, target)

    def _resolve(self, conn: ConnT, id_or_prefix: str) -> str:
        """The one session id equal to, or else starting with, ``id_or_prefix``."""
        sql = self.STATEMENTS
        if conn.execute(sql.exists, (id_or_prefix,)).fetchone():
            return id_or_prefix
        rows = (
            conn.execute(sql.prefix, (id_or_prefix,)).fetchall() if id_or_prefix else []
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
        sid = new_id()
        row = self._run(
            lambda conn: conn.execute(self.STATEMENTS.create, (sid,)).fetchone(),
            write=True,
        )
        return SessionInfo(*row)

    def list(self) -> builtins.list[SessionInfo]:
        rows = self._run(lambda conn: conn.execute(self.STATEMENTS.list, ()).fetchall())
        return [SessionInfo(*r) for r in rows]

    def get(self, id_or_prefix: str) -> SessionInfo:
        def body(conn: ConnT) -> Any:
            sid = self._resolve(conn, id_or_prefix)
            return conn.execute(self.STATEMENTS.get, (sid,)).fetchone()

        return SessionInfo(*self._run(body))

    def latest(self) -> SessionInfo | None:
        row = self._run(
            lambda conn: conn.execute(self.STATEMENTS.latest, ()).fetchone()
        )
        return None if row is None else SessionInfo(*row)

    def load(self, session_id: str) -> Conversation:
        def body(conn: ConnT) -> tuple[str, builtins.list[Any]]:
            sid = self._resolve(conn, session_id)
            return sid, conn.execute(self.STATEMENTS.load, (sid,)).fetchall()

        sid, rows = self._run(body)
        with self._errors():
            return Conversation([self._message(r) for r in rows], sid)

    def history(self, session_id: str) -> _Windows:
        def body(conn: ConnT) -> builtins.list[Any]:
            sid = self._resolve(conn, session_id)
            return conn.execute(self.STATEMENTS.history, (sid,)).fetchall()

        rows = self._run(body)
        windows: _Windows = [[] for _ in range(rows[0][0])]
        with self._errors():
            for row in rows:
                if row[1] is not None:
                    windows[row[1]].append(self._message(row[2:]))
        return windows

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        self._write(session_id, messages, new_window=False)

    def new_window(self, session_id: str, messages: Sequence[Message]) -> None:
        self._write(session_id, messages, new_window=True)

    def _write(
        self, session_id: str, messages: Sequence[Message], *, new_window: bool
    ) -> None:
        try:  # encode first: a bad message writes nothing
            rows = [codec.stored_row(m) for m in messages]
        except codec.CodecError as exc:
            raise self._error(exc) from exc
        last_user, model = (self._text(v) for v in session_summary(messages))
        sql = self.STATEMENTS
        n = len(rows)

        def update(conn: ConnT, sid: str) -> Any:
            fence = self._fence(sid)
            if fence is None:
                text = sql.new_window if new_window else sql.append
                return conn.execute(text, (n, last_user, model, sid)).fetchone()
            text = sql.new_window_fenced if new_window else sql.append_fenced
            row = conn.execute(text, (n, last_user, model, sid, *fence)).fetchone()
            if row is not None and not row[3]:
                raise self._lock_lost(sid)  # raised in the transaction: rolled back
            return row

        def body(conn: ConnT) -> None:
            # Try the id as given first: the usual case needs no lookup.
            sid = session_id
            row = update(conn, sid)
            if row is None:
                sid = self._resolve(conn, session_id)
                row = update(conn, sid)
            total, window_count, now = row[:3]
            first, window_no = total - n, window_count - 1
            self._executemany(
                conn,
                sql.insert,
                [
                    (sid, first + i, window_no, now, *self._message_values(r))
                    for i, r in enumerate(rows)
                ],
            )

        self._run(body, write=True)
