"""``@tool(timeout=s)``: a call idle that long becomes an error result; progress
(``ToolContext.emit``) restarts the clock, and a hung call never hangs the turn."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from navi_core import (
    Agent,
    Scripted,
    Text,
    ToolContext,
    ToolFinished,
    ToolProgress,
    ToolUse,
    TurnComplete,
    tool,
)
from navi_core.errors import ToolRegistrationError

RELEASE = threading.Event()


@pytest.fixture(autouse=True)
def released() -> object:
    RELEASE.clear()
    yield None
    RELEASE.set()  # the abandoned threads end with the test


@tool(timeout=0.3)
def hangs() -> str:
    """Wait for a release that never comes in time."""
    RELEASE.wait(30)
    return "released"


@tool(timeout=0.3)
def works_slowly(steps: int, context: ToolContext) -> str:
    """Take 0.1 s per step, reporting each."""
    for i in range(steps):
        time.sleep(0.1)
        context.emit(f"step {i}")
    return f"{steps} steps"


@tool
def quick() -> str:
    """Answer at once."""
    return "quick"


def run_turn(agent: Agent, prompt: str = "go") -> list[object]:
    with agent.run(prompt) as stream:
        return list(stream)


def test_a_hung_call_becomes_an_error_result_and_the_turn_goes_on() -> None:
    provider = Scripted(
        [[ToolUse("c1", "hangs", "{}"), ToolUse("c2", "quick", "{}")], [Text("done")]]
    )
    agent = Agent(provider, tools=[hangs, quick])
    t0 = time.monotonic()
    events = run_turn(agent)
    elapsed = time.monotonic() - t0
    assert elapsed < 10  # the tool would hold the turn for 30 s
    finished = {e.call_id: e for e in events if isinstance(e, ToolFinished)}
    assert finished["c1"].is_error and "timeout" in (finished["c1"].error or "")
    assert not finished["c2"].is_error
    assert isinstance(events[-1], TurnComplete)
    results = agent.conversation.messages[-2].tool_results
    text = results[0].parts[0].text  # type: ignore[union-attr]
    assert results[0].is_error and "0.3 s" in text and "still be running" in text
    assert results[1].parts[0].text == "quick"  # type: ignore[union-attr]


def test_progress_restarts_the_idle_clock() -> None:
    provider = Scripted([[ToolUse("c1", "works_slowly", '{"steps": 8}')], [Text("ok")]])
    agent = Agent(provider, tools=[works_slowly])
    events = run_turn(agent)  # 0.8 s in all, never 0.3 s without progress
    progress = [e.text for e in events if isinstance(e, ToolProgress)]
    assert progress == [f"step {i}" for i in range(8)]
    (done,) = [e for e in events if isinstance(e, ToolFinished)]
    assert not done.is_error
    result = agent.conversation.messages[-2].tool_results[0]
    assert result.parts[0].text == "8 steps"  # type: ignore[union-attr]


def test_a_timed_out_call_sees_its_cancel() -> None:
    seen = threading.Event()

    @tool(timeout=0.2)
    def polite(context: ToolContext) -> str:
        """Stop when told."""
        if context.cancelled.wait(10):
            seen.set()
        return "stopped"

    with pytest.raises(TimeoutError):
        polite.invoke({})
    assert seen.wait(5)


def test_an_async_tool_is_cancelled_at_its_timeout() -> None:
    cancelled = threading.Event()

    @tool(timeout=0.2)
    async def sleeper() -> str:
        """Sleep long."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "woke"

    with pytest.raises(TimeoutError):
        sleeper.invoke({})
    assert cancelled.wait(5)


def test_a_call_within_its_limit_returns_its_value_and_errors() -> None:
    @tool(timeout=5)
    def fine(x: int) -> int:
        """Double."""
        if x < 0:
            raise ValueError("negative")
        return 2 * x

    assert fine.invoke({"x": 4}) == 8
    with pytest.raises(ValueError, match="negative"):
        fine.invoke({"x": -1})
    assert fine.idle_timeout == 5 and fine(3) == 6  # calling it directly sets no limit


def test_the_timeout_must_be_positive() -> None:
    with pytest.raises(ToolRegistrationError, match="timeout"):

        @tool(timeout=0)
        def never() -> None:
            """Never."""
