"""Anthropic against a real HTTP server on 127.0.0.1: streams, requests, errors."""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterator

import pytest
from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body, drain, fixture, request

from navi_core import Agent, TurnComplete, tool
from navi_core._secrets import MAX_MESSAGE_CHARS
from navi_core.config import Config
from navi_core.conversation import (
    CompactionSummary,
    MediaPart,
    Message,
    RedactedThinking,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
)
from navi_core.errors import (
    AuthFailed,
    ContextOverflow,
    MalformedStream,
    Overloaded,
    RateLimited,
    TransportError,
)
from navi_core.events import TextDelta, ThinkingDelta, ToolCallStart
from navi_core.providers.anthropic import Anthropic
from navi_core.tools import ToolSpec

KEY = "sk-ant-api03-test-0123456789abcdef"


@pytest.fixture
def provider(loopback: LoopbackServer) -> Iterator[Anthropic]:
    # The request shapes without cache marks; test_anthropic_cache.py checks those.
    with Anthropic("claude-test", loopback.url, KEY, cache=False) as p:
        yield p


class TestStreams:
    @pytest.mark.parametrize("chunk", [None, 1, 11])
    def test_recorded_tool_use(
        self, loopback: LoopbackServer, provider: Anthropic, chunk: int | None
    ) -> None:
        loopback.add(Reply.sse(fixture("anthropic/tool_use.sse"), chunk=chunk))
        events, message = drain(provider, request("weather?"))
        assert message.text == "I'll check the current weather in Paris for you."
        (call,) = message.tool_uses
        assert (call.id, call.name) == ("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather")
        assert json.loads(call.input) == {"location": "Paris"}
        assert message.stop_reason == "tool_use"
        assert [e.name for e in events if isinstance(e, ToolCallStart)] == [
            "get_weather"
        ]

    def test_recorded_text_with_ping(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        body = fixture("anthropic/text_basic.sse")
        loopback.add(Reply.sse(body, trickle=True))
        events, message = drain(provider, request("hi"))
        expected = "".join(
            json.loads(line[6:])["delta"]["text"]
            for line in body.decode().splitlines()
            if line.startswith("data: ") and '"text_delta"' in line
        )
        assert message.text == expected != ""
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == expected

    def test_recorded_cut_tool_input(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        loopback.add(Reply.sse(fixture("anthropic/tool_use_padded_max_tokens.sse")))
        loopback.add(Reply.sse(anthropic_body([("text", ["ok"])])))
        _, message = drain(provider, request("hi"))
        assert message.stop_reason == "max_tokens"
        (call,) = message.tool_uses
        with pytest.raises(json.JSONDecodeError):
            json.loads(call.input)
        # The stored input stays as sent; the wire form is an empty object.
        result = Message("user", (ToolResult(call.id, (TextPart("bad"),), True),))
        drain(provider, request("hi", message, result))
        sent = loopback.requests[1].json["messages"][1]["content"]
        assert next(b for b in sent if b["type"] == "tool_use")["input"] == {}

    def test_thinking_signature_and_usage(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        usage = {
            "input_tokens": 12,
            "cache_read_input_tokens": 3000,
            "cache_creation_input_tokens": 500,
            "output_tokens": 1,
        }
        blocks = [
            ("thinking", (["Weigh ", "the options."], "EqQBCkYIARgCIkD+sig==")),
            ("redacted", "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"),
            ("text", ["Answer: ", "π ≈ 3.14 ✓"]),
        ]
        body = anthropic_body(blocks, usage=usage, output_tokens=321)
        loopback.add(Reply.sse(body, chunk=5))
        events, message = drain(provider, request("hi"))
        assert [e.text for e in events if isinstance(e, ThinkingDelta)] == [
            "Weigh ",
            "the options.",
        ]
        assert message.content == (
            Thinking("Weigh the options.", "EqQBCkYIARgCIkD+sig=="),
            RedactedThinking("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"),
            Text("Answer: π ≈ 3.14 ✓"),
        )
        assert message.usage == Usage(
            input=12, output=321, cache_read=3000, cache_write=500
        )

    def test_in_stream_overloaded_error(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        loopback.add(
            Reply.sse(fixture("synthetic/anthropic_midstream_overloaded_error.sse"))
        )
        with pytest.raises(Overloaded, match="Overloaded"):
            drain(provider, request("hi"))

    def test_in_stream_other_error(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        body = anthropic_body([("text", ["x"])], error=("rate_limit_error", "Too fast"))
        loopback.add(Reply.sse(body))
        with pytest.raises(RateLimited, match="Too fast"):
            drain(provider, request("hi"))

    def test_in_stream_error_echoing_the_key_is_redacted_and_cut(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        words = f"invalid x-api-key {KEY} " + "z" * 3_000 + KEY
        body = anthropic_body([("text", ["x"])], error=("authentication_error", words))
        assert b"event: error" in body
        loopback.add(Reply.sse(body))
        with pytest.raises(AuthFailed) as info:
            drain(provider, request("hi"))
        raised = info.value
        assert raised.message.startswith("invalid x-api-key [REDACTED] zzz")
        assert len(raised.message) == MAX_MESSAGE_CHARS
        shown = "".join(traceback.format_exception(raised))
        for text in (str(raised), repr(raised), repr(raised.args), shown):
            assert KEY not in text

    def test_cut_before_message_stop(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        body = anthropic_body([("text", ["never ", "ends"])])
        loopback.add(Reply.sse(body[: body.index(b"event: message_delta")]))
        with pytest.raises(MalformedStream):
            drain(provider, request("hi"))

    def test_reset_mid_stream(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        body = anthropic_body([("text", ["never ", "ends"])])
        loopback.add(Reply(body=(body[:300],), reset=True))
        with pytest.raises(TransportError):
            drain(provider, request("hi"))

    def test_keep_alive(self, loopback: LoopbackServer, provider: Anthropic) -> None:
        loopback.add(Reply.sse(anthropic_body([("text", ["a"])])))
        loopback.add(Reply.sse(fixture("anthropic/refusal.sse")))
        drain(provider, request("hi"))
        _, refusal = drain(provider, request("hi"))
        assert refusal.stop_reason == "refusal"
        assert loopback.connections == 1


class TestErrors:
    def test_529_overloaded(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        err = {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        }
        loopback.add(Reply.json(529, err, [("retry-after", "3")]))
        with pytest.raises(Overloaded) as info:
            provider.open(request("hi"))
        assert (info.value.status_code, info.value.retry_after_ms) == (529, 3000)
        assert info.value.message == "Overloaded"

    def test_429(self, loopback: LoopbackServer, provider: Anthropic) -> None:
        err = {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "slow"},
        }
        loopback.add(Reply.json(429, err, [("retry-after", "0")]))
        with pytest.raises(RateLimited) as info:
            provider.open(request("hi"))
        assert info.value.retry_after_ms == 0

    def test_401_never_shows_the_key(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        err = {
            "type": "error",
            "error": {
                "type": "authentication_error",
                "message": f"invalid x-api-key {KEY}",
            },
        }
        loopback.add(Reply.json(401, err))
        with pytest.raises(AuthFailed) as info:
            provider.open(request("hi"))
        assert loopback.requests[0].headers["x-api-key"] == KEY
        for text in (str(info.value), repr(info.value), repr(provider)):
            assert KEY not in text
        assert "invalid x-api-key" in info.value.message

    def test_prompt_too_long(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        err = {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum",
            },
        }
        loopback.add(Reply.json(400, err))
        with pytest.raises(ContextOverflow):
            provider.open(request("hi"))


class TestRequest:
    def test_body_and_headers(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        loopback.add(Reply.sse(anthropic_body([("text", ["ok"])])))
        spec = ToolSpec("grep", "Search.", {"type": "object", "properties": {}})
        drain(provider, request("hello", system="Be brief.", tools=[spec]))
        sent = loopback.requests[0]
        assert (sent.method, sent.path) == ("POST", "/v1/messages")
        assert sent.headers["anthropic-version"] == "2023-06-01"
        assert sent.headers["x-api-key"] == KEY
        assert "authorization" not in sent.headers
        assert sent.json == {
            "model": "claude-test",
            "max_tokens": 4096,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hello"}]}
            ],
            "stream": True,
            "system": "Be brief.",
            "tools": [
                {
                    "name": "grep",
                    "description": "Search.",
                    "input_schema": spec.parameters,
                }
            ],
        }

    def test_options_thinking_and_config(self, loopback: LoopbackServer) -> None:
        thinking = {"type": "enabled", "budget_tokens": 2048}
        with Anthropic(
            "c",
            loopback.url,
            max_tokens=8000,
            thinking=thinking,
            top_k=5,
            anthropic_version="2024-01-01",
        ) as p:
            body = p.build_body(
                request("hi", config=Config(max_output_tokens=3000, temperature=1.0))
            )
            assert body["max_tokens"] == 3000
            assert body["thinking"] == thinking
            assert body["temperature"] == 1.0 and body["top_k"] == 5
            loopback.add(Reply.sse(anthropic_body([("text", ["ok"])])))
            drain(p, request("hi"))
        assert loopback.requests[0].headers["anthropic-version"] == "2024-01-01"

    def test_no_key_no_header(
        self, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", loopback.url + "/")
        loopback.add(Reply.sse(anthropic_body([("text", ["ok"])])))
        with Anthropic("c") as p:
            assert p.wire.base_url == loopback.url
            drain(p, request("hi"))
        assert "x-api-key" not in loopback.requests[0].headers

    def test_follow_up_round_trips_thinking_and_tools(
        self, loopback: LoopbackServer, provider: Anthropic
    ) -> None:
        first = anthropic_body(
            [
                ("thinking", (["plan"], "SIG/abc+=")),
                ("redacted", "OPAQUE=="),
                ("text", ["Checking."]),
                ("tool", ("toolu_1", "read", ['{"path"', ': "a"}'])),
                ("tool", ("toolu_2", "shot", [])),
            ],
            stop="tool_use",
        )
        loopback.add(Reply.sse(first), Reply.sse(anthropic_body([("text", ["Done."])])))
        _, assistant = drain(provider, request("go"))
        results = Message(
            "user",
            (
                ToolResult("toolu_1", (TextPart("contents"),)),
                ToolResult(
                    "toolu_2",
                    (TextPart("see"), MediaPart("image/png", "iVBOR")),
                    is_error=False,
                ),
            ),
        )
        steer = Message("user", (Text("also check b"),))
        drain(provider, request("go", assistant, results, steer))
        messages = loopback.requests[1].json["messages"]
        assert messages[1] == {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "SIG/abc+="},
                {"type": "redacted_thinking", "data": "OPAQUE=="},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read",
                    "input": {"path": "a"},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "shot", "input": {}},
            ],
        }
        assert messages[2] == {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": False,
                    "content": [{"type": "text", "text": "contents"}],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "is_error": False,
                    "content": [
                        {"type": "text", "text": "see"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": "iVBOR",
                            },
                        },
                    ],
                },
                {"type": "text", "text": "also check b"},
            ],
        }
        assert len(messages) == 3

    def test_merging_and_skipping(self, provider: Anthropic) -> None:
        msgs = (
            Message("user", (CompactionSummary("earlier"),)),
            Message("user", (Text("next"), Text(""))),
            Message("assistant", (Thinking("unsigned"),)),
            Message("user", (Text("again"),)),
            Message("assistant", (ToolUse("t1", "x", "[1]"),)),
            Message(
                "user",
                (Text("note"), ToolResult("t1", (TextPart("boom"),), is_error=True)),
            ),
        )
        messages = provider.build_body(request(*msgs))["messages"]
        assert messages == [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "Summary of the earlier conversation:\n\nearlier",
                    },
                    {"type": "text", "text": "next"},
                    {"type": "text", "text": "again"},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "boom"}],
                    },
                    {"type": "text", "text": "note"},
                ],
            },
        ]

    def test_repr_and_wire(self, provider: Anthropic, loopback: LoopbackServer) -> None:
        assert (
            repr(provider)
            == f"Anthropic(model='claude-test', base_url='{loopback.url}')"
        )
        assert provider.wire.api_style == "anthropic-messages"
        with pytest.raises(ValueError, match="max_tokens"):
            Anthropic("c", loopback.url, max_tokens=0)

    def test_credentials_in_base_url_are_sent_but_never_shown(
        self, loopback: LoopbackServer
    ) -> None:
        raw = "https://user:s3cret@host/v1?api_key=s3cret"
        with Anthropic("c", raw) as p:
            assert p.wire.base_url == p.base_url == "https://host/v1"
            assert repr(p) == "Anthropic(model='c', base_url='https://host/v1')"
        port = loopback.url.rpartition(":")[2]
        loopback.add(Reply.sse(anthropic_body([("text", ["ok"])])))
        with Anthropic("c", f"http://user:s3cret@127.0.0.1:{port}/?key=s3cret") as p:
            _, message = drain(p, request("hi"))
        assert message.wire is not None
        assert message.wire.base_url == f"http://127.0.0.1:{port}"
        assert "s3cret" not in repr(message)
        sent = loopback.requests[0]
        assert sent.path == "/v1/messages?key=s3cret"
        assert sent.headers["authorization"] == "Basic dXNlcjpzM2NyZXQ="


# --- thinking blocks that carry no text (thinking display "omitted") ---------------

ADDED: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    ADDED.append((a, b))
    return str(a + b)


@pytest.mark.parametrize("chunk", [None, 11])
def test_a_thinking_block_with_no_text_goes_back_with_its_own_signature(
    loopback: LoopbackServer, chunk: int | None
) -> None:
    """Each thinking block is its own ``Thinking``: one with a signature and no text
    (right after another thinking block) is kept and sent back as it came."""
    first = anthropic_body(
        [
            ("thinking", (["A"], "SIG-A")),
            ("thinking", ([], "SIG-B")),
            ("tool", ("toolu_1", "add", ['{"a": 1, ', '"b": 2}'])),
        ],
        stop="tool_use",
    )
    loopback.add(
        Reply.sse(first, chunk=chunk), Reply.sse(anthropic_body([("text", ["3"])]))
    )
    ADDED.clear()
    with Anthropic("claude-test", loopback.url, KEY, cache=False) as provider:
        agent = Agent(provider, tools=[add])
        with agent.run("1 + 2?") as stream:
            events = list(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert (done.response, ADDED) == ("3", [(1, 2)])
    assert agent.conversation.messages[1].content[:2] == (
        Thinking("A", "SIG-A"),
        Thinking("", "SIG-B"),
    )
    assert loopback.requests[1].json["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "A", "signature": "SIG-A"},
        {"type": "thinking", "thinking": "", "signature": "SIG-B"},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}},
    ]
