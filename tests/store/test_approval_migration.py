"""A batch held in a v2 database (approvals keyed by call id) survives the move to v3
(keyed by place, bound to turn and digest) on SQLite and PostgreSQL, and resumes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from navi_core import Agent, Scripted, Text, ToolDispatchComplete, tool
from navi_core.codec import encode
from navi_core.conversation import Message, TextPart, ToolResult, ToolUse, UserMessage
from navi_core.store import SessionStore, SQLiteStore
from navi_core.store.base import Approval, ApprovalState

RAN: list[str] = []


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    RAN.append(f"pay {amount}")
    return f"paid {amount}"


@tool
def balance() -> str:
    """Read the balance."""
    RAN.append("balance")
    return "100"


HELD = Message(
    "assistant",
    (ToolUse("b1", "balance", "{}"), ToolUse("p1", "pay", '{"amount": 30}')),
)
DONE = ToolResult("b1", (TextPart("100"),))
#: the v2 rows: call_id, ord, name, state, reason, result
V2_ROWS = [
    ("b1", 0, "balance", "done", "", encode(Message("user", (DONE,))).decode()),
    ("p1", 1, "pay", "pending", "asks a person", None),
]


#: (store at v2, store at the current version, run SQL on the database)
Opened = tuple[
    Callable[[], SessionStore],
    Callable[[], SessionStore],
    Callable[[str, tuple[Any, ...]], None],
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    if request.param == "sqlite":
        import sqlite3

        path = tmp_path / "navi.db"

        class SQLiteV2(SQLiteStore):
            MIGRATIONS = SQLiteStore.MIGRATIONS[:2]

        def run_sqlite(sql: str, params: tuple[Any, ...]) -> None:
            with closing(sqlite3.connect(path)) as conn, conn:
                conn.execute(sql, params)

        yield (lambda: SQLiteV2(path)), (lambda: SQLiteStore(path)), run_sqlite
        return
    import psycopg

    from navi_core.store.postgres import PostgresStore

    dsn = request.getfixturevalue("pg_dsn")

    class PostgresV2(PostgresStore):
        MIGRATIONS = PostgresStore.MIGRATIONS[:2]

    def run_pg(sql: str, params: tuple[Any, ...]) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), params)

    yield (
        (lambda: PostgresV2(dsn, max_size=2)),
        (lambda: PostgresStore(dsn, max_size=2)),
        run_pg,
    )


def test_a_batch_held_before_v3_is_kept_and_resumes(opened: Opened) -> None:
    open_v2, open_now, run = opened
    old = open_v2()
    sid = old.create().id
    old.append(sid, [UserMessage("pay 30"), HELD])
    for row in V2_ROWS:
        run(
            "INSERT INTO navi_approvals "
            "(session_id, call_id, ord, name, state, reason, result) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sid, *row),
        )
    old.close()

    store = open_now()
    P, DN = ApprovalState.PENDING, ApprovalState.DONE
    assert store.approvals(sid) == [
        Approval("b1", "balance", DN, "", DONE, 0, "", ""),
        Approval("p1", "pay", P, "asks a person", None, 1, "", ""),
    ]
    RAN.clear()
    agent = Agent(
        Scripted([[Text("paid")]]), tools=[pay, balance], store=store, session=sid
    )
    try:
        agent.approve("p1")
        with agent.resume() as stream:
            events = list(stream)
    finally:
        agent.close()
        store.close()
    assert RAN == ["pay 30"]
    results = next(e for e in events if isinstance(e, ToolDispatchComplete)).message
    assert [r.text for r in results.tool_results] == ["100", "paid 30"]
