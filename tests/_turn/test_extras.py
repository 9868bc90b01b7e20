"""Thinking stall, planning, ``inspect()`` and turn ids."""

from __future__ import annotations

import pytest

from navi_core import (
    Agent,
    Config,
    MemoryStore,
    Message,
    MessageComplete,
    PlanningConfig,
    RateLimited,
    RetryPolicy,
    Scripted,
    Text,
    Thinking,
    ThinkingDelta,
    ThinkingStall,
    ToolUse,
    TurnComplete,
    Usage,
    tool,
)
from navi_core.events import Event
from navi_core.providers.base import ProviderRequest
from navi_core.providers.delta_stream import DeltaStream


@tool
def look(path: str) -> str:
    """Look at a file."""
    return f"contents of {path}"


def drive(agent: Agent, prompt: str = "go") -> list[Event]:
    with agent.run(prompt) as stream:
        return list(stream)


# -- thinking stall ---------------------------------------------------------------


def test_a_thinking_stall_aborts_the_response_and_is_not_retried() -> None:
    provider = Scripted([[Thinking("x" * 500), Text("too late")], [Text("unused")]])
    agent = Agent(provider, config=Config(max_thinking_chars=100))
    seen: list[Event] = []
    with agent.run("think") as stream, pytest.raises(ThinkingStall, match="limit 100"):
        for ev in stream:
            seen.append(ev)
    thought = sum(len(e.text) for e in seen if isinstance(e, ThinkingDelta))
    assert 100 < thought < 500  # aborted as it crossed the limit, not at the end
    assert provider.calls == 1
    assert [m.role for m in agent.conversation.messages] == ["user"]


def test_thinking_then_text_is_not_a_stall() -> None:
    provider = Scripted([[Thinking("x" * 50), Text("answer"), Thinking("y" * 500)]])
    agent = Agent(provider, config=Config(max_thinking_chars=60))
    done = drive(agent)[-1]
    assert isinstance(done, TurnComplete) and done.response == "answer"


def test_no_limit_by_default() -> None:
    provider = Scripted([[Thinking("x" * 5000), Text("fine")]])
    done = drive(Agent(provider))[-1]
    assert isinstance(done, TurnComplete) and done.response == "fine"


# -- planning -----------------------------------------------------------------------


def test_planning_runs_one_tool_less_request_before_a_task() -> None:
    provider = Scripted(
        [
            Message("assistant", (Text("1. look at a.txt 2. answer"),), Usage(5, 4)),
            Message("assistant", (ToolUse("c1", "look", '{"path": "a.txt"}'),),
                    Usage(9, 2)),
            Message("assistant", (Text("a.txt has contents"),), Usage(12, 3)),
        ]
    )  # fmt: skip
    config = Config(planning=PlanningConfig("Write a short numbered plan."))
    agent = Agent(provider, tools=[look], system="You help.", config=config)
    events = drive(agent, "summarise a.txt for me")
    plan_request, first, _ = provider.requests
    assert provider.calls == 3
    assert [m.text for m in plan_request] == ["summarise a.txt for me"]
    plan = events[0]
    assert isinstance(plan, MessageComplete)
    assert plan.message.text == "1. look at a.txt 2. answer"
    assert first[-1].text == "1. look at a.txt 2. answer"  # the plan joined
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.usage == Usage(5, 4) + Usage(9, 2) + Usage(12, 3)
    assert done.iterations == 2  # the plan is not an iteration


def test_the_planning_request_has_no_tools_and_adds_the_prompt() -> None:
    seen: list[tuple[str | None, tuple[str, ...]]] = []

    class Spy(Scripted):
        def open(self, request: ProviderRequest) -> DeltaStream:
            seen.append((request.system, tuple(t.name for t in request.tools)))
            return super().open(request)

    provider = Spy([[Text("plan")], [Text("done")]])
    config = Config(planning=PlanningConfig("Plan first."))
    drive(Agent(provider, tools=[look], system="Be kind.", config=config), "do a task")
    assert seen == [("Be kind.\n\nPlan first.", ()), ("Be kind.", ("look",))]


@pytest.mark.parametrize("prompt", ["hi", "thanks!", "Привет"])
def test_casual_messages_skip_planning(prompt: str) -> None:
    provider = Scripted([[Text("hello!")]])
    config = Config(planning=PlanningConfig("Plan first."))
    done = drive(Agent(provider, config=config), prompt)[-1]
    assert provider.calls == 1
    assert isinstance(done, TurnComplete) and done.response == "hello!"


def test_a_failed_plan_is_skipped() -> None:
    provider = Scripted([RateLimited("slow down", status_code=429), [Text("answer")]])
    config = Config(
        planning=PlanningConfig("Plan first."), retry=RetryPolicy(max_attempts=1)
    )
    events = drive(Agent(provider, config=config), "do the task")
    assert provider.calls == 2
    assert not any(
        isinstance(e, MessageComplete) and e.message.text == "" for e in events
    )
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.response == "answer"


# -- inspect and turn ids --------------------------------------------------------------


def test_inspect_is_exactly_what_the_next_response_is_sent() -> None:
    provider = Scripted([[Text("one")], [Text("two")]])
    agent = Agent(provider, tools=[look], system="sys")
    drive(agent, "first")
    before = agent.inspect()
    assert provider.last_request is not None
    with agent.run("second") as stream:
        preview = agent.inspect()
        list(stream)
    sent = provider.last_request
    assert sent is not None
    assert preview == sent
    assert before != sent
    assert [m.text for m in preview.messages] == ["first", "one", "second"]
    assert preview.system == "sys"
    assert [t.name for t in preview.tools] == ["look"]


def test_turn_ids_are_unique_and_reported() -> None:
    store = MemoryStore()
    agent = Agent(Scripted([[Text("a")], [Text("b")]]), store=store)
    ids = []
    for prompt in ("x", "y"):
        with agent.run(prompt) as stream:
            done = list(stream)[-1]
            assert isinstance(done, TurnComplete)
            assert done.turn_id == stream.turn_id
            ids.append(stream.turn_id)
    assert len(set(ids)) == 2 and all(len(i) == 32 for i in ids)
