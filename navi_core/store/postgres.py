"""``PostgresStore``: sessions in PostgreSQL, shared by many processes on many hosts.

Needs the ``postgres`` extra (psycopg 3 and psycopg_pool). Connections come
from a ``ConnectionPool``; every ``append`` and ``new_window`` is one transaction that
locks the session row, so concurrent writers never interleave or lose a message.
Bodies are codec JSON in a ``jsonb`` column, beside the wire identity columns; no key
is written. Times come from the server's clock, so hosts with skewed clocks still list
sessions in the right order. The shared logic lives in ``sql.SQLStore``; this module
holds the PostgreSQL dialect, the connection pool and the session lock.

The schema version lives in ``navi_schema``; ``MIGRATIONS[i]`` upgrades version ``i``
to ``i + 1``. Opening runs the missing steps in one transaction under an advisory lock,
so processes starting together migrate once; a newer schema is refused.

``lock(session_id)`` takes ``pg_try_advisory_lock`` on a connection of its own, held
until ``release()``. When the holder dies its connection drops (TCP keepalives notice
a vanished host) and the server frees the lock.

A lock is also lost while its holder lives when a restart, a failover or
``pg_terminate_backend`` ends its connection. So every write of a session this store
holds is fenced: once its ``UPDATE`` has locked the row, it checks that the backend
that took the lock still lives (pid and start time), else raises
``SessionLockLost``; a new
holder waits for that row lock before it loads, so it sees every accepted write.
Pooled connections are checked on checkout, and a transaction that failed on a dead
one before committing runs once more (``SQLStore._run``).
"""

from __future__ import annotations

import hashlib
import math
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Final, TypeAlias, get_type_hints

import orjson

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.types.json import set_json_loads
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from .._extras import install_command

    raise ImportError(
        "PostgresStore needs psycopg 3 and psycopg_pool: " + install_command("postgres")
    ) from exc

from .. import codec
from ..conversation import Message
from ..errors import SessionBusy, SessionError
from .pg_fence import (
    FENCE,
    LockHolder,
    fence_params,
    is_dead_connection,
    lock_holder,
    lock_lost,
)
from .sql import Dialect, SQLStore, Statements
from .sql_extras import ExtraStatements, approvals_schema, approvals_v3

__all__ = ["PostgresLock", "PostgresMigration", "PostgresStore"]

PostgresMigration: TypeAlias = Callable[["psycopg.Connection[Any]"], None]

#: key of the transaction-scoped advisory lock that serialises migrations
_MIGRATION_LOCK: Final = 0x6E61_7669_5F6D_6967  # "navi_mig"
#: bodies are jsonb, kept verbatim in body_text when jsonb cannot hold them
_DIALECT: Final = Dialect(
    param="%s",
    now="extract(epoch FROM clock_timestamp())",
    greatest="GREATEST",
    prefix_match="starts_with(id, ?)",
    body_columns=("body", "body_text"),
    body_values="?::jsonb, ?",
    fence=FENCE,
)
_STATEMENTS: Final = Statements.build(_DIALECT)
_EXTRAS: Final = ExtraStatements.build(_DIALECT.param, _DIALECT.body_columns)
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

    __slots__ = (
        "__weakref__",
        "_conn",
        "_finalizer",
        "_key",
        "_on_release",
        "holder",
        "session_id",
    )

    def __init__(
        self,
        session_id: str,
        conn: psycopg.Connection[Any],
        key: int,
        holder: LockHolder,
        on_release: Callable[[], None],
    ) -> None:
        self.session_id = session_id
        self._conn = conn
        self._key = key
        #: the backend holding the lock, as writes check it
        self.holder = holder
        self._on_release = on_release
        self._finalizer = weakref.finalize(self, _close, conn, on_release)

    def release(self) -> None:
        """Give the session up (idempotent); closing the connection frees the lock."""
        if not self._finalizer.alive:
            return
        self._on_release()  # writes stop being fenced before the lock goes
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


def _close(conn: psycopg.Connection[Any], on_release: Callable[[], None]) -> None:
    try:
        on_release()
    finally:
        conn.close()


class PostgresStore(SQLStore["psycopg.Connection[Any]"]):
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
    MIGRATIONS: ClassVar[tuple[PostgresMigration, ...]] = (
        _schema_v1,
        approvals_schema,
        approvals_v3,
    )
    STATEMENTS: ClassVar[Statements] = _STATEMENTS
    EXTRAS: ClassVar[ExtraStatements] = _EXTRAS
    DRIVER_ERRORS: ClassVar[tuple[type[Exception], ...]] = (psycopg.Error,)

    # Its public path, navi_core.PostgresStore, in reprs, docs and tracebacks. As
    # get_type_hints looks names up in the module __module__ names, the annotations
    # above are evaluated here, where their names are defined.
    __annotations__ = get_type_hints(
        type("PostgresStore", (), {"__annotations__": __annotations__}),
        include_extras=True,
    )
    __module__ = "navi_core"

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
        host, port = params.get("host", "localhost"), params.get("port", "5432")
        super().__init__(f"PostgreSQL {host}:{port}/{params.get('dbname', '')}")
        self._password = str(params.get("password") or "")
        keepalives = {k: v for k, v in _KEEPALIVES.items() if k not in params}
        self._lock_dsn = make_conninfo(dsn, **keepalives)
        self._connect_timeout = max(1, math.ceil(timeout))  # libpq: 0 waits forever
        self._closed = False
        #: the locks this store holds, by session id: their writes are fenced
        self._held: dict[str, LockHolder] = {}
        self._held_mutex = threading.Lock()
        # The connection's context commits the migration, or rolls it back on error.
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
            check=ConnectionPool.check_connection,
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

    # -- dialect ----------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[psycopg.Connection[Any]]:
        # A pooled connection's context is one transaction; row locks order writers.
        if self._closed:
            raise self._closed_error()
        with self._pool.connection() as conn:
            yield conn

    def _schema_version(self, conn: psycopg.Connection[Any]) -> int | None:
        # Held to the end of the transaction: processes opening together migrate once.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS navi_schema (version integer NOT NULL)"
        )
        row = conn.execute("SELECT version FROM navi_schema").fetchone()
        return None if row is None else int(row[0])

    def _set_schema_version(
        self, conn: psycopg.Connection[Any], old: int | None, new: int
    ) -> None:
        if old is None:
            conn.execute("INSERT INTO navi_schema (version) VALUES (%s)", (new,))
        else:
            conn.execute("UPDATE navi_schema SET version = %s", (new,))

    def _executemany(
        self,
        conn: psycopg.Connection[Any],
        sql: str,
        params: Sequence[Sequence[Any]],
    ) -> None:
        with conn.cursor() as cur:
            cur.executemany(sql, params)

    def _message_values(self, row: codec.StoredRow) -> tuple[Any, ...]:
        # role, wire identity, then (jsonb, verbatim) body: jsonb refuses \u0000.
        body = row.body.decode()
        bodies = (None, body) if "\\u0000" in body else (body, None)
        return (row.role, *map(_text, row[1:4]), *bodies)

    def _message(self, body: Sequence[Any]) -> Message:
        obj, text = body
        return codec.from_obj(obj) if text is None else codec.decode(text)

    def _text(self, value: str | None) -> str | None:
        return _text(value)

    def _scrub(self, exc: BaseException) -> None:
        if self._password:
            _scrub(exc, self._password)

    def _dead_connection(self, exc: BaseException) -> bool:
        return is_dead_connection(exc)

    def _fence(self, session_id: str) -> tuple[Any, ...] | None:
        with self._held_mutex:
            holder = self._held.get(session_id)
        return None if holder is None else fence_params(holder)

    def _lock_lost(self, session_id: str) -> SessionError:
        return lock_lost(session_id)

    # -- locks ------------------------------------------------------------------

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
                if row is None or not row[0]:
                    raise SessionBusy(f"session {sid} is driven by another agent")
                holder = lock_holder(conn)
                # Wait out a write of the previous holder that passed its fence check
                # before that holder lost the lock: the caller loads after this.
                with conn.transaction():
                    conn.execute(
                        "SELECT 1 FROM navi_sessions WHERE id = %s FOR UPDATE", (sid,)
                    )
        except BaseException:
            conn.close()
            raise
        with self._held_mutex:
            self._held[sid] = holder
        return PostgresLock(sid, conn, key, holder, lambda: self._forget(sid, holder))

    def _forget(self, sid: str, holder: LockHolder) -> None:
        with self._held_mutex:
            if self._held.get(sid) is holder:
                del self._held[sid]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()
