"""OpenAIChat against a real HTTP server on 127.0.0.1: streams, requests, errors."""

from __future__ import annotations

import email.utils
import json
import logging
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import httpx
import pytest
from loopback import LoopbackServer, Reply
from wire_streams import drain, fixture, openai_body, openai_chunk, request

from navi_core import (
    Agent,
    ProviderRetry,
    RetryPolicy,
    ToolFinished,
    TurnComplete,
    tool,
)
from navi_core._secrets import MAX_MESSAGE_CHARS
from navi_core.config import Config, Timeout
from navi_core.conversation import (
    CompactionSummary,
    MediaPart,
    Message,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
)
from navi_core.errors import (
    AuthFailed,
    BadRequest,
    ContextOverflow,
    IncompleteResponse,
    MalformedStream,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
    TransportError,
)
from navi_core.events import TextDelta, ThinkingDelta, ToolCallDelta, ToolCallStart
from navi_core.providers.base import RequestConfig
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.providers.scripted import Scripted
from navi_core.tools import ToolSpec

KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c"


@pytest.fixture
def provider(loopback: LoopbackServer) -> Iterator[OpenAIChat]:
    with OpenAIChat("gpt-test", loopback.url + "/v1", KEY) as p:
        yield p


def _expected_text(body: bytes) -> str:
    """The text of a recorded stream, read with the json module as an oracle."""
    out = []
    for line in body.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                if choice["index"] == 0:
                    delta = choice["delta"]
                    out.append(delta.get("content") or delta.get("refusal") or "")
    return "".join(out)


def _data(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class TestStreams:
    @pytest.mark.parametrize(
        "name", ["text_with_usage.sse", "refusal.sse", "finish_length.sse"]
    )
    @pytest.mark.parametrize("chunk", [None, 1, 7, 64])
    def test_recorded_text(
        self,
        loopback: LoopbackServer,
        provider: OpenAIChat,
        name: str,
        chunk: int | None,
    ) -> None:
        body = fixture(f"openai/{name}")
        loopback.add(Reply.sse(body, chunk=chunk))
        events, message = drain(provider, request("hi"))
        assert message.text == _expected_text(body) != ""
        assert (
            "".join(e.text for e in events if isinstance(e, TextDelta)) == message.text
        )
        assert message.usage is not None and message.usage.output > 0
        if name == "finish_length.sse":
            assert message.stop_reason == "max_tokens"

    def test_unicode_and_escapes_split_anywhere(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        pieces = [
            "Grüße 👋🏽",
            ' "quoted" \\ back',
            "\n\ttab",
            "日本語\u2028line",
            "\u2029é",
            "\x00\x1f end",
        ]
        body = openai_body(pieces)
        for size in (1, 2, 3, 5):
            loopback.add(Reply.sse(body, chunk=size))
        for _ in range(4):
            _, message = drain(provider, request("hi"))
            assert message.text == "".join(pieces)

    def test_many_small_deltas_assemble_exactly(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        texts = [f"{i}·" for i in range(1000)]
        fragments = ['{"xs": [0', *(f", {i}" for i in range(1, 600)), "]}"]
        body = openai_body(texts, tool_calls=[("c1", "f", fragments)])
        loopback.add(Reply.sse(body, chunk=4096))
        events, message = drain(provider, request("hi"))
        assert message.text == "".join(texts)
        assert json.loads(message.tool_uses[0].input) == {"xs": list(range(600))}
        assert sum(isinstance(e, TextDelta) for e in events) == 1000

    def test_trickled_one_byte_at_a_time(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        body = fixture("openai/tool_call_single.sse")
        loopback.add(Reply.sse(body, trickle=True))
        _, message = drain(provider, request("hi"))
        (call,) = message.tool_uses
        assert json.loads(call.input) and call.name

    def test_recorded_parallel_calls(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(Reply.sse(fixture("openai/tool_calls_parallel.sse"), chunk=13))
        _, message = drain(provider, request("hi"))
        names = [u.name for u in message.tool_uses]
        assert names == ["GetWeatherArgs", "get_stock_price"]
        assert json.loads(message.tool_uses[1].input) == {
            "ticker": "AAPL",
            "exchange": "NASDAQ",
        }
        assert message.stop_reason == "tool_use"

    def test_three_parallel_calls_in_fragments(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        calls = [
            ("call_a", "read_file", ['{"pa', 'th": "/etc/', 'hosts"}']),
            ("call_b", "grep", ["{", '"pattern": "\\\\d+",', ' "flags": ["i"]', "}"]),
            ("call_c", "now", []),
        ]
        loopback.add(
            Reply.sse(openai_body(["Let me look."], tool_calls=calls), chunk=9)
        )
        events, message = drain(provider, request("hi"))
        starts = [
            (e.index, e.id, e.name) for e in events if isinstance(e, ToolCallStart)
        ]
        assert starts == [
            (0, "call_a", "read_file"),
            (1, "call_b", "grep"),
            (2, "call_c", "now"),
        ]
        for index, (_, _, fragments) in enumerate(calls):
            got = [
                e.arguments
                for e in events
                if isinstance(e, ToolCallDelta) and e.index == index
            ]
            assert got == fragments
        assert message.content == (
            Text("Let me look."),
            ToolUse("call_a", "read_file", '{"path": "/etc/hosts"}'),
            ToolUse("call_b", "grep", '{"pattern": "\\\\d+", "flags": ["i"]}'),
            ToolUse("call_c", "now", "{}"),
        )

    def test_reasoning_content_and_usage_details(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        usage = {
            "prompt_tokens": 100,
            "completion_tokens": 40,
            "total_tokens": 140,
            "prompt_tokens_details": {"cached_tokens": 64},
            "completion_tokens_details": {"reasoning_tokens": 30},
        }
        body = openai_body(["42"], reasoning=["Let me ", "think."], usage=usage)
        loopback.add(Reply.sse(body))
        events, message = drain(provider, request("hi"))
        assert [e.text for e in events if isinstance(e, ThinkingDelta)] == [
            "Let me ",
            "think.",
        ]
        assert message.content == (Thinking("Let me think."), Text("42"))
        assert message.usage == Usage(input=36, output=40, cache_read=64, reasoning=30)

    def test_crlf_and_comments(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(Reply.sse(fixture("synthetic/openai_crlf_comments.sse"), chunk=3))
        _, message = drain(provider, request("hi"))
        assert message.text

    def test_in_stream_error_object(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        body = openai_chunk({"content": "par"}) + (
            b'data: {"error": {"message": "The server had an error", "type": "server_error"}}\n\n'
        )
        loopback.add(Reply.sse(body))
        with pytest.raises(ServerError, match="The server had an error"):
            drain(provider, request("hi"))

    def test_in_stream_status_codes_keep_their_meaning(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        """OpenRouter's mid-stream ``"code": 429`` is a rate limit, and vLLM's flat
        error object with ``"code": 400`` a bad request, not a broken response."""
        limited = {"error": {"code": 429, "message": "Rate limit exceeded"}}
        flat = {
            "object": "error",
            "message": "bad",
            "type": "BadRequestError",
            "code": 400,
        }
        loopback.add(
            Reply.sse(openai_chunk({"content": "par"}) + _data(limited)),
            Reply.sse(openai_chunk({"content": "par"}) + _data(flat)),
        )
        with pytest.raises(RateLimited, match="Rate limit exceeded") as info:
            drain(provider, request("hi"))
        assert info.value.retryable
        with pytest.raises(BadRequest, match="bad") as bad:
            drain(provider, request("hi"))
        assert not bad.value.retryable

    def test_in_stream_error_echoing_the_key_is_redacted_and_cut(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        # The key straddles the length cap: redacting after cutting would leak a part.
        words = "x" * (MAX_MESSAGE_CHARS - 10) + f" {KEY} " + "y" * 5_000
        error = {"error": {"message": words, "type": "invalid_request_error"}}
        loopback.add(Reply.sse(openai_chunk({"content": "par"}) + _data(error)))
        with pytest.raises(BadRequest) as info:
            drain(provider, request("hi"))
        raised = info.value
        assert len(raised.message) == MAX_MESSAGE_CHARS
        assert raised.message.startswith("x" * 100) and raised.message.endswith("...")
        shown = "".join(traceback.format_exception(raised))
        for text in (
            str(raised),
            repr(raised),
            raised.message,
            repr(raised.args),
            shown,
        ):
            assert KEY not in text and KEY[:12] not in text

    def test_in_stream_error_keeps_class_and_traceback(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        error = {"error": {"message": f"boom {KEY}", "type": "server_error"}}
        loopback.add(Reply.sse(openai_chunk({"content": "par"}) + _data(error)))
        with pytest.raises(ServerError) as info:
            drain(provider, request("hi"))
        raised = info.value
        assert raised.message == "boom [REDACTED]" and raised.args == (raised.message,)
        assert raised.retryable and raised.status_code is None
        assert raised.__cause__ is None and raised.__context__ is None
        # where the error object was read is still in the traceback
        frames = [f.name for f in traceback.extract_tb(raised.__traceback__)]
        assert any(name.rsplit(".", 1)[-1] == "feed" for name in frames), frames

    def test_cut_before_done_is_malformed(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(Reply.sse(fixture("synthetic/openai_truncated_no_done.sse")))
        with pytest.raises(MalformedStream):
            drain(provider, request("hi"))

    def test_bad_json_is_malformed(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(Reply.sse(b'data: {"choices": [\n\n'))
        with pytest.raises(MalformedStream):
            drain(provider, request("hi"))

    def test_reset_mid_stream(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        body = openai_body(["never finished"])
        loopback.add(Reply(body=(body[:150], 0.05), reset=True))
        with pytest.raises(TransportError) as info:
            drain(provider, request("hi"))
        assert isinstance(info.value.__cause__, httpx.TransportError)

    def test_read_timeout(self, loopback: LoopbackServer) -> None:
        body = openai_body(["slow"])
        loopback.add(Reply(body=(body[:100], 3.0, body[100:])))
        with OpenAIChat("m", loopback.url, timeout=Timeout(read=0.2)) as p:
            start = time.monotonic()
            with pytest.raises(TransportError, match="timed out"):
                drain(p, request("hi"))
            assert time.monotonic() - start < 2.5

    def test_timeout_before_headers(self, loopback: LoopbackServer) -> None:
        loopback.add(Reply(body=(openai_body(["x"]),), delay=3.0))
        with (
            OpenAIChat("m", loopback.url, timeout=Timeout(read=0.2)) as p,
            pytest.raises(TransportError),
        ):
            p.open(request("hi"))

    def test_connection_refused(self) -> None:
        with (
            OpenAIChat("m", "http://127.0.0.1:9/v1", timeout=Timeout(connect=1.0)) as p,
            pytest.raises(TransportError) as info,
        ):
            p.open(request("hi"))
        assert info.value.retryable

    def test_keep_alive_reuses_one_connection(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(
            Reply.sse(openai_body(["one"])), Reply.sse(openai_body(["two"]), chunk=50)
        )
        assert drain(provider, request("a"))[1].text == "one"
        assert drain(provider, request("b"))[1].text == "two"
        assert loopback.connections == 1
        assert [r.connection for r in loopback.requests] == [1, 1]

    def test_early_close_drops_the_connection(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(
            Reply(body=(openai_body(["a"])[:80], 0.5)), Reply.sse(openai_body(["b"]))
        )
        stream = provider.open(request("a"))
        stream.close()
        assert drain(provider, request("b"))[1].text == "b"
        assert loopback.connections == 2

    def test_json_instead_of_a_stream(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(Reply.json(200, {"choices": [{"message": {"content": "hi"}}]}))
        with pytest.raises(MalformedStream, match="expected an event stream"):
            provider.open(request("hi"))

    def test_error_object_with_status_200(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(
            Reply.json(200, {"error": {"message": "busy", "type": "overloaded_error"}})
        )
        with pytest.raises(Overloaded, match="busy"):
            provider.open(request("hi"))


class TestErrors:
    def test_429_retry_after_zero(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(
            Reply.json(
                429,
                {
                    "error": {
                        "message": "Rate limit reached for gpt-test",
                        "type": "requests",
                        "code": "rate_limit_exceeded",
                    }
                },
                [("retry-after", "0")],
            )
        )
        with pytest.raises(RateLimited) as info:
            provider.open(request("hi"))
        error = info.value
        assert (error.status_code, error.retry_after_ms) == (429, 0)
        assert error.message == "Rate limit reached for gpt-test"

    def test_retry_after_ms_wins(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(
            Reply.json(
                429,
                {"error": {"message": "slow"}},
                [("retry-after-ms", "1500"), ("retry-after", "9")],
            )
        )
        with pytest.raises(RateLimited) as info:
            provider.open(request("hi"))
        assert info.value.retry_after_ms == 1500

    def test_retry_after_http_date(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        date = email.utils.formatdate(time.time() + 20, usegmt=True)
        loopback.add(
            Reply.json(503, {"error": {"message": "later"}}, [("retry-after", date)])
        )
        with pytest.raises(ServerError) as info:
            provider.open(request("hi"))
        assert info.value.retry_after_ms is not None
        assert 15_000 <= info.value.retry_after_ms <= 21_000

    @pytest.mark.parametrize(
        ("status", "cls"), [(529, Overloaded), (500, ServerError), (502, ServerError)]
    )
    def test_server_side(
        self,
        loopback: LoopbackServer,
        provider: OpenAIChat,
        status: int,
        cls: type[ProviderError],
    ) -> None:
        loopback.add(Reply.text(status, "upstream failed"))
        with pytest.raises(cls, match="upstream failed") as info:
            provider.open(request("hi"))
        assert info.value.status_code == status and info.value.retryable

    def test_401_never_shows_the_key(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        echoed = {
            "error": {
                "message": f"Incorrect API key provided: {KEY}. Bearer {KEY}",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }
        loopback.add(Reply.json(401, echoed))
        with pytest.raises(AuthFailed) as info:
            provider.open(request("hi"))
        error = info.value
        assert loopback.requests[0].headers["authorization"] == f"Bearer {KEY}"
        for text in (
            str(error),
            repr(error),
            error.message,
            repr(error.args),
            repr(provider),
        ):
            assert KEY not in text
        assert "Incorrect API key provided" in error.message
        assert (
            repr(provider)
            == f"OpenAIChat(model='gpt-test', base_url='{loopback.url}/v1')"
        )

    @pytest.mark.parametrize("through", ["own connections", "an httpx.Client"])
    def test_debug_logs_never_show_the_key(
        self,
        loopback: LoopbackServer,
        caplog: pytest.LogCaptureFixture,
        through: str,
    ) -> None:
        caplog.set_level(logging.DEBUG)
        echoed = {"error": {"message": f"bad key {KEY}"}}
        loopback.add(Reply.json(401, echoed), Reply.sse(openai_body(["ok"])))
        client = httpx.Client() if through == "an httpx.Client" else None
        with OpenAIChat("gpt-test", loopback.url + "/v1", KEY, client=client) as p:
            with pytest.raises(AuthFailed):
                p.open(request("hi"))
            drain(p, request("hi"))
        # the records exist (httpx logs its own requests), and none shows the key
        names = {r.name.split(".")[0] for r in caplog.records}
        assert ("httpx" in names or "httpcore" in names) == (client is not None)
        assert any(r.name == "navi_core.http" for r in caplog.records)
        assert KEY not in caplog.text
        if client is not None:
            client.close()

    @pytest.mark.parametrize(
        ("status", "body", "words"),
        [
            pytest.param(
                400,
                {
                    "error": {
                        "message": "This model's maximum context length is 8192 "
                        "tokens. However, your messages resulted in 9000 tokens.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": "context_length_exceeded",
                    }
                },
                "maximum context length",
                id="openai",
            ),
            pytest.param(
                400,
                {
                    "object": "error",
                    "message": "This model's maximum context length is 4096 tokens. "
                    "However, you requested 5000 tokens (4000 in the messages, 1000 "
                    "in the completion).",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                },
                "4096 tokens",
                id="vllm",
            ),
            pytest.param(
                400,
                {
                    "error": {
                        "code": 400,
                        "message": "request (4476 tokens) exceeds the available "
                        "context size (4096 tokens)",
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": 4476,
                        "n_ctx": 4096,
                    }
                },
                "available context size",
                id="llama.cpp",
            ),
            pytest.param(
                400,
                {"error": "prompt too long; exceeded max context length by 17 tokens"},
                "by 17 tokens",
                id="ollama",
            ),
        ],
    )
    def test_context_overflow(
        self,
        loopback: LoopbackServer,
        provider: OpenAIChat,
        status: int,
        body: dict[str, object],
        words: str,
    ) -> None:
        loopback.add(Reply.json(status, body))
        with pytest.raises(ContextOverflow) as info:
            provider.open(request("hi"))
        assert info.value.status_code == status and words in info.value.message

    def test_huge_error_page_is_cut(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(Reply.text(502, "<html>" + "gateway " * 50_000))
        with pytest.raises(ServerError) as info:
            provider.open(request("hi"))
        assert len(info.value.message) <= 500
        # the connection was not left half-read
        loopback.add(Reply.sse(openai_body(["ok"])))
        assert drain(provider, request("hi"))[1].text == "ok"

    def test_key_absent_from_transport_errors(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(Reply(body=(b"data: {",), reset=True))
        with pytest.raises(ProviderError) as info:
            drain(provider, request("hi"))
        assert KEY not in str(info.value) and KEY not in repr(info.value)


class TestRequest:
    def test_body_and_headers(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        loopback.add(Reply.sse(openai_body(["ok"])))
        spec = ToolSpec(
            "read_file",
            "Read a file.",
            {"type": "object", "properties": {"path": {"type": "string"}}},
        )
        config = Config(max_output_tokens=256, temperature=0.2)
        drain(
            provider, request("hello", system="Be brief.", tools=[spec], config=config)
        )
        sent = loopback.requests[0]
        assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
        assert sent.headers["accept-encoding"] == "identity"
        assert sent.json == {
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hello"},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "description": "Read a file.",
                        "parameters": spec.parameters,
                    },
                }
            ],
            "max_tokens": 256,
            "temperature": 0.2,
        }

    def test_follow_up_carries_calls_and_results(
        self, loopback: LoopbackServer, provider: OpenAIChat
    ) -> None:
        calls = [
            ("call_a", "read_file", ['{"path": "a.txt"}']),
            ("call_b", "shot", ["{}"]),
            ("call_c", "bad", ['{"x": ']),
        ]
        loopback.add(
            Reply.sse(openai_body(["Looking."], reasoning=["hmm"], tool_calls=calls))
        )
        loopback.add(Reply.sse(openai_body(["Done."])))
        _, assistant = drain(provider, request("go"))
        results = Message(
            "user",
            (
                ToolResult("call_a", (TextPart("line 1"), TextPart("line 2"))),
                ToolResult(
                    "call_b",
                    (TextPart("a screenshot"), MediaPart("image/png", "iVBORw0KGgo=")),
                ),
                ToolResult(
                    "call_c", (TextPart("arguments are not valid JSON"),), is_error=True
                ),
            ),
        )
        drain(provider, request("go", assistant, results))
        messages = loopback.requests[1].json["messages"]
        assert messages[1] == {
            "role": "assistant",
            "content": "Looking.",
            # the reasoning its server streamed goes back within a tool turn
            "reasoning_content": "hmm",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "shot", "arguments": "{}"},
                },
                {
                    "id": "call_c",
                    "type": "function",
                    "function": {"name": "bad", "arguments": "{}"},
                },
            ],
        }
        assert messages[2:5] == [
            {"role": "tool", "tool_call_id": "call_a", "content": "line 1\nline 2"},
            {"role": "tool", "tool_call_id": "call_b", "content": "a screenshot"},
            {
                "role": "tool",
                "tool_call_id": "call_c",
                "content": "arguments are not valid JSON",
            },
        ]
        assert messages[5] == {
            "role": "user",
            "content": [
                {"type": "text", "text": "Image(s) from tool call shot (call_b):"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                },
            ],
        }
        assert len(messages) == 6

    def test_summary_and_image_only_results(self, provider: OpenAIChat) -> None:
        use = Message("assistant", (ToolUse("c1", "shot", "{}"),))
        result = Message(
            "user",
            (ToolResult("c1", (MediaPart("image/jpeg", "AAAA"),)), Text("and now?")),
        )
        body = provider.build_body(
            request(Message("user", (CompactionSummary("we talked"),)), use, result)
        )
        messages = body["messages"]
        assert messages[0] == {
            "role": "user",
            "content": "Summary of the earlier conversation:\n\nwe talked",
        }
        assert messages[1] == {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "shot", "arguments": "{}"},
                }
            ],
        }
        assert messages[2]["role"] == "tool" and "image" in messages[2]["content"]
        assert (
            messages[3]["content"][1]["image_url"]["url"]
            == "data:image/jpeg;base64,AAAA"
        )
        assert messages[3]["content"][2] == {"type": "text", "text": "and now?"}

    def test_options_and_max_completion_tokens(self, loopback: LoopbackServer) -> None:
        with OpenAIChat(
            "o3",
            loopback.url,
            max_tokens_field="max_completion_tokens",
            reasoning_effort="low",
            stream_options={"include_usage": False},
        ) as p:
            body = p.build_body(request("hi", config=Config(max_output_tokens=99)))
        assert body["max_completion_tokens"] == 99 and "max_tokens" not in body
        assert body["reasoning_effort"] == "low"
        assert body["stream_options"] == {"include_usage": False}
        with pytest.raises(ValueError, match="max_tokens_field"):
            OpenAIChat("m", loopback.url, max_tokens_field="tokens")  # type: ignore[arg-type]

    def test_no_key_no_authorization(
        self, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        loopback.add(Reply.sse(openai_body(["ok"])))
        with OpenAIChat("llama", loopback.url) as p:
            drain(p, request("hi"))
        assert "authorization" not in loopback.requests[0].headers
        assert loopback.requests[0].path == "/chat/completions"

    def test_an_empty_key_keeps_the_environment_s_key_from_a_local_server(
        self, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123")
        loopback.add(Reply.sse(openai_body(["ok"])))
        with OpenAIChat("llama", loopback.url, api_key="") as p:
            drain(p, request("hi"))
        assert "authorization" not in loopback.requests[0].headers

    def test_environment_defaults(
        self, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("OPENAI_BASE_URL", loopback.url + "/api/v1/")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123")
        loopback.add(Reply.sse(openai_body(["ok"])))
        with OpenAIChat("m") as p:
            assert p.wire.base_url == loopback.url + "/api/v1"
            drain(p, request("hi"))
        assert loopback.requests[0].path == "/api/v1/chat/completions"
        assert loopback.requests[0].headers["authorization"] == "Bearer sk-from-env-123"

    def test_default_base_url(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        with OpenAIChat("gpt-4o") as p:
            assert p.wire.base_url == "https://api.openai.com/v1"
            assert p.wire.api_style == "openai-chat"

    def test_bad_base_url(self) -> None:
        with pytest.raises(ValueError, match="base_url"):
            OpenAIChat("m", "localhost:11434/v1")
        with pytest.raises(ValueError, match="base_url") as info:
            OpenAIChat("m", "ftp://user:s3cret@host/v1")
        assert "s3cret" not in str(info.value)

    def test_credentials_in_base_url_are_sent_but_never_shown(self) -> None:
        raw = "https://user:s3cret@host/v1?api_key=s3cret"
        with OpenAIChat("m", raw) as p:
            assert p.wire.base_url == p.base_url == "https://host/v1"
            assert repr(p) == "OpenAIChat(model='m', base_url='https://host/v1')"
            assert "s3cret" not in repr(p.wire)

    def test_base_url_credentials_reach_the_server(
        self, loopback: LoopbackServer
    ) -> None:
        port = loopback.url.rpartition(":")[2]
        raw = f"http://user:s3cret@127.0.0.1:{port}/v1/?api_key=s3cret&api-version=2"
        loopback.add(Reply.sse(openai_body(["ok"])))
        with OpenAIChat("m", raw) as p:
            _, message = drain(p, request("hi"))
            assert p.base_url == f"http://127.0.0.1:{port}/v1?api-version=2"
        assert message.wire == p.wire and "s3cret" not in repr(message)
        sent = loopback.requests[0]
        assert sent.path == "/v1/chat/completions?api_key=s3cret&api-version=2"
        assert sent.headers["authorization"] == "Basic dXNlcjpzM2NyZXQ="

    def test_base_url_secrets_are_redacted_from_errors(
        self, loopback: LoopbackServer
    ) -> None:
        port = loopback.url.rpartition(":")[2]
        raw = f"http://127.0.0.1:{port}/v1?api_key=url-secret-77"
        loopback.add(Reply.json(400, {"error": {"message": "bad url-secret-77"}}))
        with OpenAIChat("m", raw) as p, pytest.raises(BadRequest) as info:
            p.open(request("hi"))
        assert info.value.message == "bad [REDACTED]"

    def test_custom_headers_and_shared_client(self, loopback: LoopbackServer) -> None:
        loopback.add(Reply.sse(openai_body(["a"])), Reply.sse(openai_body(["b"])))
        with httpx.Client() as client:
            with OpenAIChat(
                "m", loopback.url, headers={"api-key": "azure-secret-1"}, client=client
            ) as p:
                drain(p, request("hi"))
            with OpenAIChat("m", loopback.url, client=client) as p:
                drain(p, request("hi"))  # the shared client is still open
        assert loopback.requests[0].headers["api-key"] == "azure-secret-1"
        assert loopback.connections == 1

    def test_http2_flag_falls_back_to_http11_on_plain_http(
        self, loopback: LoopbackServer
    ) -> None:
        loopback.add(Reply.sse(openai_body(["ok"])))
        with OpenAIChat("m", loopback.url, http2=True) as p:
            assert drain(p, request("hi"))[1].text == "ok"


@dataclass(frozen=True)
class OlderSettings:
    """A ``RequestConfig`` written before ``coalesce_deltas`` existed."""

    max_output_tokens: int | None = None
    temperature: float | None = None


def test_a_request_config_without_coalesce_deltas_still_streams(
    loopback: LoopbackServer, provider: OpenAIChat
) -> None:
    loopback.add(Reply.sse(openai_body(["Hel", "lo"])))
    old = cast(RequestConfig, OlderSettings())
    events, message = drain(provider, request("hi", config=cast(Config, old)))
    assert message.text == "Hello"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    scripted = Scripted(["Hi there"], chunk_chars=2)
    events, message = drain(scripted, request("hi", config=cast(Config, old)))
    assert message.text == "Hi there"


# --- servers' own shapes: Ollama's parallel calls, a body with no [DONE] -------------

FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=5, jitter=False))
READ: list[str] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    READ.append(path)
    return f"content of {path}"


def _ollama_call(call_id: str, path: str, index: dict[str, int]) -> bytes:
    """A whole call in a chunk of its own, as Ollama streams each parallel call."""
    arguments = json.dumps({"path": path})
    function = {"name": "read_file", "arguments": arguments}
    call = {**index, "id": call_id, "type": "function", "function": function}
    delta = {"role": "assistant", "content": "", "tool_calls": [call]}
    return openai_chunk(delta, model="qwen3-coder:30b")


@pytest.mark.parametrize(
    "index", [{"index": 0}, {}], ids=["ollama-0.20-index-0", "no-index"]
)
def test_ollama_parallel_calls_run_with_their_own_ids(
    loopback: LoopbackServer, index: dict[str, int]
) -> None:
    body = b"".join(
        [
            _ollama_call("call_a1", "a", index),
            _ollama_call("call_b2", "b", index),
            openai_chunk(
                {"role": "assistant", "content": ""}, finish_reason="tool_calls"
            ),
            openai_chunk(usage={"prompt_tokens": 50, "completion_tokens": 20}),
            b"data: [DONE]\n\n",
        ]
    )
    loopback.add(Reply.sse(body, chunk=7), Reply.sse(openai_body(["Both read."])))
    READ.clear()
    with OpenAIChat("qwen3-coder:30b", loopback.url + "/v1") as provider:
        agent = Agent(provider, tools=[read_file], config=FAST)
        with agent.run("read a and b") as stream:
            events = list(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert (done.response, done.tool_calls) == ("Both read.", 2)
    assert sorted(READ) == ["a", "b"]
    finished = {e.call_id for e in events if isinstance(e, ToolFinished)}
    assert finished == {"call_a1", "call_b2"}
    messages = loopback.requests[1].json["messages"]
    assert [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in messages[1]["tool_calls"]
    ] == [
        ("call_a1", "read_file", '{"path": "a"}'),
        ("call_b2", "read_file", '{"path": "b"}'),
    ]
    assert messages[2:4] == [
        {"role": "tool", "tool_call_id": "call_a1", "content": "content of a"},
        {"role": "tool", "tool_call_id": "call_b2", "content": "content of b"},
    ]


def test_a_body_ending_after_the_finish_reason_completes_the_turn(
    loopback: LoopbackServer,
) -> None:
    """A server that sends no ``[DONE]``: the finish reason (and the usage after it)
    ended the answer, so the turn completes at once, never retried."""
    loopback.add(Reply.sse(openai_body(["Hel", "lo"], done=False), chunk=5))
    with OpenAIChat("gpt-test", loopback.url + "/v1") as provider:
        agent = Agent(provider, tools=[read_file], config=FAST)
        with agent.run("hi") as stream:
            events = list(stream)
    assert not [e for e in events if isinstance(e, ProviderRetry)]
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert (done.response, done.stop_reason) == ("Hello", "end_turn")
    assert agent.conversation.messages[1].usage == Usage(10, 5)
    assert len(loopback.requests) == 1


def test_a_body_ending_with_no_finish_reason_is_incomplete(
    loopback: LoopbackServer, provider: OpenAIChat
) -> None:
    body = openai_body(["Hel", "lo"], done=False)
    cut = body[: body.index(b'"finish_reason":"stop"')]
    loopback.add(Reply.sse(cut[: cut.rindex(b"data: ")]))
    with pytest.raises(IncompleteResponse):
        drain(provider, request("hi"))
