"""AnthropicParser: recorded Messages streams and each event rule, both twins."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest
from chunking import DATA, chunkings, feed_all, run

from navi_core._deltas import (
    BLOCK_SEALED_THINKING,
    BLOCK_TEXT,
    DONE,
    ERROR,
    FINISH,
    MODEL,
    REDACTED_THINKING,
    SIGNATURE,
    TEXT,
    THINKING,
    TOOL_ARGS,
    TOOL_START,
    USAGE,
)
from navi_core.errors import MalformedStream
from navi_core.events import (
    ModelInfo,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
)

EVENTS = (TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta, ModelInfo)


def parse(core: ModuleType, raw: bytes) -> list[tuple[Any, ...]]:
    """Parse under every chunking; all must agree."""
    return feed_all(core.AnthropicParser, raw)


def sse(*payloads: dict[str, Any]) -> bytes:
    """Frame payloads as the API does: ``event: <type>`` then ``data: <json>``."""
    return b"".join(
        f"event: {p['type']}\ndata: {json.dumps(p)}\n\n".encode() for p in payloads
    )


def start(model: str = "claude-x", **usage: Any) -> dict[str, Any]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": model}
    return {"type": "message_start", "message": {**message, "usage": usage}}


def block(index: int, content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": content}


def delta(index: int, content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": content}


def fixture(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_text_basic(core: ModuleType) -> None:
    raw = fixture("anthropic/text_basic.sse")
    assert not raw.endswith(b"\n")  # message_stop is unterminated
    assert parse(core, raw) == [
        (MODEL, "claude-3-opus-latest"),
        (USAGE, 11, 1, 0, 0, 0),
        (TEXT, "Hello"),
        (TEXT, " there"),
        (TEXT, "!"),
        (FINISH, "end_turn"),
        (USAGE, 11, 6, 0, 0, 0),
        (DONE,),
    ]


def test_tool_use(core: ModuleType) -> None:
    deltas = parse(core, fixture("anthropic/tool_use.sse"))
    assert deltas[:4] == [
        (MODEL, "claude-sonnet-4-20250514"),
        (USAGE, 377, 1, 0, 0, 0),
        (TEXT, "I"),
        (TEXT, "'ll check the current weather in Paris for you."),
    ]
    assert deltas[4] == (TOOL_START, 0, "toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather")
    args = [d for d in deltas if d[0] == TOOL_ARGS]
    assert all(d[1] == 0 and d[2] for d in args)  # the empty first fragment is dropped
    assert json.loads("".join(d[2] for d in args)) == {"location": "Paris"}
    assert deltas[-3:] == [(FINISH, "tool_use"), (USAGE, 377, 65, 0, 0, 0), (DONE,)]


def test_padded_lines_and_cut_off_tool_input(core: ModuleType) -> None:
    deltas = parse(core, fixture("anthropic/tool_use_padded_max_tokens.sse"))
    assert deltas[0] == (MODEL, "claude-3-7-sonnet-20250219")
    assert (
        deltas.count((TOOL_START, 0, "toolu_01EKqbqmZrGRXy18eN7m9kvY", "make_file"))
        == 1
    )
    text = "".join(d[1] for d in deltas if d[0] == TEXT)
    assert text.startswith("I'll create a comprehensive tax guide for someone")
    args = "".join(d[2] for d in deltas if d[0] == TOOL_ARGS)
    assert args.startswith('{"filename": "taxes.txt", "lines_of_text": [\n"# COMPRE')
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)  # max_tokens cut the input off: passed on as received
    assert deltas[-3:] == [(FINISH, "max_tokens"), (USAGE, 450, 124, 0, 0, 0), (DONE,)]


def test_refusal(core: ModuleType) -> None:
    assert parse(core, fixture("anthropic/refusal.sse")) == [
        (MODEL, "claude-opus-4-7"),
        (USAGE, 20, 1, 0, 0, 0),
        (FINISH, "refusal"),
        (USAGE, 20, 0, 0, 0, 0),
        (DONE,),
    ]


def test_midstream_overloaded_error(core: ModuleType) -> None:
    raw = fixture("synthetic/anthropic_midstream_overloaded_error.sse")
    assert parse(core, raw)[-2:] == [
        (TEXT, "Partial ans"),
        (ERROR, "overloaded_error", "Overloaded"),
    ]


def test_tool_without_arguments(core: ModuleType) -> None:
    lines = fixture("vercel-ai-jsonl/anthropic_tool_no_args.jsonl").splitlines()
    raw = b"".join(b"data: " + line + b"\n\n" for line in lines if line)
    assert parse(core, raw) == [
        (MODEL, "claude-sonnet-4-5-20250929"),
        (USAGE, 565, 7, 0, 0, 0),
        (TEXT, "I'll update the issue list for"),
        (TEXT, " you."),
        (TOOL_START, 0, "toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList"),
        (FINISH, "tool_use"),
        (USAGE, 565, 48, 0, 0, 0),
        (DONE,),
    ]


def test_thinking_signature_and_redacted(core: ModuleType) -> None:
    raw = sse(
        start(),
        block(0, {"type": "thinking", "thinking": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me "}),
        delta(0, {"type": "thinking_delta", "thinking": "think."}),
        delta(0, {"type": "signature_delta", "signature": "c2ln"}),
        block(1, {"type": "redacted_thinking", "data": "EmwKAhgB"}),
        block(2, {"type": "thinking", "thinking": "whole", "signature": "sig2"}),
        block(3, {"type": "text", "text": "Hi"}),
        delta(3, {"type": "text_delta", "text": ""}),
        delta(3, {"type": "citations_delta", "citation": {}}),
    )
    assert parse(core, raw)[2:] == [
        (THINKING, "Let me "),
        (THINKING, "think."),
        (SIGNATURE, "c2ln"),
        (REDACTED_THINKING, "EmwKAhgB"),
        (THINKING, "whole"),
        (SIGNATURE, "sig2"),
        (TEXT, "Hi"),
    ]


def test_a_thinking_block_with_no_text_keeps_its_own_signature(
    core: ModuleType,
) -> None:
    """With thinking display "omitted" a thinking block carries only its signature:
    an empty THINKING before it makes the block its own, not the previous one's."""
    stop = [{"type": "content_block_stop", "index": i} for i in range(4)]
    raw = sse(
        start(),
        block(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "A"}),
        delta(0, {"type": "signature_delta", "signature": "SIG-A"}),
        stop[0],
        block(1, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(1, {"type": "signature_delta", "signature": "SIG-"}),
        delta(1, {"type": "signature_delta", "signature": "B"}),
        stop[1],
        block(2, {"type": "thinking", "thinking": "", "signature": "SIG-C"}),
        stop[2],
        block(3, {"type": "text", "text": ""}),
        delta(3, {"type": "text_delta", "text": "x"}),
        stop[3],
    )
    deltas = parse(core, raw)[2:]
    assert deltas == [
        (THINKING, "A"),
        (SIGNATURE, "SIG-A"),
        (THINKING, ""),
        (SIGNATURE, "SIG-"),
        (SIGNATURE, "B"),
        (THINKING, ""),
        (SIGNATURE, "SIG-C"),
        (TEXT, "x"),
    ]
    asm = core.Assembler(EVENTS, RuntimeError)
    pushed: list[Any] = []
    asm.feed(deltas, pushed.append)
    assert pushed == [ThinkingDelta("A"), TextDelta("x")]
    assert asm.blocks() == [
        (BLOCK_SEALED_THINKING, "A", "SIG-A"),
        (BLOCK_SEALED_THINKING, "", "SIG-B"),
        (BLOCK_SEALED_THINKING, "", "SIG-C"),
        (BLOCK_TEXT, "x", None),
    ]


def test_tool_ordinals_follow_tool_blocks_only(core: ModuleType) -> None:
    raw = sse(
        start(),
        block(0, {"type": "text", "text": ""}),
        block(1, {"type": "tool_use", "id": "a", "name": "f", "input": {}}),
        block(
            2, {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}
        ),
        delta(2, {"type": "input_json_delta", "partial_json": '{"q":1}'}),
        block(
            3, {"type": "tool_use", "id": "b", "name": "g", "input": {"x": [1, "é"]}}
        ),
        delta(3, {"type": "input_json_delta", "partial_json": ""}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"k":'}),
        delta(1, {"type": "input_json_delta", "partial_json": "2}"}),
    )
    assert parse(core, raw)[2:] == [
        (TOOL_START, 0, "a", "f"),
        (TOOL_START, 1, "b", "g"),
        (TOOL_ARGS, 1, '{"x":[1,"é"]}'),
        (TOOL_ARGS, 0, '{"k":'),
        (TOOL_ARGS, 0, "2}"),
    ]


def test_usage_is_merged_into_running_totals(core: ModuleType) -> None:
    raw = sse(
        start(
            input_tokens=100,
            output_tokens=1,
            cache_read_input_tokens=None,
            cache_creation_input_tokens=30,
        ),
        {
            "type": "message_delta",
            "delta": {"stop_reason": None},
            "usage": {"output_tokens": 9},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {
                "output_tokens": 20,
                "cache_read_input_tokens": 5,
                "input_tokens": None,
            },
        },
        {"type": "message_delta", "delta": {}},
        {"type": "message_stop"},
    )
    assert parse(core, raw) == [
        (MODEL, "claude-x"),
        (USAGE, 100, 1, 0, 30, 0),
        (USAGE, 100, 9, 0, 30, 0),
        (FINISH, "end_turn"),
        (USAGE, 100, 20, 5, 30, 0),
        (DONE,),
    ]


def test_message_start_without_usage_or_model(core: ModuleType) -> None:
    raw = sse({"type": "message_start", "message": {"model": ""}})
    assert parse(core, raw) == [(USAGE, 0, 0, 0, 0, 0)]


def test_ping_stop_and_unknown_types_are_ignored(core: ModuleType) -> None:
    raw = sse(
        {"type": "ping"},
        {"type": "content_block_stop", "index": 0},
        {"type": "brand_new_event", "x": 1},
        block(0, {"type": "image", "source": {}}),
    )
    assert parse(core, raw) == []


def test_error_event_without_details(core: ModuleType) -> None:
    raw = sse({"type": "error"}, {"type": "error", "error": {"type": "api_error"}})
    assert parse(core, raw) == [(ERROR, "error", ""), (ERROR, "api_error", "")]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            b'{"type": "ping"',
            'invalid JSON in SSE event at byte 12: \'{"type": "ping"\'',
        ),
        (b'"ping"', "SSE event at byte 12 is not a JSON object: '\"ping\"'"),
        (
            b'{"type": "content_block_delta", "index": 0}',
            "unexpected JSON structure in SSE event at byte 12: "
            '\'{"type": "content_block_delta", "index": 0}\'',
        ),
    ],
)
def test_malformed_payload(core: ModuleType, payload: bytes, message: str) -> None:
    raw = b"event: x\r\n\r\ndata: " + payload + b"\r\n\r\n"
    for chunks in chunkings(raw):
        with pytest.raises(MalformedStream) as info:
            run(core.AnthropicParser(), chunks)
        assert info.value.offset == 12
        assert str(info.value) == message


def test_close_then_feed(core: ModuleType) -> None:
    parser = core.AnthropicParser()
    assert parser.feed(b'data: {"type":"message_stop"}') == []
    assert parser.close() == [(DONE,)]
    with pytest.raises(ValueError, match="after close"):
        parser.feed(b"\n\n")


TOOL_BLOCK = (
    b'data: {"type":"content_block_start","index":1,"content_block":'
    b'{"type":"tool_use","id":"t","name":"f","input":{}}}\n\n'
)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"type":"content_block_delta","index":0,"delta":'
         b'{"type":"text\\u005fdelta","text":"hi"}}', [(TEXT, "hi")]),
        (b'{"type":"content_block_delta","index":0,"delta":'
         b'{"type":"\\u0074hinking_delta","thinking":"hm"}}', [(THINKING, "hm")]),
        (b'{"type":"content_block_delta","index":0,"delta":'
         b'{"type":"signature_delt\\u0061","signature":"s"}}', [(SIGNATURE, "s")]),
        (b'{"type":"content_block_delta","index":1,"delta":'
         b'{"type":"input_json\\u005Fdelta","partial_json":"{}"}}', [(TOOL_ARGS, 0, "{}")]),
        (b'{"type":"content_block_delta","index":0,"delta":'
         b'{"type":"text_delta","text":"a\\/b"}}', [(TEXT, "a/b")]),
        (b'{"type":"content_block\\u005fdelta","index":0,"delta":'
         b'{"type":"text_delta","text":"hi"}}', [(TEXT, "hi")]),
        (b'{"type":"\\u0063ontent_block_delta","index":0,"delta":'
         b'{"type":"text\\u005fdelta","text":"hi"}}', [(TEXT, "hi")]),
        (b'{"type":"p\\u0069ng"}', []),
        (b'{"type":"content_block_st\\u006fp","index":0}', []),
        (b'{"type":"message_st\\u006fp"}', [(DONE,)]),
    ],
)  # fmt: skip
def test_escaped_types_mean_what_they_decode_to(
    core: ModuleType, payload: bytes, expected: list[tuple[Any, ...]]
) -> None:
    """JSON escapes in a ``type`` value change its bytes, not its meaning."""
    deltas = parse(core, TOOL_BLOCK + b"data: " + payload + b"\n\n")
    assert deltas[1:] == expected
