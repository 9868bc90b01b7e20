"""Whole turns through ``Agent.run`` against the HTTP providers on a loopback server."""

from __future__ import annotations

import json

import pytest
from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body, openai_body, openai_chunk

from navi_core import (
    Agent,
    Config,
    MessageComplete,
    ProviderRetry,
    RetryPolicy,
    TextDelta,
    ToolDispatchComplete,
    TurnComplete,
    tool,
)
from navi_core._secrets import MAX_MESSAGE_CHARS
from navi_core.errors import BadRequest, StreamPoisoned
from navi_core.events import Event
from navi_core.providers._http import MAX_RETRY_AFTER_MS
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.stream import Stream

FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=20, jitter=False))


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def _events(stream: Stream) -> list[Event]:
    with stream:
        return list(stream)


def test_openai_tool_call_then_final_text(loopback: LoopbackServer) -> None:
    calls = [("call_1", "add", ['{"a": 2', ', "b": 40}'])]
    loopback.add(Reply.sse(openai_body(tool_calls=calls), chunk=17))
    loopback.add(Reply.sse(openai_body(["The sum ", "is 42."])))
    with OpenAIChat("gpt-test", loopback.url + "/v1", "sk-x1234567") as provider:
        agent = Agent(provider, tools=[add], config=FAST)
        events = _events(agent.run("2 + 40?"))
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert (done.response, done.iterations, done.tool_calls) == ("The sum is 42.", 2, 1)
    roles = [m.role for m in agent.conversation.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    (result,) = agent.conversation.messages[2].tool_results
    assert (result.tool_use_id, result.text, result.is_error) == ("call_1", "42", False)
    second = loopback.requests[1].json["messages"]
    assert second[1]["tool_calls"][0]["function"] == {
        "name": "add",
        "arguments": '{"a": 2, "b": 40}',
    }
    assert second[2] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    assert loopback.connections == 1


def test_openai_rate_limited_twice_then_success(loopback: LoopbackServer) -> None:
    limited = Reply.json(
        429, {"error": {"message": "Rate limit reached"}}, [("retry-after", "0")]
    )
    loopback.add(limited, limited, Reply.sse(openai_body(["fine"])))
    with OpenAIChat("gpt-test", loopback.url) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("hi"))
    assert len(loopback.requests) == 3
    retries = [e for e in events if isinstance(e, ProviderRetry)]
    assert [(r.attempt, r.error, r.status_code, r.retry_after_ms) for r in retries] == [
        (1, "RateLimited", 429, 0),
        (2, "RateLimited", 429, 0),
    ]
    assert retries[0].message == "Rate limit reached"
    assert [m.role for m in agent.conversation.messages] == ["user", "assistant"]
    assert agent.conversation.messages[1].text == "fine"
    assert sum(isinstance(e, MessageComplete) for e in events) == 1


def test_openai_reset_mid_stream_is_retried_without_duplicates(
    loopback: LoopbackServer,
) -> None:
    body = openai_body(["Hello ", "world", "!"])
    cut = body.index(b"world")
    loopback.add(Reply(body=(body[:cut],), reset=True), Reply.sse(body, chunk=40))
    with OpenAIChat("gpt-test", loopback.url) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("hi"))
    (retry,) = [e for e in events if isinstance(e, ProviderRetry)]
    assert retry.error == "TransportError"
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == [
        "Hello ",
        "Hello ",
        "world",
        "!",
    ]  # the failed attempt's delta, then all
    assert [m.role for m in agent.conversation.messages] == ["user", "assistant"]
    assert agent.conversation.messages[1].text == "Hello world!"
    assert loopback.connections == 2


def test_openai_stream_cut_inside_its_last_event_is_retried(
    loopback: LoopbackServer,
) -> None:
    """A body may end without ``[DONE]`` after its finish reason, not inside an event."""
    loopback.add(
        Reply.sse(openai_body(["par"], done=False)[:-1]),
        Reply.sse(openai_body(["whole"])),
    )
    with OpenAIChat("gpt-test", loopback.url) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("hi"))
    assert [e.error for e in events if isinstance(e, ProviderRetry)] == [
        "IncompleteResponse"
    ]
    assert [m.text for m in agent.conversation.messages] == ["hi", "whole"]


def test_anthropic_tool_round_trip_with_thinking(loopback: LoopbackServer) -> None:
    first = anthropic_body(
        [
            ("thinking", (["I should add."], "sig-1")),
            ("tool", ("toolu_1", "add", ['{"a": 1, ', '"b": 2}'])),
        ],
        stop="tool_use",
    )
    overloaded = {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    loopback.add(
        Reply.sse(first, chunk=23),
        Reply.json(529, overloaded),
        Reply.sse(anthropic_body([("text", ["3"])])),
    )
    with Anthropic("claude-test", loopback.url, "sk-ant-123456") as provider:
        agent = Agent(provider, tools=[add], config=FAST)
        events = _events(agent.run("1 + 2?"))
    assert isinstance(events[-1], TurnComplete) and events[-1].response == "3"
    assert [e.error for e in events if isinstance(e, ProviderRetry)] == ["Overloaded"]
    assert sum(isinstance(e, ToolDispatchComplete) for e in events) == 1
    follow_up = loopback.requests[2].json["messages"]
    assert follow_up[1]["content"][0] == {
        "type": "thinking",
        "thinking": "I should add.",
        "signature": "sig-1",
    }
    assert follow_up[1]["content"][1]["input"] == {"a": 1, "b": 2}
    assert follow_up[2]["content"][0]["tool_use_id"] == "toolu_1"
    assert json.loads(json.dumps(follow_up[2]["content"][0]["content"])) == [
        {"type": "text", "text": "3"}
    ]
    assert [m.role for m in agent.conversation.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


KEY = "sk-proj-echoed-9f8e7d6c5b4a"


def test_openai_in_stream_error_with_the_key_is_redacted_in_the_retry(
    loopback: LoopbackServer,
) -> None:
    words = f"upstream said: bad key {KEY}; " + "w" * 2_000
    error = {"error": {"message": words, "type": "server_error"}}
    failing = (
        openai_chunk({"content": "par"}) + b"data: %b\n\n" % json.dumps(error).encode()
    )
    loopback.add(Reply.sse(failing), Reply.sse(openai_body(["fine"])))
    with OpenAIChat("gpt-test", loopback.url, KEY) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("hi"))
    (retry,) = [e for e in events if isinstance(e, ProviderRetry)]
    assert retry.error == "ServerError"
    assert retry.message.startswith("upstream said: bad key [REDACTED]; www")
    assert len(retry.message) == MAX_MESSAGE_CHARS
    assert KEY not in repr(events)
    assert agent.conversation.messages[-1].text == "fine"


def test_anthropic_error_events_with_the_key_are_redacted(
    loopback: LoopbackServer,
) -> None:
    overloaded = anthropic_body([], error=("overloaded_error", f"busy {KEY}"))
    refused = anthropic_body(
        [("text", ["x"])], error=("invalid_request_error", f"bad {KEY} " + "q" * 900)
    )
    loopback.add(Reply.sse(overloaded), Reply.sse(refused))
    with Anthropic("claude-test", loopback.url, KEY) as provider:
        agent = Agent(provider, config=FAST)
        stream = agent.run("hi")
        seen: list[Event] = []
        with pytest.raises(BadRequest) as info:
            while ev := stream.next():
                seen.append(ev)
        with pytest.raises(StreamPoisoned) as poisoned:
            stream.next()
        stream.close()
    (retry,) = [e for e in seen if isinstance(e, ProviderRetry)]
    assert (retry.error, retry.message) == ("Overloaded", "busy [REDACTED]")
    error = info.value
    assert error.message.startswith("bad [REDACTED] qqq")
    assert len(error.message) == MAX_MESSAGE_CHARS
    assert poisoned.value.__cause__ is error
    assert KEY not in repr(seen) and KEY not in str(error)


def test_huge_retry_after_is_still_retried(loopback: LoopbackServer) -> None:
    limited = Reply.json(
        429, {"error": {"message": "slow down"}}, [("retry-after", "9" * 400)]
    )
    loopback.add(limited, Reply.sse(openai_body(["fine"])))
    with OpenAIChat("gpt-test", loopback.url) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("hi"))
    (retry,) = [e for e in events if isinstance(e, ProviderRetry)]
    assert retry.retry_after_ms == MAX_RETRY_AFTER_MS
    assert retry.delay_ms == FAST.retry.max_delay_ms
    assert agent.conversation.messages[-1].text == "fine"


def test_request_timeout_and_conflict_are_retried(loopback: LoopbackServer) -> None:
    loopback.add(
        Reply.text(408, "Request Timeout"),
        Reply.json(409, {"error": {"message": "lock timeout"}}),
        Reply.sse(openai_body(["fine"])),
    )
    with OpenAIChat("gpt-test", loopback.url) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("hi"))
    retries = [e for e in events if isinstance(e, ProviderRetry)]
    assert [(r.error, r.status_code) for r in retries] == [
        ("TransportError", 408),
        ("ServerError", 409),
    ]
    assert agent.conversation.messages[-1].text == "fine"


def test_base_url_credentials_stay_out_of_agent_and_messages(
    loopback: LoopbackServer,
) -> None:
    port = loopback.url.rpartition(":")[2]
    raw = f"http://user:s3cret@127.0.0.1:{port}/v1?api_key=s3cret"
    loopback.add(Reply.sse(openai_body(["fine"])))
    with OpenAIChat("gpt-test", raw) as provider:
        agent = Agent(provider, config=FAST)
        _events(agent.run("hi"))
        assert "s3cret" not in repr(agent)
        assert "s3cret" not in repr(agent.conversation.messages)
        assert agent.conversation.messages[-1].wire == provider.wire
        assert provider.wire.base_url == f"http://127.0.0.1:{port}/v1"
    assert loopback.requests[0].path == "/v1/chat/completions?api_key=s3cret"
