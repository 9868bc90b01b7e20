"""A response cut off before its API's terminal marker is an ``IncompleteResponse``:
retried like a dropped connection, never reported as a finished answer.

Each API is cut at four places over a real loopback server: before any delta,
mid-text, mid-tool-call and after the last delta; chat completions also in the shape
llama-cpp-python's server sends when a second request arrives (``[DONE]`` with no
``finish_reason`` before it).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body, openai_body, responses_body

from navi_core import (
    Agent,
    Config,
    IncompleteResponse,
    MalformedStream,
    ProviderRetry,
    RetryPolicy,
    StopReason,
    TurnComplete,
    tool,
)
from navi_core.events import Event
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.base import Provider
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.providers.openai_responses import OpenAIResponses

FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=5, jitter=False))
CALLS: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    CALLS.append((a, b))
    return str(a + b)


def _events(body: bytes) -> list[bytes]:
    return [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]


def through(body: bytes, marker: bytes, nth: int = 1) -> bytes:
    """The events of ``body`` up to and including the ``nth`` one holding ``marker``."""
    events = _events(body)
    seen = 0
    for i, event in enumerate(events):
        seen += marker in event
        if seen == nth:
            return b"".join(events[: i + 1])
    raise AssertionError(f"{marker!r} not found {nth} times")


def before(body: bytes, marker: bytes) -> bytes:
    """The events of ``body`` before the first one holding ``marker``."""
    events = _events(body)
    index = next(i for i, e in enumerate(events) if marker in e)
    return b"".join(events[:index])


def without(body: bytes, marker: bytes) -> bytes:
    """``body`` with every event holding ``marker`` left out."""
    return b"".join(e for e in _events(body) if marker not in e)


ARGS = ['{"a": 2,', ' "b": 3}']

CHAT_TEXT = openai_body(["Hel", "lo"])
CHAT_TOOL = openai_body(tool_calls=[("call_1", "add", ARGS)])
ANTHROPIC_TEXT = anthropic_body([("text", ["Hel", "lo"])])
ANTHROPIC_TOOL = anthropic_body([("tool", ("toolu_1", "add", ARGS))], stop="tool_use")
RESPONSES_TEXT = responses_body(["Hel", "lo"])
RESPONSES_TOOL = responses_body(tool_calls=[("call_1", "add", ARGS)])

CUTS: dict[str, tuple[bytes, bytes]] = {
    # name: (the cut body, the whole body sent on the retry)
    "chat/before-any-delta": (_events(CHAT_TEXT)[0], openai_body(["whole"])),
    "chat/mid-text": (through(CHAT_TEXT, b'"Hel"'), openai_body(["whole"])),
    "chat/mid-tool-call": (
        through(CHAT_TOOL, b'"tool_calls"', 2),
        openai_body(["whole"]),
    ),
    "chat/after-last-delta": (
        before(CHAT_TEXT, b'"finish_reason":"stop"'),
        openai_body(["whole"]),
    ),
    "chat/done-without-finish-reason": (
        without(CHAT_TEXT, b'"finish_reason":"stop"'),
        openai_body(["whole"]),
    ),
    "chat/finish-reason-without-done": (
        before(CHAT_TEXT, b"[DONE]"),
        openai_body(["whole"]),
    ),
    "anthropic/before-any-delta": (
        through(ANTHROPIC_TEXT, b"message_start"),
        anthropic_body([("text", ["whole"])]),
    ),
    "anthropic/mid-text": (
        through(ANTHROPIC_TEXT, b'"Hel"'),
        anthropic_body([("text", ["whole"])]),
    ),
    "anthropic/mid-tool-call": (
        through(ANTHROPIC_TOOL, b"input_json_delta", 2),
        anthropic_body([("text", ["whole"])]),
    ),
    "anthropic/after-last-delta": (
        before(ANTHROPIC_TEXT, b"message_stop"),
        anthropic_body([("text", ["whole"])]),
    ),
    "responses/before-any-delta": (
        through(RESPONSES_TEXT, b"response.created"),
        responses_body(["whole"]),
    ),
    "responses/mid-text": (
        through(RESPONSES_TEXT, b'"Hel"'),
        responses_body(["whole"]),
    ),
    "responses/mid-tool-call": (
        through(RESPONSES_TOOL, b"function_call_arguments.delta"),
        responses_body(["whole"]),
    ),
    "responses/after-last-delta": (
        before(RESPONSES_TEXT, b"response.completed"),
        responses_body(["whole"]),
    ),
}

MAKERS: dict[str, Callable[[str], Provider]] = {
    "chat": lambda url: OpenAIChat("gpt-test", url),
    "anthropic": lambda url: Anthropic("claude-test", base_url=url, api_key="k"),
    "responses": lambda url: OpenAIResponses("gpt-test", url),
}


def _turn(provider: Provider) -> list[Event]:
    agent = Agent(provider, tools=[add], config=FAST)
    try:
        return list(agent.run("hi"))
    finally:
        agent.close()


@pytest.mark.parametrize("name", sorted(CUTS))
def test_a_cut_response_is_retried_never_finished(
    loopback: LoopbackServer, name: str
) -> None:
    cut, whole = CUTS[name]
    loopback.add(Reply.sse(cut), Reply.sse(whole))
    CALLS.clear()
    provider = MAKERS[name.split("/")[0]](loopback.url + "/v1")
    with provider:  # type: ignore[attr-defined]
        events = _turn(provider)
    assert [e.error for e in events if isinstance(e, ProviderRetry)] == [
        "IncompleteResponse"
    ]
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.END_TURN
    assert CALLS == []  # a call cut mid-arguments never runs
    assert len(loopback.requests) == 2


@pytest.mark.parametrize("api", sorted(MAKERS))
def test_a_server_that_always_cuts_fails_the_turn(
    loopback: LoopbackServer, api: str
) -> None:
    cut = {
        "chat": without(CHAT_TEXT, b'"finish_reason":"stop"'),
        "anthropic": before(ANTHROPIC_TEXT, b"message_stop"),
        "responses": before(RESPONSES_TEXT, b"response.completed"),
    }[api]
    for _ in range(FAST.retry.max_attempts):
        loopback.add(Reply.sse(cut))
    provider = MAKERS[api](loopback.url + "/v1")
    with provider, pytest.raises(IncompleteResponse) as caught:  # type: ignore[attr-defined]
        _turn(provider)
    assert isinstance(caught.value, MalformedStream)  # a transient failure
    assert caught.value.retryable


def test_require_finish_reason_false_accepts_a_bare_done(
    loopback: LoopbackServer,
) -> None:
    """A server that never sends ``finish_reason`` can still be used, on request."""
    loopback.add(Reply.sse(without(CHAT_TEXT, b'"finish_reason":"stop"')))
    with OpenAIChat("gpt-test", loopback.url, require_finish_reason=False) as provider:
        events = _turn(provider)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.END_TURN
    assert not [e for e in events if isinstance(e, ProviderRetry)]
    assert len(loopback.requests) == 1
