"""OpenAIResponses over a loopback server: request bodies, recorded streams, whole
turns with reasoning items carried back and calls paired with their outputs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from loopback import LoopbackServer, Reply
from wire_streams import drain, request, responses_body

from navi_core import (
    Agent,
    Config,
    MessageComplete,
    OpenAIResponses,
    RetryPolicy,
    StopReason,
    TurnComplete,
    tool,
)
from navi_core.conversation import Text, Thinking, ToolUse, Usage
from navi_core.errors import (
    BadRequest,
    IncompleteResponse,
    RateLimited,
    StreamPoisoned,
)
from navi_core.events import Event, ProviderRetry
from navi_core.stream import Stream

DATA = Path(__file__).parent.parent / "data" / "sse"
FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=20, jitter=False))


@tool
def calculator(a: float, b: float, op: str) -> str:
    """A minimal calculator.

    Args:
        a: first operand.
        b: second operand.
        op: add, subtract, multiply or divide.
    """
    result = {"add": a + b, "subtract": a - b, "multiply": a * b}.get(op, a / b)
    return f"{result:g}"


def recorded(name: str) -> bytes:
    return (DATA / "openai-responses" / name).read_bytes()


def events(stream: Stream) -> list[Event]:
    with stream:
        return list(stream)


def test_request_body_is_stateless_and_streamed(loopback: LoopbackServer) -> None:
    loopback.add(Reply.sse(responses_body(["hi"])))
    with OpenAIResponses("gpt-5", loopback.url + "/v1", "sk-test-123456") as provider:
        _, message = drain(
            provider, request("hello", system="be brief", tools=[calculator.spec])
        )
    sent = loopback.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test-123456"
    body = sent.json
    assert body["stream"] is True and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["instructions"] == "be brief"
    assert body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    ]
    assert body["tools"][0]["type"] == "function"
    assert body["tools"][0]["name"] == "calculator"
    assert set(body["tools"][0]["parameters"]["properties"]) == {"a", "b", "op"}
    # left out, the API would make the tool strict (chat completions never does)
    assert body["tools"][0]["strict"] is False
    assert "text" not in body
    assert message.content == (Text("hi"),)
    assert message.wire is not None and message.wire.api_style == "openai-responses"


def test_recorded_session_reasoning_and_calls_go_back(loopback: LoopbackServer) -> None:
    """The four responses of a recorded session against the real API, replayed as a
    whole turn: each request carries the reasoning item unchanged and each
    function_call paired with its function_call_output."""
    names = ["reasoning_tool_call", "tool_call_1", "tool_call_2", "text_after_tools"]
    for name in names:
        loopback.add(Reply.sse(recorded(f"{name}.sse"), chunk=333))
    with OpenAIResponses("gpt-5.1-codex-max", loopback.url + "/v1") as provider:
        agent = Agent(provider, tools=[calculator], config=FAST)
        got = events(agent.run("Compute (12 + 7) * 3 * 10 with the calculator."))
    done = got[-1]
    assert isinstance(done, TurnComplete)
    assert done.response == "The final result is **570**."
    assert (done.iterations, done.tool_calls) == (4, 3)
    first = agent.conversation.messages[1]
    thinking = first.content[0]
    assert isinstance(thinking, Thinking)
    assert thinking.text.startswith("**Calculating step-by-step")
    assert isinstance(first.content[1], ToolUse)
    assert first.usage == Usage(134, 28, 0, 0, 0)
    raw_item = next(
        orjson.loads(line[6:])["item"]
        for line in recorded("reasoning_tool_call.sse").splitlines()
        if b'"response.output_item.done"' in line and b'"reasoning"' in line
    )
    second = loopback.requests[1].json["input"]
    assert second[1] == raw_item  # encrypted_content and all, unchanged
    assert second[2] == {
        "type": "function_call",
        "call_id": "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
        "name": "calculator",
        "arguments": '{"a":12,"b":7,"op":"add"}',
    }
    assert second[3] == {
        "type": "function_call_output",
        "call_id": "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
        "output": "19",
    }
    last = loopback.requests[3].json["input"]
    outputs = [i["output"] for i in last if i.get("type") == "function_call_output"]
    assert outputs == ["19", "57", "570"]
    calls = [i["call_id"] for i in last if i.get("type") == "function_call"]
    paired = [i["call_id"] for i in last if i.get("type") == "function_call_output"]
    assert calls == paired
    assert loopback.connections == 1


def test_reasoning_built_stream_round_trip(loopback: LoopbackServer) -> None:
    loopback.add(
        Reply.sse(
            responses_body(
                reasoning=[(["thinking ", "hard"], "ENC1")],
                tool_calls=[("call_9", "calculator", ['{"a":1,', '"b":2,"op":"add"}'])],
                usage={"input_tokens": 100, "output_tokens": 40,
                       "input_tokens_details": {"cached_tokens": 64},
                       "output_tokens_details": {"reasoning_tokens": 30}},
            ),
            chunk=7,
        ),
        Reply.sse(responses_body(["3"])),
    )  # fmt: skip
    with OpenAIResponses("o4-mini", loopback.url + "/v1") as provider:
        agent = Agent(provider, tools=[calculator], config=FAST)
        got = events(agent.run("1+2"))
    complete = [e for e in got if isinstance(e, MessageComplete)]
    assert complete[0].usage == Usage(36, 40, 64, 0, 30)
    item = loopback.requests[1].json["input"][1]
    assert item["type"] == "reasoning" and item["encrypted_content"] == "ENC1"
    assert item["summary"] == [{"type": "summary_text", "text": "thinking hard"}]


def test_error_event_fails_the_turn_without_retry(loopback: LoopbackServer) -> None:
    loopback.add(Reply.sse(recorded("error_quota.sse")))
    with OpenAIResponses("gpt-5-nano", loopback.url + "/v1") as provider:
        agent = Agent(provider, config=FAST)
        stream = agent.run("hi")
        with pytest.raises(BadRequest, match="exceeded your current quota"):
            events(stream)
        with pytest.raises(StreamPoisoned):
            stream.next()
    assert len(loopback.requests) == 1
    assert [m.role for m in agent.conversation.messages] == ["user"]


def test_rate_limit_in_stream_is_retried(loopback: LoopbackServer) -> None:
    limited = (
        b'event: response.failed\ndata: {"type":"response.failed","response":'
        b'{"error":{"code":"rate_limit_exceeded","message":"slow down"}}}\n\n'
    )
    loopback.add(Reply.sse(limited), Reply.sse(responses_body(["ok"])))
    with OpenAIResponses("gpt-5", loopback.url + "/v1") as provider:
        agent = Agent(provider, config=FAST)
        got = events(agent.run("hi"))
    retries = [e for e in got if isinstance(e, ProviderRetry)]
    assert [r.error for r in retries] == [RateLimited.__name__]
    assert isinstance(got[-1], TurnComplete) and got[-1].response == "ok"


def test_a_body_cut_before_completed_is_retried(loopback: LoopbackServer) -> None:
    whole = responses_body(["abc"])
    cut = whole[: whole.index(b"event: response.completed")]
    loopback.add(Reply.sse(cut), Reply.sse(whole))
    with OpenAIResponses("gpt-5", loopback.url + "/v1") as provider:
        agent = Agent(provider, config=FAST)
        got = events(agent.run("hi"))
    assert [e.error for e in got if isinstance(e, ProviderRetry)] == [
        "IncompleteResponse"
    ]
    assert isinstance(got[-1], TurnComplete) and got[-1].response == "abc"


#: the stream of the review: a start, half an answer, then a chat-style [DONE] where
#: response.completed belongs (a compatible server that lost its upstream)
CUT_AT_DONE = (
    b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
    b'"response":{"id":"resp_1","model":"gpt-5","status":"in_progress"}}\n\n'
    b'event: response.output_item.added\ndata: {"type":"response.output_item.added",'
    b'"sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message",'
    b'"role":"assistant","status":"in_progress","content":[]}}\n\n'
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
    b'"sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,'
    b'"delta":"The answer is"}\n\n'
    b"data: [DONE]\n\n"
)


def test_done_before_completed_is_incomplete(loopback: LoopbackServer) -> None:
    """[DONE] is no terminator for Responses: half an answer is not END_TURN."""
    loopback.add(Reply.sse(CUT_AT_DONE))
    once = Config(retry=RetryPolicy(max_attempts=1))
    with OpenAIResponses("gpt-5", loopback.url + "/v1") as provider:
        agent = Agent(provider, config=once)
        stream = agent.run("hi")
        with pytest.raises(IncompleteResponse, match=r"\[DONE\] at byte \d+ before"):
            events(stream)
    assert len(loopback.requests) == 1
    assert [m.role for m in agent.conversation.messages] == ["user"]


def test_done_before_completed_is_retried(loopback: LoopbackServer) -> None:
    loopback.add(
        Reply.sse(CUT_AT_DONE), Reply.sse(responses_body(["The answer is 42"]))
    )
    with OpenAIResponses("gpt-5", loopback.url + "/v1") as provider:
        agent = Agent(provider, config=FAST)
        got = events(agent.run("hi"))
    assert [e.error for e in got if isinstance(e, ProviderRetry)] == [
        "IncompleteResponse"
    ]
    assert len(loopback.requests) == 2
    done = got[-1]
    assert isinstance(done, TurnComplete) and done.response == "The answer is 42"
    assert done.stop_reason is StopReason.END_TURN


def test_done_after_completed_is_ignored(loopback: LoopbackServer) -> None:
    """Compatible servers that add a chat-style [DONE] after response.completed."""
    body = responses_body(["fine"], usage={"input_tokens": 3, "output_tokens": 1})
    loopback.add(Reply.sse(body + b"data: [DONE]\n\n", chunk=5))
    with OpenAIResponses("gpt-5", loopback.url + "/v1") as provider:
        agent = Agent(provider, config=FAST)
        got = events(agent.run("hi"))
    assert not [e for e in got if isinstance(e, ProviderRetry)]
    (complete,) = [e for e in got if isinstance(e, MessageComplete)]
    assert complete.usage == Usage(3, 1, 0, 0, 0)
    assert isinstance(got[-1], TurnComplete) and got[-1].response == "fine"
    assert len(loopback.requests) == 1


def test_a_reasoning_item_without_encrypted_content_stays_home(
    loopback: LoopbackServer,
) -> None:
    """A server that ignored ``include`` sends bare reasoning items: with no server
    state their ids name nothing, so they are not sent back."""
    loopback.add(
        Reply.sse(responses_body(["a"], reasoning=[(["why"], "")])),
        Reply.sse(responses_body(["b"])),
    )
    with OpenAIResponses("o4-mini", loopback.url + "/v1") as provider:
        agent = Agent(provider, config=FAST)
        events(agent.run("one"))
        events(agent.run("two"))
    kinds = [i.get("type", i.get("role")) for i in loopback.requests[1].json["input"]]
    assert kinds == ["user", "assistant", "user"]


def test_a_response_cut_off_after_its_reasoning_does_not_break_the_session(
    loopback: LoopbackServer,
) -> None:
    """Only reasoning, then ``response.incomplete`` (``max_output_tokens``): the
    reasoning stays stored, but a reasoning item with no item after it is refused by
    the API, so later requests leave it out; one that a call follows still goes."""
    loopback.add(
        Reply.sse(
            responses_body(
                reasoning=[(["long ", "thought"], "ENC-CUT")],
                incomplete="max_output_tokens",
            )
        ),
        Reply.sse(responses_body(["next answer"])),
    )
    with OpenAIResponses("o4-mini", loopback.url + "/v1") as provider:
        agent = Agent(provider, config=FAST)
        first = events(agent.run("think"))
        done = first[-1]
        assert isinstance(done, TurnComplete)
        assert done.stop_reason is StopReason.MAX_TOKENS
        (kept,) = agent.conversation.messages[1].content
        assert isinstance(kept, Thinking) and "ENC-CUT" in (kept.signature or "")
        events(agent.run("again"))
    kinds = [i.get("type", i.get("role")) for i in loopback.requests[1].json["input"]]
    assert kinds == ["user", "user"]


@dataclass
class City:
    name: str
    population: int


def test_structured_output_asks_for_the_schema_as_the_text_format(
    loopback: LoopbackServer,
) -> None:
    loopback.add(Reply.sse(responses_body(['{"name": "Oslo", "population": 709000}'])))
    with OpenAIResponses("gpt-5", loopback.url + "/v1") as provider:
        done = Agent(provider, config=FAST).ask("Largest city in Norway?", output=City)
    assert done.output == City("Oslo", 709000)
    text = loopback.requests[0].json["text"]
    assert text["format"]["type"] == "json_schema"
    assert text["format"]["name"] == "City" and text["format"]["strict"] is True
    assert text["format"]["schema"]["required"] == ["name", "population"]
