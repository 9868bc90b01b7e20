"""Clients that send slowly, or not at all, hold no thread of ``navi-core serve``.

Each test runs a real server of one worker with two turn threads against sockets
that connect and send nothing, drip a header line at a time, or announce a longer
body than they send: authenticated turns go on meanwhile, and every such socket is
cut (``408``) once ``--read-timeout`` has passed. Cancels and reads do not wait
behind turns that hold every turn thread, and clients that never read their answers
are cut once ``--send-timeout`` has passed.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from conftest import model_args
from fake_model import FakeModel
from servekit import TOKEN, Attackers, Client, Served

from navi_core.events import StopReason, TurnComplete

READ_TIMEOUT = 3.0


@pytest.fixture
def small(fake_model: FakeModel, tmp_path: Path) -> Iterator[Served]:
    """One worker, two turn threads, a short read timeout."""
    (tmp_path / "workspace").mkdir()
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "s.db")]
    args += ["--workers", "1", "--threads", "2", "--max-body", "4096"]
    args += ["--read-timeout", str(READ_TIMEOUT), "--grace", "0.5"]
    with Served.start(tmp_path, args) as s:
        yield s


@pytest.fixture
def attackers(small: Served) -> Iterator[Attackers]:
    a = Attackers(small.port)
    yield a
    a.close()


def test_idle_drip_fed_and_short_body_sockets_hold_no_thread_and_are_cut(
    small: Served, attackers: Attackers
) -> None:
    attackers.open(idle=16, drip=4, short_body=4)  # each alone once stopped 1 x 2
    time.sleep(0.3)
    t0 = time.monotonic()
    with Client(small.url, timeout=10) as c:
        sid = c.new_session()
        for i in range(3):
            done = c.turn(sid, f"turn {i}").last
            assert isinstance(done, TurnComplete) and done.response == f"echo: turn {i}"
    served_in = time.monotonic() - t0
    assert served_in < READ_TIMEOUT, "the turns waited for the slow sockets"
    got = attackers.cut_within(READ_TIMEOUT + 3.0)
    assert time.monotonic() - attackers.opened >= READ_TIMEOUT - 0.5
    for kind in ("drip", "short_body"):
        for data in got[kind]:
            assert data.startswith(b"HTTP/1.1 408"), (kind, data)
    assert got["idle"] == [b""] * 16  # nothing sent, nothing to answer
    with Client(small.url) as c:  # and the server still serves
        assert c.http.get("/v1/sessions").status_code == 200


def test_cancel_and_reads_do_not_wait_behind_turns_holding_every_turn_thread(
    small: Served,
) -> None:
    socks = []
    with Client(small.url, timeout=5) as c:
        sids = [c.new_session() for _ in range(2)]
        body = orjson.dumps({"prompt": "slow 200"})  # 10 s each
        for sid in sids:
            sock = socket.create_connection(("127.0.0.1", small.port))
            sock.sendall(
                b"POST /v1/sessions/%s/turns HTTP/1.1\r\nHost: x\r\n"
                b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s"
                % (sid.encode(), TOKEN.encode(), len(body), body)
            )
            seen = b""
            while b"event: TextDelta" not in seen:
                chunk = sock.recv(65536)
                assert chunk, seen
                seen += chunk
            socks.append(sock)
        try:
            t0 = time.monotonic()
            r = c.http.post(f"/v1/sessions/{sids[0]}/cancel")
            assert r.status_code == 202 and r.json() == {"running": True}
            assert c.http.get(f"/v1/sessions/{sids[1]}").status_code == 200
            assert time.monotonic() - t0 < 1.0
            rest = b""
            socks[0].settimeout(5)
            while b"event: TurnComplete" not in rest:
                chunk = socks[0].recv(65536)
                assert chunk, rest
                rest += chunk
            assert time.monotonic() - t0 < 2.0
            assert b'"stop_reason":"cancelled"' in rest
        finally:
            for sock in socks:
                sock.close()


def test_keep_alive_pipelining_chunked_bodies_and_100_continue_still_work(
    small: Served,
) -> None:
    with Client(small.url) as c:
        sid = c.new_session()
    sock = socket.create_connection(("127.0.0.1", small.port))
    sock.settimeout(10)
    auth = b"Authorization: Bearer %s\r\n" % TOKEN.encode()
    get = b"GET /v1/sessions/%s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (sid.encode(), auth)
    chunked = (
        b"POST /v1/sessions/%s/steer HTTP/1.1\r\nHost: x\r\n%s"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5\r\n{"tex\r\nC\r\nt": "hello"}\r\n0\r\n\r\n' % (sid.encode(), auth)
    )
    sock.sendall(get + chunked + get)  # three requests in one write
    answers = b""
    while answers.count(b"HTTP/1.1 ") < 3 or not answers.endswith(b"}"):
        chunk = sock.recv(65536)
        assert chunk, answers
        answers += chunk
    statuses = re.findall(rb"HTTP/1\.1 (\d{3})", answers)
    assert statuses == [b"200", b"202", b"200"], answers
    body = b'{"text": "again"}'
    sock.sendall(
        b"POST /v1/sessions/%s/steer HTTP/1.1\r\nHost: x\r\n%s"
        b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
        b"Content-Length: %d\r\n\r\n" % (sid.encode(), auth, len(body))
    )
    assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
    sock.sendall(body)
    reply = b""
    while not reply.endswith(b"}"):
        chunk = sock.recv(65536)
        assert chunk, reply
        reply += chunk
    assert reply.startswith(b"HTTP/1.1 202") and b"100 Continue" not in reply
    sock.close()
    with Client(small.url) as c:
        result = c.turn(sid, "go")
        assert isinstance(result.last, TurnComplete)
        assert result.last.stop_reason is StopReason.END_TURN
        texts = [b.get("text") for m in c.messages(sid) for b in m["content"]]
    assert "hello" in texts and "again" in texts  # both steers reached the turn


def test_a_head_too_large_is_431(small: Served) -> None:
    sock = socket.create_connection(("127.0.0.1", small.port))
    sock.settimeout(10)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 70_000)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    assert data.startswith(b"HTTP/1.1 431")
    sock.close()


def test_a_body_that_stalls_is_cut_after_the_read_timeout_not_before(
    small: Served,
) -> None:
    with Client(small.url) as c:
        sid = c.new_session()
    body = orjson.dumps({"prompt": "hello"})
    sock = socket.create_connection(("127.0.0.1", small.port))
    sock.sendall(
        b"POST /v1/sessions/%s/turns HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s"
        % (sid.encode(), TOKEN.encode(), len(body), body[:5])
    )
    time.sleep(READ_TIMEOUT / 2)  # slow, but within the limit: served
    sock.sendall(body[5:])
    sock.settimeout(10)
    seen = b""
    while b"event: TurnComplete" not in seen:
        chunk = sock.recv(65536)
        assert chunk, seen
        seen += chunk
    assert seen.startswith(b"HTTP/1.1 200")
    sock.close()


def test_clients_that_never_read_their_answers_are_cut_after_the_send_timeout(
    fake_model: FakeModel, tmp_path: Path
) -> None:
    (tmp_path / "workspace").mkdir()
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "s.db")]
    args += ["--workers", "1", "--threads", "2", "--send-timeout", "1"]
    with Served.start(tmp_path, args) as served:
        request = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
        readers = []
        for _ in range(4):  # more than there are threads for such requests
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", served.port))
            sock.sendall(request * 2000)  # answers that fill every buffer
            readers.append(sock)
        time.sleep(1.0)
        t0 = time.monotonic()
        with Client(served.url, timeout=10) as c:
            assert c.http.get("/v1/sessions").status_code == 200
            sid = c.new_session()
            assert isinstance(c.turn(sid, "hi").last, TurnComplete)
        assert time.monotonic() - t0 < 4.0
        time.sleep(3.0)  # two threads, four readers: the last are cut by now
        for sock in readers:  # each was cut: its answers end early
            sock.settimeout(10)
            got = 0
            try:
                while chunk := sock.recv(1 << 20):
                    got += len(chunk)
            except ConnectionResetError:
                pass
            sock.close()
            assert got < 2000 * 20_000 / 4  # the answers are 20 kB each
