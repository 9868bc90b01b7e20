"""History paging and held approvals for the SQL stores, shared by SQLite and PostgreSQL.

``history_page`` reads ``navi_messages`` by ``seq``, which runs across every window of
a session, so a cursor is simply the next ``seq`` to read.

Held approvals live in ``navi_approvals``: one row per tool call of the batch held
for approval, keyed by ``(session_id, ord)`` (its place in the response: two calls
may share an id), with its call id, the turn that held it, the digest of its name and
arguments, state, reason and (once done) the result as codec JSON. ``move_approval``
is one ``UPDATE ... WHERE`` the row is the call named (place, id, turn, digest) ``AND
state = expected``: of two drivers racing to run an approved call, exactly one sees
its row change, and a decision never lands on a newer call at the same place.

Schema step 3 (``approvals_v3``) rebuilds the v2 table under the new key; rows held
before it keep their state and get an empty turn and digest, which ``approvals``
reads as bound to the call id alone.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from .. import codec
from ..conversation import Message, ToolResult
from ..errors import SessionNotFound
from .base import (
    Approval,
    ApprovalState,
    HistoryPage,
    check_page_limit,
    parse_cursor,
)

__all__ = ["ExtraStatements", "SQLExtras", "approvals_schema", "approvals_v3"]


def approvals_schema(conn: Any) -> None:
    """Schema step 2: the ``navi_approvals`` table (same text for both databases)."""
    conn.execute(
        """CREATE TABLE navi_approvals (
            session_id TEXT NOT NULL REFERENCES navi_sessions (id) ON DELETE CASCADE,
            call_id TEXT NOT NULL,
            ord INTEGER NOT NULL,
            name TEXT NOT NULL,
            state TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            result TEXT,
            PRIMARY KEY (session_id, call_id)
        )"""
    )


def approvals_v3(conn: Any) -> None:
    """Schema step 3: held calls keyed by their place in the response, with the turn
    that held them and their digest (same text for both databases)."""
    conn.execute(
        """CREATE TABLE navi_approvals_v3 (
            session_id TEXT NOT NULL REFERENCES navi_sessions (id) ON DELETE CASCADE,
            ord INTEGER NOT NULL,
            call_id TEXT NOT NULL,
            turn_id TEXT NOT NULL DEFAULT '',
            digest TEXT NOT NULL DEFAULT '',
            name TEXT NOT NULL,
            state TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            result TEXT,
            PRIMARY KEY (session_id, ord)
        )"""
    )
    conn.execute(
        "INSERT INTO navi_approvals_v3 "
        "(session_id, ord, call_id, name, state, reason, result) "
        "SELECT session_id, ord, call_id, name, state, reason, result "
        "FROM navi_approvals"
    )
    conn.execute("DROP TABLE navi_approvals")
    conn.execute("ALTER TABLE navi_approvals_v3 RENAME TO navi_approvals")


@dataclass(frozen=True, slots=True)
class ExtraStatements:
    """The paging and approval statements, in one dialect."""

    page: str
    clear: str
    insert: str
    select: str
    move: str
    #: ``delete_session``: the children first, then the session row (its count
    #: tells whether the id named a session)
    forget: tuple[str, ...]

    @classmethod
    def build(cls, param: str, body_columns: Sequence[str]) -> ExtraStatements:
        """The statements with ``param`` placeholders, reading ``body_columns``."""
        body = ", ".join(body_columns)
        sql = {
            "page": f"SELECT seq, {body} FROM navi_messages "
            "WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
            "clear": "DELETE FROM navi_approvals WHERE session_id = ?",
            "insert": "INSERT INTO navi_approvals "
            "(session_id, ord, call_id, turn_id, digest, name, state, reason, result) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            "select": "SELECT call_id, name, state, reason, result, ord, turn_id, "
            "digest FROM navi_approvals WHERE session_id = ? ORDER BY ord",
            "move": "UPDATE navi_approvals SET state = ?, "
            "reason = COALESCE(?, reason), result = COALESCE(?, result) "
            "WHERE session_id = ? AND ord = ? AND call_id = ? AND turn_id = ? "
            "AND digest = ? AND state = ? RETURNING ord",
        }
        forget = (
            "DELETE FROM navi_approvals WHERE session_id = ?",
            "DELETE FROM navi_messages WHERE session_id = ?",
            "DELETE FROM navi_sessions WHERE id = ? RETURNING id",
        )
        return cls(
            **{k: v.replace("?", param) for k, v in sql.items()},
            forget=tuple(q.replace("?", param) for q in forget),
        )


def _encode_result(result: ToolResult | None) -> str | None:
    if result is None:
        return None
    return codec.encode(Message("user", (result,))).decode()


def _decode_result(text: str | None) -> ToolResult | None:
    if text is None:
        return None
    (block,) = codec.decode(text).content
    if not isinstance(block, ToolResult):
        raise codec.CodecError("a stored approval result is not a tool result")
    return block


class SQLExtras:
    """``history_page`` and the approval methods of ``SQLStore``."""

    #: the statements, built once per dialect with ``ExtraStatements.build``
    EXTRAS: ClassVar[ExtraStatements]

    if TYPE_CHECKING:

        def _tx(self, *, write: bool = False) -> AbstractContextManager[Any]: ...
        def _errors(self) -> AbstractContextManager[None]: ...
        def _resolve(self, conn: Any, id_or_prefix: str) -> str: ...
        def _message(self, body: Sequence[Any]) -> Message: ...

    def history_page(
        self, session_id: str, limit: int = 100, cursor: str | None = None
    ) -> HistoryPage:
        limit = check_page_limit(limit)
        start = parse_cursor(cursor)
        with self._tx() as conn:
            sid = self._resolve(conn, session_id)
            rows = conn.execute(self.EXTRAS.page, (sid, start, limit + 1)).fetchall()
        with self._errors():
            messages = tuple(self._message(r[1:]) for r in rows[:limit])
        more = len(rows) > limit
        return HistoryPage(messages, str(int(rows[limit - 1][0]) + 1) if more else None)

    def save_approvals(self, session_id: str, approvals: Sequence[Approval]) -> None:
        with self._errors():
            rows = [
                (
                    i,
                    a.call_id,
                    a.turn_id,
                    a.digest,
                    a.name,
                    str(a.state),
                    a.reason,
                    _encode_result(a.result),
                )
                for i, a in enumerate(approvals)
            ]
        with self._tx(write=True) as conn:
            sid = self._resolve(conn, session_id)
            conn.execute(self.EXTRAS.clear, (sid,))
            for row in rows:
                conn.execute(self.EXTRAS.insert, (sid, *row))

    def approvals(self, session_id: str) -> builtins.list[Approval]:
        with self._tx() as conn:
            sid = self._resolve(conn, session_id)
            rows = conn.execute(self.EXTRAS.select, (sid,)).fetchall()
        with self._errors():
            return [
                Approval(
                    r[0],
                    r[1],
                    ApprovalState(r[2]),
                    r[3],
                    _decode_result(r[4]),
                    int(r[5]),
                    r[6],
                    r[7],
                )
                for r in rows
            ]

    def delete_session(self, session_id: str) -> None:
        *children, parent = self.EXTRAS.forget
        with self._tx(write=True) as conn:
            for sql in children:
                conn.execute(sql, (session_id,))
            if conn.execute(parent, (session_id,)).fetchone() is None:
                raise SessionNotFound(f"no session {session_id!r}")

    def move_approval(
        self,
        session_id: str,
        held: Approval,
        expected: ApprovalState,
        new: ApprovalState,
        *,
        reason: str | None = None,
        result: ToolResult | None = None,
    ) -> bool:
        with self._errors():
            body = _encode_result(result)
        named = (held.ordinal, held.call_id, held.turn_id, held.digest)
        with self._tx(write=True) as conn:
            sid = self._resolve(conn, session_id)
            row = conn.execute(
                self.EXTRAS.move,
                (str(new), reason, body, sid, *named, str(expected)),
            ).fetchone()
        return row is not None
