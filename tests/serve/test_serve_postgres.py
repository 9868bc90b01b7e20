"""Two ``navi-core serve`` instances on two ports sharing one PostgreSQL database."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import model_args
from fake_model import FakeModel
from psycopg.conninfo import make_conninfo
from servekit import Served, postgres_dsn, read_turn

from navi_core.events import StopReason, TurnComplete

pytestmark = pytest.mark.postgres


@pytest.fixture
def schema_dsn() -> Iterator[str]:
    base = postgres_dsn()
    schema = f"navi_serve_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield make_conninfo(base, options=f"-c search_path={schema}")
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def two_servers(
    fake_model: FakeModel, tmp_path: Path, schema_dsn: str
) -> Iterator[tuple[Served, Served]]:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.txt").write_text("hi\n")
    args = [
        *model_args(fake_model, tmp_path),
        "--postgres",
        schema_dsn,
        "--threads",
        "4",
    ]
    with Served.start(tmp_path, args) as a, Served.start(tmp_path, args) as b:
        assert a.port != b.port
        yield a, b


def test_two_servers_serve_one_session_alternately(
    two_servers: tuple[Served, Served],
) -> None:
    a, b = two_servers
    with a.client() as ca, b.client() as cb:
        sid = ca.new_session()
        for i in range(6):
            c = (ca, cb)[i % 2]
            prompt = "please use tool" if i == 3 else f"turn {i}"
            done = c.turn(sid, prompt).last
            assert (
                isinstance(done, TurnComplete)
                and done.stop_reason is StopReason.END_TURN
            )
        from_a, from_b = ca.messages(sid), cb.messages(sid)
    assert from_a == from_b
    texts = [(m["role"], m["content"][0].get("text")) for m in from_a]
    expect = []
    for i in range(6):
        if i == 3:
            expect += [("user", "please use tool"), ("assistant", None), ("user", None)]
            expect += [("assistant", 'tool said: ["notes.txt"]')]
        else:
            expect += [("user", f"turn {i}"), ("assistant", f"echo: turn {i}")]
    assert texts == expect  # nothing lost, nothing doubled, in order


def test_409_and_cancel_across_servers(two_servers: tuple[Served, Served]) -> None:
    a, b = two_servers
    with a.client() as ca, b.client() as cb:
        sid = ca.new_session()
        with ca.http.stream(
            "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "slow"}
        ) as r:
            chunks = r.iter_raw()
            next(chunks)
            busy = cb.http.post(f"/v1/sessions/{sid}/turns", json={"prompt": "no"})
            assert busy.status_code == 409 and busy.json()["error"] == "session_busy"
            t0 = time.monotonic()
            c = cb.http.post(f"/v1/sessions/{sid}/cancel")
            assert c.status_code == 202 and c.json() == {"running": True}
            result = read_turn(chunks)
        assert time.monotonic() - t0 < 2.0
        assert isinstance(result.last, TurnComplete)
        assert result.last.stop_reason is StopReason.CANCELLED
        done = cb.turn(sid, "now me").last  # the other server drives it next
        assert isinstance(done, TurnComplete) and done.response == "echo: now me"
        users = [
            m["content"][0]["text"] for m in ca.messages(sid) if m["role"] == "user"
        ]
    assert users == ["slow", "now me"]


def test_concurrent_turns_on_many_sessions_lose_nothing(
    two_servers: tuple[Served, Served],
) -> None:
    servers = two_servers
    errors: list[BaseException] = []
    sids: list[str] = []

    def work(n: int) -> None:
        try:
            with servers[n % 2].client() as c, servers[(n + 1) % 2].client() as other:
                sid = c.new_session()
                sids.append(sid)
                for i in range(3):
                    (c, other)[i % 2].turn(sid, f"s{n} t{i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with servers[0].client() as c:
        for n, sid in enumerate(sorted(sids)):
            msgs = c.messages(sid)
            assert len(msgs) == 6, (n, msgs)
            prompts = [m["content"][0]["text"] for m in msgs if m["role"] == "user"]
            assert len(set(prompts)) == 3
