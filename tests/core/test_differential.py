"""Hypothesis: chunking never matters, and Cython equals the pure twin, errors included."""

from __future__ import annotations

import json
import random
from types import ModuleType
from typing import Any, Final

import orjson
from hypothesis import HealthCheck, given, settings, strategies as st

from navi_core.errors import MalformedStream

FIXTURE_SAFE = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
DIFF = settings(deadline=None, max_examples=300)

# --- SSE streams -----------------------------------------------------------------

EOLS = st.sampled_from([b"\n", b"\r", b"\r\n"])
TEXT = st.text(
    st.characters(blacklist_categories=["Cs"])
    | st.sampled_from("\u2028\u2029\x85\0:é😀"),
    max_size=12,
)
FIELD_VALUE = TEXT.map(
    lambda t: t.replace("\n", "").replace("\r", "").encode()
) | st.binary(max_size=6).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b""))
NAME = st.sampled_from([b"data", b"event", b"id", b"retry", b"dat", b"x", b"", b"Data"])
RETRY = st.integers(0, 10**6).map(lambda n: b"retry: %d" % n)
LINE = st.one_of(
    st.tuples(NAME, st.sampled_from([b":", b": ", b":  "]), FIELD_VALUE).map(b"".join),
    NAME,
    FIELD_VALUE.map(lambda v: b":" + v),  # comment
    RETRY,
    st.just(b""),
)
STREAM = st.builds(
    lambda bom, lines: bom + b"".join(line + eol for line, eol in lines),
    st.sampled_from([b"", b"\xef\xbb\xbf", b"\xef\xbb"]),
    st.lists(st.tuples(LINE, EOLS), max_size=30),
) | st.binary(max_size=80)
TAIL = st.sampled_from([b"", b"data: tail", b"\r", b"data: x\r\n"])


def split(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(raw) + 1) for c in cuts})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]


CUTS = st.lists(st.integers(0, 10_000), max_size=12)


def outcome(parser: Any, chunks: list[bytes]) -> tuple[list[Any], Any]:
    """What a caller sees: everything returned, then the error (type, text, offset)."""
    got: list[Any] = []
    try:
        for chunk in chunks:
            got += parser.feed(chunk)
        got += parser.close()
    except (MalformedStream, ValueError) as exc:
        return got, (type(exc), str(exc), getattr(exc, "offset", None))
    return got, None


@FIXTURE_SAFE
@given(raw=STREAM, tail=TAIL, cuts=CUTS, limit=st.sampled_from([8, 40, 10**6]))
def test_sse_chunking_does_not_matter(
    core: ModuleType, raw: bytes, tail: bytes, cuts: list[int], limit: int
) -> None:
    raw += tail
    whole = outcome(core.SSEDecoder(max_event_bytes=limit), [raw])
    assert outcome(core.SSEDecoder(max_event_bytes=limit), split(raw, cuts)) == whole


@DIFF
@given(raw=STREAM, tail=TAIL, cuts=CUTS, limit=st.sampled_from([8, 40, 10**6]))
def test_sse_twins_agree(
    both_cores: tuple[ModuleType, ModuleType],
    raw: bytes,
    tail: bytes,
    cuts: list[int],
    limit: int,
) -> None:
    py, cy = both_cores
    chunks = split(raw + tail, cuts)
    assert outcome(cy.SSEDecoder(max_event_bytes=limit), chunks) == outcome(
        py.SSEDecoder(max_event_bytes=limit), chunks
    )


# --- provider streams ------------------------------------------------------------

WORDS = st.text(
    st.characters(blacklist_categories=["Cs"]) | st.sampled_from('"\\/\n\t\u2028😀é'),
    max_size=10,
)
MAYBE = st.none() | WORDS
TOKENS = st.none() | st.integers(0, 10**7)


def dumps(obj: Any, style: int) -> bytes:
    """JSON as different servers write it: compact, spaced, ASCII-escaped, padded."""
    if style == 0:
        return orjson.dumps(obj)
    if style == 1:
        return json.dumps(obj).encode()
    if style == 2:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return json.dumps(obj, indent=None).encode() + b"   "


# Few ids and names, so that a call's pieces often repeat or change them; arguments
# whole or in pieces, or an object (Ollama's): a piece may start another call.
CALL_ID = st.sampled_from(["", "call_a", "call_b"]) | st.text(max_size=6)
CALL_NAME = st.sampled_from(["", "f", "g"]) | st.text(max_size=6)
CALL_ARGS = (
    WORDS
    | st.sampled_from(["{}", '{"p":1}', '{"p":', "1}", "[", "]"])
    | st.dictionaries(st.text(max_size=3), WORDS, max_size=2)
)
tool_call = st.fixed_dictionaries(
    {},
    optional={
        "index": st.integers(0, 3) | st.none(),  # none: Ollama before 0.20
        "id": CALL_ID | st.none(),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {}, optional={"name": CALL_NAME | st.none(), "arguments": CALL_ARGS}
        ),
    },
)
openai_delta = st.fixed_dictionaries(
    {},
    optional={
        "role": st.just("assistant"),
        "content": MAYBE,
        "refusal": MAYBE,
        "reasoning_content": MAYBE,
        "reasoning": MAYBE,
        "tool_calls": st.lists(tool_call, max_size=2) | st.none(),
    },
)
openai_choice = st.fixed_dictionaries(
    {"index": st.sampled_from([0, 0, 0, 1]), "delta": openai_delta},
    optional={
        "logprobs": st.none(),
        "finish_reason": st.none()
        | st.sampled_from(["stop", "length", "tool_calls", "content_filter"]),
    },
)
openai_usage = st.fixed_dictionaries(
    {"prompt_tokens": TOKENS, "completion_tokens": TOKENS},
    optional={
        "prompt_tokens_details": st.none()
        | st.fixed_dictionaries({"cached_tokens": TOKENS}),
        "completion_tokens_details": st.none()
        | st.fixed_dictionaries({"reasoning_tokens": TOKENS}),
    },
)
openai_chunk = st.fixed_dictionaries(
    {
        "id": st.just("chatcmpl-1"),
        "object": st.just("chat.completion.chunk"),
        "choices": st.lists(openai_choice, max_size=2),
    },
    optional={
        "created": st.integers(0, 2**40),
        "model": st.sampled_from(["", "gpt-4o", "gpt-4o", "o3"]),
        "system_fingerprint": st.none() | st.just("fp_1"),
        "usage": st.none() | openai_usage,
        "error": st.none(),
    },
) | st.fixed_dictionaries({"error": st.fixed_dictionaries({"message": WORDS})})


def frame(payloads: list[bytes], eol: bytes) -> bytes:
    return b"".join(b"data: " + p + eol + eol for p in payloads)


@st.composite
def openai_stream(draw: st.DrawFn) -> bytes:
    style = draw(st.integers(0, 3))
    chunks = [dumps(c, style) for c in draw(st.lists(openai_chunk, max_size=12))]
    return frame([*chunks, b"[DONE]"], draw(EOLS))


# A refusal: OpenAI's refusal pieces (empty or null ones too) among text, maybe a tool
# call, then a finish (maybe in the last piece's chunk): a plain "stop" of a response
# that refused and called no tool is reported "refusal", whichever twin read what.
refusal_delta = st.fixed_dictionaries(
    {"refusal": st.none() | WORDS | st.sampled_from(["", "I'm sorry", " I can't."])},
    optional={
        "role": st.just("assistant"),
        "content": st.none() | st.just(""),
        "tool_calls": st.lists(tool_call, max_size=1),
    },
)


@st.composite
def refusal_stream(draw: st.DrawFn) -> bytes:
    style = draw(st.integers(0, 3))
    deltas = draw(st.lists(refusal_delta | openai_delta, min_size=1, max_size=8))
    reason = draw(st.sampled_from(["stop", "stop", "length", "tool_calls", "error"]))
    choices: list[dict[str, Any]] = [{"index": 0, "delta": d} for d in deltas]
    if draw(st.booleans()):
        choices[-1]["finish_reason"] = reason
    else:
        choices.append({"index": 0, "delta": {}, "finish_reason": reason})
    chunks = [dumps({"model": "gpt-4o", "choices": [c]}, style) for c in choices]
    return frame([*chunks, b"[DONE]"], draw(EOLS))


anthropic_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": WORDS}),
    st.fixed_dictionaries(  # no text and maybe a signature: display "omitted"
        {"type": st.just("thinking"), "thinking": st.just("") | WORDS},
        optional={"signature": st.just("") | WORDS},
    ),
    st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": WORDS}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": st.text(max_size=5),
            "name": st.text(max_size=5),
            "input": st.dictionaries(st.text(max_size=3), WORDS, max_size=2),
        }
    ),
)
anthropic_delta = st.one_of(
    st.fixed_dictionaries({"type": st.just("text_delta"), "text": WORDS}),
    st.fixed_dictionaries({"type": st.just("thinking_delta"), "thinking": WORDS}),
    st.fixed_dictionaries({"type": st.just("signature_delta"), "signature": WORDS}),
    st.fixed_dictionaries({"type": st.just("input_json_delta"), "partial_json": WORDS}),
    st.fixed_dictionaries({"type": st.just("citations_delta")}),
)
anthropic_usage = st.fixed_dictionaries(
    {},
    optional={
        "input_tokens": TOKENS,
        "output_tokens": TOKENS,
        "cache_read_input_tokens": TOKENS,
        "cache_creation_input_tokens": TOKENS,
    },
)
anthropic_content_delta = st.builds(
    lambda i, d: {"type": "content_block_delta", "index": i, "delta": d},
    st.integers(0, 4),
    anthropic_delta,
)
anthropic_event = st.one_of(
    st.builds(
        lambda u, m: {"type": "message_start", "message": {"model": m, "usage": u}},
        anthropic_usage,
        st.sampled_from(["claude", ""]),
    ),
    st.builds(
        lambda i, b: {"type": "content_block_start", "index": i, "content_block": b},
        st.integers(0, 4),
        anthropic_block,
    ),
    anthropic_content_delta,
    st.builds(lambda i: {"type": "content_block_stop", "index": i}, st.integers(0, 4)),
    st.builds(
        lambda r, u: {"type": "message_delta", "delta": {"stop_reason": r}, "usage": u},
        st.none() | st.sampled_from(["end_turn", "tool_use"]),
        anthropic_usage,
    ),
    st.just({"type": "ping"}),
    st.just({"type": "message_stop"}),
    st.builds(
        lambda m: {
            "type": "error",
            "error": {"type": "overloaded_error", "message": m},
        },
        WORDS,
    ),
)


def _named_events(events: list[dict[str, Any]], style: int, eol: bytes) -> bytes:
    """Messages-style SSE: each event named by its ``type``, its JSON in ``style``."""
    return b"".join(
        b"event: " + e["type"].encode() + eol + b"data: " + dumps(e, style) + eol + eol
        for e in events
    )


@st.composite
def anthropic_stream(draw: st.DrawFn) -> bytes:
    style = draw(st.integers(0, 3))
    eol = draw(EOLS)
    events = draw(st.lists(anthropic_event, max_size=14))
    return _named_events(events, style, eol)


@DIFF
@given(raw=openai_stream(), cuts=CUTS)
def test_openai_twins_agree(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    py, cy = both_cores
    expected = outcome(py.OpenAIChatParser(), [raw])
    assert expected[1] is None
    assert outcome(cy.OpenAIChatParser(), split(raw, cuts)) == expected


@DIFF
@given(raw=refusal_stream(), cuts=CUTS)
def test_openai_refusals_agree(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    py, cy = both_cores
    expected = outcome(py.OpenAIChatParser(), [raw])
    assert expected[1] is None
    assert outcome(py.OpenAIChatParser(), split(raw, cuts)) == expected
    assert outcome(cy.OpenAIChatParser(), split(raw, cuts)) == expected


@DIFF
@given(raw=anthropic_stream(), cuts=CUTS)
def test_anthropic_twins_agree(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    py, cy = both_cores
    expected = outcome(py.AnthropicParser(), [raw])
    assert expected[1] is None
    assert outcome(cy.AnthropicParser(), split(raw, cuts)) == expected


# Tool calls one per chunk, as the fast path takes them, pieces sharing an index
# (Ollama) or not, ids and names repeated or changed, and streams that end without
# [DONE]: after the finish reason or not, at an event's end or inside one.
call_piece = st.fixed_dictionaries(
    {},
    optional={
        "index": st.sampled_from([0, 0, 1]),
        "id": st.sampled_from(["", "a", "a", "b"]),
        "function": st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["", "f", "g"]),
                "arguments": st.sampled_from(["", "{}", '{"p":', "1}", '"x"']),
            },
        ),
    },
)
ENDINGS = st.sampled_from(
    [b"data: [DONE]\n\n", b"", b"\n", b": ping\n\n", b": pi", b"data: {"]
)


@st.composite
def openai_calls_stream(draw: st.DrawFn) -> bytes:
    style = draw(st.integers(0, 3))
    eol = draw(EOLS)
    chunks: list[dict[str, Any]] = [
        {"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]}
        for piece in draw(st.lists(call_piece, max_size=10))
    ]
    finish = draw(st.sampled_from([None, "tool_calls", "stop"]))
    if finish is not None:
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if draw(st.booleans()):
        chunks.append({"choices": [], "usage": {"prompt_tokens": 1}})
    raw = frame([dumps(c, style) for c in chunks], eol)
    cut = draw(st.sampled_from([0, 0, 0, 1, 2]))  # the last event's blank line, cut
    ending = draw(ENDINGS)
    return raw[: len(raw) - cut * len(eol)] + (ending if not cut else b"")


@DIFF
@given(raw=openai_calls_stream(), cuts=CUTS)
def test_openai_calls_and_endings_agree(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    py, cy = both_cores
    expected = outcome(py.OpenAIChatParser(), [raw])
    assert outcome(py.OpenAIChatParser(), split(raw, cuts)) == expected
    assert outcome(cy.OpenAIChatParser(), split(raw, cuts)) == expected


# Thinking blocks in order, each with text pieces (maybe none: display "omitted") and
# signature pieces, as the API sends them, between text and tool blocks.
@st.composite
def anthropic_thinking_stream(draw: st.DrawFn) -> bytes:
    style = draw(st.integers(0, 3))
    eol = draw(EOLS)
    events: list[dict[str, Any]] = []
    for index in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["thinking", "thinking", "thinking", "text"]))
        pieces = draw(st.lists(st.sampled_from(["", "a", "b c"]), max_size=2))
        block: dict[str, Any] = {"type": kind, kind: ""}
        if kind == "thinking":
            block["signature"] = draw(st.sampled_from(["", "", "S"]))
        events.append(
            {"type": "content_block_start", "index": index, "content_block": block}
        )
        key = "thinking" if kind == "thinking" else "text"
        deltas = [{"type": f"{key}_delta", key: t} for t in pieces]
        if kind == "thinking":
            signatures = draw(st.lists(st.sampled_from(["s1", "s2"]), max_size=2))
            deltas += [{"type": "signature_delta", "signature": s} for s in signatures]
        events += [
            {"type": "content_block_delta", "index": index, "delta": d} for d in deltas
        ]
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_stop"})
    return _named_events(events, style, eol)


@DIFF
@given(raw=anthropic_thinking_stream(), cuts=CUTS)
def test_anthropic_thinking_blocks_agree(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    py, cy = both_cores
    expected = outcome(py.AnthropicParser(), [raw])
    assert expected[1] is None
    assert outcome(cy.AnthropicParser(), split(raw, cuts)) == expected


# --- damaged payloads: the compiled fast path must give up exactly when needed ----

NOISE = st.sampled_from(
    [b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"0", b"-", b"1e5", b".5", b"null",
     b"\\u", b"\\ud83d", b"\\u00e9", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x01", b" ",
     b'"content":1,', b'"model":"x",', b'"index":1,', b'"type":"ping",', b"\t"]
)  # fmt: skip


@st.composite
def damaged(draw: st.DrawFn, events: st.SearchStrategy[Any]) -> bytes:
    payload = bytearray(dumps(draw(events), draw(st.integers(0, 3))))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(payload)))
        cut = draw(st.integers(0, 2))
        payload[at : at + cut] = draw(NOISE)
    return bytes(payload)


@DIFF
@given(payloads=st.lists(damaged(openai_chunk) | damaged(anthropic_event), max_size=3))
def test_damaged_payloads_agree(
    both_cores: tuple[ModuleType, ModuleType], payloads: list[bytes]
) -> None:
    py, cy = both_cores
    raw = frame(payloads, b"\n")
    for name in ("OpenAIChatParser", "AnthropicParser"):
        expected = outcome(getattr(py, name)(), [raw])
        assert outcome(getattr(cy, name)(), [raw]) == expected


# --- repeated envelopes: the pure twin's learned templates against the scanner ----

RAW_PIECES = st.sampled_from(
    [b"a", b" word", b"\\n", b'\\"', b"\\u00e9", b"\\ud83d\\ude00", b"\\ud83d", b"\xc3\xa9",
     b"\xff", b'"', b"\\", b"\x01", b"\\x", b'","x":"', b"\t", b"", b"}", b"\\/"]
)  # fmt: skip
TEMPLATES = st.sampled_from(
    [
        b'{"id":"c","object":"chat.completion.chunk","model":"%s","choices":[{"index":0,'
        b'"delta":{"content":"%s"},"logprobs":null,"finish_reason":null}]}',
        b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%s,"function":'
        b'{"arguments":"%s"}}]}}]}',
        b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
        b'"text":"%s"},"note":"%s"}',
        b'{"type":"content_block_delta","index":%s,"delta":{"type":"input_json_delta",'
        b'"partial_json":"%s"}}   ',
    ]
)
# Few distinct values, so that a string often equals another one in the same chunk.
SMALL = st.sampled_from([b"a", b"b", b"", b"0", b"1"])
FILL = SMALL | st.lists(RAW_PIECES, max_size=4).map(b"".join)


@st.composite
def repeated(draw: st.DrawFn) -> bytes:
    template = draw(TEMPLATES)
    fills = draw(st.lists(st.tuples(SMALL, FILL), max_size=12))
    head = [b'{"type":"content_block_start","index":1,"content_block":{"type":"tool_use",'
            b'"id":"t","name":"f","input":{}}}',
            b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c",'
            b'"function":{"name":"f","arguments":""}}]}}]}']  # fmt: skip
    return frame([*head, *(template % fill for fill in fills)], b"\n")


@DIFF
@given(raw=repeated(), cuts=CUTS)
def test_repeated_envelopes_agree(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    py, cy = both_cores
    for name in ("OpenAIChatParser", "AnthropicParser"):
        expected = outcome(getattr(py, name)(), [raw])
        assert outcome(getattr(py, name)(), split(raw, cuts)) == expected
        assert outcome(getattr(cy, name)(), split(raw, cuts)) == expected


# --- the members before "choices": kept from one chunk, compared in the next -----
#
# The compiled parser keeps the bytes of a chunk up to its "choices" key and the scan's
# state there; a chunk that starts with the same bytes is scanned from that key on.
# These heads repeat, nest in one another (one is the start of another), differ in
# a byte at the same length (an "object" of "error" is no chunk: one taken for another
# would read an error as text) and carry state the rest of the chunk meets again: a
# model (also given again after "choices"), a usage or error of null (a second one is
# refused).

HEADS = st.sampled_from(
    [
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",',
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m2",',
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":12,"model":"m",',
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"\\u006d",',
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","usage":null,"model":"m", ',
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","error":null,"x":[1,{}],',
        b'{"id":"chatcmpl-1","object":"error","created":1,"model":"m","message":"e",',
        b'{"id":"chatcmpl-1","object":"error","created":1,"model":"m",',
        b'{"id":"chatcmpl-1","object":"chunk","created":1,"model":"m",',
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,',
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m"',
        b"{",
    ]
)
BODIES = st.sampled_from(
    [
        b'"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}',
        b'"choices":[{"index":0,"delta":{"content":"%s"}}],"model":"m3"}',
        b'"choices":[{"index":0,"delta":{"content":"%s"}}],"usage":null}',
        b'"choices":[{"index":0,"delta":{"content":"%s"}}],"error":null}',
        b'"choices":[{"index":0,"delta":{"content":"%s"}}],"choices":[]}',
        b'"choices":[{"index":0,"delta":{},"finish_reason":"%s"}]}',
        b'"choices":[{"index":0,"delta":{"content":"%s"}}]} x',
        b'"choices":[]}%s',
        b',"choices":[{"index":0,"delta":{"content":"%s"}}]}',
    ]
)


@st.composite
def kept_heads(draw: st.DrawFn) -> bytes:
    chunks = draw(st.lists(st.tuples(HEADS, BODIES, FILL), min_size=1, max_size=10))
    return frame([head + body % fill for head, body, fill in chunks], b"\n")


@DIFF
@given(raw=kept_heads(), cuts=CUTS)
def test_kept_heads_read_as_whole_chunks(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    py, cy = both_cores
    expected = outcome(py.OpenAIChatParser(), [raw])
    assert outcome(cy.OpenAIChatParser(), split(raw, cuts)) == expected


# --- re-encodings: the same JSON spelled differently, then with odd values --------
#
# A scanner that compares raw bytes can mistake a spelling for a meaning: "text_delta"
# may arrive as "text\u005fdelta". These streams escape characters of string values
# (and of keys), add "\/" escapes, whitespace (newlines too: the payload then spans
# several data lines) and overridden duplicates of members. That much is equivalent:
# the twin must read the canonical stream's deltas. Odd values (numbers as strings,
# 1e2, -0, nested objects...), unknown members and reordered ones change the meaning
# (a tool's input is data): there the twins must only agree, errors included.

ODD: Final = [b'"0"', b'"1"', b'""', b'"x"', b"1e2", b"-0", b"0.0", b"1.5", b"true",
              b"null", b"[]", b"{}", b'{"a":"b"}', b'["x"]', b"100000000000000000000"]  # fmt: skip
SHORT_ESCAPES: Final = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Spelling:
    """Writes JSON values with random but equivalent (or, if ``odd``, odd) choices."""

    def __init__(self, rng: random.Random, odd: bool) -> None:
        self.rng = rng
        self.odd = odd
        self.changed = False  # an odd value went in: the meaning differs

    def ws(self) -> bytes:
        return self.rng.choice([b"", b"", b"", b" ", b"\t", b"\n", b" \n  "])

    def string(self, text: str, chance: float) -> bytes:
        """``text`` as JSON; by ``chance``, with some characters written as \\u escapes."""
        picked: set[int] = set()
        if text and self.rng.random() < chance:
            picked = {i for i in range(len(text)) if self.rng.random() < 0.3}
            picked = picked or {self.rng.randrange(len(text))}
        out = ['"']
        for i, ch in enumerate(text):
            if i in picked or (ord(ch) < 0x20 and ch not in SHORT_ESCAPES):
                out.append(self.escape(ord(ch)))
            elif ch in '"\\':
                out.append("\\" + ch)
            elif ch == "/" and self.rng.random() < 0.5:
                out.append("\\/")
            elif ch in SHORT_ESCAPES:
                out.append(SHORT_ESCAPES[ch])
            else:
                out.append(ch)
        return "".join([*out, '"']).encode()

    def escape(self, cp: int) -> str:
        form = self.rng.choice(["\\u%04x", "\\u%04X"])
        if cp < 0x10000:
            return form % cp
        cp -= 0x10000
        return form % (0xD800 + (cp >> 10)) + form % (0xDC00 + (cp & 0x3FF))

    def value(self, value: Any) -> bytes:
        if self.odd and self.rng.random() < 0.05:
            self.changed = True
            return self.rng.choice(ODD)
        if isinstance(value, dict):
            return self.members(value)
        if isinstance(value, list):
            items = [self.ws() + self.value(v) + self.ws() for v in value]
            return b"[" + (b",".join(items) if items else self.ws()) + b"]"
        if isinstance(value, str):
            return self.string(value, 0.4)
        return orjson.dumps(value)

    def members(self, obj: dict[str, Any]) -> bytes:
        pairs = [(self.rng.random() < 0.1, key, value) for key, value in obj.items()]
        if self.odd and self.rng.random() < 0.2:  # tool input keeps its key order
            self.changed = True
            self.rng.shuffle(pairs)
        out = []
        for repeat, key, value in pairs:
            if repeat:  # an earlier duplicate: the last one wins
                out.append(self.member(key, self.rng.choice(ODD)))
            out.append(self.member(key, self.value(value)))
        if self.odd and self.rng.random() < 0.1:  # tool input keeps every key
            self.changed = True
            out.append(self.member("x_unknown", self.rng.choice(ODD)))
        return b"{" + (b",".join(out) if out else self.ws()) + b"}"

    def member(self, key: str, raw: bytes) -> bytes:
        name = self.string(key, 0.05)
        return self.ws() + name + self.ws() + b":" + self.ws() + raw + self.ws()


def data_lines(payloads: list[bytes]) -> bytes:
    """Frame each payload, one ``data:`` line per line of it (LFs join them again)."""
    return b"".join(
        b"".join(b"data: " + line + b"\n" for line in p.split(b"\n")) + b"\n"
        for p in payloads
    )


Respelled = tuple[bytes, bytes, bool]
RESPELLED_EVENTS: Final = {
    "OpenAIChatParser": openai_chunk,
    "AnthropicParser": anthropic_event | anthropic_content_delta,  # deltas are common
}


@st.composite
def respelled(draw: st.DrawFn, parser: str) -> Respelled:
    """(canonical stream, the same spelled otherwise, whether odd values went in)."""
    objs = draw(st.lists(RESPELLED_EVENTS[parser], min_size=1, max_size=10))
    end = [b"[DONE]"] if parser == "OpenAIChatParser" else []
    spelling = Spelling(draw(st.randoms(use_true_random=True)), draw(st.booleans()))
    canonical = frame([*(orjson.dumps(o) for o in objs), *end], b"\n")
    spelled = data_lines([*(spelling.value(o) for o in objs), *end])
    return canonical, spelled, spelling.changed


def check_respelled(
    both_cores: tuple[ModuleType, ModuleType],
    parser: str,
    case: Respelled,
    cuts: list[int],
) -> None:
    py, cy = (getattr(core, parser) for core in both_cores)
    canonical, spelled, changed = case
    expected = outcome(py(), [spelled])
    if not changed:  # the same JSON: the same deltas as the plain spelling
        assert expected[1] is None
        assert outcome(py(), [canonical]) == expected
    assert outcome(py(), split(spelled, cuts)) == expected
    assert outcome(cy(), split(spelled, cuts)) == expected


@DIFF
@given(case=respelled("OpenAIChatParser"), cuts=CUTS)
def test_respelled_openai_chunks_read_alike(
    both_cores: tuple[ModuleType, ModuleType], case: Respelled, cuts: list[int]
) -> None:
    check_respelled(both_cores, "OpenAIChatParser", case, cuts)


@DIFF
@given(case=respelled("AnthropicParser"), cuts=CUTS)
def test_respelled_anthropic_events_read_alike(
    both_cores: tuple[ModuleType, ModuleType], case: Respelled, cuts: list[int]
) -> None:
    check_respelled(both_cores, "AnthropicParser", case, cuts)
