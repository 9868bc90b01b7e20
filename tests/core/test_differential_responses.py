"""Hypothesis for the Responses parser: random streams, chunk boundaries, damaged and
respelled payloads; the compiled twin equals the pure one, errors included."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import orjson
from hypothesis import given, strategies as st
from test_differential import (
    CUTS,
    DIFF,
    EOLS,
    FIXTURE_SAFE,
    NOISE,
    TOKENS,
    WORDS,
    Spelling,
    data_lines,
    dumps,
    outcome,
    split,
)

INDEX = st.integers(0, 3)
SEQ = st.integers(0, 10**6)
MODEL = st.sampled_from(["", "gpt-5", "gpt-5", "o4-mini"])


def event(kind: str, **members: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just(kind), **members},
        optional={"sequence_number": SEQ, "item_id": st.just("item_1")},
    )


def delta_event(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just(kind), "delta": WORDS},
        optional={
            "sequence_number": SEQ,
            "item_id": st.just("msg_1"),
            "output_index": INDEX,
            "content_index": st.just(0),
            "summary_index": st.integers(0, 1),
            "logprobs": st.just([]),
            "obfuscation": st.text(max_size=8),
        },
    )


function_call = st.fixed_dictionaries(
    {"type": st.just("function_call")},
    optional={
        "id": st.just("fc_1"),
        "call_id": st.text(max_size=6),
        "name": st.text(max_size=6),
        "arguments": WORDS,
        "status": st.just("in_progress"),
    },
)
reasoning = st.fixed_dictionaries(
    {"type": st.just("reasoning"), "id": st.just("rs_1")},
    optional={
        "encrypted_content": WORDS,
        "summary": st.lists(
            st.fixed_dictionaries({"type": st.just("summary_text"), "text": WORDS}),
            max_size=2,
        ),
    },
)
message: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"type": st.just("message"), "id": st.just("msg_1"), "role": st.just("assistant")},
    optional={"content": st.just([])},
)
usage = st.fixed_dictionaries(
    {"input_tokens": TOKENS, "output_tokens": TOKENS},
    optional={
        "input_tokens_details": st.none()
        | st.fixed_dictionaries({"cached_tokens": TOKENS}),
        "output_tokens_details": st.none()
        | st.fixed_dictionaries({"reasoning_tokens": TOKENS}),
        "total_tokens": TOKENS,
    },
)
response: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"id": st.just("resp_1"), "model": MODEL},
    optional={
        "status": st.sampled_from(["in_progress", "completed", "incomplete"]),
        "usage": st.none() | usage,
        "incomplete_details": st.none()
        | st.fixed_dictionaries(
            {"reason": st.sampled_from(["max_output_tokens", "content_filter"])}
        ),
        "output": st.just([]),
    },
)
error = st.fixed_dictionaries(
    {"code": st.none() | st.sampled_from(["server_error", "rate_limit_exceeded"])},
    optional={"message": WORDS, "type": st.just("invalid_request_error")},
)
responses_event = st.one_of(
    delta_event("response.output_text.delta"),
    delta_event("response.output_text.delta"),
    delta_event("response.refusal.delta"),
    delta_event("response.reasoning_summary_text.delta"),
    delta_event("response.reasoning_text.delta"),
    delta_event("response.function_call_arguments.delta"),
    delta_event("response.function_call_arguments.delta"),
    event("response.created", response=response),
    event("response.in_progress", response=response),
    event(
        "response.output_item.added",
        output_index=INDEX,
        item=function_call | reasoning | message,
    ),
    event(
        "response.output_item.done",
        output_index=INDEX,
        item=function_call | reasoning | message,
    ),
    event("response.reasoning_summary_part.added", summary_index=st.integers(0, 2)),
    event("response.output_text.done", text=WORDS),
    event("response.content_part.added", part=st.just({"type": "output_text"})),
    event("response.function_call_arguments.done", arguments=WORDS),
    event("response.reasoning_summary_text.done", text=WORDS),
    event("response.refusal.done", refusal=WORDS),
    event("error", code=st.sampled_from(["server_error", "x"]), message=WORDS),
)
terminal = st.one_of(
    event("response.completed", response=response),
    event("response.incomplete", response=response),
    event("response.failed", response=st.fixed_dictionaries({"error": error})),
)


def framed(events: list[dict[str, Any]], style: int, eol: bytes) -> bytes:
    return b"".join(
        b"event: " + e["type"].encode() + eol + b"data: " + dumps(e, style) + eol + eol
        for e in events
    )


@st.composite
def responses_stream(draw: st.DrawFn) -> bytes:
    """Events, then an end: a terminal event; one followed by a chat-style [DONE]
    (ignored); or a [DONE] alone (IncompleteResponse). Then events, ignored."""
    eol = draw(EOLS)
    style = draw(st.integers(0, 3))
    done = b"data: [DONE]" + eol + eol
    events = draw(st.lists(responses_event, max_size=14))
    end = draw(st.sampled_from(["terminal", "terminal+done", "done"]))
    if end != "done":
        events.append(draw(terminal))
    raw = framed(events, style, eol)
    if end != "terminal":
        raw += done
    after = draw(st.lists(responses_event, max_size=2))  # after the end: ignored
    return raw + framed(after, style, eol)


@FIXTURE_SAFE
@given(raw=responses_stream(), cuts=CUTS)
def test_responses_chunking_does_not_matter(
    core: ModuleType, raw: bytes, cuts: list[int]
) -> None:
    whole = outcome(core.OpenAIResponsesParser(), [raw])
    assert outcome(core.OpenAIResponsesParser(), split(raw, cuts)) == whole


@DIFF
@given(raw=responses_stream(), cuts=CUTS)
def test_responses_twins_agree(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    py, cy = both_cores
    expected = outcome(py.OpenAIResponsesParser(), [raw])
    assert outcome(cy.OpenAIResponsesParser(), split(raw, cuts)) == expected


# A refusal: refusal deltas (empty ones too) among text, maybe a function call, then
# an end: a completed response that refused and called nothing is a "refusal".
refusal_event = st.one_of(
    delta_event("response.refusal.delta"),
    delta_event("response.refusal.delta"),
    delta_event("response.output_text.delta"),
    event("response.refusal.done", refusal=WORDS),
    event("response.output_item.added", output_index=INDEX, item=function_call),
)


@st.composite
def refusal_stream(draw: st.DrawFn) -> bytes:
    events = draw(st.lists(refusal_event, min_size=1, max_size=8))
    events.append(draw(terminal))
    return framed(events, draw(st.integers(0, 3)), draw(EOLS))


@DIFF
@given(raw=refusal_stream(), cuts=CUTS)
def test_responses_refusals_agree(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    py, cy = both_cores
    expected = outcome(py.OpenAIResponsesParser(), [raw])
    assert outcome(py.OpenAIResponsesParser(), split(raw, cuts)) == expected
    assert outcome(cy.OpenAIResponsesParser(), split(raw, cuts)) == expected


@st.composite
def damaged_events(draw: st.DrawFn) -> bytes:
    payload = bytearray(dumps(draw(responses_event), draw(st.integers(0, 3))))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(payload)))
        cut = draw(st.integers(0, 2))
        payload[at : at + cut] = draw(
            NOISE | st.sampled_from([b'"delta":"x",', b'"output_index":1,'])
        )
    return bytes(payload)


@DIFF
@given(payloads=st.lists(damaged_events(), max_size=3))
def test_damaged_responses_payloads_agree(
    both_cores: tuple[ModuleType, ModuleType], payloads: list[bytes]
) -> None:
    py, cy = both_cores
    start = (
        b'{"type":"response.output_item.added","output_index":1,'
        b'"item":{"type":"function_call","call_id":"c","name":"f"}}'
    )
    raw = b"".join(b"data: " + p + b"\n\n" for p in [start, *payloads])
    expected = outcome(py.OpenAIResponsesParser(), [raw])
    assert outcome(cy.OpenAIResponsesParser(), [raw]) == expected


@st.composite
def respelled(draw: st.DrawFn) -> tuple[bytes, bytes, bool]:
    """(canonical stream, the same spelled otherwise, whether odd values went in)."""
    objs = draw(st.lists(responses_event, min_size=1, max_size=10))
    spelling = Spelling(draw(st.randoms(use_true_random=True)), draw(st.booleans()))
    canonical = b"".join(b"data: " + orjson.dumps(o) + b"\n\n" for o in objs)
    spelled = data_lines([spelling.value(o) for o in objs])
    return canonical, spelled, spelling.changed


@DIFF
@given(case=respelled(), cuts=CUTS)
def test_respelled_responses_events_read_alike(
    both_cores: tuple[ModuleType, ModuleType],
    case: tuple[bytes, bytes, bool],
    cuts: list[int],
) -> None:
    py, cy = (core.OpenAIResponsesParser for core in both_cores)
    canonical, spelled, changed = case
    expected = outcome(py(), [spelled])
    if not changed:
        assert expected[1] is None
        assert outcome(py(), [canonical]) == expected
    assert outcome(py(), split(spelled, cuts)) == expected
    assert outcome(cy(), split(spelled, cuts)) == expected
