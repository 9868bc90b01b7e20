"""OpenAIResponsesParser: streams recorded from the Responses API and each event rule,
both twins, under every chunking."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import orjson
import pytest
from chunking import DATA, chunkings, feed_all

from navi_core._deltas import (
    DONE,
    ERROR,
    FINISH,
    MODEL,
    REASONING_ITEM,
    TEXT,
    THINKING,
    TOOL_ARGS,
    TOOL_START,
    USAGE,
)
from navi_core.errors import IncompleteResponse, MalformedStream

Delta = tuple[Any, ...]


def parse(core: ModuleType, raw: bytes) -> list[Delta]:
    """Parse under every chunking; all must agree."""
    return feed_all(core.OpenAIResponsesParser, raw)


def sse(*payloads: dict[str, Any]) -> bytes:
    """Frame payloads as the API does: ``event: <type>`` then ``data: <json>``."""
    return b"".join(
        f"event: {p['type']}\ndata: {json.dumps(p)}\n\n".encode() for p in payloads
    )


def fixture(name: str) -> bytes:
    return (DATA / "openai-responses" / name).read_bytes()


def joined(deltas: list[Delta], kind: int) -> str:
    return "".join(d[-1] for d in deltas if d[0] == kind)


def completed(**usage: Any) -> dict[str, Any]:
    return {
        "type": "response.completed",
        "response": {"id": "r", "model": "m", "status": "completed", "usage": usage},
    }


def test_recorded_reasoning_then_tool_call(core: ModuleType) -> None:
    raw = fixture("reasoning_tool_call.sse")
    got = parse(core, raw)
    assert got[0] == (MODEL, "gpt-5.1-codex-max")
    assert joined(got, THINKING) == (
        "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then"
        " multiply the result by 3, and finally multiply that by 10, reporting the"
        " final product."
    )
    (item,) = [d[1] for d in got if d[0] == REASONING_ITEM]
    done = [
        json.loads(line[6:])
        for line in raw.decode().splitlines()
        if line.startswith("data: ") and '"response.output_item.done"' in line
    ]
    assert orjson.loads(item) == done[0]["item"]  # the whole item, unchanged
    assert orjson.loads(item)["encrypted_content"].startswith("gAAAAABpPDIV")
    assert [d for d in got if d[0] == TOOL_START] == [
        (TOOL_START, 0, "call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator")
    ]
    assert json.loads(joined(got, TOOL_ARGS)) == {"a": 12, "b": 7, "op": "add"}
    assert got[-2:] == [(USAGE, 134, 28, 0, 0, 0), (DONE,)]
    assert not [d for d in got if d[0] in (TEXT, FINISH, ERROR)]


def test_recorded_text_with_cached_and_reasoning_tokens(core: ModuleType) -> None:
    raw = fixture("text_two_messages.sse")
    got = parse(core, raw)
    deltas = [
        json.loads(line[6:])["delta"]
        for line in raw.decode().splitlines()
        if line.startswith('data: {"type":"response.output_text.delta"')
    ]
    assert "".join(deltas) == "Got itHere are a few **AI"
    # the second message item starts a paragraph: the first one said something
    assert joined(got, TEXT) == "Got it\n\nHere are a few **AI"
    # 7112 prompt tokens of which 3072 cached; 463 output of which 64 reasoning
    assert got[-2:] == [(USAGE, 4040, 463, 3072, 0, 64), (DONE,)]


def test_recorded_error_event_then_response_failed(core: ModuleType) -> None:
    got = parse(core, fixture("error_quota.sse"))
    errors = [d for d in got if d[0] == ERROR]
    assert [e[1] for e in errors] == ["insufficient_quota", "insufficient_quota"]
    assert errors[0][2].startswith("You exceeded your current quota")
    assert DONE not in [d[0] for d in got]


def test_calls_are_paired_by_output_index(core: ModuleType) -> None:
    def added(index: int, call_id: str, name: str) -> dict[str, Any]:
        item = {"type": "function_call", "call_id": call_id, "name": name}
        return {"type": "response.output_item.added", "output_index": index,
                "item": {**item, "arguments": ""}}  # fmt: skip

    def args(index: int, text: str) -> dict[str, Any]:
        return {"type": "response.function_call_arguments.delta",
                "output_index": index, "delta": text}  # fmt: skip

    raw = sse(
        added(1, "call_a", "read"),
        added(2, "call_b", "list"),
        args(2, '{"dir":'),
        args(1, '{"path":"x"}'),
        args(2, '"."}'),
        args(7, "never started"),
        completed(input_tokens=5, output_tokens=3),
    )
    assert parse(core, raw) == [
        (TOOL_START, 0, "call_a", "read"),
        (TOOL_START, 1, "call_b", "list"),
        (TOOL_ARGS, 1, '{"dir":'),
        (TOOL_ARGS, 0, '{"path":"x"}'),
        (TOOL_ARGS, 1, '"."}'),
        (MODEL, "m"),
        (USAGE, 5, 3, 0, 0, 0),
        (DONE,),
    ]


def test_arguments_only_in_the_finished_item_are_kept_once(core: ModuleType) -> None:
    item = {"type": "function_call", "call_id": "c1", "name": "f",
            "arguments": '{"a":1}'}  # fmt: skip
    raw = sse(
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        completed(),
    )
    got = parse(core, raw)
    assert got[:2] == [(TOOL_START, 0, "c1", "f"), (TOOL_ARGS, 0, '{"a":1}')]
    streamed = sse(
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "output_index": 0,
         "delta": '{"a":1}'},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        completed(),
    )  # fmt: skip
    assert [d for d in parse(core, streamed) if d[0] == TOOL_ARGS] == [
        (TOOL_ARGS, 0, '{"a":1}')
    ]


def test_incomplete_is_a_finish_reason(core: ModuleType) -> None:
    raw = sse(
        {"type": "response.output_text.delta", "delta": "cut"},
        {"type": "response.incomplete",
         "response": {"model": "m", "status": "incomplete",
                      "incomplete_details": {"reason": "max_output_tokens"},
                      "usage": {"input_tokens": 2, "output_tokens": 9}}},
    )  # fmt: skip
    assert parse(core, raw) == [
        (TEXT, "cut"),
        (MODEL, "m"),
        (FINISH, "max_tokens"),
        (USAGE, 2, 9, 0, 0, 0),
        (DONE,),
    ]


def refusal(text: str) -> dict[str, Any]:
    return {"type": "response.refusal.delta", "output_index": 0, "delta": text}


def test_refusal_deltas_end_a_completed_response_as_a_refusal(
    core: ModuleType,
) -> None:
    raw = sse(
        refusal("I can't"),
        refusal(" help."),
        {"type": "response.refusal.done", "refusal": "I can't help."},
        completed(input_tokens=4, output_tokens=3),
    )
    assert parse(core, raw) == [
        (TEXT, "I can't"),
        (TEXT, " help."),
        (MODEL, "m"),
        (FINISH, "refusal"),
        (USAGE, 4, 3, 0, 0, 0),
        (DONE,),
    ]


def test_what_a_refusal_does_not_change(core: ModuleType) -> None:
    """An empty refusal delta refuses nothing; a response cut at the token limit or
    one with a function call ends as it would without the refusal."""
    empty = sse(refusal(""), {"type": "response.output_text.delta", "delta": "Hi"},
                completed())  # fmt: skip
    assert FINISH not in [d[0] for d in parse(core, empty)]
    cut = sse(
        refusal("no"),
        {"type": "response.incomplete",
         "response": {"model": "m", "status": "incomplete",
                      "incomplete_details": {"reason": "max_output_tokens"}}},
    )  # fmt: skip
    assert (FINISH, "max_tokens") in parse(core, cut)
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    called = sse(
        refusal("no"),
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        completed(),
    )
    assert FINISH not in [d[0] for d in parse(core, called)]


def test_summary_parts_are_separated(core: ModuleType) -> None:
    part = "response.reasoning_summary_part.added"
    text = "response.reasoning_summary_text.delta"
    raw = sse(
        {"type": part, "summary_index": 0},
        {"type": text, "delta": "one"},
        {"type": part, "summary_index": 1},
        {"type": text, "delta": "two"},
        completed(),
    )
    assert joined(parse(core, raw), THINKING) == "one\n\ntwo"


def test_events_after_the_end_are_ignored(core: ModuleType) -> None:
    raw = sse(completed(), {"type": "response.output_text.delta", "delta": "late"})
    assert parse(core, raw + b"data: {broken\n\n") == [
        (MODEL, "m"),
        (USAGE, 0, 0, 0, 0, 0),
        (DONE,),
    ]


def test_done_marker_after_the_end_is_ignored(core: ModuleType) -> None:
    """Some compatible servers follow response.completed with a chat-style [DONE]."""
    raw = sse({"type": "response.output_text.delta", "delta": "hi"}, completed())
    assert parse(core, raw + b"data: [DONE]\n\n") == [
        (TEXT, "hi"),
        (MODEL, "m"),
        (USAGE, 0, 0, 0, 0, 0),
        (DONE,),
    ]


@pytest.mark.parametrize("after", [b"", b"data: [DONE]\n\n", sse(completed())])
def test_done_marker_before_the_end_is_incomplete(
    core: ModuleType, after: bytes
) -> None:
    """A [DONE] with no response.completed (or .incomplete, .failed) before it ends a
    cut stream: the deltas before it, then IncompleteResponse, whatever follows."""
    raw = sse(
        {"type": "response.created", "response": {"id": "r", "model": "m"}},
        {"type": "response.output_text.delta", "delta": "The answer is"},
    )
    at = len(raw)  # where the [DONE] event starts, as for any bad payload
    raw += b"data: [DONE]\n\n" + after
    for chunks in chunkings(raw):
        parser = core.OpenAIResponsesParser()
        got: list[Delta] = []
        with pytest.raises(IncompleteResponse) as caught:
            for chunk in chunks:
                got += parser.feed(chunk)
            got += parser.close()
        assert got == [(MODEL, "m"), (TEXT, "The answer is")]
        assert caught.value.offset == at
        assert str(caught.value) == (
            f"[DONE] at byte {at} before response.completed: the server cut the "
            "response short"
        )


def test_failed_response_is_an_error(core: ModuleType) -> None:
    raw = sse(
        {"type": "response.failed",
         "response": {"error": {"code": "server_error", "message": "boom"}}},
    )  # fmt: skip
    assert parse(core, raw) == [(ERROR, "server_error", "boom")]


@pytest.mark.parametrize(
    "payload",
    [
        b'{"type":"response.output_text.delta","delta":5}',
        b'{"type":"response.output_item.added"}',
        b'{"type":"response.function_call_arguments.delta","delta":"x","output_index":{}}',
        b"[1]",
        b'{"type":"response.output_text.delta","delta":"x"',
    ],
)
def test_bad_payloads_are_malformed(core: ModuleType, payload: bytes) -> None:
    with pytest.raises(MalformedStream, match="byte 0"):
        core.OpenAIResponsesParser().feed(b"data: " + payload + b"\n\n")
