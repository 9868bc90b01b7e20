"""The phase table itself, and that every move the Stream makes is in it."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest

from navi_core import (
    Agent,
    AnyEvent,
    Config,
    Phase,
    ProviderRequest,
    ProviderRetry,
    ProviderStream,
    RateLimited,
    RetryPolicy,
    Scripted,
    StreamPoisoned,
    Text,
    ToolUse,
    tool,
)
from navi_core._turn import machine
from navi_core._turn.machine import Turn, render_transitions, transition_table
from navi_core.events import Event
from navi_core.stream import TRANSITIONS, Trigger


def test_table_matches_the_design() -> None:
    assert dict(TRANSITIONS) == {
        (Phase.TURN_START, Trigger.OPENED): Phase.STREAMING,
        (Phase.TURN_START, Trigger.FINISHED): Phase.DONE,
        (Phase.TURN_START, Trigger.CANCELLED): Phase.DONE,
        (Phase.TURN_START, Trigger.FAILED): Phase.FAILED,
        (Phase.TURN_START, Trigger.APPROVED): Phase.AFTER_RESPONSE,
        (Phase.STREAMING, Trigger.COMPLETED): Phase.AFTER_RESPONSE,
        (Phase.STREAMING, Trigger.STREAM_FAILED): Phase.TURN_START,
        (Phase.STREAMING, Trigger.CANCELLED): Phase.DONE,
        (Phase.STREAMING, Trigger.FAILED): Phase.FAILED,
        (Phase.AFTER_RESPONSE, Trigger.TOOLS_DONE): Phase.TURN_START,
        (Phase.AFTER_RESPONSE, Trigger.STEERED): Phase.TURN_START,
        (Phase.AFTER_RESPONSE, Trigger.FINISHED): Phase.DONE,
        (Phase.AFTER_RESPONSE, Trigger.CANCELLED): Phase.DONE,
        (Phase.AFTER_RESPONSE, Trigger.FAILED): Phase.FAILED,
    }
    sources = {a for a, _ in TRANSITIONS}
    assert sources == set(Phase) - {Phase.DONE, Phase.FAILED}
    assert {b for b in TRANSITIONS.values()} == set(Phase)
    assert set(Trigger) == {t for _, t in TRANSITIONS}


def test_docstring_diagram_is_the_table() -> None:
    doc = machine.__doc__
    assert doc is not None
    diagram = doc.split("this from ``TRANSITIONS``)::")[1]
    lines = [ln.strip() for ln in diagram.strip().splitlines()]
    assert "\n".join(lines) == render_transitions()


def test_readme_table_is_the_table() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "stream.md"
    assert transition_table() in page.read_text()


def test_illegal_move_is_refused_with_both_names() -> None:
    stream = Agent(Scripted([])).run("x")
    with pytest.raises(RuntimeError, match="from TURN_START on 'completed'"):
        stream._turn._move(Trigger.COMPLETED)
    assert stream.phase is Phase.TURN_START


def test_observed_path_of_a_turn_with_tools_and_a_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[Phase, Phase]] = []
    original = Turn._move

    def spy(self: Turn, trigger: Trigger) -> None:
        before = self.phase
        original(self, trigger)
        seen.append((before, self.phase))

    monkeypatch.setattr(Turn, "_move", spy)

    @tool
    def t() -> str:
        """T."""
        return "x"

    p = Scripted([RateLimited("r"), [ToolUse("a", "t", "{}")], [Text("done")]])
    agent = Agent(p, tools=[t], config=Config(retry=RetryPolicy(initial_delay_ms=0)))
    stream = agent.run("x")
    events: list[AnyEvent] = []
    while (ev := stream.next()) is not None:
        events.append(ev)
    assert p.calls == 3
    assert sum(isinstance(e, ProviderRetry) for e in events) == 1
    assert seen == [
        (Phase.TURN_START, Phase.STREAMING),
        (Phase.STREAMING, Phase.AFTER_RESPONSE),
        (Phase.AFTER_RESPONSE, Phase.TURN_START),
        (Phase.TURN_START, Phase.STREAMING),
        (Phase.STREAMING, Phase.AFTER_RESPONSE),
        (Phase.AFTER_RESPONSE, Phase.DONE),
    ]
    assert all(b in TRANSITIONS.values() for _, b in seen)


class _Broken:
    """A response whose produce() raises a bug and whose close() raises too."""

    closed = 0

    def produce(self, queue: deque[Event]) -> bool:
        raise TypeError("bug in produce")

    def close(self) -> None:
        type(self).closed += 1
        raise OSError("socket already gone")


class _BrokenProvider:
    wire = Scripted([]).wire

    def open(self, request: ProviderRequest) -> ProviderStream:
        return _Broken()

    def close(self) -> None:
        pass


def test_a_failing_release_keeps_the_original_error_and_the_failed_phase() -> None:
    agent = Agent(_BrokenProvider())
    stream = agent.run("x")
    with pytest.raises(TypeError, match="bug in produce"):
        stream.next()
    assert stream.phase is Phase.FAILED
    assert _Broken.closed == 1
    with pytest.raises(StreamPoisoned) as info:
        stream.next()
    assert isinstance(info.value.__cause__, TypeError)
    stream.close()
    assert [m.role for m in agent.conversation.messages] == ["user"]
    agent.close()
