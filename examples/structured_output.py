"""Structured output: ask for a dataclass, get one back, checked against its schema.

    python examples/structured_output.py

The model: NAVI_BASE_URL (an OpenAI-compatible base URL ending in /v1) and NAVI_MODEL
name a real endpoint; unset, the example runs offline on ``Scripted``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from navi_core import Agent, OpenAIChat, Provider, Scripted, TurnComplete


def provider(*answers: str) -> Provider:
    """NAVI_BASE_URL's endpoint, or ``answers`` replayed offline."""
    base_url = os.environ.get("NAVI_BASE_URL")
    if base_url:
        return OpenAIChat(os.environ.get("NAVI_MODEL", "qwen2.5"), base_url=base_url)
    return Scripted(answers)


@dataclass
class City:
    name: str
    population: int


# An OpenAI-compatible server is sent the JSON schema of City (response_format); the
# answer is parsed and checked, and an invalid one gets one corrective message.
agent = Agent(provider('{"name": "Oslo", "population": 717710}'))
with agent.run("What is the largest city in Norway?", output=City) as stream:
    done = [ev for ev in stream][-1]  # iterating a stream pulls every event
assert isinstance(done, TurnComplete)
city = done.output
assert isinstance(city, City)
print(f"{city.name}: {city.population:,} people")
agent.close()
