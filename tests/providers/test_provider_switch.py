"""One session through Anthropic -> OpenAI Chat -> Responses -> Anthropic over loopback:
each request is valid for its API, reasoning of one API never reaches another, and each
API gets its own reasoning back unchanged, also after the session is reopened."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body, openai_body, responses_body

from navi_core import (
    Agent,
    Anthropic,
    OpenAIChat,
    OpenAIResponses,
    RedactedThinking,
    SQLiteStore,
    Thinking,
    TurnComplete,
    tool,
)
from navi_core.stream import Stream

SIGNATURE = "EqQBCkYIARgCIkBANTHROPIC-SIGNATURE"
REDACTED = "EmwKAhgBEgy3REDACTED-DATA"
ENCRYPTED = "gAAAAABENCRYPTED-REASONING"


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return f"value of {key}"


def turn(stream: Stream) -> TurnComplete:
    with stream:
        done = list(stream)[-1]
    assert isinstance(done, TurnComplete)
    return done


def check_anthropic(body: dict[str, Any]) -> None:
    """Roles alternate, start with the user, each tool_use is answered next."""
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    for before, after in pairwise(messages):
        assert before["role"] != after["role"]
        uses = [b["id"] for b in before["content"] if b["type"] == "tool_use"]
        if uses:
            results = [
                b["tool_use_id"] for b in after["content"] if b["type"] == "tool_result"
            ]
            assert results == uses
    for message in messages:
        for block in message["content"]:
            assert block["type"] in {
                "text",
                "thinking",
                "redacted_thinking",
                "tool_use",
                "tool_result",
                "image",
            }
            if block["type"] == "thinking":
                assert block["signature"] == SIGNATURE


def check_chat(body: dict[str, Any]) -> None:
    messages = body["messages"]
    for i, message in enumerate(messages):
        assert set(message) <= {"role", "content", "tool_calls", "tool_call_id"}
        for call in message.get("tool_calls", ()):
            answers = [
                m for m in messages[i + 1 :] if m.get("tool_call_id") == call["id"]
            ]
            assert len(answers) == 1


def check_responses(body: dict[str, Any]) -> None:
    items = body["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert calls == outputs
    for item in items:
        if item.get("type") == "reasoning":
            assert item["encrypted_content"] == ENCRYPTED


def test_switching_providers_keeps_every_request_valid(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(
        # 1: Anthropic thinks (signed), redacts some, calls a tool, then answers
        Reply.sse(anthropic_body([
            ("thinking", (["Let me ", "look."], SIGNATURE)),
            ("redacted", REDACTED),
            ("tool", ("toolu_01", "lookup", ['{"key":', '"a"}'])),
        ], stop="tool_use")),
        Reply.sse(anthropic_body([("text", ["a is known."])])),
        # 2: OpenAI Chat with reasoning_content (a vLLM/DeepSeek style server)
        Reply.sse(openai_body(["b too."], reasoning=["hmm"])),
        # 3: Responses: a reasoning item, a call, then the answer
        Reply.sse(responses_body(
            reasoning=[(["checking c"], ENCRYPTED)],
            tool_calls=[("call_r1", "lookup", ['{"key":"c"}'])],
        )),
        Reply.sse(responses_body(["c is known."])),
        # 4: back on Anthropic, in a reopened session
        Reply.sse(anthropic_body([("text", ["All three."])])),
    )  # fmt: skip
    db = tmp_path / "navi.db"
    url = loopback.url
    claude, chat = Anthropic("claude-x", url), OpenAIChat("qwen", url + "/v1")
    responses = OpenAIResponses("gpt-5", url + "/v1")
    with claude, chat, responses:
        with (
            SQLiteStore(db) as store,
            Agent(claude, tools=[lookup], store=store) as agent,
        ):
            sid = agent.session_id
            assert turn(agent.run("What is a?")).response == "a is known."
            agent.provider = chat
            assert turn(agent.run("And b?")).response == "b too."
            agent.provider = responses
            assert turn(agent.run("And c?")).response == "c is known."
        with (
            SQLiteStore(db) as store,
            Agent(claude, tools=[lookup], store=store, session=sid) as again,
        ):
            assert turn(again.run("All of them?")).response == "All three."

    bodies = [r.json for r in loopback.requests]
    texts = [orjson.dumps(b).decode() for b in bodies]
    assert [r.path for r in loopback.requests] == [
        "/v1/messages", "/v1/messages", "/v1/chat/completions",
        "/v1/responses", "/v1/responses", "/v1/messages",
    ]  # fmt: skip
    for i in (0, 1, 5):
        check_anthropic(bodies[i])
    check_chat(bodies[2])
    check_responses(bodies[3])
    check_responses(bodies[4])

    # OpenAI Chat and Responses never see Anthropic's signature or redacted thinking
    for i in (2, 3, 4):
        assert SIGNATURE not in texts[i] and REDACTED not in texts[i]
    # Anthropic and Chat never see the encrypted reasoning item
    for i in (2, 5):
        assert ENCRYPTED not in texts[i]
    # Anthropic gets its own blocks back unchanged, in place, after the reopen
    first_answer = bodies[5]["messages"][1]["content"]
    assert first_answer[:3] == [
        {"type": "thinking", "thinking": "Let me look.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {"key": "a"}},
    ]
    # Responses gets its reasoning item back, before its call, within its own loop
    items = bodies[4]["input"]
    kinds = [i.get("type", i.get("role")) for i in items]
    reasoning_at = kinds.index("reasoning")
    assert items[reasoning_at]["encrypted_content"] == ENCRYPTED
    assert kinds[reasoning_at + 1] == "function_call"
    # the stored session kept each message's API and every reasoning block
    with SQLiteStore(db) as store, Agent(chat, store=store, session=sid) as reopened:
        messages = reopened.conversation.messages
    styles = [m.wire.api_style for m in messages
              if m.role == "assistant" and m.wire is not None]  # fmt: skip
    assert styles == [
        "anthropic-messages", "anthropic-messages", "openai-chat",
        "openai-responses", "openai-responses", "anthropic-messages",
    ]  # fmt: skip
    blocks = [b for m in messages for b in m.content]
    assert RedactedThinking(REDACTED) in blocks
    signed = [b.signature for b in blocks if isinstance(b, Thinking) and b.signature]
    assert signed[0] == SIGNATURE and ENCRYPTED in signed[1]


def test_reasoning_stays_with_its_model(loopback: LoopbackServer) -> None:
    """Another model behind the same API gets the text and calls, not the reasoning."""
    loopback.add(
        Reply.sse(responses_body(["first"], reasoning=[(["why"], ENCRYPTED)])),
        Reply.sse(responses_body(["second"])),
        Reply.sse(responses_body(["third"])),
    )
    url = loopback.url + "/v1"
    with (
        OpenAIResponses("o4-mini", url) as thinker,
        OpenAIResponses("gpt-4o", url) as plain,
    ):
        agent = Agent(thinker)
        turn(agent.run("one"))
        agent.provider = plain
        turn(agent.run("two"))
        agent.provider = thinker
        turn(agent.run("three"))
    second, third = (orjson.dumps(r.json).decode() for r in loopback.requests[1:])
    assert ENCRYPTED not in second and '"first"' in second
    assert ENCRYPTED in third  # back on the model that wrote it
