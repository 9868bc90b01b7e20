"""How ``navi-core serve`` fails: a 500 names an error id, never the database; a turn
whose store or control bus fails ends its stream with an ``error`` frame, not a
cut; the details are in the server log."""

from __future__ import annotations

import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import orjson
import psycopg
import pytest
from conftest import model_args
from fake_model import FakeModel
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from servekit import Client, Served, postgres_dsn, read_turn
from tcpproxy import TcpProxy

from navi_core.events import StopReason, TurnComplete


@pytest.fixture
def sqlite_served(fake_model: FakeModel, tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "workspace").mkdir()
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "s.db")]
    with Served.start(tmp_path, [*args, "--workers", "1", "--threads", "2"]) as s:
        yield s


def _rename(db: Path, table: str, to: str) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(f"ALTER TABLE {table} RENAME TO {to}")


def test_a_500_names_an_error_id_and_only_the_log_names_the_database(
    sqlite_served: Served, tmp_path: Path
) -> None:
    with sqlite_served.client() as c:
        assert c.http.get("/v1/sessions").status_code == 200
        _rename(tmp_path / "s.db", "navi_sessions", "navi_sessions_gone")
        r = c.http.get("/v1/sessions")
    assert r.status_code == 500
    body = r.json()
    assert body["error"] == "internal_error"
    assert str(tmp_path) not in r.text and "s.db" not in r.text
    error_id = re.search(r"error id ([0-9a-f]{12})", body["message"])
    assert error_id is not None, body
    log = sqlite_served.log.read_text()
    line = next(ln for ln in log.splitlines() if error_id.group(1) in ln)
    assert "GET /v1/sessions failed" in line
    assert str(tmp_path / "s.db") in log  # the details, for the operator


@contextmanager
def streaming(c: Client, sid: str, prompt: str) -> Iterator[Iterator[bytes]]:
    """A turn's body, read up to its first text."""
    with c.http.stream(
        "POST", f"/v1/sessions/{sid}/turns", json={"prompt": prompt}
    ) as r:
        assert r.status_code == 200
        chunks = r.iter_raw()
        seen = b""
        while b"event: TextDelta" not in seen:
            seen += next(chunks)
        yield chunks


def test_a_store_failure_at_the_end_of_a_turn_is_an_error_frame_without_the_path(
    sqlite_served: Served, tmp_path: Path
) -> None:
    with sqlite_served.client() as c:
        sid = c.new_session()
        with streaming(c, sid, "slow 20") as chunks:
            _rename(tmp_path / "s.db", "navi_messages", "navi_messages_gone")
            result = read_turn(chunks)  # a cut body would raise here
    assert result.error is not None, result.names()
    assert result.error["error"] == "internal_error"
    assert str(tmp_path) not in orjson.dumps(result.error).decode()
    assert "error id" in result.error["message"]


def test_a_failing_control_bus_does_not_cut_a_turn(
    sqlite_served: Served, tmp_path: Path
) -> None:
    with sqlite_served.client() as c:
        sid = c.new_session()
        with streaming(c, sid, "slow 20") as chunks:
            _rename(tmp_path / "s.db.control", "navi_serve_control", "gone")
            result = read_turn(chunks)
        _rename(tmp_path / "s.db.control", "gone", "navi_serve_control")
    assert result.error is None
    done = result.last
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.END_TURN
    assert done.response == "tick " * 20
    assert "the control bus failed while session" in sqlite_served.log.read_text()


@pytest.fixture
def proxied_postgres() -> Iterator[tuple[str, TcpProxy]]:
    """A schema of the test server, reached through a proxy that can restart."""
    base = postgres_dsn()
    schema = f"navi_fail_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        host, port = conn.info.host, conn.info.port
    if host.startswith("/"):
        pytest.skip("the proxy needs PostgreSQL on TCP")
    proxy = TcpProxy(port)
    params = conninfo_to_dict(base)
    params.update(host="127.0.0.1", port=str(proxy.port))
    params["options"] = f"-c search_path={schema}"
    try:
        yield make_conninfo("", **params), proxy
    finally:
        proxy.close()
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.mark.postgres
def test_a_postgres_restart_mid_turn_ends_the_stream_with_an_error_frame(
    fake_model: FakeModel, tmp_path: Path, proxied_postgres: tuple[str, TcpProxy]
) -> None:
    dsn, proxy = proxied_postgres
    (tmp_path / "workspace").mkdir()
    args = [*model_args(fake_model, tmp_path), "--postgres", dsn, "--workers", "1"]
    with Served.start(tmp_path, [*args, "--threads", "2"]) as served:
        with served.client() as c:
            sid = c.new_session()
            with streaming(c, sid, "slow 40") as chunks:
                proxy.outage(1.0)  # every connection of the server drops
                result = read_turn(chunks)  # a cut body would raise here
        assert result.error is not None, result.names()
        text = orjson.dumps(result.error).decode()
        assert str(proxy.port) not in text and "127.0.0.1" not in text
        time.sleep(1.0)  # back up: the server serves again
        with served.client() as c:
            assert c.http.get(f"/v1/sessions/{sid}").status_code == 200
            done = c.turn(sid, "again").last
            assert isinstance(done, TurnComplete) and done.response == "echo: again"
