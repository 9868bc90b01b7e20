"""Checked by mypy --strict in tests/typing/test_results_typing.py (never run): typed
one-call results, cost and budget in user code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from pydantic import BaseModel
from typing_extensions import assert_type

from navi_core import (
    Agent,
    Budget,
    Config,
    Cost,
    OpenAIChat,
    Pricing,
    Scripted,
    StopReason,
    Stream,
    TurnComplete,
)


@dataclass
class City:
    name: str
    population: int


class Pair(TypedDict):
    left: int
    right: int


class Weather(BaseModel):
    rain: bool


provider = OpenAIChat("m", pricing=Pricing(input=0.15, output=0.6, cache_read=0.075))
agent = Agent(provider, config=Config(budget=Budget(usd=0.5, tokens=200_000)))

done = agent.ask("Biggest city of Norway?", output=City)
assert_type(done, TurnComplete[City])
assert_type(done.output, City | None)
assert_type(agent.ask("hi"), TurnComplete[Any])
assert_type(agent.ask("w", output=Weather).output, Weather | None)

stream = agent.run("Biggest city?", output=City)
assert_type(stream, Stream[City])
assert_type(stream.result(), TurnComplete[City])
assert_type(stream.result(timeout=2.5).output, City | None)
with agent.run("hi") as plain:
    assert_type(plain.result().output, Any | None)

cost = done.cost
assert_type(cost, Cost | None)
if cost is not None:
    assert_type(cost.usd, float)
    assert_type(cost.cache_usd, float)
assert_type(done.stop_reason is StopReason.BUDGET, bool)
assert_type(Pricing(3.0, 15.0).cost_of(done.usage), Cost)
assert_type(Pricing.lookup("gpt-4o", "https://api.openai.com/v1"), Pricing | None)
assert_type(
    Pricing.known("gpt-4o", "https://api.openai.com/v1"), tuple[Pricing | None] | None
)
assert_type(Pricing.prefetch("gpt-4o", "https://api.openai.com/v1"), None)
assert_type(Scripted([], pricing=Pricing(1.0, 1.0)), Scripted)

pair = Agent(Scripted([])).ask("two numbers", output=Pair).output
if pair is not None:
    assert_type(pair["left"], int)
