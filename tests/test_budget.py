"""``Config.budget``: a turn stops before a request that would start over budget, with
``StopReason.BUDGET``, nothing sent and the conversation well-formed; over real HTTP
for both APIs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from providers.wire_streams import anthropic_body, openai_body

from navi_core import (
    Agent,
    Anthropic,
    Budget,
    Config,
    OpenAIChat,
    Pricing,
    RetryPolicy,
    StopReason,
    ToolResult,
    tool,
)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


PRICE = Pricing(input=1.0, output=1.0)  # one micro-dollar a token


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    providers: list[Any] = []
    yield providers
    for p in providers:
        p.close()


def openai(url: str) -> OpenAIChat:
    return OpenAIChat("gpt-test", base_url=url + "/v1", api_key="k", pricing=PRICE)


def anthropic(url: str) -> Anthropic:
    return Anthropic("claude-test", base_url=url, api_key="k", pricing=PRICE)


def openai_call() -> Reply:
    usage = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
    return Reply.sse(
        openai_body(tool_calls=[("c1", "lookup", ['{"key": "a"}'])], usage=usage)
    )


def anthropic_call() -> Reply:
    usage = {"input_tokens": 1000, "output_tokens": 1}
    body = anthropic_body(
        [("tool", ("c1", "lookup", ['{"key": "a"}']))],
        stop="tool_use",
        usage=usage,
        output_tokens=50,
    )
    return Reply.sse(body)


APIS = pytest.mark.parametrize(
    ("make", "call"),
    [(openai, openai_call), (anthropic, anthropic_call)],
    ids=["openai", "anthropic"],
)


def config(budget: Budget) -> Config:
    return Config(budget=budget, retry=RetryPolicy(max_attempts=1))


@APIS
@pytest.mark.parametrize(
    "budget", [Budget(tokens=1100), Budget(usd=0.0011)], ids=["tokens", "usd"]
)
def test_the_turn_stops_before_a_request_that_would_pass_the_budget(
    loopback: LoopbackServer, opened: list[Any], make: Any, call: Any, budget: Budget
) -> None:
    loopback.add(call(), Reply.sse(openai_body(["never sent"])))
    opened.append(provider := make(loopback.url))
    with Agent(provider, tools=[lookup], config=config(budget)) as agent:
        done = agent.ask("look a up")
        messages = agent.conversation.messages
    assert done.stop_reason is StopReason.BUDGET
    assert len(loopback.requests) == 1  # the second request was never sent
    assert (done.iterations, done.tool_calls) == (1, 1)
    assert done.usage.total == 1050
    assert done.cost == PRICE.cost_of(done.usage)
    # the pending tool result was committed: the history is well-formed
    last = messages[-1]
    assert last.role == "user"
    assert [b.tool_use_id for b in last.content if isinstance(b, ToolResult)] == ["c1"]


@APIS
def test_a_budget_below_the_first_prompt_sends_nothing(
    loopback: LoopbackServer, opened: list[Any], make: Any, call: Any
) -> None:
    opened.append(provider := make(loopback.url))
    with Agent(provider, config=config(Budget(tokens=3))) as agent:
        done = agent.ask("a prompt that is estimated above three tokens for sure")
        roles = [m.role for m in agent.conversation.messages]
    assert done.stop_reason is StopReason.BUDGET
    assert (done.iterations, done.response) == (0, "")
    assert loopback.requests == []
    assert roles == ["user"]


@APIS
def test_a_budget_with_room_lets_the_turn_finish(
    loopback: LoopbackServer, opened: list[Any], make: Any, call: Any
) -> None:
    answer = (
        openai_body(["done"])
        if make is openai
        else anthropic_body([("text", ["done"])])
    )
    loopback.add(call(), Reply.sse(answer))
    opened.append(provider := make(loopback.url))
    budget = Budget(usd=1.0, tokens=1_000_000)
    with Agent(provider, tools=[lookup], config=config(budget)) as agent:
        done = agent.ask("look a up")
    assert done.stop_reason is StopReason.END_TURN
    assert len(loopback.requests) == 2


def test_a_usd_budget_needs_a_known_price(loopback: LoopbackServer) -> None:
    provider = OpenAIChat("gpt-test", base_url=loopback.url + "/v1", api_key="k")
    try:
        agent = Agent(provider, config=config(Budget(usd=1.0)))
        with agent, pytest.raises(ValueError, match=r"needs the model's price"):
            agent.ask("hi")
    finally:
        provider.close()
    assert loopback.requests == []


def test_budget_values_are_checked() -> None:
    with pytest.raises(ValueError):
        Budget(usd=-1.0)
    with pytest.raises(ValueError):
        Budget(tokens=-1)
