"""A turn that waits for a turn thread counts as running from the moment it is read:
cancel stops it before it calls the model, a steer lands after its prompt, from the
worker that holds it or from another server on the same database."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from conftest import model_args
from fake_model import FakeModel
from servekit import Client, Served, TurnResult, read_turn

from navi_core.events import StopReason, TurnComplete


@contextmanager
def _servers(
    fake_model: FakeModel, tmp_path: Path, where: str
) -> Iterator[tuple[Served, Served]]:
    """One worker of one turn thread, and the server that sends cancel and steer:
    the same one, or a second on the same database file."""
    (tmp_path / "workspace").mkdir()
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "s.db")]
    args += ["--workers", "1", "--threads", "1"]
    with ExitStack() as stack:
        held = stack.enter_context(Served.start(tmp_path, args))
        if where == "same":
            yield held, held
        else:
            yield held, stack.enter_context(Served.start(tmp_path, args))


@contextmanager
def _busy_thread(c: Client, sid: str) -> Iterator[None]:
    """A slow turn of ``sid`` (20 s) holds the only turn thread until the block ends,
    when it is cancelled."""
    body = {"prompt": "slow 400"}
    with c.http.stream("POST", f"/v1/sessions/{sid}/turns", json=body) as r:
        chunks = r.iter_raw()
        seen = b""
        while b"event: TextDelta" not in seen:
            seen += next(chunks)
        try:
            yield
        finally:
            c.http.post(f"/v1/sessions/{sid}/cancel")
            read_turn(chunks)


def _queue_turn(
    served: Served, sid: str, prompt: str
) -> tuple[threading.Thread, list[TurnResult]]:
    """POST a turn of ``sid`` in a thread; returns once the server accepted it (its
    prompt is stored) while it waits for a turn thread."""
    results: list[TurnResult] = []

    def run() -> None:
        with served.client() as c:
            results.append(c.turn(sid, prompt))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    with served.client() as c:
        deadline = time.monotonic() + 3
        while not any(m["role"] == "user" for m in c.messages(sid)):
            assert time.monotonic() < deadline, "the turn was not accepted"
            time.sleep(0.02)
    assert results == [], "the turn ran at once: no turn thread was busy"
    return thread, results


@pytest.mark.parametrize("where", ["same", "another_server"])
def test_a_queued_turn_is_cancelled_before_it_calls_the_model(
    fake_model: FakeModel, tmp_path: Path, where: str
) -> None:
    with (
        _servers(fake_model, tmp_path, where) as (held, other),
        held.client() as a,
        other.client() as b,
    ):
        busy, queued = a.new_session(), a.new_session()
        with _busy_thread(a, busy):
            asked = fake_model.requests
            thread, results = _queue_turn(held, queued, "hello")
            r = b.http.post(f"/v1/sessions/{queued}/cancel")
            assert (r.status_code, r.json()) == (202, {"running": True})
        thread.join(10)
        (result,) = results
        done = result.last
        assert isinstance(done, TurnComplete)
        assert done.stop_reason is StopReason.CANCELLED
        assert fake_model.requests == asked  # only the busy turn asked the model
        assert [(m["role"], m["content"][0]["text"]) for m in b.messages(queued)] == [
            ("user", "hello")
        ]


@pytest.mark.parametrize("where", ["same", "another_server"])
def test_a_steer_sent_after_a_queued_turn_follows_its_prompt(
    fake_model: FakeModel, tmp_path: Path, where: str
) -> None:
    with (
        _servers(fake_model, tmp_path, where) as (held, other),
        held.client() as a,
        other.client() as b,
    ):
        busy, queued = a.new_session(), a.new_session()
        with _busy_thread(a, busy):
            thread, results = _queue_turn(held, queued, "hello")
            r = b.http.post(f"/v1/sessions/{queued}/steer", json={"text": "and more"})
            assert (r.status_code, r.json()) == (202, {"disposition": "queued"})
        thread.join(10)
        (result,) = results
        done = result.last
        assert isinstance(done, TurnComplete)
        assert done.stop_reason is StopReason.END_TURN
        assert "Steered" in result.names()
        texts = [(m["role"], m["content"][0]["text"]) for m in b.messages(queued)]
        assert texts == [
            ("user", "hello"),
            ("user", "and more"),
            ("assistant", "echo: and more"),
        ]
