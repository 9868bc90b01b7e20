"""Reasoning a chat-completions server streamed goes back to it in tool turns.

DeepSeek's thinking mode (and Kimi's) refuses a request whose assistant tool-call
message lacks the ``reasoning_content`` it streamed (400, "Missing `reasoning_content`
field in the assistant message at message index 2", api-docs.deepseek.com/guides/
thinking_mode#tool-calls); since V4 that holds for every later request, in later user
turns too. Reasoning of a turn without tool calls is not needed there (it is ignored),
so it is not sent. Whole turns run through ``Agent`` against a loopback server that
checks each request as DeepSeek does.
"""

from __future__ import annotations

from typing import Any

import orjson
from loopback import LoopbackServer, Reply
from wire_streams import openai_body

from navi_core import Agent, Config, RetryPolicy, tool
from navi_core.conversation import Message, Text, Thinking, ToolUse, UserMessage
from navi_core.providers.base import ProviderRequest
from navi_core.providers.openai_chat import OpenAIChat

ONCE = Config(retry=RetryPolicy(max_attempts=1))
WEATHER = ("call_0", "weather", ['{"city":', '"Oslo"}'])
CALL = {
    "id": "call_0",
    "type": "function",
    "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
}


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def missing_reasoning(messages: list[dict[str, Any]]) -> int | None:
    """The index of the first assistant tool-call message without reasoning_content
    (what DeepSeek's thinking mode refuses), or None."""
    for i, message in enumerate(messages):
        calls = message["role"] == "assistant" and message.get("tool_calls")
        if calls and "reasoning_content" not in message:
            return i
    return None


class DeepSeekLike(LoopbackServer):
    """Answers a request missing a tool-call message's reasoning_content with the 400
    DeepSeek sends; any other request gets the next scripted reply."""

    def _take_reply_locked(self) -> Reply:
        at = missing_reasoning(self.requests[-1].json["messages"])
        if at is None:
            return super()._take_reply_locked()
        message = (
            f"Missing `reasoning_content` field in the assistant message at message "
            f"index {at}. For more information, please refer to "
            "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
        )
        error = {"message": message, "type": "invalid_request_error", "param": None}
        return Reply.json(400, {"error": {**error, "code": "invalid_request_error"}})


def test_a_tool_call_goes_back_with_its_reasoning() -> None:
    """The second request of a tool loop carries the reasoning the server streamed
    with the call, so DeepSeek takes it."""
    with DeepSeekLike() as server:
        server.add(
            Reply.sse(openai_body(reasoning=["Need the ", "weather tool."],
                                  tool_calls=[WEATHER])),
            Reply.sse(openai_body(["Sunny in Oslo."], reasoning=["It is sunny."])),
        )  # fmt: skip
        with OpenAIChat("deepseek-reasoner", server.url + "/v1", "k") as provider:
            agent = Agent(provider, tools=[weather], system="s", config=ONCE)
            assert agent.ask("weather in Oslo?").response == "Sunny in Oslo."
        second = server.requests[1].json["messages"]
    assert second[2] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Need the weather tool.",
        "tool_calls": [CALL],
    }
    assert second[3] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "sunny in Oslo",
    }
    assert len(server.requests) == 2


def test_later_turns_keep_tool_turns_reasoning_and_drop_the_rest() -> None:
    """In a new user turn the earlier tool turn's messages still carry their reasoning
    (DeepSeek V4 refuses them without it), its final answer's included; a turn
    without tool calls sends none, in its own next request or later."""
    with DeepSeekLike() as server:
        server.add(
            # turn 1: a tool call, then the answer
            Reply.sse(openai_body(reasoning=["Need the tool."], tool_calls=[WEATHER])),
            Reply.sse(openai_body(["Sunny."], reasoning=["Say it."])),
            # turn 2: no tool
            Reply.sse(openai_body(["Yes."], reasoning=["Plain."])),
            # turn 3
            Reply.sse(openai_body(["Bye."], reasoning=["Done."])),
        )
        with OpenAIChat("deepseek-v4-flash", server.url + "/v1", "k") as provider:
            agent = Agent(provider, tools=[weather], config=ONCE)
            for prompt in ("weather in Oslo?", "sure?", "thanks"):
                agent.ask(prompt)
        bodies = [r.json["messages"] for r in server.requests]
    assert len(bodies) == 4
    kept = [
        (m["role"], m.get("reasoning_content"), "tool_calls" in m) for m in bodies[3]
    ]
    assert kept == [
        ("user", None, False),
        ("assistant", "Need the tool.", True),
        ("tool", None, False),
        ("assistant", "Say it.", False),  # the answer of a tool turn
        ("user", None, False),
        ("assistant", None, False),  # turn 2 called no tool: "Plain." stays here
        ("user", None, False),
    ]
    assert bodies[2][:4] == bodies[3][:4]  # turn 1 is sent alike in every request
    assert "Plain." not in orjson.dumps(bodies[3]).decode()


def test_another_model_s_reasoning_is_not_sent(loopback: LoopbackServer) -> None:
    """Reasoning goes back only to the endpoint and model that streamed it: after a
    switch to another model the tool turn is sent without it, and the new model's
    own tool turn with its own."""
    loopback.add(
        Reply.sse(openai_body(reasoning=["Mine."], tool_calls=[WEATHER])),
        Reply.sse(openai_body(["Sunny."])),
        Reply.sse(
            openai_body(
                reasoning=["Theirs."],
                tool_calls=[("call_1", "weather", ['{"city":"Bergen"}'])],
            )
        ),
        Reply.sse(openai_body(["Still sunny."])),
    )
    url = loopback.url + "/v1"
    with OpenAIChat("deepseek-chat", url) as first, OpenAIChat("qwen3", url) as other:
        agent = Agent(first, tools=[weather], config=ONCE)
        agent.ask("weather in Oslo?")
        agent.provider = other
        agent.ask("and in general?")
    last = loopback.requests[3].json["messages"]
    sent = [m.get("reasoning_content") for m in last if m["role"] == "assistant"]
    assert sent == [None, None, "Theirs."]
    assert "Mine." not in loopback.requests[3].body.decode()


def test_send_reasoning_chooses_by_host_and_can_be_forced() -> None:
    """Groq and Cerebras refuse an assistant message with reasoning_content (400
    "property 'reasoning_content' is unsupported"), and OpenAI streams none: by
    default none is sent there. ``send_reasoning`` says it either way."""
    made = {
        "https://api.groq.com/openai/v1": False,
        "https://api.cerebras.ai/v1": False,
        "https://api.openai.com/v1": False,
        "https://api.deepseek.com": True,
        "https://api.moonshot.ai/v1": True,
        "http://127.0.0.1:8000/v1": True,
        "https://notgroq.com/v1": True,
    }
    for url, default in made.items():
        for send, expected in ((None, default), (True, True), (False, False)):
            with OpenAIChat("m", url, "k", send_reasoning=send) as provider:
                assert provider.send_reasoning is expected, (url, send)
                call = Message(
                    "assistant",
                    (Thinking("why"), ToolUse("call_0", "weather", "{}")),
                    wire=provider.wire,
                )
                request = ProviderRequest((UserMessage("go"), call), None, (), ONCE)
                body = orjson.loads(provider.encode_body(request))
                assert body == provider.build_body(request)
                sent = body["messages"][1].get("reasoning_content")
                assert sent == ("why" if expected else None), (url, send)


def test_a_message_without_reasoning_is_sent_as_before(
    loopback: LoopbackServer,
) -> None:
    """A call streamed without reasoning (as OpenAI's chat completions streams every
    call) is sent exactly as before, with no empty reasoning_content; a later call of
    the same loop that came with reasoning carries it."""
    loopback.add(
        Reply.sse(openai_body(["Looking."], tool_calls=[WEATHER])),
        Reply.sse(
            openai_body(
                reasoning=["Once more."],
                tool_calls=[("call_1", "weather", ['{"city":"Bergen"}'])],
            )
        ),
        Reply.sse(openai_body(["Sunny."])),
    )
    with OpenAIChat("gpt-4o", loopback.url + "/v1") as provider:
        Agent(provider, tools=[weather], config=ONCE).ask("weather in Oslo?")
    second, third = (r.json["messages"] for r in loopback.requests[1:])
    plain = {"role": "assistant", "content": "Looking.", "tool_calls": [CALL]}
    assert second[1] == plain
    assert third[1] == plain
    assert third[3]["reasoning_content"] == "Once more."


def test_reasoning_from_tags_goes_back_too(loopback: LoopbackServer) -> None:
    """Reasoning a server left in the content between <think> tags (Ollama or
    llama.cpp without a reasoning parser) is the server's own reasoning as well."""
    loopback.add(
        Reply.sse(openai_body(["<think>Use it.</think>"], tool_calls=[WEATHER])),
        Reply.sse(openai_body(["Sunny."])),
    )
    with OpenAIChat("qwen3", loopback.url + "/v1") as provider:
        agent = Agent(provider, tools=[weather], config=ONCE)
        agent.ask("weather in Oslo?")
    assert agent.conversation.messages[1].content[0] == Thinking("Use it.")
    second = loopback.requests[1].json["messages"]
    assert second[1] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Use it.",
        "tool_calls": [CALL],
    }
    assert Text("Sunny.") in agent.conversation.messages[-1].content
