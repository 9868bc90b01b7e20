"""Disconnects, contention, cancel across workers and graceful shutdown, over gunicorn."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from conftest import model_args
from fake_model import FakeModel
from servekit import TOKEN, Client, Served, read_turn

from navi_core import SQLiteStore
from navi_core.events import StopReason, TurnComplete


def _open_turn(
    served: Served, sid: str, prompt: str, until: bytes = b"event: TextDelta"
) -> socket.socket:
    """POST a turn on a raw socket and read until ``until`` arrived."""
    body = orjson.dumps({"prompt": prompt})
    sock = socket.create_connection(("127.0.0.1", served.port))
    sock.sendall(
        b"POST /v1/sessions/%s/turns HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (sid.encode(), TOKEN.encode(), len(body), body)
    )
    seen = b""
    while until not in seen:
        chunk = sock.recv(65536)
        assert chunk, seen
        seen += chunk
    assert seen.startswith(b"HTTP/1.1 200")
    return sock


def _wait_free(client: Client, sid: str, limit: float) -> float:
    """Seconds until the session takes a new turn (not 409), failing past ``limit``."""
    t0 = time.monotonic()
    while True:
        r = client.http.post(f"/v1/sessions/{sid}/turns", json={"prompt": "after"})
        if r.status_code == 200:
            return time.monotonic() - t0
        assert r.status_code == 409, r.text
        assert time.monotonic() - t0 < limit, "the session stayed busy"
        time.sleep(0.01)


def test_a_client_that_hangs_up_cancels_the_turn_and_frees_the_session(
    served: Served, client: Client, fake_model: FakeModel
) -> None:
    sid = client.new_session()
    closed_before = fake_model.closed_early
    sock = _open_turn(served, sid, "slow")
    sock.close()
    assert _wait_free(client, sid, 5.0) < 0.5
    texts = [(m["role"], m["content"][0]["text"]) for m in client.messages(sid)]
    assert texts[0] == ("user", "slow")  # the prompt stayed; the cut answer did not
    assert ("user", "after") in texts and ("assistant", "echo: after") in texts
    assert not any(t == "tick " * 100 for _, t in texts)
    deadline = time.monotonic() + 5
    while fake_model.closed_early == closed_before:  # the model's response was dropped
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_hang_up_during_a_silent_provider_read_frees_the_session_at_once(
    served: Served, client: Client
) -> None:
    sid = client.new_session()
    sock = _open_turn(served, sid, "silent 5", until=b": turn of session")
    time.sleep(0.2)  # the worker now waits in a read that gets no byte for 5 s
    sock.close()
    assert _wait_free(client, sid, 5.0) < 0.5
    texts = [(m["role"], m["content"][0]["text"]) for m in client.messages(sid)]
    assert texts[0] == ("user", "silent 5") and ("assistant", "finally") not in texts


def test_a_second_driver_gets_409_while_a_turn_runs(
    served: Served, client: Client
) -> None:
    sid = client.new_session()
    sock = _open_turn(served, sid, "slow")  # 5 s: outlasts the contention
    statuses: list[int] = []
    bodies: list[dict[str, object]] = []
    lock = threading.Lock()

    def contend() -> None:
        with served.client() as c:
            for path, body in (("turns", {"prompt": "me too"}), ("compact", {})):
                r = c.http.post(f"/v1/sessions/{sid}/{path}", json=body)
                with lock:
                    statuses.append(r.status_code)
                    bodies.append(r.json())

    threads = [threading.Thread(target=contend) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sock.close()
    assert statuses == [409] * 12
    assert all(b["error"] == "session_busy" for b in bodies)
    _wait_free(client, sid, 5.0)
    users = [
        m["content"][0]["text"] for m in client.messages(sid) if m["role"] == "user"
    ]
    assert "me too" not in users


@pytest.fixture
def sync_served(fake_model: FakeModel, tmp_path: Path) -> Iterator[Served]:
    """Two workers of one turn thread each."""
    (tmp_path / "workspace").mkdir()
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "s.db")]
    with Served.start(
        tmp_path, [*args, "--workers", "2", "--threads", "1", "--grace", "0.5"]
    ) as s:
        yield s


def test_cancel_reaches_the_turn_in_another_worker(
    sync_served: Served, fake_model: FakeModel, tmp_path: Path
) -> None:
    # a second server on the same file: its workers are surely not the driver's
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "s.db")]
    with (
        Served.start(tmp_path, [*args, "--threads", "1"]) as other,
        sync_served.client() as a,
        other.client() as b,
    ):
        sid = a.new_session()
        with a.http.stream(
            "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "slow"}
        ) as r:
            chunks = r.iter_raw()
            next(chunks)
            t0 = time.monotonic()
            c = b.http.post(f"/v1/sessions/{sid}/cancel")
            assert c.status_code == 202 and c.json() == {"running": True}
            result = read_turn(chunks)
        assert time.monotonic() - t0 < 1.0
        done = result.last
        assert (
            isinstance(done, TurnComplete) and done.stop_reason is StopReason.CANCELLED
        )
        # what streamed before the cancel landed is kept, marked cancelled
        user, *answer = b.messages(sid)
        assert user["role"] == "user"
        assert len(answer) <= 1
        for m in answer:
            assert (m["role"], m["stop_reason"]) == ("assistant", "cancelled")
            text = "".join(c["text"] for c in m["content"] if c["type"] == "text")
            assert text.startswith("tick") and len(text) < 100 * len("tick ")


def test_sigterm_cancels_a_long_turn_after_the_grace_period(
    sync_served: Served, tmp_path: Path
) -> None:
    with sync_served.client() as a:
        sid = a.new_session()
        a.turn(sid, "please use tool")  # committed before the shutdown
        with a.http.stream(
            "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "slow"}
        ) as r:
            chunks = r.iter_raw()
            next(chunks)
            t0 = time.monotonic()
            stopper = threading.Thread(target=sync_served.terminate)
            stopper.start()
            result = read_turn(chunks)
            elapsed = time.monotonic() - t0
        stopper.join()
    assert sync_served.proc.returncode == 0
    done = result.last
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.CANCELLED
    assert 0.4 < elapsed < 3.0  # grace 0.5 s, the whole answer would take 5 s
    with SQLiteStore(tmp_path / "s.db") as store:  # the server is gone: read the file
        stored = store.load(sid).messages
    # the cancelled turn keeps the text it streamed as its answer
    assert [m.role for m in stored] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert stored[-1].stop_reason == "cancelled" and stored[-1].text.startswith("tick")
    assert stored[-2].text == "slow" and stored[3].text.startswith("tool said")


def test_sigterm_lets_a_short_turn_finish(
    fake_model: FakeModel, tmp_path: Path
) -> None:
    (tmp_path / "workspace").mkdir()
    db = str(tmp_path / "s.db")
    args = [
        *model_args(fake_model, tmp_path),
        "--db",
        db,
        "--threads",
        "2",
        "--grace",
        "10",
    ]
    with Served.start(tmp_path, args) as served, served.client() as a:
        sid = a.new_session()
        with a.http.stream(
            "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "slow 20"}
        ) as r:
            chunks = r.iter_raw()
            next(chunks)
            stopper = threading.Thread(target=served.terminate)
            stopper.start()
            time.sleep(0.3)
            # a draining server takes no new connection
            with pytest.raises(httpx.HTTPError):
                httpx.post(
                    served.url + "/v1/sessions",
                    timeout=1,
                    headers={"Authorization": f"Bearer {TOKEN}"},
                ).raise_for_status()
            result = read_turn(chunks)
        stopper.join()
    done = result.last
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.END_TURN
    with Served.start(tmp_path, args) as again, again.client() as b:
        texts = [(m["role"], m["content"][0]["text"]) for m in b.messages(sid)]
    assert texts == [("user", "slow 20"), ("assistant", "tick " * 20)]
