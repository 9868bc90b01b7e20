"""``Config(coalesce_deltas=True)`` over real HTTP: the same turn in fewer events.

Recorded streams of every API are served on loopback whole and cut into small chunks;
a turn with coalescing must end with the same message and show the same text, thinking
and arguments as one without, in at most as many events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body

from navi_core import Agent, Config, NullStore
from navi_core.events import (
    MessageComplete,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    TurnComplete,
)
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.providers.openai_responses import OpenAIResponses

SSE = Path(__file__).resolve().parents[1] / "data" / "sse"
KEY = "sk-test-coalesce"

THINKING = anthropic_body(
    [
        ("thinking", (["Let me ", "think ", "about it."], "sig-1")),
        ("redacted", "opaque"),
        ("text", ["The ", "answer ", "is ", "42."]),
        ("tool", ("toolu_1", "lookup", ['{"q":', ' "life"', "}"])),
    ],
    stop="tool_use",
)

CASES = [
    ("openai", "openai/text_with_usage.sse"),
    ("openai", "openai/tool_calls_parallel.sse"),
    ("openai", "openai/tool_call_single.sse"),
    ("anthropic", "anthropic/tool_use.sse"),
    ("anthropic", "anthropic/text_basic.sse"),
    ("anthropic", THINKING),
    ("responses", "openai-responses/reasoning_tool_call.sse"),
    ("responses", "openai-responses/text_two_messages.sse"),
]


def make(api: str, url: str) -> Any:
    if api == "openai":
        return OpenAIChat("gpt-test", url, KEY)
    if api == "anthropic":
        return Anthropic("claude-test", url, KEY, cache=False)
    return OpenAIResponses("gpt-test", url, KEY)


def turn(
    loopback: LoopbackServer, api: str, body: bytes, chunk: int | None, coalesce: bool
) -> tuple[list[Any], Any]:
    loopback.add(Reply.sse(body, chunk=chunk))
    config = Config(coalesce_deltas=coalesce, max_iterations=1)
    with make(api, loopback.url) as provider:
        agent = Agent(provider, store=NullStore(), config=config)
        events = list(agent.run("hi"))
        agent.close()
    message = next(ev.message for ev in events if isinstance(ev, MessageComplete))
    assert isinstance(events[-1], TurnComplete)
    return events, message


def shown(events: list[Any]) -> tuple[str, str, dict[int, str]]:
    text = "".join(ev.text for ev in events if isinstance(ev, TextDelta))
    thinking = "".join(ev.text for ev in events if isinstance(ev, ThinkingDelta))
    args: dict[int, str] = {}
    for ev in events:
        if isinstance(ev, ToolCallDelta):
            args[ev.index] = args.get(ev.index, "") + ev.arguments
    return text, thinking, args


@pytest.mark.parametrize("chunk", [None, 7, 64])
@pytest.mark.parametrize(("api", "source"), CASES, ids=lambda v: str(v)[:40])
def test_coalescing_gives_the_same_turn_in_fewer_events(
    loopback: LoopbackServer, api: str, source: str | bytes, chunk: int | None
) -> None:
    body = source if isinstance(source, bytes) else (SSE / source).read_bytes()
    plain, plain_message = turn(loopback, api, body, chunk, coalesce=False)
    joined, joined_message = turn(loopback, api, body, chunk, coalesce=True)
    assert joined_message.content == plain_message.content
    assert joined_message.usage == plain_message.usage
    assert shown(joined) == shown(plain)
    assert len(joined) <= len(plain)
    texts = [sum(isinstance(e, TextDelta) for e in evs) for evs in (plain, joined)]
    if chunk is None and texts[0] > 1:  # one read held the body: its text joined up
        assert texts[1] < texts[0]
