"""OpenTelemetry spans of whole turns over loopback, read with the SDK's in-memory
exporter: a turn span, a chat span per response with model, tokens and finish reason,
an execute_tool span per call, all in one trace; errors marked; no key anywhere. And
the navi_core loggers: requests, retries, tool failures, never a key."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from loopback import LoopbackServer, Reply
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from wire_streams import anthropic_body, openai_body

from navi_core import (
    Agent,
    Anthropic,
    Config,
    OpenAIChat,
    ProviderRetry,
    ResponseDiscarded,
    RetryPolicy,
    Scripted,
    Text,
    tool,
)
from navi_core.errors import AuthFailed
from navi_core.tracing import instrument

KEY = "sk-tracing-secret-4242"
FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=5, jitter=False))


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@tool
def broken(path: str) -> str:
    """Always fails."""
    raise OSError(f"cannot open {path}")


@pytest.fixture
def exporter() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider, memory
    provider.shutdown()


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        out.setdefault(span.name.split(" ")[0], []).append(span)
    return out


def no_key(spans: tuple[ReadableSpan, ...]) -> None:
    for span in spans:
        assert KEY not in span.name
        for value in (span.attributes or {}).values():
            assert KEY not in str(value)


def test_a_tool_turn_makes_one_trace(
    loopback: LoopbackServer, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tracer_provider, memory = exporter
    calls = [("call_1", "add", ['{"a": 2, "b": 40}'])]
    usage = {"prompt_tokens": 50, "completion_tokens": 9,
             "prompt_tokens_details": {"cached_tokens": 20}}  # fmt: skip
    loopback.add(
        Reply.sse(openai_body(tool_calls=calls, usage=usage)),
        Reply.sse(openai_body(["42"])),
    )
    with OpenAIChat("gpt-test", loopback.url + "/v1", KEY) as provider:
        agent = instrument(Agent(provider, tools=[add], config=FAST), tracer_provider)
        with agent.run("2 + 40?") as stream:
            events = list(stream)
    assert events[-1].response == "42"  # type: ignore[union-attr]
    spans = memory.get_finished_spans()
    groups = by_name(spans)
    (turn,) = groups["invoke_agent"]
    chats = groups["chat"]
    (tool_span,) = groups["execute_tool"]
    assert len(chats) == 2
    trace_id = turn.context.trace_id
    for span in (*chats, tool_span):
        assert span.context.trace_id == trace_id
        assert span.parent is not None and span.parent.span_id == turn.context.span_id
    first = chats[0]
    assert first.name == "chat gpt-test" and first.kind == SpanKind.CLIENT
    attrs = dict(first.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-test"
    assert attrs["gen_ai.response.model"] == "gpt-test"
    assert attrs["gen_ai.usage.input_tokens"] == 50
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 20
    assert attrs["gen_ai.usage.output_tokens"] == 9
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert attrs["server.address"] == "127.0.0.1"
    assert dict(chats[1].attributes or {})["gen_ai.response.finish_reasons"] == (
        "end_turn",
    )
    tool_attrs = dict(tool_span.attributes or {})
    assert tool_span.name == "execute_tool add"
    assert tool_attrs["gen_ai.tool.call.id"] == "call_1"
    assert tool_span.status.status_code == StatusCode.UNSET
    turn_attrs = dict(turn.attributes or {})
    assert turn_attrs["gen_ai.operation.name"] == "invoke_agent"
    assert turn_attrs["gen_ai.conversation.id"] == agent.session_id
    assert turn_attrs["navi.turn.iterations"] == 2
    assert turn_attrs["navi.turn.tool_calls"] == 1
    assert turn_attrs["gen_ai.usage.output_tokens"] == 9 + 5
    # the chat spans lie within the turn, the tool span between the two chats
    times = [
        (s.start_time or 0, s.end_time or 0) for s in (turn, first, tool_span, chats[1])
    ]
    (turn_start, turn_end), (_, first_end), (_, tool_end), (_, second_end) = times
    assert turn_start <= times[1][0] and first_end <= tool_end <= second_end <= turn_end
    no_key(spans)


def test_failures_are_marked(
    loopback: LoopbackServer, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tracer_provider, memory = exporter
    calls = [("call_9", "broken", ['{"path": "/etc/x"}'])]
    loopback.add(
        Reply.sse(openai_body(tool_calls=calls)),
        Reply.json(401, {"error": {"message": f"bad key {KEY}"}}),
    )
    with OpenAIChat("gpt-test", loopback.url + "/v1", KEY) as provider:
        agent = instrument(
            Agent(provider, tools=[broken], config=FAST), tracer_provider
        )
        with pytest.raises(AuthFailed), agent.run("open it") as stream:
            list(stream)
    groups = by_name(memory.get_finished_spans())
    (tool_span,) = groups["execute_tool"]
    assert tool_span.status.status_code == StatusCode.ERROR
    failed_chat = groups["chat"][1]
    assert failed_chat.status.status_code == StatusCode.ERROR
    assert dict(failed_chat.attributes or {})["error.type"] == "AuthFailed"
    (turn,) = groups["invoke_agent"]
    assert turn.status.status_code == StatusCode.ERROR
    no_key(memory.get_finished_spans())


def test_loggers_report_requests_retries_and_tool_failures(
    loopback: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    limited = Reply.json(429, {"error": {"message": "slow"}}, [("retry-after", "0")])
    calls = [("toolu_1", "broken", ['{"path": "/x"}'])]
    loopback.add(
        limited,
        Reply.sse(anthropic_body([("tool", calls[0])], stop="tool_use")),
        Reply.sse(anthropic_body([("text", ["sorry"])])),
    )
    caplog.set_level(logging.DEBUG, logger="navi_core")
    url = loopback.url.replace("http://", f"http://user:{KEY}@")
    with Anthropic("claude-x", url) as provider:  # the key as the URL's password
        agent = Agent(provider, tools=[broken], config=FAST)
        with agent.run("open /x") as stream:
            list(stream)
    records = [r for r in caplog.records if r.name.startswith("navi_core")]
    text = "\n".join(r.getMessage() for r in records)
    assert f"POST {loopback.url}/v1/messages (claude-x): HTTP 429" in text
    assert "attempt 1/4 failed (RateLimited, HTTP 429): retrying in 0 ms" in text
    assert "Tool 'broken' failed: OSError: cannot open /x" in text
    assert "response body:" in text  # DEBUG: the wire details
    names = {r.name for r in records}
    assert {"navi_core.http", "navi_core.retry", "navi_core.tools"} <= names
    assert KEY not in text


def test_a_failed_attempt_that_showed_deltas_is_discarded_under_tracing(
    loopback: LoopbackServer, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    """The traced response tells what it showed, as the untraced one does: the host
    gets its ``ResponseDiscarded`` before the retry, and the failed attempt's span is
    marked."""
    tracer_provider, memory = exporter
    body = openai_body(["Hello ", "wor"], done=False)
    loopback.add(
        Reply(body=(body,), reset=True), Reply.sse(openai_body(["Hello ", "world"]))
    )
    config = Config(retry=RetryPolicy(max_attempts=2, initial_delay_ms=0))
    with OpenAIChat("gpt-test", loopback.url + "/v1", KEY) as provider:
        agent = instrument(Agent(provider, config=config), tracer_provider)
        with agent.run("hi") as stream:
            events = list(stream)
    kinds = [type(e) for e in events]
    i = kinds.index(ResponseDiscarded)
    assert kinds[i + 1] is ProviderRetry
    discarded = events[i]
    assert isinstance(discarded, ResponseDiscarded)
    assert (discarded.attempt, discarded.text_chars, discarded.tool_calls) == (1, 9, 0)
    chats = by_name(memory.get_finished_spans())["chat"]
    assert [c.status.status_code for c in chats] == [StatusCode.ERROR, StatusCode.UNSET]
    no_key(memory.get_finished_spans())


def test_an_instrumented_agent_takes_every_keyword_of_run_and_resume(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """``ask()`` passes ``output=`` to ``run()``, and ``resume()`` takes ``output=``:
    the instrumented methods pass keywords on."""
    tracer_provider, memory = exporter
    agent = instrument(
        Agent(Scripted([[Text("Hello.")], [Text("Again.")]])), tracer_provider
    )
    assert agent.ask("hi").response == "Hello."
    with agent.resume(output=None) as stream:  # nothing to resume: it just ends
        stream.result()
    agent.close()
    assert [s.name for s in memory.get_finished_spans()].count(
        "invoke_agent navi_core"
    ) == 2
