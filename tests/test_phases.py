"""The phase table itself, and that every move the Stream makes is in it."""

from __future__ import annotations

import pytest

from navi_core import (
    Agent,
    Config,
    Phase,
    ProviderRetry,
    RateLimited,
    RetryPolicy,
    Scripted,
    Text,
    ToolUse,
    tool,
)
from navi_core.stream import TRANSITIONS, Stream


def test_table_matches_the_design():
    assert TRANSITIONS[Phase.TURN_START] >= {Phase.STREAMING, Phase.FAILED}
    assert TRANSITIONS[Phase.STREAMING] >= {
        Phase.AFTER_RESPONSE,
        Phase.TURN_START,
        Phase.FAILED,
    }
    assert TRANSITIONS[Phase.AFTER_RESPONSE] == {
        Phase.TURN_START,
        Phase.DONE,
        Phase.FAILED,
    }
    assert (
        TRANSITIONS[Phase.DONE] == frozenset()
        and TRANSITIONS[Phase.FAILED] == frozenset()
    )
    assert set(TRANSITIONS) == set(Phase)


def test_illegal_move_is_refused_with_both_names():
    stream = Agent(Scripted([])).run("x")
    with pytest.raises(RuntimeError, match="TURN_START -> AFTER_RESPONSE"):
        stream._enter(Phase.AFTER_RESPONSE)


def test_observed_path_of_a_turn_with_tools_and_a_retry(monkeypatch):
    seen: list[tuple[Phase, Phase]] = []
    original = Stream._enter

    def spy(self, to):
        seen.append((self._phase, to))
        original(self, to)

    monkeypatch.setattr(Stream, "_enter", spy)

    @tool
    def t() -> str:
        """T."""
        return "x"

    p = Scripted([RateLimited("r"), [ToolUse("a", "t", "{}")], [Text("done")]])
    agent = Agent(p, tools=[t], config=Config(retry=RetryPolicy(initial_delay_ms=0)))
    stream = agent.run("x")
    events = []
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
    assert all(b in TRANSITIONS[a] for a, b in seen)
