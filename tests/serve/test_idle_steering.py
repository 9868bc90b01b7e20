"""Steering a session that runs no turn is bounded: a few messages of bounded size
wait for its next turn, and the rest are refused with 429 instead of piling up in
the control table."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from conftest import model_args
from fake_model import FakeModel
from psycopg.conninfo import make_conninfo
from servekit import Served, postgres_dsn

from navi_core import SQLiteStore
from navi_core.config import Config
from navi_core.events import TurnComplete
from navi_core.serve.app import MAX_STEER
from navi_core.serve.control import (
    ControlBus,
    LocalControl,
    PostgresControl,
    SQLiteControl,
)

WAITING = Config().max_steering


@pytest.fixture(scope="module")
def roomy(fake_model: FakeModel, served_dir: Path) -> Iterator[Served]:
    """The default body limit (1 MiB): room for a long steering message."""
    args = [*model_args(fake_model, served_dir), "--db", str(served_dir / "i.db")]
    with Served.start(served_dir, [*args, "--workers", "2"]) as s:
        yield s


def _rows(db: Path) -> int:
    with closing(sqlite3.connect(f"{db}.control")) as conn, conn:
        return int(
            conn.execute("SELECT count(*) FROM navi_serve_control").fetchone()[0]
        )


def test_steering_an_idle_session_stops_at_the_limit_with_429(
    roomy: Served, served_dir: Path
) -> None:
    with roomy.client() as c:
        sid = c.new_session()
        before = _rows(served_dir / "i.db")
        for i in range(WAITING):
            r = c.http.post(f"/v1/sessions/{sid}/steer", json={"text": f"s{i} " * 50})
            assert r.status_code == 202 and r.json() == {"disposition": "next_turn"}
        for _ in range(3):
            r = c.http.post(f"/v1/sessions/{sid}/steer", json={"text": "one more"})
            assert r.status_code == 429, r.text
            assert r.json()["error"] == "steering_queue_full"
            assert f"{WAITING} steering messages wait" in r.json()["message"]
        assert _rows(served_dir / "i.db") - before == WAITING
        # the next turn takes them all; then there is room again
        done = c.turn(sid, "go").last
        assert isinstance(done, TurnComplete)
        assert _rows(served_dir / "i.db") == before
        r = c.http.post(f"/v1/sessions/{sid}/steer", json={"text": "again"})
        assert r.status_code == 202


def test_a_steering_message_has_a_size_limit(roomy: Served) -> None:
    with roomy.client() as c:
        sid = c.new_session()
        r = c.http.post(
            f"/v1/sessions/{sid}/steer", json={"text": "x" * (MAX_STEER + 1)}
        )
        assert r.status_code == 400 and r.json()["field"] == "text"
        assert str(MAX_STEER) in r.json()["message"]
        r = c.http.post(f"/v1/sessions/{sid}/steer", json={"text": "x" * MAX_STEER})
        assert r.status_code == 202


def test_one_cancel_waits_at_most(roomy: Served, served_dir: Path) -> None:
    with roomy.client() as c:
        sid = c.new_session()
        store = SQLiteStore(served_dir / "i.db")
        lock = store.lock(sid)  # as another worker's driver would
        try:
            for _ in range(20):
                r = c.http.post(f"/v1/sessions/{sid}/cancel")
                assert r.status_code == 202 and r.json() == {"running": True}
        finally:
            lock.release()
            store.close()
    bus = SQLiteControl(str(served_dir / "i.db.control"))
    try:
        assert bus.take(sid) == [("cancel", "")]
    finally:
        bus.close()


@pytest.fixture(
    params=["local", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def bus(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ControlBus]:
    if request.param == "local":
        yield LocalControl()
    elif request.param == "sqlite":
        local = SQLiteControl(str(tmp_path / "c.control"))
        yield local
        local.close()
    else:
        base = postgres_dsn()
        schema = f"navi_ctl_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        try:
            control = PostgresControl(
                make_conninfo(base, options=f"-c search_path={schema}")
            )
            yield control
            control.close()
        finally:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_every_control_bus_keeps_a_limit_per_session_and_kind(bus: ControlBus) -> None:
    assert all(bus.post("a", "steer", f"t{i}", limit=3) for i in range(3))
    assert not bus.post("a", "steer", "t3", limit=3)
    assert bus.post("a", "cancel", limit=1) and not bus.post("a", "cancel", limit=1)
    assert bus.post("b", "steer", "other session", limit=3)
    assert bus.post("a", "steer", "unbounded")  # no limit: always left
    assert bus.take("a") == [
        ("steer", "t0"),
        ("steer", "t1"),
        ("steer", "t2"),
        ("cancel", ""),
        ("steer", "unbounded"),
    ]
    assert bus.post("a", "steer", "room again", limit=3)
