"""What a host with no event loop does to a stream besides driving it well.

A GUI or a game engine drops a view with its stream mid-turn, starts turns from
more than one thread, or passes ``math.inf`` for "no limit". None of these may leave
a thread or a connection behind, start two turns on one session, or fail the turn
with an error about navi_core's insides. Real HTTP on loopback throughout.
"""

from __future__ import annotations

import gc
import math
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultkit import chunk
from loopback import LoopbackServer, Reply

from navi_core import (
    PENDING,
    Agent,
    Config,
    OpenAIChat,
    Phase,
    Scripted,
    StopReason,
    Stream,
    Text,
    TurnComplete,
)
from navi_core.store.sqlite import SQLiteStore


def _slow_answer(words: int, pause: float) -> Reply:
    """A chat-completions answer of ``words`` words, ``pause`` seconds apart."""
    body: list[bytes | float] = []
    for i in range(words):
        delta = {"content": f"w{i} "}
        body += [chunk({"choices": [{"index": 0, "delta": delta}]}), pause]
    stop = {"index": 0, "delta": {}, "finish_reason": "stop"}
    body += [chunk({"choices": [stop]}), b"data: [DONE]\n\n"]
    return Reply(body=body)


def _established_to(port: int) -> int:
    """How many TCP connections to 127.0.0.1:``port`` are established (the
    client's ends, from ``/proc/net/tcp``)."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    remote = f"0100007F:{port:04X}"
    return sum(1 for row in rows if row.split()[2] == remote and row.split()[3] == "01")


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "navi-stream"]


@pytest.fixture
def provider(loopback: LoopbackServer) -> Iterator[OpenAIChat]:
    with OpenAIChat("m", loopback.url + "/v1", "k") as provider:
        yield provider


def test_a_stream_dropped_mid_turn_leaves_no_thread_or_connection(
    loopback: LoopbackServer, provider: OpenAIChat
) -> None:
    """Driven with ``next(timeout)`` (its reads run on a worker thread), then
    dropped without ``close()`` while the server is still sending."""
    loopback.add(_slow_answer(200, 0.02))
    before = _workers()
    agent = Agent(provider)
    stream = agent.run("go on")
    seen = 0
    while seen < 5:
        seen += stream.next(timeout=0.01) is not PENDING
    assert len(_workers()) == len(before) + 1
    del stream, agent
    # the socket is freed by the garbage collector, with the ResourceWarning any
    # socket that was never closed gives (close() or a with block closes it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
        deadline = time.monotonic() + 5
        while len(_workers()) > len(before) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _workers() == before
        deadline = time.monotonic() + 5
        while _established_to(loopback.port) and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.02)
        for _ in range(3):  # whatever still held the socket: freed here, not later
            gc.collect()
            time.sleep(0.02)
    assert _established_to(loopback.port) == 0


def _start_from_two_threads(agent: Agent) -> tuple[list[Stream[None]], int]:
    """``agent.run()`` from two threads released at once: the streams started and
    how many calls were refused with a ``RuntimeError``."""
    barrier = threading.Barrier(2)
    started: list[Stream[None]] = []
    refused: list[RuntimeError] = []

    def start(prompt: str) -> None:
        barrier.wait()
        try:
            started.append(agent.run(prompt))
        except RuntimeError as exc:
            refused.append(exc)

    threads = [threading.Thread(target=start, args=(p,)) for p in "XY"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # refused while the other starts its turn, or once it has started it
    assert all("another thread" in str(e) or "still running" in str(e) for e in refused)
    return started, len(refused)


def test_two_threads_starting_a_turn_of_one_agent_start_one(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "navi.db") as store:
        for _ in range(20):
            agent = Agent(Scripted([[Text("a")], [Text("b")]]), store=store)
            started, refused = _start_from_two_threads(agent)
            assert (len(started), refused) == (1, 1)
            with started[0] as stream:
                assert stream.result().response == "a"
            roles = [m.role for m in agent.conversation.messages]
            assert roles == ["user", "assistant"]  # one prompt, one answer
            agent.close()


def test_a_second_thread_in_next_gets_a_clear_error_and_the_turn_goes_on(
    loopback: LoopbackServer, provider: OpenAIChat
) -> None:
    loopback.add(_slow_answer(100, 0.002))
    agent = Agent(provider)
    stream = agent.run("go on")
    errors: list[BaseException] = []
    texts: list[str] = []

    def drive(timeout: float | None) -> None:
        try:
            while (ev := stream.next(timeout)) is not None:
                if isinstance(ev, TurnComplete):
                    texts.append(ev.response)
        except RuntimeError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=(t,)) for t in (None, 0.001)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert stream.phase is Phase.DONE
    assert texts == ["".join(f"w{i} " for i in range(100))]
    assert errors and all("another thread" in str(e) for e in errors)
    stream.close()
    agent.close()


@pytest.mark.parametrize("timeout", [math.inf, 1e300, float(threading.TIMEOUT_MAX)])
def test_an_unbounded_timeout_means_no_limit(
    loopback: LoopbackServer, provider: OpenAIChat, timeout: float
) -> None:
    loopback.add(_slow_answer(3, 0.01))
    with Agent(provider) as agent, agent.run("hi") as stream:
        while (ev := stream.next(timeout)) is not None:
            assert ev is not PENDING
        assert stream.phase is Phase.DONE
    with Agent(Scripted([[Text("Hello.")]])) as agent, agent.run("hi") as stream:
        done = stream.result(timeout=timeout)
        assert done.stop_reason is StopReason.END_TURN and done.response == "Hello."


def test_a_nan_timeout_is_refused_and_the_turn_goes_on() -> None:
    with Agent(Scripted([[Text("Hello.")]])) as agent, agent.run("hi") as stream:
        with pytest.raises(ValueError, match="NaN"):
            stream.next(math.nan)
        assert stream.result().response == "Hello."


def test_an_unbounded_turn_timeout_sets_no_timer() -> None:
    """``Config(turn_timeout=math.inf)`` is no limit: no timer thread fails on it."""
    config = Config(turn_timeout=math.inf)
    with Agent(Scripted([[Text("Hello.")]]), config=config) as agent:
        assert agent.run("hi").result().response == "Hello."


def test_a_nan_result_timeout_is_refused() -> None:
    with Agent(Scripted([[Text("Hello.")]])) as agent, agent.run("hi") as stream:
        with pytest.raises(ValueError, match="NaN"):
            stream.result(math.nan)
        assert stream.result(1.0).response == "Hello."
