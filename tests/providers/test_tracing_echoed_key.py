"""A server that echoes the key where the trace records what it names (the response's
model, a tool call's name and id) does not get the key into a span: the provider's
credentials are redacted there, over loopback, read with the in-memory exporter;
through a cassette ``Recorder`` too, which keeps the provider it wraps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback import LoopbackServer, Reply
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from wire_streams import openai_chunk

from navi_core import Agent, OpenAIChat
from navi_core.providers.base import Provider
from navi_core.testing import Recorder
from navi_core.tracing import instrument

KEY = "sk-echoed-trace-LEAK-7391"


def _echoing_body() -> bytes:
    """A tool call whose model, name and id all quote the key (as a gateway that
    reflects the Authorization header might)."""
    echo = f"gpt-test Bearer {KEY}"
    start = {
        "index": 0,
        "id": f"call-{KEY}",
        "type": "function",
        "function": {"name": f"lookup_{KEY}", "arguments": "{}"},
    }
    return b"".join(
        [
            openai_chunk({"role": "assistant", "content": ""}, model=echo),
            openai_chunk({"tool_calls": [start]}, model=echo),
            openai_chunk(finish_reason="tool_calls", model=echo),
            b"data: [DONE]\n\n",
        ]
    )


def _answer() -> bytes:
    return b"".join(
        [
            openai_chunk({"role": "assistant", "content": "done"}, model=KEY),
            openai_chunk(finish_reason="stop", model=KEY),
            b"data: [DONE]\n\n",
        ]
    )


@pytest.fixture
def memory() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider, exporter
    tracer_provider.shutdown()


@pytest.mark.parametrize("recorded", [False, True], ids=["plain", "recorder"])
def test_a_key_the_server_echoes_stays_off_every_span(
    loopback: LoopbackServer,
    memory: tuple[TracerProvider, InMemorySpanExporter],
    tmp_path: Path,
    recorded: bool,
) -> None:
    tracer_provider, exporter = memory
    loopback.add(Reply.sse(_echoing_body()), Reply.sse(_answer()))
    with OpenAIChat("gpt-test", loopback.url + "/v1", KEY) as http:
        provider: Provider = http
        if recorded:
            provider = Recorder(http, tmp_path / "turn.jsonl")
        agent = instrument(Agent(provider), tracer_provider)
        with agent.run("look it up") as stream:
            list(stream)
        agent.close()
    spans = exporter.get_finished_spans()
    names = {span.name.split(" ")[0] for span in spans}
    assert {"invoke_agent", "chat", "execute_tool"} <= names
    for span in spans:
        assert KEY not in span.name
        for value in (span.attributes or {}).values():
            assert KEY not in str(value), (span.name, value)
    chat = next(s for s in spans if s.name.startswith("chat"))
    model = dict(chat.attributes or {})["gen_ai.response.model"]
    assert str(model).startswith("gpt-test ") and str(model).endswith("[REDACTED]")
    tool = next(s for s in spans if s.name.startswith("execute_tool"))
    assert tool.name == "execute_tool lookup_[REDACTED]"
    assert dict(tool.attributes or {})["gen_ai.tool.call.id"] == "call-[REDACTED]"
