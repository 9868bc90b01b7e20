"""The SQL text of the SQL stores: a ``Dialect`` per database, ``Statements`` built from it.

Every statement is written once, with ``?`` for a parameter; ``Statements.build``
fills in what differs between databases (the placeholder, the clock, ``GREATEST``,
prefix matching, the body columns, the lock fence) so SQLite and PostgreSQL run the
same statements. ``sql.SQLStore`` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["Dialect", "Statements"]

_SESSION_COLUMNS: Final = (
    "id, created_at, modified_at, message_count, last_user_message, model"
)


@dataclass(frozen=True, slots=True)
class Dialect:
    """The SQL text that differs between databases; statements are built from it.

    Every statement is written with ``?`` for a parameter, replaced by ``param``.
    """

    #: the driver's parameter placeholder
    param: str
    #: an expression for the current time in Unix seconds
    now: str
    #: the scalar maximum of two values
    greatest: str
    #: true when ``id`` starts with the one ``?`` parameter
    prefix_match: str
    #: the ``navi_messages`` columns holding a body, as read and written
    body_columns: tuple[str, ...]
    #: the placeholders those columns are inserted with
    body_values: str
    #: a condition that the writer still holds the session lock (its parameters
    #: from ``SQLStore._fence``); empty when the database fences nothing
    fence: str = ""


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement the core runs, in one dialect."""

    exists: str
    prefix: str
    create: str
    list: str
    get: str
    latest: str
    load: str
    history: str
    append: str
    new_window: str
    insert: str
    #: ``append`` and ``new_window`` that also return ``Dialect.fence``
    append_fenced: str
    new_window_fenced: str

    @classmethod
    def build(cls, d: Dialect) -> Statements:
        body = ", ".join(f"m.{c}" for c in d.body_columns)
        touch = (
            "message_count = message_count + ?, "
            f"modified_at = {d.greatest}(modified_at, {d.now})"
        )
        returning = "WHERE id = ? RETURNING message_count, window_count, modified_at"
        sql = {
            "exists": "SELECT 1 FROM navi_sessions WHERE id = ?",
            "prefix": f"SELECT id FROM navi_sessions WHERE {d.prefix_match} LIMIT 2",
            # One clock reading for both times: a new session was modified when made.
            "create": "INSERT INTO navi_sessions (id, created_at, modified_at) "
            f"SELECT ?, t, t FROM (SELECT {d.now} AS t) AS clock "
            f"RETURNING {_SESSION_COLUMNS}",
            "list": f"SELECT {_SESSION_COLUMNS} FROM navi_sessions "
            "ORDER BY modified_at DESC, id DESC",
            "get": f"SELECT {_SESSION_COLUMNS} FROM navi_sessions WHERE id = ?",
            "latest": f"SELECT {_SESSION_COLUMNS} FROM navi_sessions "
            "ORDER BY modified_at DESC, id DESC LIMIT 1",
            "load": f"SELECT {body} FROM navi_sessions s JOIN navi_messages m "
            "ON m.session_id = s.id AND m.seq >= s.window_start "
            "WHERE s.id = ? ORDER BY m.seq",
            # LEFT JOIN: a session without messages still gives its window count.
            "history": f"SELECT s.window_count, m.window_no, {body} "
            "FROM navi_sessions s LEFT JOIN navi_messages m ON m.session_id = s.id "
            "WHERE s.id = ? ORDER BY m.seq",
            "append": f"UPDATE navi_sessions SET {touch}, "
            "last_user_message = COALESCE(?, last_user_message), "
            f"model = COALESCE(?, model) {returning}",
            "new_window": "UPDATE navi_sessions SET window_start = message_count, "
            f"window_count = window_count + 1, {touch}, "
            # a window of a summary alone has neither: the session keeps its own
            "last_user_message = COALESCE(?, last_user_message), "
            f"model = COALESCE(?, model) {returning}",
            "insert": "INSERT INTO navi_messages (session_id, seq, window_no, "
            f"created_at, role, api_style, base_url, model, {', '.join(d.body_columns)}) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, {d.body_values})",
        }
        # The fence is read after the UPDATE has locked the row (a CTE's rows come
        # first), so a new lock holder, which takes that row lock before it loads,
        # either sees this write or makes its fence fail. Without a fence the
        # statements stay as they are (``SQLStore._fence`` never asks for them).
        for name in ("append", "new_window"):
            sql[f"{name}_fenced"] = (
                f"WITH w AS ({sql[name]}) SELECT w.message_count, w.window_count, "
                f"w.modified_at, {d.fence} FROM w"
                if d.fence
                else sql[name]
            )
        return cls(**{k: v.replace("?", d.param) for k, v in sql.items()})
