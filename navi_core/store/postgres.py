"""``PostgresStore``: sessions in PostgreSQL, shared by many processes on many hosts.

Needs the ``navi-core[postgres]`` extra (psycopg 3 and psycopg_pool). Connections come
from a ``ConnectionPool``; every ``append`` and ``new_window`` is one transaction that
locks the session row, so concurrent writers never interleave or lose a message.
Bodies are codec JSON in a ``jsonb`` column, beside the wire identity columns; no key
is written. Times come from the server's clock, so hosts with skewed clocks still list
sessions in the right order.

The schema version lives in ``navi_schema``; ``MIGRATIONS[i]`` upgrades version ``i``
to ``i + 1``. Opening runs the missing steps in one transaction under an advisory lock,
so processes starting together migrate once; a newer schema is refused.

``lock(session_id)`` takes ``pg_try_advisory_lock`` on a connection of its own, held
until ``release()``. When the holder dies its connection drops (TCP keepalives notice
a vanished host) and the server frees the lock.
"""

from __future__ import annotations

import hashlib
import math
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Final, TypeAlias

import orjson

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.types.json import set_json_loads
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "PostgresStore needs psycopg 3 and psycopg_pool: "
        "pip install 'navi-core[postgres]'"
    ) from exc

from .. import codec
from ..conversation import Conversation, Message
from ..errors import AmbiguousSession, SessionBusy, SessionError, SessionNotFound
from .base import SessionInfo
from .memory import session_summary

__all__ = ["PostgresLock", "PostgresMigration", "PostgresStore"]

PostgresMigration: TypeAlias = Callable[["psycopg.Connection[Any]"], None]
_Windows: TypeAlias = "list[list[Message]]"

#: key of the transaction-scoped advisory lock that serialises migrations
_MIGRATION_LOCK: Final = 0x6E61_7669_5F6D_6967  # "navi_mig"
_NOW: Final = "extract(epoch FROM clock_timestamp())"
_SESSION_COLUMNS: Final = (
    "id, created_at, modified_at, message_count, last_user_message, model"
)
_APPEND: Final = (
    "UPDATE navi_sessions SET message_count = message_count + %s, "
    f"modified_at = GREATEST(modified_at, {_NOW}), "
    "last_user_message = COALESCE(%s, last_user_message), model = COALESCE(%s, model) "
    "WHERE id = %s RETURNING message_count, window_count, modified_at"
)
_NEW_WINDOW: Final = (
    "UPDATE navi_sessions SET window_start = message_count, "
    "window_count = window_count + 1, message_count = message_count + %s, "
    f"modified_at = GREATEST(modified_at, {_NOW}), last_user_message = %s, model = %s "
    "WHERE id = %s RETURNING message_count, window_count, modified_at"
)
_INSERT: Final = (
    "INSERT INTO navi_messages (session_id, seq, window_no, created_at, role, "
    "api_style, base_url, model, body, body_text) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s)"
)
_KEEPALIVES: Final = {
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
}


def _schema_v1(conn: psycopg.Connection[Any]) -> None:
    """Sessions with denormalised listing columns; messages keyed by (session, seq)."""
    conn.execute(
        """CREATE TABLE navi_sessions (
            id text PRIMARY KEY,
            created_at double precision NOT NULL,
            modified_at double precision NOT NULL,
            message_count integer NOT NULL DEFAULT 0,
            window_count integer NOT NULL DEFAULT 1,
            window_start integer NOT NULL DEFAULT 0,
            last_user_message text,
            model text
        )"""
    )
    conn.execute("CREATE INDEX navi_sessions_recent ON navi_sessions (modified_at, id)")
    # body_text keeps the JSON verbatim when jsonb cannot hold it (a \u0000 escape).
    conn.execute(
        """CREATE TABLE navi_messages (
            session_id text NOT NULL REFERENCES navi_sessions (id) ON DELETE CASCADE,
            seq integer NOT NULL,
            window_no integer NOT NULL,
            created_at double precision NOT NULL,
            role text NOT NULL,
            api_style text,
            base_url text,
            model text,
            body jsonb,
            body_text text,
            CHECK ((body IS NULL) <> (body_text IS NULL)),
            PRIMARY KEY (session_id, seq)
        )"""
    )


def _text(value: str | None) -> str | None:
    """A column value PostgreSQL text can hold: valid UTF-8 without NUL characters."""
    if not value:
        return value
    value = codec.valid_text(value)
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _parse_dsn(dsn: str) -> dict[str, Any] | None:
    try:
        return conninfo_to_dict(dsn)
    except psycopg.Error:
        return None


def _scrub(exc: BaseException, secret: str) -> None:
    """Replace ``secret`` in the messages of ``exc`` and of every exception it chains."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(
            a.replace(secret, "***") if isinstance(a, str) else a for a in current.args
        )
        current = current.__cause__ or current.__context__


def _lock_key(session_id: str) -> int:
    digest = hashlib.blake2b(f"navi_core.session:{session_id}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def _configure(conn: psycopg.Connection[Any]) -> None:
    set_json_loads(orjson.loads, conn)


class PostgresLock:
    """A session-level advisory lock held on a dedicated connection."""

    __slots__ = ("__weakref__", "_conn", "_finalizer", "_key", "session_id")

    def __init__(
        self, session_id: str, conn: psycopg.Connection[Any], key: int
    ) -> None:
        self.session_id = session_id
        self._conn = conn
        self._key = key
        self._finalizer = weakref.finalize(self, conn.close)

    def release(self) -> None:
        """Give the session up (idempotent); closing the connection frees the lock."""
        if not self._finalizer.alive:
            return
        try:
            self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
        except psycopg.Error:
            pass  # the connection is gone, and the server freed the lock with it
        finally:
            self._finalizer()

    def __enter__(self) -> PostgresLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self._finalizer.alive else "released"
        return f"<PostgresLock {self.session_id} {state}>"


class PostgresStore:
    """Sessions in the PostgreSQL database at ``dsn``.

    Args:
        dsn: a libpq connection string or URL; a ``search_path`` in ``options``
            selects the schema. Its password is never shown in reprs or errors.
        min_size, max_size: bounds of the connection pool.
        timeout: seconds to wait for a connection (from the pool or the server).

    Raises:
        SessionError: the server cannot be reached, or the schema is newer than
            this navi_core.
    """

    #: schema steps; ``MIGRATIONS[i]`` takes version ``i`` to ``i + 1``
    MIGRATIONS: ClassVar[tuple[PostgresMigration, ...]] = (_schema_v1,)

    def __init__(
        self, dsn: str, *, min_size: int = 1, max_size: int = 8, timeout: float = 30.0
    ) -> None:
        params = _parse_dsn(dsn)
        if params is None:
            # Raised outside the parser's except block, so its message (which may
            # quote a piece of an unquoted password) is not even chained.
            raise SessionError(
                "invalid PostgreSQL DSN (not shown: it may hold a password)"
            )
        self._password = str(params.get("password") or "")
        keepalives = {k: v for k, v in _KEEPALIVES.items() if k not in params}
        self._lock_dsn = make_conninfo(dsn, **keepalives)
        host, port = params.get("host", "localhost"), params.get("port", "5432")
        self._where = f"PostgreSQL {host}:{port}/{params.get('dbname', '')}"
        self._timeout = timeout
        self._connect_timeout = max(1, math.ceil(timeout))  # libpq: 0 waits forever
        self._closed = False
        with (
            self._errors(),
            psycopg.connect(dsn, connect_timeout=self._connect_timeout) as conn,
        ):
            self._migrate(conn)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            open=False,
            configure=_configure,
            timeout=timeout,
            name="navi_core",
        )
        try:
            with self._errors():
                self._pool.open(wait=True, timeout=timeout)
        except BaseException:
            self._pool.close()
            raise

    def __repr__(self) -> str:
        return f"<PostgresStore {self._where}>"

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn psycopg and codec failures into a ``SessionError``; hide the password."""
        try:
            yield
        except (psycopg.Error, codec.CodecError) as exc:
            if self._password:
                _scrub(exc, self._password)
            text = str(exc).strip() or type(exc).__name__
            raise SessionError(f"{self._where}: {text}") from exc

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        target = len(self.MIGRATIONS)
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS navi_schema (version integer NOT NULL)"
        )
        row = conn.execute("SELECT version FROM navi_schema").fetchone()
        version = 0 if row is None else int(row[0])
        if version > target:
            raise SessionError(
                f"{self._where} has navi schema v{version}, newer than this navi_core "
                f"knows (v{target}); upgrade navi_core"
            )
        for step in self.MIGRATIONS[version:]:
            step(conn)
        if row is None:
            conn.execute("INSERT INTO navi_schema (version) VALUES (%s)", (target,))
        elif version != target:
            conn.execute("UPDATE navi_schema SET version = %s", (target,))

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One pooled connection, one transaction: committed, or rolled back on error."""
        if self._closed:
            raise SessionError(f"{self._where}: store is closed")
        with self._errors(), self._pool.connection() as conn:
            yield conn

    @staticmethod
    def _resolve(conn: psycopg.Connection[Any], id_or_prefix: str) -> str:
        if conn.execute(
            "SELECT 1 FROM navi_sessions WHERE id = %s", (id_or_prefix,)
        ).fetchone():
            return id_or_prefix
        rows = (
            conn.execute(
                "SELECT id FROM navi_sessions WHERE starts_with(id, %s) LIMIT 2",
                (id_or_prefix,),
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
        with self._tx() as conn:
            row = conn.execute(
                f"INSERT INTO navi_sessions (id, created_at, modified_at) "
                f"VALUES (%s, {_NOW}, {_NOW}) RETURNING {_SESSION_COLUMNS}",
                (uuid.uuid4().hex,),
            ).fetchone()
        assert row is not None
        return SessionInfo(*row)

    def list(self) -> list[SessionInfo]:
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM navi_sessions "
                "ORDER BY modified_at DESC, id DESC"
            ).fetchall()
        return [SessionInfo(*r) for r in rows]

    def get(self, id_or_prefix: str) -> SessionInfo:
        with self._tx() as conn:
            sid = self._resolve(conn, id_or_prefix)
            row = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM navi_sessions WHERE id = %s", (sid,)
            ).fetchone()
        assert row is not None
        return SessionInfo(*row)

    def latest(self) -> SessionInfo | None:
        with self._tx() as conn:
            row = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM navi_sessions "
                "ORDER BY modified_at DESC, id DESC LIMIT 1"
            ).fetchone()
        return None if row is None else SessionInfo(*row)

    def load(self, session_id: str) -> Conversation:
        with self._tx() as conn:
            sid = self._resolve(conn, session_id)
            # One statement, one snapshot: a concurrent new_window cannot split it.
            rows = conn.execute(
                "SELECT m.body, m.body_text FROM navi_sessions s "
                "JOIN navi_messages m ON m.session_id = s.id AND m.seq >= s.window_start "
                "WHERE s.id = %s ORDER BY m.seq",
                (sid,),
            ).fetchall()
        with self._errors():
            return Conversation([_decode(b, t) for b, t in rows], sid)

    def history(self, session_id: str) -> _Windows:
        with self._tx() as conn:
            sid = self._resolve(conn, session_id)
            rows = conn.execute(
                "SELECT s.window_count, m.window_no, m.body, m.body_text "
                "FROM navi_sessions s LEFT JOIN navi_messages m ON m.session_id = s.id "
                "WHERE s.id = %s ORDER BY m.seq",
                (sid,),
            ).fetchall()
        windows: _Windows = [[] for _ in range(rows[0][0])]
        with self._errors():
            for _, window_no, body, body_text in rows:
                if window_no is not None:
                    windows[window_no].append(_decode(body, body_text))
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
        last_user, model = (_text(v) for v in session_summary(messages))
        sql = _NEW_WINDOW if new_window else _APPEND
        n = len(rows)
        with self._tx() as conn:
            # The UPDATE locks the session row: writers to one session take turns.
            row = conn.execute(sql, (n, last_user, model, session_id)).fetchone()
            if row is None:
                sid = self._resolve(conn, session_id)
                row = conn.execute(sql, (n, last_user, model, sid)).fetchone()
                assert row is not None
            else:
                sid = session_id
            total, window_count, now = row
            first, window_no = total - n, window_count - 1
            params = [
                (sid, first + i, window_no, now, *_columns(r))
                for i, r in enumerate(rows)
            ]
            with conn.cursor() as cur:
                cur.executemany(_INSERT, params)

    def lock(self, session_id: str) -> PostgresLock:
        sid = self.get(session_id).id
        key = _lock_key(sid)
        with self._errors():
            conn = psycopg.connect(
                self._lock_dsn, autocommit=True, connect_timeout=self._connect_timeout
            )
        try:
            with self._errors():
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        except BaseException:
            conn.close()
            raise
        if row is None or not row[0]:
            conn.close()
            raise SessionBusy(f"session {sid} is driven by another agent")
        return PostgresLock(sid, conn, key)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()


def _columns(row: codec.StoredRow) -> tuple[str | None, ...]:
    """role, wire identity, then (jsonb, verbatim) body: jsonb refuses ``\\u0000``."""
    body = row.body.decode()
    bodies = (None, body) if "\\u0000" in body else (body, None)
    return (row.role, *map(_text, row[1:4]), *bodies)


def _decode(body: Any, body_text: str | None) -> Message:
    return codec.from_obj(body) if body_text is None else codec.decode(body_text)
