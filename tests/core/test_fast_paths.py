"""Chunks the compiled fast path takes as well as the readers: the same deltas."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

from chunking import feed_all

from navi_core._deltas import DONE, MODEL, TEXT, TOOL_ARGS, TOOL_START


def sse(*payloads: Any) -> bytes:
    return b"".join(
        b"data: " + (p if isinstance(p, bytes) else json.dumps(p).encode()) + b"\n\n"
        for p in payloads
    )


def test_another_choice_gives_only_its_model(core: ModuleType) -> None:
    """n > 1: a chunk for choice 1 changes the model, and starts no tool call."""
    call = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
    first = {"index": 0, "id": "c0", "function": {"name": "g", "arguments": "{"}}
    raw = sse(
        {
            "model": "m1",
            "choices": [
                {"index": 1, "delta": {"tool_calls": [call]}, "finish_reason": "stop"}
            ],
        },
        {"model": "m2", "choices": [{"index": 0, "delta": {"tool_calls": [first]}}]},
        b'{"model":"m2","choices":[{"index":12,"delta":{"content":"x"}}]}',
    )
    assert feed_all(core.OpenAIChatParser, raw) == [
        (MODEL, "m1"),
        (MODEL, "m2"),
        (TOOL_START, 0, "c0", "g"),
        (TOOL_ARGS, 0, "{"),
    ]


def test_message_stop_is_done_whatever_else_it_holds(core: ModuleType) -> None:
    raw = sse(
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "message_stop", "index": 3, "extra": [1, {"a": None}]},
        b'{"type":"message_stop"}',
    )  # fmt: skip
    assert feed_all(core.AnthropicParser, raw) == [(TEXT, "hi"), (DONE,), (DONE,)]
