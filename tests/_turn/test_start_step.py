"""The turn's first step: start hooks off the driving thread, then what ``resume()``
found; a turn without hooks starts no thread for them."""

from __future__ import annotations

import threading
import time

import pytest

from navi_core import (
    PENDING,
    Agent,
    Hook,
    Phase,
    Scripted,
    StopReason,
    Text,
    TextDelta,
    TurnComplete,
    TurnInfo,
)
from navi_core._turn import offload
from navi_core.events import Event


def test_a_turn_without_hooks_starts_no_worker_for_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[object] = []
    real = offload.Worker.__init__

    def counting(self: offload.Worker, *args: object) -> None:
        made.append(self)
        real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(offload.Worker, "__init__", counting)
    agent = Agent(Scripted([[Text("plain")]]))
    with agent.run("go") as stream:
        assert [type(e) for e in stream][-1] is TurnComplete
    assert made == []
    hooked = Agent(Scripted([[Text("hooked")]]), hooks=[Hook()])
    with hooked.run("go") as stream:
        list(stream)
    assert len(made) == 1  # the start hooks ran on the stream's worker


def test_a_slow_on_turn_start_is_waited_for_within_next_timeout() -> None:
    """``next(timeout)`` returns ``PENDING`` while the start hooks run, and the turn
    goes on once they returned; the request opens after them."""
    release = threading.Event()
    order: list[str] = []
    provider = Scripted([[Text("after the hook")]])

    class Slow(Hook):
        def on_turn_start(self, turn: TurnInfo) -> None:
            release.wait(5)
            order.append(f"hook, {provider.calls} requests")

    agent = Agent(provider, hooks=[Slow()])
    with agent.run("go") as stream:
        t0 = time.monotonic()
        assert stream.next(timeout=0.02) is PENDING
        assert time.monotonic() - t0 < 1.0
        assert stream.phase is Phase.TURN_START
        release.set()
        events: list[Event] = []
        while (ev := stream.next(timeout=1)) is not None:
            if ev is not PENDING:
                events.append(ev)
    assert order == ["hook, 0 requests"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "after the hook"
    )
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.END_TURN


def test_an_exception_escaping_the_start_hooks_fails_the_turn() -> None:
    class Interrupts(Hook):
        def on_turn_start(self, turn: TurnInfo) -> None:
            raise KeyboardInterrupt

    provider = Scripted([[Text("never")]])
    agent = Agent(provider, hooks=[Interrupts()])
    with agent.run("go") as stream, pytest.raises(KeyboardInterrupt):
        list(stream)
    assert stream.phase is Phase.FAILED and provider.calls == 0


def test_a_resume_with_nothing_to_do_runs_its_start_hooks_and_ends() -> None:
    """What ``resume()`` found is looked at in the first step, after the start hooks:
    a finished session ends the turn there (END_TURN), with no request."""
    seen: list[str] = []

    class Note(Hook):
        def on_turn_start(self, turn: TurnInfo) -> None:
            seen.append(f"start {turn.prompt}")

        def on_completion(self, turn: TurnComplete) -> None:
            seen.append(f"completion {turn.stop_reason}")

    provider = Scripted([[Text("answer")]])
    agent = Agent(provider, hooks=[Note()])
    with agent.run("go") as stream:
        list(stream)
    seen.clear()
    stream = agent.resume()
    assert stream.running and stream.phase is Phase.TURN_START  # nothing ran yet
    with stream:
        events = list(stream)
    assert [type(e) for e in events] == [TurnComplete]
    done = events[0]
    assert isinstance(done, TurnComplete)
    assert (done.stop_reason, done.response) == (StopReason.END_TURN, "answer")
    assert seen == ["start None", "completion end_turn"]
    assert provider.calls == 1
