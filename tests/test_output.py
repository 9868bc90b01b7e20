"""Structured output: ``agent.run(prompt, output=T)`` over real HTTP on loopback, for
both APIs; the corrective retry; ``OutputValidationError``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypedDict

import orjson
import pytest
from loopback import LoopbackServer, Reply
from pydantic import BaseModel, Field

from navi_core import (
    Agent,
    AnyEvent,
    Message,
    Scripted,
    StopReason,
    Stream,
    Text,
    ToolUse,
    TurnComplete,
    tool,
)
from navi_core.errors import OutputValidationError
from navi_core.output import OUTPUT_TOOL, OutputSpec
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.tools._results import ResultText


@dataclass
class City:
    name: str
    population: int
    tags: list[str]


class Forecast(BaseModel):
    city: str
    high_c: float = Field(le=60)
    rain: bool


class Pair(TypedDict):
    left: int
    right: int


@pytest.fixture
def openai(loopback: LoopbackServer) -> Iterator[OpenAIChat]:
    provider = OpenAIChat("gpt-test", base_url=loopback.url + "/v1", api_key="k")
    yield provider
    provider.close()


@pytest.fixture
def anthropic(loopback: LoopbackServer) -> Iterator[Anthropic]:
    provider = Anthropic("claude-test", base_url=loopback.url, api_key="k")
    yield provider
    provider.close()


def sse(obj: Any, event: str | None = None) -> bytes:
    head = b"event: %b\n" % event.encode() if event else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return sse({"id": "c", "model": "gpt-test", "choices": [choice]})


OPENAI_USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}


def openai_text(text: str) -> Reply:
    body = (
        openai_chunk({"role": "assistant", "content": ""})
        + openai_chunk({"content": text[: len(text) // 2]})
        + openai_chunk({"content": text[len(text) // 2 :]})
        + openai_chunk({}, "stop")
        + sse({"id": "c", "model": "gpt-test", "choices": [], "usage": OPENAI_USAGE})
        + b"data: [DONE]\n\n"
    )
    return Reply.sse(body)


def openai_tools(*calls: tuple[str, str, Any]) -> Reply:
    """A chat-completions stream of tool calls, (id, name, arguments) each."""
    body = [openai_chunk({"role": "assistant", "content": ""})]
    for i, (call_id, name, arguments) in enumerate(calls):
        function = {"name": name, "arguments": json_text(arguments)}
        call = {"index": i, "id": call_id, "type": "function", "function": function}
        body.append(openai_chunk({"tool_calls": [call]}))
    body.append(openai_chunk({}, "tool_calls"))
    body.append(
        sse({"id": "c", "model": "gpt-test", "choices": [], "usage": OPENAI_USAGE})
    )
    body.append(b"data: [DONE]\n\n")
    return Reply.sse(b"".join(body))


def anthropic_tool(call_id: str, name: str, arguments: Any) -> Reply:
    return anthropic_tools((call_id, name, arguments))


def anthropic_tools(*calls: tuple[str, str, Any]) -> Reply:
    """A Messages stream of tool calls, (id, name, arguments) each, in one response."""
    start = {
        "type": "message_start",
        "message": {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 5, "output_tokens": 1},
        },
    }
    blocks: list[bytes] = []
    for i, (call_id, name, arguments) in enumerate(calls):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json_text(arguments)}
        blocks += [
            sse(
                {"type": "content_block_start", "index": i, "content_block": block},
                "content_block_start",
            ),
            sse(
                {"type": "content_block_delta", "index": i, "delta": delta},
                "content_block_delta",
            ),
            sse({"type": "content_block_stop", "index": i}, "content_block_stop"),
        ]
    body = b"".join(
        [
            sse(start, "message_start"),
            *blocks,
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 9},
                },
                "message_delta",
            ),
            sse({"type": "message_stop"}, "message_stop"),
        ]
    )
    return Reply.sse(body)


def drain(stream: Stream) -> list[AnyEvent]:
    out: list[AnyEvent] = []
    while (ev := stream.next()) is not None:
        out.append(ev)
    return out


def final(events: list[AnyEvent]) -> TurnComplete:
    done = events[-1]
    assert isinstance(done, TurnComplete)
    return done


def assert_every_call_answered_once(messages: list[Message]) -> None:
    """The stored conversation can be sent again: each assistant message's tool calls
    are answered by the next message, one result each, in the model's order."""
    for i, message in enumerate(messages):
        uses = message.tool_uses
        if message.role != "assistant" or not uses:
            continue
        answer = messages[i + 1]
        assert answer.role == "user"
        assert [r.tool_use_id for r in answer.tool_results] == [u.id for u in uses]
    answered = [r.tool_use_id for m in messages for r in m.tool_results]
    assert sorted(answered) == sorted(u.id for m in messages for u in m.tool_uses)


# -- OpenAI chat completions ---------------------------------------------------------


def test_openai_sends_a_strict_json_schema_and_returns_the_dataclass(
    loopback: LoopbackServer, openai: OpenAIChat
) -> None:
    loopback.add(
        openai_text('{"name": "Oslo", "population": 709000, "tags": ["fjord"]}')
    )
    agent = Agent(openai)
    done = final(drain(agent.run("Describe Oslo.", output=City)))
    assert done.output == City("Oslo", 709000, ["fjord"])
    (req,) = loopback.requests
    fmt = req.json["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "City" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["name", "population", "tags"]
    assert schema["additionalProperties"] is False


def test_openai_invalid_answer_gets_one_corrective_retry(
    loopback: LoopbackServer, openai: OpenAIChat
) -> None:
    loopback.add(
        openai_text('{"name": "Oslo", "population": "many", "tags": []}'),
        openai_text('```json\n{"name": "Oslo", "population": 709000, "tags": []}\n```'),
    )
    agent = Agent(openai)
    done = final(drain(agent.run("Describe Oslo.", output=City)))
    assert done.output == City("Oslo", 709000, [])
    assert done.iterations == 2
    correction = loopback.requests[1].json["messages"][-1]
    assert correction["role"] == "user"
    assert "`population`: expected integer, got string" in correction["content"]


def test_openai_two_invalid_answers_raise_output_validation_error(
    loopback: LoopbackServer, openai: OpenAIChat
) -> None:
    loopback.add(openai_text("Oslo is lovely."), openai_text('{"name": "Oslo"}'))
    agent = Agent(openai)
    stream = agent.run("Describe Oslo.", output=City)
    with pytest.raises(
        OutputValidationError, match=r"`population`: required field is missing"
    ):
        drain(stream)
    assert len(loopback.requests) == 2
    assert "not JSON" in loopback.requests[1].json["messages"][-1]["content"]


def test_openai_pydantic_output_bounds_are_checked(
    loopback: LoopbackServer, openai: OpenAIChat
) -> None:
    loopback.add(
        openai_text('{"city": "Oslo", "high_c": 99, "rain": false}'),
        openai_text('{"city": "Oslo", "high_c": 21.5, "rain": true}'),
    )
    agent = Agent(openai)
    done = final(drain(agent.run("Weather?", output=Forecast)))
    assert isinstance(done.output, Forecast) and done.output.high_c == 21.5
    assert (
        "`high_c`: expected a number at most 60"
        in loopback.requests[1].json["messages"][-1]["content"]
    )


# -- Anthropic Messages --------------------------------------------------------------


def test_anthropic_forces_the_output_tool_and_returns_the_model(
    loopback: LoopbackServer, anthropic: Anthropic
) -> None:
    loopback.add(
        anthropic_tool(
            "t1", OUTPUT_TOOL, {"city": "Bergen", "high_c": 12, "rain": True}
        )
    )
    agent = Agent(anthropic)
    done = final(drain(agent.run("Weather in Bergen?", output=Forecast)))
    assert done.output == Forecast(city="Bergen", high_c=12.0, rain=True)
    body = loopback.requests[0].json
    assert body["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL}
    (declared,) = body["tools"]
    assert declared["name"] == OUTPUT_TOOL
    assert declared["input_schema"]["properties"]["high_c"]["maximum"] == 60
    # the output call has its result, so the conversation stays valid for the next turn
    (receipt,) = agent.conversation.messages[-1].tool_results
    assert receipt.tool_use_id == "t1" and not receipt.is_error


def test_anthropic_with_tools_runs_them_then_takes_the_answer(
    loopback: LoopbackServer, anthropic: Anthropic
) -> None:
    @tool
    def population(city: str) -> int:
        """Look up a city's population."""
        return 285000 if city == "Bergen" else 0

    loopback.add(
        anthropic_tool("t1", "population", {"city": "Bergen"}),
        anthropic_tool(
            "t2", OUTPUT_TOOL, {"name": "Bergen", "population": 285000, "tags": []}
        ),
    )
    agent = Agent(anthropic, tools=[population])
    done = final(drain(agent.run("Bergen?", output=City)))
    assert done.output == City("Bergen", 285000, [])
    assert done.tool_calls == 1
    body = loopback.requests[0].json
    assert body["tool_choice"] == {"type": "any"}
    assert [t["name"] for t in body["tools"]] == ["population", OUTPUT_TOOL]


def test_anthropic_invalid_tool_input_is_corrected_through_its_result(
    loopback: LoopbackServer, anthropic: Anthropic
) -> None:
    loopback.add(
        anthropic_tool("t1", OUTPUT_TOOL, {"left": 1, "right": "2"}),
        anthropic_tool("t2", OUTPUT_TOOL, {"left": 1, "right": 2}),
    )
    agent = Agent(anthropic)
    done = final(drain(agent.run("Pair?", output=Pair)))
    assert done.output == {"left": 1, "right": 2}
    last = loopback.requests[1].json["messages"][-1]
    (result,) = last["content"]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert "`right`: expected integer, got string" in result["content"][0]["text"]


def test_anthropic_with_thinking_lets_the_model_choose(
    loopback: LoopbackServer,
) -> None:
    loopback.add(anthropic_tool("t1", OUTPUT_TOOL, {"left": 3, "right": 4}))
    thinking = {"type": "enabled", "budget_tokens": 1024}
    provider = Anthropic(
        "claude-test", base_url=loopback.url, api_key="k", thinking=thinking
    )
    try:
        done = final(drain(Agent(provider).run("Pair?", output=Pair)))
    finally:
        provider.close()
    assert done.output == {"left": 3, "right": 4}
    assert loopback.requests[0].json["tool_choice"] == {"type": "auto"}


# -- without a provider --------------------------------------------------------------


def test_without_output_nothing_changes(
    loopback: LoopbackServer, openai: OpenAIChat
) -> None:
    loopback.add(openai_text("plain"))
    agent = Agent(openai)
    done = final(drain(agent.run("hi")))
    assert done.output is None and done.response == "plain"
    assert "response_format" not in loopback.requests[0].json


def test_a_type_that_cannot_be_asked_for_is_refused_before_anything_is_stored() -> None:
    agent = Agent(Scripted([[Text("{}")]]))
    with pytest.raises(TypeError, match="dataclass, TypedDict or pydantic model"):
        agent.run("x", output=int)
    assert agent.conversation.messages == []


def test_scripted_text_answer_and_a_tool_call_in_between() -> None:
    @tool
    def two() -> int:
        """Two."""
        return 2

    agent = Agent(
        Scripted([[ToolUse("a", "two", "{}")], [Text('{"left": 2, "right": 2}')]]),
        tools=[two],
    )
    done = final(drain(agent.run("Pair of twos", output=Pair)))
    assert done.output == {"left": 2, "right": 2} and done.tool_calls == 1


def test_non_strict_schema_is_sent_without_strict() -> None:
    @dataclass
    class Loose:
        a: int
        b: int = 0

    spec = OutputSpec.of(Loose)
    assert spec.openai_response_format()["json_schema"]["strict"] is False
    assert spec.schema["additionalProperties"] is False


def test_final_answer_beside_other_tools_runs_them_and_asks_again() -> None:
    @tool
    def one() -> int:
        """One."""
        return 1

    agent = Agent(
        Scripted(
            [
                [ToolUse("a", "one", "{}"), ToolUse("b", OUTPUT_TOOL, '{"left": 1}')],
                [ToolUse("c", OUTPUT_TOOL, '{"left": 1, "right": 1}')],
            ]
        ),
        tools=[one],
    )
    done = final(drain(agent.run("Pair", output=Pair)))
    assert done.output == {"left": 1, "right": 1}
    ran, premature = agent.conversation.messages[2].tool_results
    assert (ran.text, ran.is_error) == ("1", False)
    assert premature.is_error and premature.text == NOT_ALONE


# -- a final answer beside other tool calls ------------------------------------------

#: what the model reads for a ``final_answer`` call made beside other calls
NOT_ALONE = (
    "Tool 'final_answer' was not run: it is accepted only on its own, after the "
    "results of your other calls, in a turn that asks for a structured answer. "
    "Call it again now, alone, if it is one of your tools; otherwise give the "
    "answer as your reply."
)


def test_the_text_for_a_final_answer_beside_other_calls_is_pinned() -> None:
    assert ResultText.output_not_alone(OUTPUT_TOOL) == NOT_ALONE
    assert ResultText.unknown(OUTPUT_TOOL, ["lookup"]) == NOT_ALONE
    assert ResultText.unknown("other", ["lookup"]) == (
        "Unknown tool 'other'; available tools: lookup."
    )


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_final_answer_beside_another_call_over_http_runs_it_and_asks_again(
    loopback: LoopbackServer, api: str
) -> None:
    """The model calls ``lookup`` and ``final_answer`` in one response (Anthropic's
    ``tool_choice: any`` allows it; a chat server may do it too): ``lookup`` runs,
    the premature answer is told truly why it was not taken, and the answer the
    model gives next ends the turn; every call keeps exactly one result."""
    looked_up: list[str] = []

    @tool
    def lookup(city: str) -> int:
        """Look up a city's population."""
        looked_up.append(city)
        return 285000

    answer = {"name": "Bergen", "population": 285000, "tags": []}
    both = (("c1", "lookup", {"city": "Bergen"}), ("c2", OUTPUT_TOOL, answer))
    provider: Anthropic | OpenAIChat
    if api == "anthropic":
        provider = Anthropic("claude-test", base_url=loopback.url, api_key="k")
        loopback.add(anthropic_tools(*both), anthropic_tool("c3", OUTPUT_TOOL, answer))
    else:
        provider = OpenAIChat("gpt-test", base_url=loopback.url + "/v1", api_key="k")
        loopback.add(openai_tools(*both), openai_text(json_text(answer)))
    try:
        agent = Agent(provider, tools=[lookup])
        done = final(drain(agent.run("Bergen?", output=City)))
    finally:
        provider.close()
    assert done.output == City("Bergen", 285000, [])
    assert done.stop_reason is StopReason.END_TURN
    assert len(loopback.requests) == 2 and looked_up == ["Bergen"]
    messages = agent.conversation.messages
    assert_every_call_answered_once(messages)
    ran, premature = messages[2].tool_results
    assert (ran.tool_use_id, ran.text, ran.is_error) == ("c1", "285000", False)
    assert (premature.tool_use_id, premature.is_error) == ("c2", True)
    assert premature.text == NOT_ALONE
    # what the model read in the second request
    sent = loopback.requests[1].json["messages"]
    if api == "anthropic":
        results = sent[-1]["content"]
        assert [r["tool_use_id"] for r in results] == ["c1", "c2"]
        assert results[1]["is_error"] is True
        assert results[1]["content"][0]["text"] == NOT_ALONE
    else:
        tool_messages = [m for m in sent if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2"]
        assert NOT_ALONE in str(tool_messages[1]["content"])


def test_a_final_answer_beside_other_calls_is_no_corrective_retry() -> None:
    """The call made beside others is not counted as an invalid answer: two invalid
    lone answers after it still get their one corrective retry first."""

    @tool
    def one() -> int:
        """One."""
        return 1

    agent = Agent(
        Scripted(
            [
                [ToolUse("a", "one", "{}"), ToolUse("b", OUTPUT_TOOL, '{"left": 1}')],
                [ToolUse("c", OUTPUT_TOOL, '{"left": 1}')],
                [ToolUse("d", OUTPUT_TOOL, '{"left": 1, "right": 1}')],
            ]
        ),
        tools=[one],
    )
    done = final(drain(agent.run("Pair", output=Pair)))
    assert done.output == {"left": 1, "right": 1}
    assert_every_call_answered_once(agent.conversation.messages)


def test_final_answer_in_a_turn_without_output_is_told_to_answer_as_text() -> None:
    """Without ``output=``, no ``final_answer`` is offered; a call of it (say, after
    an earlier structured turn) gets the same true text, which says to reply instead."""
    agent = Agent(Scripted([[ToolUse("a", OUTPUT_TOOL, '{"left": 1}')], [Text("one")]]))
    done = final(drain(agent.run("Pair")))
    assert done.response == "one" and done.output is None
    (result,) = agent.conversation.messages[2].tool_results
    assert result.is_error and result.text == NOT_ALONE
