"""Float token counts (OpenRouter sends ``12.0``) never fail a good answer.

Before the fix ``{"prompt_tokens": 12.0}`` raised ``MalformedStream``: the answer was
discarded and requested again four times. Now integral floats are taken as integers,
others rounded, and anything unreadable counts 0.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import orjson
import pytest
from faultkit import openai_stream, run_turn
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    Config,
    MessageComplete,
    ProviderRetry,
    RetryPolicy,
    Usage,
)
from navi_core._deltas import USAGE
from navi_core.providers.openai_chat import OpenAIChat


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 12.0, "completion_tokens": 37.0}, Usage(12, 37, 0, 0, 0)),
        ({"prompt_tokens": 12.6, "completion_tokens": 37.25}, Usage(13, 37, 0, 0, 0)),
        (
            {
                "prompt_tokens": 100.0,
                "completion_tokens": 9,
                "prompt_tokens_details": {"cached_tokens": 40.0},
                "completion_tokens_details": {"reasoning_tokens": 3.0},
            },
            Usage(60, 9, 40, 0, 3),
        ),
        (
            {
                "prompt_tokens": "12",
                "completion_tokens": float("inf"),
                "prompt_tokens_details": [],
            },
            Usage(0, 0, 0, 0, 0),
        ),
        ({"prompt_tokens": -5, "completion_tokens": True}, Usage(0, 0, 0, 0, 0)),
    ],
)
def test_odd_usage_keeps_the_answer(
    loopback: LoopbackServer, usage: dict[str, Any], expected: Usage
) -> None:
    body = openai_stream("The answer.", usage=usage).replace(b"Infinity", b"1e999")
    loopback.add(Reply.sse(body))
    provider = OpenAIChat("m", base_url=loopback.url + "/v1", api_key="sk-test-usage")
    config = Config(retry=RetryPolicy(initial_delay_ms=1, jitter=False))
    with provider, Agent(provider, config=config) as agent:
        events, done = run_turn(agent, "question")
    assert not [e for e in events if isinstance(e, ProviderRetry)]
    assert len(loopback.requests) == 1
    (complete,) = [e for e in events if isinstance(e, MessageComplete)]
    assert done.response == "The answer."
    assert complete.message.usage == expected
    assert done.usage == expected


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 12.0, "completion_tokens": 37.25},
        {"prompt_tokens": "x", "prompt_tokens_details": 3, "completion_tokens": None},
        {"prompt_tokens": 1e300, "completion_tokens": -0.0},
    ],
)
def test_both_core_parsers_read_usage_alike(
    both_cores: tuple[ModuleType, ModuleType], usage: dict[str, Any]
) -> None:
    body = openai_stream("hi", usage=usage)
    py, cy = (core.OpenAIChatParser() for core in both_cores)
    assert py.feed(body) + py.close() == cy.feed(body) + cy.close()


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": 12.0, "output_tokens": 3.5},
        {"input_tokens": "12", "cache_read_input_tokens": [1]},
    ],
)
def test_anthropic_usage_never_fails(
    both_cores: tuple[ModuleType, ModuleType], usage: dict[str, Any]
) -> None:
    start = {"type": "message_start", "message": {"model": "c", "usage": usage}}
    body = b"event: message_start\ndata: " + orjson.dumps(start) + b"\n\n"
    outs = []
    for core in both_cores:
        parser = core.AnthropicParser()
        outs.append(parser.feed(body) + parser.close())
    assert outs[0] == outs[1]
    assert outs[0][-1][0] == USAGE
