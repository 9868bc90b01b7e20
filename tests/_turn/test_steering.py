"""Steering with acknowledgement, on a real SQLite file: every disposition, the bound
on the queue, the order a next turn applies them in, and no loss on close."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from navi_core import (
    Agent,
    Config,
    Scripted,
    SQLiteStore,
    SteerDisposition,
    Steered,
    SteeringQueueFull,
    TextDelta,
    TurnComplete,
)
from navi_core.events import Event
from navi_core.stream import Stream


def texts(agent: Agent) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in agent.conversation.messages]


def drain(stream: Stream) -> list[Event]:
    return list(stream)


def test_steering_a_running_turn_is_queued_and_joins_before_the_next_response(
    sqlite_stores: Callable[..., SQLiteStore],
    tmp_path: Path,
) -> None:
    provider = Scripted(["first answer", "answer to the steer"])
    with Agent(provider, store=sqlite_stores()) as agent:
        stream = agent.run("question")
        while not isinstance(stream.next(), TextDelta):
            pass
        assert agent.steer("also this") is SteerDisposition.QUEUED
        events = drain(stream)
        steered = [e for e in events if isinstance(e, Steered)]
        assert [e.message.text for e in steered] == ["also this"]
        done = events[-1]
        assert isinstance(done, TurnComplete) and done.response == "answer to the steer"
        assert texts(agent) == [
            ("user", "question"),
            ("assistant", "first answer"),
            ("user", "also this"),
            ("assistant", "answer to the steer"),
        ]
        # the second request carried the steering message
        assert provider.requests[1][-1].text == "also this"


def test_steering_with_no_turn_running_is_applied_first_by_the_next_run(
    sqlite_stores: Callable[..., SQLiteStore],
    tmp_path: Path,
) -> None:
    provider = Scripted(["answer"])
    with Agent(provider, store=sqlite_stores()) as agent:
        assert agent.steer("one") is SteerDisposition.NEXT_TURN
        assert agent.steer("two") is SteerDisposition.NEXT_TURN
        stream = agent.run("prompt")
        events = drain(stream)
        assert [e.message.text for e in events if isinstance(e, Steered)] == [
            "one",
            "two",
        ]
        assert texts(agent) == [
            ("user", "one"),
            ("user", "two"),
            ("user", "prompt"),
            ("assistant", "answer"),
        ]


def test_resume_applies_waiting_steering_and_answers_it(
    sqlite_stores: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    provider = Scripted(["hello", "answer to the steer"])
    with Agent(provider, store=sqlite_stores()) as agent:
        drain(agent.run("hi"))
        assert agent.steer("and now?") is SteerDisposition.NEXT_TURN
        events = drain(agent.resume())
        assert any(isinstance(e, Steered) for e in events)
        done = events[-1]
        assert isinstance(done, TurnComplete) and done.response == "answer to the steer"


def test_the_queue_is_bounded_by_max_steering(
    sqlite_stores: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    config = Config(max_steering=3)
    with Agent(Scripted([]), store=sqlite_stores(), config=config) as agent:
        for i in range(3):
            agent.steer(f"m{i}")
        with pytest.raises(SteeringQueueFull, match="3 steering messages"):
            agent.steer("one too many")
        assert len(agent.steering) == 3


def test_steering_never_applied_is_stored_by_close(
    sqlite_stores: Callable[..., SQLiteStore], tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    agent = Agent(Scripted(["answer"]), store=sqlite_stores(db))
    drain(agent.run("hi"))
    agent.steer("left behind")
    session = agent.session_id
    agent.close()
    again = Agent(Scripted(["answer to it"]), store=sqlite_stores(db), session=session)
    assert texts(again)[-1] == ("user", "left behind")
    events = drain(again.resume())
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.response == "answer to it"
    again.close()


def test_steering_during_a_cancelled_turn_waits_for_the_next_one(
    sqlite_stores: Callable[..., SQLiteStore],
    tmp_path: Path,
) -> None:
    provider = Scripted(["a long answer that is cancelled", "next"])
    with Agent(provider, store=sqlite_stores()) as agent:
        stream = agent.run("q1")
        stream.next()
        assert agent.steer("queued") is SteerDisposition.QUEUED
        stream.cancel()
        drain(stream)
        assert ("user", "queued") not in texts(agent)
        drain(agent.run("q2"))
        assert texts(agent)[-3:] == [
            ("user", "queued"),
            ("user", "q2"),
            ("assistant", "next"),
        ]


def test_steer_refuses_a_message_that_is_not_from_the_user() -> None:
    from navi_core import Message, Text

    with Agent(Scripted([])) as agent, pytest.raises(ValueError, match="user message"):
        agent.steer(Message("assistant", (Text("no"),)))
