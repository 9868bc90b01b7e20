"""The SSE encoding of events round-trips every event and every block type."""

from __future__ import annotations

import typing

import orjson
import pytest

from navi_core.conversation import (
    CompactionSummary,
    MediaPart,
    Message,
    RedactedThinking,
    System,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
    WireIdentity,
)
from navi_core.events import (
    PENDING,
    AnyEvent,
    Compacted,
    CompactionStarted,
    Elicitation,
    Event,
    HookFailure,
    Lagged,
    MessageComplete,
    ModelInfo,
    ProviderRetry,
    ResponseDiscarded,
    Steered,
    StopReason,
    SubagentEvent,
    TextDelta,
    ThinkingDelta,
    TodoItem,
    TodoUpdated,
    ToolCallDelta,
    ToolCallStart,
    ToolDispatchComplete,
    ToolDispatchStart,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnComplete,
)
from navi_core.serve.wire import EVENT_TYPES, WireError, decode_event, encode_event

WIRE = WireIdentity("openai_chat", "http://127.0.0.1:1/v1", "m")
ASSISTANT = Message(
    "assistant",
    (
        Thinking("hmm \u2028 ünïcode", "sig=="),
        RedactedThinking("opaque"),
        Text('a "quoted"\nline 🙂'),
        ToolUse("call_1", "read", '{"path": "a b"}'),
    ),
    Usage(10, 5, 3, 2, 1),
    stop_reason="tool_use",
    wire=WIRE,
)
RESULTS = Message(
    "user",
    (
        ToolResult(
            "call_1", (TextPart("text"), MediaPart("image/png", "iVBORw0KGgo=")), True
        ),
        System("be brief", "replace"),
        CompactionSummary("earlier: things"),
    ),
)
USE = ToolUse("call_9", "rm", '{"all": true}')

SAMPLES: list[Event] = [
    TextDelta("Hel\nlo"),
    ThinkingDelta("so"),
    ToolCallStart(0, "call_1", "read"),
    ToolCallDelta(0, '{"pa'),
    ModelInfo("gpt"),
    MessageComplete(ASSISTANT, Usage(1, 2, 3, 4, 0)),
    ToolDispatchStart(2),
    ToolStarted("call_1", "read"),
    ToolFinished("call_1", "read", True, 0.125, "boom"),
    ToolDispatchComplete(RESULTS),
    ProviderRetry(1, 4, 500, "RateLimited", 429, 1000, "slow down", False),
    CompactionStarted("threshold", 40, 9000),
    Compacted(40, 8, 31, 2),
    TurnComplete(
        StopReason.APPROVAL_REQUIRED,
        "done",
        3,
        1,
        Usage(5, 6),
        "turn-1",
        {"answer": [1, 2]},
        (HookFailure("Audit", "tool_end", "ValueError: x", "call_1"),),
        (USE,),
    ),
    PENDING,
    ResponseDiscarded(2, 10, 0, 1),
    ToolProgress("call_1", "50%"),
    Steered(Message("user", (Text("also this"),))),
    SubagentEvent("call_2", ToolStarted("c", "grep")),
    Lagged(7),
    TodoUpdated((TodoItem("read", "done"), TodoItem("write"))),
    Elicitation("call_3", "elicit-1", "Which branch?", {"type": "object"}),
    MessageComplete(ASSISTANT, Usage(7, 8, estimated=True)),
]


def test_every_event_type_has_a_sample() -> None:
    assert {type(e).__name__ for e in SAMPLES} == set(EVENT_TYPES)
    assert set(EVENT_TYPES) == {c.__name__ for c in typing.get_args(AnyEvent)}


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_each_event_round_trips_through_one_sse_event(event: Event) -> None:
    frame = encode_event(event)
    head, data, tail = frame.split(b"\n", 2)
    assert head == b"event: " + type(event).__name__.encode()
    assert data.startswith(b"data: ") and tail == b"\n"
    obj = orjson.loads(data[6:])
    assert obj["type"] == type(event).__name__
    assert decode_event(data[6:]) == event


def test_messages_travel_in_the_stored_format() -> None:
    obj = orjson.loads(
        encode_event(MessageComplete(ASSISTANT, Usage())).split(b"data: ")[1]
    )
    content = obj["message"]["content"]
    assert [b["type"] for b in content] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
    ]
    assert obj["message"]["wire"] == {
        "api_style": "openai_chat",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
    }


@pytest.mark.parametrize(
    "data",
    [
        b"nope",
        b"[]",
        b'{"type": "Nothing"}',
        b'{"type": "ToolStarted"}',
        b'{"type": "TextDelta", "txt": 1}',
    ],
)
def test_bad_input_is_a_wire_error(data: bytes) -> None:
    with pytest.raises(WireError):
        decode_event(data)
