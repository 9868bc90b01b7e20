"""Observers: ``Agent.subscribe`` delivers every event of every turn, bounded, to any thread."""

from __future__ import annotations

import threading
import time

from navi_core import (
    Agent,
    Lagged,
    Scripted,
    Text,
    TextDelta,
    ToolUse,
    TurnComplete,
    tool,
)
from navi_core.events import Event
from navi_core.subscribe import Observers


def test_a_slow_reader_gets_lagged_then_the_newest_events() -> None:
    observers = Observers()
    sub = observers.subscribe(maxsize=3)
    for i in range(10):
        observers.publish("t1", TextDelta(str(i)))
    first = sub.get(timeout=0)
    assert first == ("t1", Lagged(7))
    rest = [sub.get(timeout=0) for _ in range(3)]
    assert rest == [("t1", TextDelta(str(i))) for i in (7, 8, 9)]
    assert sub.get(timeout=0) is None


def test_close_wakes_a_blocked_reader_and_stops_delivery() -> None:
    observers = Observers()
    sub = observers.subscribe()
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.extend(sub), daemon=True)
    reader.start()
    observers.publish("t", TextDelta("a"))
    time.sleep(0.05)
    sub.close()
    reader.join(timeout=2)
    assert not reader.is_alive()
    assert got == [("t", TextDelta("a"))]
    assert not observers  # removed on close
    observers.publish("t", TextDelta("b"))  # no error, nobody listens


def test_publish_never_waits_for_a_reader() -> None:
    observers = Observers()
    observers.subscribe(maxsize=8)  # never read
    t0 = time.perf_counter()
    for _ in range(20_000):
        observers.publish("t", TextDelta("x"))
    assert time.perf_counter() - t0 < 0.5


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_every_event_of_every_turn_reaches_another_thread() -> None:
    provider = Scripted(
        [
            [ToolUse("c1", "add", '{"a": 1, "b": 2}')],
            [Text("three")],
            [Text("again")],
        ]
    )
    agent = Agent(provider, tools=[add])
    sub = agent.subscribe()
    received: list[tuple[str, Event]] = []
    reader = threading.Thread(target=lambda: received.extend(sub), daemon=True)
    reader.start()
    turns: list[tuple[str, list[Event]]] = []
    for prompt in ("add", "more"):
        with agent.run(prompt) as stream:
            events: list[Event] = list(stream)
            turns.append((stream.turn_id, events))
    agent.close()  # ends the subscription
    reader.join(timeout=5)
    expected = [(tid, ev) for tid, evs in turns for ev in evs]
    assert received == expected
    ids = [tid for tid, _ in turns]
    assert len(set(ids)) == 2 and all(ids)
    for tid, evs in turns:
        done = evs[-1]
        assert isinstance(done, TurnComplete) and done.turn_id == tid


def test_a_lagging_subscriber_of_a_real_turn_keeps_the_newest() -> None:
    agent = Agent(Scripted([[Text("x" * 400)]], chunk_chars=4))
    sub = agent.subscribe(maxsize=5)
    with agent.run("go") as stream:
        events: list[Event] = list(stream)
    got = [sub.get(timeout=0) for _ in range(6)]
    assert sub.get(timeout=0) is None
    first = got[0]
    assert first is not None and first[1] == Lagged(len(events) - 5)
    assert [g[1] for g in got[1:] if g is not None] == events[-5:]
    assert isinstance(events[-1], TurnComplete)
    agent.close()
