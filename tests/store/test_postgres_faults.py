"""PostgreSQL: a lost session lock stops its writer; a stale pooled connection
does not fail the turn.

Before the fix, after ``pg_terminate_backend`` of the lock's connection (a restart or
a failover does the same) a second agent took the session while the first kept
writing into it; and a pooled connection killed the same way failed the next turn.
Now every write of a locked session is fenced by the lock (``SessionLockLost``), and
pooled connections are checked on checkout, a transaction that failed on a dead
one before committing running again on a fresh one.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest
from faultkit import run_turn

from navi_core import (
    Agent,
    Scripted,
    SessionBusy,
    SessionLockLost,
    Text,
    UserMessage,
)

psycopg = pytest.importorskip("psycopg")
from psycopg.conninfo import make_conninfo  # noqa: E402

from navi_core.store.postgres import PostgresStore  # noqa: E402

pytestmark = pytest.mark.postgres


@pytest.fixture
def dsn() -> Iterator[str]:
    """A DSN on a fresh schema with an application name of its own (to find its
    backends); the schema is dropped afterwards."""
    base = os.environ.get("NAVI_TEST_POSTGRES_DSN")
    if not base:
        pytest.skip("PostgreSQL tests need NAVI_TEST_POSTGRES_DSN (. .ci/postgres.sh)")
    tag = uuid.uuid4().hex[:12]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA navi_f_{tag}")
    try:
        yield make_conninfo(
            base, options=f"-c search_path=navi_f_{tag}", application_name=f"nf_{tag}"
        )
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA navi_f_{tag} CASCADE")


def _terminate(dsn: str, *, locks_only: bool) -> int:
    """End this test's backends (only those holding advisory locks, or all)."""
    app = psycopg.conninfo.conninfo_to_dict(dsn)["application_name"]
    where = "a.application_name = %s AND a.pid <> pg_backend_pid()"
    if locks_only:
        where += " AND a.pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory')"
    with psycopg.connect(dsn, autocommit=True, application_name="killer") as conn:
        rows = conn.execute(
            f"SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a WHERE {where}",
            (app,),
        ).fetchall()
        # wait until the server has really let them go
        for _ in range(100):
            left = conn.execute(
                f"SELECT count(*) FROM pg_stat_activity a WHERE {where}", (app,)
            ).fetchone()
            if left is not None and left[0] == 0:
                break
            time.sleep(0.02)
    return len(rows)


def test_a_lost_lock_stops_the_first_writer(dsn: str) -> None:
    with (
        PostgresStore(dsn, max_size=2) as first,
        PostgresStore(dsn, max_size=2) as second,
    ):
        a = Agent(Scripted([[Text("one")], [Text("two")]]), store=first)
        sid = a.session_id
        run_turn(a, "first prompt")
        with pytest.raises(SessionBusy):
            Agent(Scripted([]), store=second, session=sid)
        assert _terminate(dsn, locks_only=True) == 1
        b = Agent(Scripted([[Text("from b")]]), store=second, session=sid)
        with pytest.raises(SessionLockLost, match="lost its session lock"):
            a.run("second prompt from a")
        run_turn(b, "prompt from b")
        b.close()
        a.close()
        texts = [m.text for m in second.load(sid).messages]
    assert texts == ["first prompt", "one", "prompt from b", "from b"]


def test_a_write_in_flight_is_seen_by_the_next_holder(dsn: str) -> None:
    """A second holder loads after the first holder's last accepted write."""
    with PostgresStore(dsn) as store, PostgresStore(dsn) as other:
        sid = store.create().id
        lock = store.lock(sid)
        store.append(sid, [UserMessage("kept")])
        _terminate(dsn, locks_only=True)
        with pytest.raises(SessionLockLost):
            store.append(sid, [UserMessage("refused")])
        with Agent(Scripted([]), store=other, session=sid) as agent:
            assert [m.text for m in agent.conversation.messages] == ["kept"]
        lock.release()


def test_stale_pooled_connections_do_not_fail_the_turn(dsn: str) -> None:
    with PostgresStore(dsn, min_size=2, max_size=2) as store:
        agent = Agent(Scripted([[Text("one")], [Text("two")]]), store=store)
        run_turn(agent, "first")
        sid = agent.session_id
        agent.close()
        assert _terminate(dsn, locks_only=False) >= 1  # every pooled connection
        with Agent(Scripted([[Text("three")]]), store=store, session=sid) as again:
            _, done = run_turn(again, "second")
        assert done.response == "three"
        assert [s.id for s in store.list()] == [sid]
        texts = [m.text for m in store.load(sid).messages]
    assert texts == ["first", "one", "second", "three"]
