"""Events are immutable values, pattern-matchable, and the union names them all."""

from __future__ import annotations

import dataclasses
import typing

import pytest

import navi_core.events as events_mod
from navi_core import (
    Message,
    StopReason,
    Text,
    TextDelta,
    ToolCallStart,
    TurnComplete,
    Usage,
)
from navi_core.events import AnyEvent, Event


def all_event_classes() -> set[type[Event]]:
    return {
        obj
        for obj in vars(events_mod).values()
        if isinstance(obj, type) and issubclass(obj, Event) and obj is not Event
    }


def test_any_event_names_every_event_class() -> None:
    assert set(typing.get_args(AnyEvent)) == all_event_classes()


EVENT_CLASSES = sorted(all_event_classes(), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", EVENT_CLASSES)
def test_every_event_is_frozen_and_slotted(cls: type[Event]) -> None:
    # "is True": a bare is_dataclass() would narrow type[Event] to Never for mypy,
    # which then skips the rest of this test
    assert dataclasses.is_dataclass(cls) is True
    # set by @dataclass at run time; typeshed does not declare it
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    # slotted all the way up: instances carry no __dict__
    assert "__slots__" in vars(cls)
    assert all("__dict__" not in vars(k) for k in cls.__mro__ if k is not object)


def test_events_cannot_be_changed() -> None:
    ev = TextDelta("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.text = "b"  # type: ignore[misc]  # the write must fail: under test


def test_positional_and_keyword_patterns_match() -> None:
    ev = ToolCallStart(2, "id", "name")
    match ev:
        case ToolCallStart(i, call_id, name=n):
            assert (i, call_id, n) == (2, "id", "name")
        case _:
            pytest.fail("no match")
    match TextDelta("hi"):
        case TextDelta(text=t):
            assert t == "hi"


def test_turn_complete_holds_values() -> None:
    # a list on purpose: Message stores its content as a tuple
    msg = Message("assistant", [Text("x")])  # type: ignore[arg-type]
    assert isinstance(msg.content, tuple)
    done = TurnComplete(StopReason.END_TURN, "x", 1, 0, Usage(1, 2))
    assert str(done.stop_reason) == "end_turn" and done.stop_reason == "end_turn"
    assert hash(done) == hash(TurnComplete(StopReason.END_TURN, "x", 1, 0, Usage(1, 2)))
