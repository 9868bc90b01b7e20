"""A sub-agent's turn is priced at its own model's price in its parent's cost.

The parent runs on a cheap model, its sub-agent on one ten times the price; each has
its own loopback model server reporting usage. ``TurnComplete.cost`` of the parent is
its own tokens at its price plus the child's cost as the child reported it, and a
``Budget`` sees the same sum. A child whose turn fails after some responses (a
request refused, a thinking stall) spent tokens too: they count the same way, once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from faultkit import chunk, drive, openai_stream
from loopback import LoopbackServer, Reply

import navi_core
from navi_core import (
    Agent,
    Budget,
    Config,
    Event,
    Pricing,
    StopReason,
    SubAgent,
    SubagentEvent,
    Tool,
    ToolDispatchComplete,
    TurnComplete,
    tool,
)
from navi_core.providers.openai_chat import OpenAIChat

MILLION = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}
SMALL = {"prompt_tokens": 10, "completion_tokens": 2}
#: the parent's own two responses at its price
OWN = 2 * (10 * 1.0 + 2 * 2.0) / 1_000_000
#: a million tokens each way at the child's price (10 and 20 USD per million)
CHILD = 30.0


@tool
def look() -> str:
    """Look something up."""
    return "found"


#: the child's first response: a call of its tool, a million tokens each way
CALL = Reply.sse(openai_stream("", usage=MILLION, tool_calls=[("k1", "look", "{}")]))
#: a request the child's server refuses (not retried: the child's turn fails)
REFUSED = Reply.json(
    400, {"error": {"message": "bad request", "type": "invalid_request_error"}}
)
#: a response that streams only thinking, past the child's limit of 40 characters,
#: before (a moment later) its answer
STALL = Reply(
    body=(
        chunk({"choices": [{"index": 0, "delta": {"reasoning_content": "hmm " * 50}}]}),
        0.05,
        openai_stream("late", usage=MILLION),
    )
)


@contextmanager
def _parent_and_child(
    parent: LoopbackServer,
    child: LoopbackServer,
    config: Config | None = None,
    *,
    child_tools: Sequence[Tool[..., Any]] = (),
) -> Iterator[Agent]:
    with (
        OpenAIChat("big", child.url + "/v1", "k", pricing=Pricing(10.0, 20.0)) as big,
        OpenAIChat(
            "small", parent.url + "/v1", "k", pricing=Pricing(1.0, 2.0)
        ) as small,
    ):
        research = SubAgent(
            "research",
            "Research a task.",
            lambda: Agent(big, tools=child_tools),
            max_thinking_chars=40,
        )
        with Agent(small, tools=[research], config=config or Config()) as agent:
            yield agent


def _parent_replies(parent: LoopbackServer) -> None:
    """The parent's turn: it calls the sub-agent, then answers."""
    parent.add(
        Reply.sse(
            openai_stream(
                "", usage=SMALL, tool_calls=[("c1", "research", '{"task": "t"}')]
            )
        ),
        Reply.sse(openai_stream("final", usage=SMALL)),
    )


def _run(
    parent: LoopbackServer,
    child_replies: Sequence[Reply],
    config: Config | None = None,
) -> tuple[list[Event], TurnComplete[None]]:
    """The parent's turn, its sub-agent's server answering with ``child_replies``:
    every event of it and its ``TurnComplete``."""
    _parent_replies(parent)
    with LoopbackServer() as child:
        child.add(*child_replies)
        with _parent_and_child(parent, child, config, child_tools=[look]) as agent:
            return drive(agent.run("go"))


def _ask(parent: LoopbackServer, config: Config | None = None) -> TurnComplete[None]:
    """The parent's turn: it calls the sub-agent (whose server reports a million
    tokens each way), then answers."""
    return _run(
        parent, [Reply.sse(openai_stream("child answer", usage=MILLION))], config
    )[1]


def _result(events: list[Event]) -> str:
    """The text of the sub-agent call's result, as the parent model reads it."""
    done = next(e for e in events if isinstance(e, ToolDispatchComplete))
    return done.message.tool_results[0].text


def _child_events(events: list[Event]) -> list[Event]:
    return [e.event for e in events if isinstance(e, SubagentEvent)]


def _public(event: Event) -> bool:
    """Whether ``event`` is one of navi_core's public events (nothing internal)."""
    kind = type(event)
    return getattr(navi_core, kind.__name__, None) is kind


def test_the_parents_cost_holds_the_child_at_its_own_price(
    loopback: LoopbackServer,
) -> None:
    done = _ask(loopback)
    assert done.cost is not None
    own = 2 * (10 * 1.0 + 2 * 2.0) / 1_000_000
    assert done.cost.usd == pytest.approx(30.0 + own)
    assert done.usage.input == 1_000_020  # the tokens still add up


def test_a_budget_counts_the_child_at_its_own_price(loopback: LoopbackServer) -> None:
    """$5 is three times what the child would cost at the parent's price, and a
    sixth of what it cost: the budget stops the turn before its next response."""
    done = _ask(loopback, Config(budget=Budget(usd=5.0)))
    assert done.stop_reason is StopReason.BUDGET
    assert len(loopback.requests) == 1


def test_a_child_that_fails_after_a_priced_response_is_counted(
    loopback: LoopbackServer,
) -> None:
    """The child's server answers a tool call (a million tokens each way), then
    refuses its next request: the child's turn fails, and what it spent is in the
    parent's usage and cost, at the child's price, once."""
    events, done = _run(loopback, [CALL, REFUSED])
    assert "bad request" in _result(events)  # the call's error result
    child = _child_events(events)
    assert not any(isinstance(e, TurnComplete) for e in child)  # it failed
    assert all(_public(e) for e in child)
    assert done.stop_reason is StopReason.END_TURN
    assert done.usage.input == 1_000_020
    assert done.usage.output == 1_000_004
    assert done.cost is not None
    assert done.cost.usd == pytest.approx(CHILD + OWN)


def test_a_child_stopped_by_a_thinking_stall_is_counted(
    loopback: LoopbackServer,
) -> None:
    """The child's second response streams only thinking past its limit: the child
    stops (``thinking stall``), and its first response counts in the parent's."""
    events, done = _run(loopback, [CALL, STALL])
    assert _result(events) == "[Sub-agent stopped: thinking stall]"
    assert all(_public(e) for e in _child_events(events))
    assert done.usage.input == 1_000_020
    assert done.cost is not None
    assert done.cost.usd == pytest.approx(CHILD + OWN)


def test_a_child_that_completes_is_counted_once(loopback: LoopbackServer) -> None:
    """A child that calls its tool and answers: both its responses count, through
    its ``TurnComplete`` only."""
    answer = Reply.sse(openai_stream("child answer", usage=MILLION))
    events, done = _run(loopback, [CALL, answer])
    assert _result(events) == "child answer\n\n[Sub-agent stopped: completed]"
    child = _child_events(events)
    assert sum(isinstance(e, TurnComplete) for e in child) == 1
    assert all(_public(e) for e in child)
    assert done.usage.input == 2_000_020
    assert done.cost is not None
    assert done.cost.usd == pytest.approx(2 * CHILD + OWN)


def test_a_budget_counts_a_failed_child(loopback: LoopbackServer) -> None:
    """The failed child spent $30 of a $5 budget: the parent stops before its next
    response."""
    _, done = _run(loopback, [CALL, REFUSED], Config(budget=Budget(usd=5.0)))
    assert done.stop_reason is StopReason.BUDGET
    assert len(loopback.requests) == 1


def test_a_token_budget_counts_a_stalled_child(loopback: LoopbackServer) -> None:
    """A token budget counts the two million tokens of a child that stalled."""
    _, done = _run(loopback, [CALL, STALL], Config(budget=Budget(tokens=100_000)))
    assert done.stop_reason is StopReason.BUDGET
    assert len(loopback.requests) == 1


def test_a_failed_child_counts_its_own_sub_agents(loopback: LoopbackServer) -> None:
    """The child runs a sub-agent of its own (a hundred and two hundred USD per
    million), then fails: the parent counts the grandchild's turn at its price too,
    through the failed child's spend."""
    _parent_replies(loopback)
    with LoopbackServer() as child, LoopbackServer() as grandchild:
        child.add(
            Reply.sse(
                openai_stream(
                    "",
                    usage=MILLION,
                    tool_calls=[("k1", "deeper", '{"task": "t"}')],
                )
            ),
            REFUSED,
        )
        grandchild.add(Reply.sse(openai_stream("deep answer", usage=MILLION)))
        with OpenAIChat(
            "huge", grandchild.url + "/v1", "k", pricing=Pricing(100.0, 200.0)
        ) as huge:
            tools = [SubAgent("deeper", "Go deeper.", lambda: Agent(huge))]
            with _parent_and_child(loopback, child, child_tools=tools) as agent:
                events, done = drive(agent.run("go"))
    assert "bad request" in _result(events)
    assert done.usage.input == 2_000_020
    assert done.cost is not None
    assert done.cost.usd == pytest.approx(300.0 + CHILD + OWN)
