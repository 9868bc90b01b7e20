"""The body cache holds what it counts: exact-size bytes, bounded by the memory they take.

orjson returns its output in the buffer it wrote it to (KiBs for a 60-byte result), so
bytes kept as orjson returns them cost far more than their length. These tests measure
with ``tracemalloc``, which sees the buffers whatever ``sys.getsizeof`` says.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from unittest import mock

import orjson
import pytest

from navi_core.conversation import Message, Text, TextPart, ToolResult, ToolUse
from navi_core.providers import body_cache
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.base import ProviderRequest
from navi_core.providers.body_cache import MessageCache, exact
from navi_core.providers.openai_chat import OpenAIChat

URL = "http://127.0.0.1:9"


@dataclass(frozen=True)
class Settings:
    max_output_tokens: int | None = None
    temperature: float | None = None
    coalesce_deltas: bool = False


def small_message(i: int) -> Message:
    if i % 2:
        return Message("assistant", (ToolUse(f"call_{i}", "add", '{"a":1,"b":2}'),))
    return Message("user", (ToolResult(f"call_{i - 1}", (TextPart(f"RZQ17 {i}"),)),))


@pytest.fixture
def cache() -> Iterator[MessageCache]:
    """A fresh cache in place of the process-wide one."""
    fresh = MessageCache()
    with mock.patch.object(body_cache, "CACHE", fresh):
        yield fresh


def traced(build: object) -> tuple[int, object]:
    """The memory ``build()`` leaves allocated, and what it returned."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()  # type: ignore[operator]
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, kept
    finally:
        tracemalloc.stop()


def test_exact_copies_to_the_size_of_the_data() -> None:
    data = orjson.dumps({"role": "tool", "tool_call_id": "call_1", "content": "3"})
    copy = exact(data)
    assert copy == data and type(copy) is bytes
    size, kept = traced(lambda: [exact(orjson.dumps({"n": i})) for i in range(500)])
    assert size / 500 < 2 * sys.getsizeof(copy)
    size_raw, raw = traced(lambda: [orjson.dumps({"n": i}) for i in range(500)])
    assert size < size_raw / 2  # what the copy saves: orjson's spare buffer
    del kept, raw


@pytest.mark.parametrize("make", [OpenAIChat, Anthropic], ids=["chat", "anthropic"])
def test_a_cached_message_costs_about_its_json(
    cache: MessageCache, make: type[OpenAIChat] | type[Anthropic]
) -> None:
    """Per message kept: the bytes (exact size), and the entry's small bookkeeping
    (its tuple, table slot and weak reference: ~650 bytes in all on Python 3.11+,
    ~760 on 3.10, whose objects are larger)."""
    provider = make("m", URL)
    n = 400
    history = tuple(small_message(i) for i in range(n))
    request = ProviderRequest(history, None, (), Settings())
    provider.encode_body(ProviderRequest(history[:1], None, (), Settings()))
    size, _ = traced(lambda: provider.encode_body(request) and None)
    per_message = size / n
    json_size = len(orjson.dumps(provider.build_body(request))) / n
    # a 1 KiB+ orjson buffer per message would be well above this
    assert per_message < 4 * json_size + 400, (per_message, json_size)
    provider.close()


def test_the_byte_limit_holds_in_real_memory(cache: MessageCache) -> None:
    """Messages only the cache keeps alive: what they hold stays near ``max_bytes``."""
    limit = 256 * 1024
    bounded = MessageCache(max_bytes=limit)
    provider = OpenAIChat("m", URL)

    def fill() -> None:
        with mock.patch.object(body_cache, "CACHE", bounded):
            for i in range(3000):
                message = Message("user", (Text(f"question {i}"),))
                provider.encode_body(ProviderRequest((message,), None, (), Settings()))

    provider.encode_body(ProviderRequest((small_message(0),), None, (), Settings()))
    size, _ = traced(fill)
    assert 0 < len(bounded) < 3000  # it did evict
    assert bounded.nbytes <= limit + 1024
    assert size <= 1.5 * limit, size  # what it counts is what it holds
    provider.close()


def test_the_message_limit_still_applies() -> None:
    bounded = MessageCache(limit=10)
    kept = [Message("user", (Text(str(i)),)) for i in range(25)]
    for message in kept:
        bounded.put(message, "k", message.text, 1)
    assert len(bounded) <= 10


def test_one_message_in_two_formats() -> None:
    bounded = MessageCache()
    message = Message("user", (Text("hi"),))
    bounded.put(message, "a", 1, 10)
    bounded.put(message, "b", 2, 20)
    bounded.put(message, "a", 3, 5)
    assert (bounded.get(message, "a"), bounded.get(message, "b")) == (3, 2)
    assert bounded.get(message, "c") is None
    assert len(bounded) == 1 and bounded.nbytes == 35
