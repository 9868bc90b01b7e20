"""A sub-agent's turn is priced at its own model's price in its parent's cost.

The parent runs on a cheap model, its sub-agent on one ten times the price; each has
its own loopback model server reporting usage. ``TurnComplete.cost`` of the parent is
its own tokens at its price plus the child's cost as the child reported it, and a
``Budget`` sees the same sum.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from faultkit import openai_stream
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    Budget,
    Config,
    Pricing,
    StopReason,
    SubAgent,
    TurnComplete,
)
from navi_core.providers.openai_chat import OpenAIChat

MILLION = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}
SMALL = {"prompt_tokens": 10, "completion_tokens": 2}


@contextmanager
def _parent_and_child(
    parent: LoopbackServer, child: LoopbackServer, config: Config | None = None
) -> Iterator[Agent]:
    with (
        OpenAIChat("big", child.url + "/v1", "k", pricing=Pricing(10.0, 20.0)) as big,
        OpenAIChat(
            "small", parent.url + "/v1", "k", pricing=Pricing(1.0, 2.0)
        ) as small,
    ):
        research = SubAgent("research", "Research a task.", lambda: Agent(big))
        with Agent(small, tools=[research], config=config or Config()) as agent:
            yield agent


def _ask(parent: LoopbackServer, config: Config | None = None) -> TurnComplete[None]:
    """The parent's turn: it calls the sub-agent (whose server reports a million
    tokens each way), then answers."""
    parent.add(
        Reply.sse(
            openai_stream(
                "", usage=SMALL, tool_calls=[("c1", "research", '{"task": "t"}')]
            )
        ),
        Reply.sse(openai_stream("final", usage=SMALL)),
    )
    with LoopbackServer() as child:
        child.add(Reply.sse(openai_stream("child answer", usage=MILLION)))
        with _parent_and_child(parent, child, config) as agent:
            return agent.ask("go")


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
