"""A response cut off before its API's terminal marker is an ``IncompleteResponse``:
retried like a dropped connection, never reported as a finished answer.

Each API is cut at four places over a real loopback server: before any delta,
mid-text, mid-tool-call and after the last delta; chat completions also in the shape
llama-cpp-python's server sends when a second request arrives (``[DONE]`` with no
``finish_reason`` before it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body, fixture, openai_body, responses_body

from navi_core import (
    Agent,
    Config,
    IncompleteResponse,
    MalformedStream,
    ProviderRetry,
    RetryPolicy,
    StopReason,
    ToolDispatchComplete,
    ToolDispatchStart,
    ToolFinished,
    ToolResult,
    ToolStarted,
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


@dataclass
class City:
    city: str


@dataclass
class Prefs:
    city: str = "unknown"


NOW: list[str] = []


@tool
def now() -> str:
    """The time."""
    NOW.append("ran")
    return "noon"


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
    # after its finish reason a body may end without [DONE]; not inside an event
    "chat/cut-inside-the-last-event": (
        before(CHAT_TEXT, b"[DONE]")[:-1],
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


# -- a tool call cut off at the output token limit ---------------------------------

CUT_ARGS = ['{"a": 2,']


def _responses_incomplete(body: bytes) -> bytes:
    """``body`` (a Responses stream) ending in ``response.incomplete`` at the output
    token limit instead of ``response.completed``, as the API ends a cut response."""
    *events, last = _events(body)
    data = orjson.loads(last.split(b"data: ", 1)[1])
    data["type"] = "response.incomplete"
    data["response"]["status"] = "incomplete"
    data["response"]["incomplete_details"] = {"reason": "max_output_tokens"}
    return b"".join(events) + b"event: response.incomplete\ndata: %b\n\n" % (
        orjson.dumps(data)
    )


TOKEN_LIMIT_CUTS: dict[str, tuple[str, bytes]] = {
    # name: (the API, a response whose tool call was cut at the token limit)
    "chat": (
        "chat",
        openai_body(tool_calls=[("call_1", "add", CUT_ARGS)], finish="length"),
    ),
    "chat/cut-before-any-argument": (
        "chat",
        openai_body(tool_calls=[("call_1", "add", [])], finish="length"),
    ),
    "chat/a-whole-call-then-a-cut-one": (
        "chat",
        openai_body(
            tool_calls=[("call_1", "add", ARGS), ("call_2", "add", CUT_ARGS)],
            finish="length",
        ),
    ),
    "anthropic": (
        "anthropic",
        anthropic_body([("tool", ("toolu_1", "add", CUT_ARGS))], stop="max_tokens"),
    ),
    "anthropic/recorded": (
        "anthropic",
        fixture("anthropic/tool_use_padded_max_tokens.sse"),
    ),
    "responses": (
        "responses",
        _responses_incomplete(responses_body(tool_calls=[("call_1", "add", CUT_ARGS)])),
    ),
}
WHOLE = {
    "chat": openai_body(["whole"]),
    "anthropic": anthropic_body([("text", ["whole"])]),
    "responses": responses_body(["whole"]),
}


@pytest.mark.parametrize("name", sorted(TOKEN_LIMIT_CUTS))
def test_a_tool_call_cut_at_the_token_limit_ends_the_turn_unrun(
    loopback: LoopbackServer, name: str
) -> None:
    """A response that ran out of output tokens in the middle of a call is not acted
    on: none of its calls runs, each is answered with why, and the turn ends with
    ``MAX_TOKENS`` after one request (not a loop of paid requests that are cut the
    same way); the next turn sends a valid conversation."""
    api, cut = TOKEN_LIMIT_CUTS[name]
    loopback.add(Reply.sse(cut), Reply.sse(WHOLE[api]))
    CALLS.clear()
    provider = MAKERS[api](loopback.url + "/v1")
    agent = Agent(provider, tools=[add], config=FAST)
    with provider, agent:  # type: ignore[attr-defined]
        events = list(agent.run("hi"))
        done = events[-1]
        assert isinstance(done, TurnComplete)
        assert done.stop_reason is StopReason.MAX_TOKENS
        assert done.iterations == 1
        assert len(loopback.requests) == 1
        assert CALLS == []
        assert not [e for e in events if isinstance(e, ProviderRetry)]
        calls = agent.conversation.messages[-2].tool_uses
        results = agent.conversation.messages[-1].content
        assert done.tool_calls == len(calls) == len(results) >= 1
        for call, result in zip(calls, results, strict=True):
            assert isinstance(result, ToolResult) and result.is_error
            assert result.tool_use_id == call.id
            text = result.parts[0].text  # type: ignore[union-attr]
            assert "was not run" in text and "output token limit" in text
        # reported as a batch whose every call was refused, as a host renders one
        batch = [
            e
            for e in events
            if isinstance(
                e,
                (ToolDispatchStart, ToolStarted, ToolFinished, ToolDispatchComplete),
            )
        ]
        assert batch[0] == ToolDispatchStart(len(calls))
        for i, call in enumerate(calls):
            started, finished = batch[1 + 2 * i], batch[2 + 2 * i]
            assert started == ToolStarted(call.id, call.name)
            assert isinstance(finished, ToolFinished)
            assert (finished.call_id, finished.is_error) == (call.id, True)
            assert "output token limit" in (finished.error or "")
        assert isinstance(batch[-1], ToolDispatchComplete)
        assert batch[-1].message.content == results
        if name == "chat/a-whole-call-then-a-cut-one":  # the whole one says why too
            texts = [r.parts[0].text for r in results]  # type: ignore[union-attr]
            assert "before its last tool call was complete" in texts[0]
            assert "before the call's arguments were complete" in texts[1]
        # the next turn goes on from a valid conversation: the results went with it
        again = agent.run("go on").result()
        assert again.stop_reason is StopReason.END_TURN
        assert len(loopback.requests) == 2
        sent = loopback.requests[1].body.decode()
        assert sent.count("output token limit") == len(calls)


def test_whole_tool_calls_at_the_token_limit_run(loopback: LoopbackServer) -> None:
    """A response that reached the limit with every call whole: the calls run."""
    whole = openai_body(tool_calls=[("call_1", "add", ARGS)], finish="length")
    loopback.add(Reply.sse(whole), Reply.sse(openai_body(["five"])))
    CALLS.clear()
    with OpenAIChat("gpt-test", loopback.url + "/v1") as provider:
        events = _turn(provider)
    assert CALLS == [(2, 3)]
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.END_TURN
    assert len(loopback.requests) == 2


def test_a_no_argument_call_at_the_token_limit_with_a_call_after_it_runs(
    loopback: LoopbackServer,
) -> None:
    """Only the last call of a cut response can have been cut before its arguments:
    an earlier one with none has none (``{}``)."""
    calls = [("call_1", "add", []), ("call_2", "add", ARGS)]
    loopback.add(
        Reply.sse(openai_body(tool_calls=calls, finish="length")),
        Reply.sse(openai_body(["five"])),
    )
    CALLS.clear()
    with OpenAIChat("gpt-test", loopback.url + "/v1") as provider:
        events = _turn(provider)
    assert CALLS == [
        (2, 3)
    ]  # call_1 was dispatched too (its missing arguments refused)
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.END_TURN


def test_a_whole_no_argument_call_before_more_output_is_not_cut(
    loopback: LoopbackServer,
) -> None:
    """Only a call the cut response ended with can have been cut before its
    arguments: one followed by more output had none."""
    blocks: list[tuple[str, Any]] = [
        ("text", ["a"]),
        ("tool", ("toolu_1", "now", [])),
        ("text", ["b"]),
    ]
    loopback.add(
        Reply.sse(anthropic_body(blocks, stop="max_tokens")),
        Reply.sse(anthropic_body([("text", ["noon"])])),
    )
    NOW.clear()
    provider = MAKERS["anthropic"](loopback.url + "/v1")
    with provider, Agent(provider, tools=[now], config=FAST) as agent:  # type: ignore[attr-defined]
        done = agent.run("time?").result()
    assert NOW == ["ran"]
    assert done.stop_reason is StopReason.END_TURN


@pytest.mark.parametrize(
    ("fragments", "answer"),
    [(['{"city": "Pa'], City(city="Paris")), ([], Prefs(city="Paris"))],
    ids=["mid-input", "before-any-input"],
)
def test_a_structured_answer_cut_at_the_token_limit_gets_its_corrective_retry(
    loopback: LoopbackServer, fragments: list[str], answer: City | Prefs
) -> None:
    """``run(..., output=T)``: a ``final_answer`` call cut off is an invalid answer,
    and the model is asked once to give it again, told why; one cut before any input
    is not an empty answer, even for a type whose fields all have defaults."""
    cut = anthropic_body(
        [("tool", ("toolu_1", "final_answer", fragments))], stop="max_tokens"
    )
    whole = anthropic_body(
        [("tool", ("toolu_2", "final_answer", ['{"city": "Paris"}']))],
        stop="tool_use",
    )
    loopback.add(Reply.sse(cut), Reply.sse(whole))
    provider = MAKERS["anthropic"](loopback.url + "/v1")
    with provider, Agent(provider, config=FAST) as agent:  # type: ignore[attr-defined]
        done = agent.run("Where?", output=type(answer)).result()
    assert done.stop_reason is StopReason.END_TURN
    assert done.output == answer
    assert len(loopback.requests) == 2
    assert "cut off at the output token limit" in loopback.requests[1].body.decode()
