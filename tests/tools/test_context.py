"""``ToolContext``: what a running call knows of its turn."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from navi_core import (
    Agent,
    Scripted,
    Text,
    ToolCall,
    ToolContext,
    ToolSpec,
    ToolUse,
    TurnComplete,
    tool,
)

SEEN: list[tuple[str, str]] = []


@tool
def where(context: ToolContext) -> str:
    """Say which turn runs this call."""
    SEEN.append((context.call_id, context.turn_id))
    return context.turn_id


class Batch:
    """A tool source: its calls carry the turn id too."""

    def tools(self) -> Sequence[ToolSpec]:
        return [ToolSpec("batch", "Batch.", {"type": "object", "properties": {}})]

    def call_batch(self, calls: Sequence[ToolCall]) -> Sequence[Any]:
        SEEN.extend((c.id, c.turn_id) for c in calls)
        return ["ok" for _ in calls]


def test_each_call_knows_the_turn_that_made_it() -> None:
    SEEN.clear()
    provider = Scripted(
        [
            [ToolUse("c1", "where", "{}"), ToolUse("c2", "batch", "{}")],
            [Text("one")],
            [ToolUse("c3", "where", "{}")],
            [Text("two")],
        ]
    )
    agent = Agent(provider, tools=[where, Batch()])
    turns = []
    for prompt in ("first", "second"):
        with agent.run(prompt) as stream:
            done = list(stream)[-1]
        assert isinstance(done, TurnComplete) and done.turn_id == stream.turn_id
        turns.append(done.turn_id)
    assert turns[0] != turns[1]
    assert sorted(SEEN) == [("c1", turns[0]), ("c2", turns[0]), ("c3", turns[1])]


def test_a_context_made_by_hand_keeps_its_positional_shape() -> None:
    cancelled = threading.Event()
    context = ToolContext("c1", "where", "s1", cancelled)
    assert (context.call_id, context.name, context.session_id) == ("c1", "where", "s1")
    assert context.cancelled is cancelled and context.turn_id == ""
    assert where.invoke({}) == ""  # outside a turn, an inert context
