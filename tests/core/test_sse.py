"""SSEDecoder: the WHATWG event-stream rules, limits and end of input, on both twins."""

from __future__ import annotations

import array
import subprocess
import sys
import tracemalloc
from types import ModuleType
from typing import Any

import pytest
from chunking import DATA, chunkings, run

from navi_core import _framing_py, _sse_py
from navi_core._deltas import DONE, TEXT
from navi_core.errors import MalformedStream


def decode(core: ModuleType, raw: bytes, **kwargs: Any) -> list[Any]:
    """Decode ``raw`` under every chunking and check they all agree."""
    results = [run(core.SSEDecoder(**kwargs), c) for c in chunkings(raw)]
    assert all(r == results[0] for r in results)
    return results[0]


def datas(core: ModuleType, raw: bytes) -> list[str]:
    return [e.data for e in decode(core, raw)]


def test_event_fields(core: ModuleType) -> None:
    raw = b"event: add\nid: 7\nretry: 1500\ndata: one\n\ndata: two\n\n"
    ev = core.SSEEvent
    assert decode(core, raw) == [
        ev("add", "one", "7", 1500),
        ev("message", "two", "7", None),
    ]


def test_event_value_semantics(core: ModuleType) -> None:
    a = core.SSEEvent("message", "x", "", None)
    assert a == core.SSEEvent("message", "x", "", None)
    assert a != core.SSEEvent("message", "y", "", None)
    assert repr(a) == "SSEEvent(event='message', data='x', id='', retry=None)"
    with pytest.raises(AttributeError):
        a.data = "z"


def test_multiline_data_joined_with_lf(core: ModuleType) -> None:
    assert datas(core, b"data: a\ndata:b\ndata\ndata:  c\n\n") == ["a\nb\n\n c"]


def test_value_rules(core: ModuleType) -> None:
    # One leading space is removed; a line without a colon is a field with no value.
    raw = b"data:x\n\ndata:  two spaces\n\ndata\n\ndata:\n\ndata: a:b\n\n"
    assert datas(core, raw) == ["x", " two spaces", "", "", "a:b"]


def test_comments_and_unknown_fields_ignored(core: ModuleType) -> None:
    raw = b": hello\n:\nfoo: bar\nDATA: no\ndata: yes\n: mid\n\n"
    assert datas(core, raw) == ["yes"]


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"], ids=["lf", "cr", "crlf"])
def test_line_endings(core: ModuleType, eol: bytes) -> None:
    raw = b"data: a" + eol + b"data: b" + eol + eol + b"data: c" + eol + eol
    assert datas(core, raw) == ["a\nb", "c"]


def test_crlf_split_across_chunks(core: ModuleType) -> None:
    dec = core.SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    # The LF completes the CRLF: it must not count as an empty line.
    assert dec.feed(b"\ndata: b\r") == []
    assert dec.feed(b"\n") == []
    assert [e.data for e in dec.feed(b"\r\n")] == ["a\nb"]


def test_cr_then_empty_feed_then_lf(core: ModuleType) -> None:
    dec = core.SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"") == []
    assert dec.feed(b"\n") == []
    assert [e.data for e in dec.feed(b"\n")] == ["a"]


def test_mixed_line_endings(core: ModuleType) -> None:
    assert datas(core, b"data: a\r\ndata: b\rdata: c\n\r\n\rdata: d\n\n") == [
        "a\nb\nc",
        "d",
    ]


def test_bom_skipped_at_start_only(core: ModuleType) -> None:
    bom = "\ufeff".encode()
    assert datas(core, bom + b"data: a\n\n") == ["a"]
    # Not at the start: the BOM is part of the field name, so the line is ignored.
    assert datas(core, b"data: a\n\n" + bom + b"data: b\n\n") == ["a"]
    assert datas(core, bom + bom + b"data: a\n\ndata: b\n\n") == ["b"]
    # Only a BOM's first two bytes: not a BOM, decoded as invalid UTF-8 text.
    assert datas(core, b"\xef\xbbdata: a\n\ndata: b\n\n") == ["b"]


def test_bom_split_across_chunks(core: ModuleType) -> None:
    dec = core.SSEDecoder()
    assert dec.feed(b"\xef") == []
    assert dec.feed(b"\xbb") == []
    assert [e.data for e in dec.feed(b"\xbfdata: a\n\n")] == ["a"]


def test_multibyte_utf8_split(core: ModuleType) -> None:
    text = "héllo 😀 мир"
    raw = b"event: \xc3\xa9v\ndata: " + text.encode() + b"\n\n"
    assert decode(core, raw) == [core.SSEEvent("év", text, "", None)]


def test_unicode_line_separators_are_not_line_breaks(core: ModuleType) -> None:
    text = "a\u2028b\u2029c\x85d\x0be\x0cf"
    assert datas(core, b"data: " + text.encode() + b"\n\n") == [text]


def test_invalid_utf8_is_replaced(core: ModuleType) -> None:
    raw = b"event: \xff\nid: \xc3\ndata: a\xffb\xe2\x82\ndata: \xf0\x9f\n\n"
    assert decode(core, raw) == [
        core.SSEEvent("\ufffd", "a\ufffdb\ufffd\n\ufffd", "\ufffd", None)
    ]


def test_retry_only_ascii_digits_and_only_its_event(core: ModuleType) -> None:
    raw = (
        b"retry: 10\ndata: a\n\n"
        b"retry: 1x\ndata: b\n\n"
        b"retry: \xd9\xa3\ndata: c\n\n"  # ARABIC-INDIC DIGIT THREE
        b"retry:\ndata: d\n\n"
        b"retry: -5\nretry: 20\ndata: e\n\n"
        b"data: f\n\n"
    )
    assert [e.retry for e in decode(core, raw)] == [10, None, None, None, 20, None]


def test_id_persists_and_nul_is_ignored(core: ModuleType) -> None:
    raw = (
        b"data: a\n\n"
        b"id: 1\ndata: b\n\n"
        b"data: c\n\n"
        b"id: 2\x003\ndata: d\n\n"
        b"id: 5\n\n"  # no data: not dispatched, but the id is kept
        b"data: e\n\n"
        b"id\ndata: f\n\n"
    )
    assert [e.id for e in decode(core, raw)] == ["", "1", "1", "1", "5", ""]


def test_event_without_data_is_not_dispatched(core: ModuleType) -> None:
    raw = b"event: ping\n\nevent: x\nretry: 5\n\ndata\n\n"
    assert decode(core, raw) == [core.SSEEvent("message", "", "", None)]


def test_empty_event_name_means_message(core: ModuleType) -> None:
    assert [e.event for e in decode(core, b"event:\ndata: a\n\n")] == ["message"]


def test_accepts_bytearray_and_memoryview(core: ModuleType) -> None:
    dec = core.SSEDecoder()
    assert dec.feed(bytearray(b"data: a\n")) == []
    assert dec.feed(memoryview(b"xx\n\n")[2:]) == [
        core.SSEEvent("message", "a", "", None)
    ]


def test_close_dispatches_unterminated_event(core: ModuleType) -> None:
    assert datas(core, b"data: a\n\ndata: b") == ["a", "b"]
    assert datas(core, b"data: a\n\ndata: b\n") == ["a", "b"]
    assert datas(core, b"data: a\n\ndata: b\r") == ["a", "b"]
    assert datas(core, b"data: a\n\nevent: x\n") == ["a"]
    assert datas(core, b"data: a\n\n: comment") == ["a"]


def test_close_finishes_a_pending_bom_prefix(core: ModuleType) -> None:
    dec = core.SSEDecoder()
    assert dec.feed(b"\xef\xbb") == []
    assert dec.close() == []


def test_feed_after_close_raises_and_close_is_idempotent(core: ModuleType) -> None:
    dec = core.SSEDecoder()
    assert dec.feed(b"data: a") == []
    assert [e.data for e in dec.close()] == ["a"]
    assert dec.close() == []
    with pytest.raises(ValueError, match="after close"):
        dec.feed(b"data: b\n\n")


def test_oversize_line(core: ModuleType) -> None:
    raw = b"data: ok\n\n: " + b"x" * 30 + b"\n\ndata: later\n\n"
    for chunks in chunkings(raw):
        dec = core.SSEDecoder(max_event_bytes=20)
        seen: list[Any] = []
        with pytest.raises(MalformedStream) as info:
            for chunk in chunks:
                seen += dec.feed(chunk)
            seen += dec.close()
        assert [e.data for e in seen] == ["ok"]
        assert info.value.offset == 10
        assert "x" * 10 not in str(info.value)
        assert str(info.value) == "SSE line at byte 10 exceeds max_event_bytes (20)"


def test_line_at_the_limit_is_fine(core: ModuleType) -> None:
    assert decode(core, b"data:" + b"y" * 15 + b"\n\n", max_event_bytes=20) == [
        core.SSEEvent("message", "y" * 15, "", None)
    ]


def test_unterminated_oversize_line_fails_at_close(core: ModuleType) -> None:
    dec = core.SSEDecoder(max_event_bytes=20)
    assert dec.feed(b"data: " + b"z" * 14) == []
    with pytest.raises(MalformedStream) as info:
        dec.feed(b"z")
    assert info.value.offset == 0


def test_oversize_event_data(core: ModuleType) -> None:
    raw = b"id: 1\ndata: 0123456789\ndata: 0123456789\n\n"
    for chunks in chunkings(raw):
        dec = core.SSEDecoder(max_event_bytes=20)
        with pytest.raises(MalformedStream) as info:
            run(dec, chunks)
        assert info.value.offset == 23
        assert str(info.value) == (
            "SSE event data at byte 23 exceeds max_event_bytes (20)"
        )


def test_error_after_events_is_raised_on_the_next_call(core: ModuleType) -> None:
    dec = core.SSEDecoder(max_event_bytes=8)
    events = dec.feed(b"data: a\n\ndata: 0123456789\n\n")
    assert [e.data for e in events] == ["a"]
    with pytest.raises(MalformedStream):
        dec.feed(b"data: b\n\n")
    with pytest.raises(MalformedStream):
        dec.close()


def test_max_event_bytes_must_be_positive(core: ModuleType) -> None:
    with pytest.raises(ValueError, match="positive"):
        core.SSEDecoder(max_event_bytes=0)


def test_framing_fixture(core: ModuleType) -> None:
    raw = (DATA / "synthetic" / "sse_framing_corner_cases.sse").read_bytes()
    events = decode(core, raw)
    assert [(e.event, e.id, e.retry) for e in events] == [
        ("message", "1", 3000),
        ("message", "1", None),
        ("message", "1", None),
        ("message", "1", None),
    ]
    assert events[0].data.split("\n") == [
        '{"choices":[{"index":0,',
        '"delta":{"content":"joined"},"finish_reason":null}]}',
    ]
    assert events[-1].data == "[DONE]"


def test_anthropic_fixture_keeps_unterminated_last_event(core: ModuleType) -> None:
    raw = (DATA / "anthropic" / "text_basic.sse").read_bytes()
    assert not raw.endswith(b"\n")
    events = decode(core, raw)
    assert [e.event for e in events][-2:] == ["message_delta", "message_stop"]
    assert events[-1].data == '{"type":"message_stop"}'


def test_memory_stays_flat_on_a_200mb_stream(core: ModuleType) -> None:
    event = b"data: " + b"x" * 1000 + b"\n\n"
    chunk_size = 64 * 1024
    body = event * (4 * chunk_size // len(event) + 1)
    total = 0
    dispatched = 0
    dec = core.SSEDecoder(max_event_bytes=64 * 1024)
    tracemalloc.start()
    try:
        while total < 200 * 1024 * 1024:
            for pos in range(0, len(body), chunk_size):
                dispatched += len(dec.feed(body[pos : pos + chunk_size]))
            total += len(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dispatched >= total // len(event) - 1
    assert peak < 2 * 1024 * 1024


def test_endless_line_fails_before_memory_grows(core: ModuleType) -> None:
    chunk = b"y" * (64 * 1024)
    dec = core.SSEDecoder(max_event_bytes=1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(MalformedStream) as info:
            for _ in range(3200):  # 200 MB if nothing stopped it
                dec.feed(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.offset == 0
    assert peak < 3 * 1024 * 1024


def test_absurd_retry_values_are_ignored(core: ModuleType) -> None:
    """More than 18 significant digits: no use as a delay, and past int()'s limit."""
    huge = b"9" * 5000
    raw = (
        b"retry: 7\nretry: " + huge + b"\ndata: a\n\n"
        b"retry: " + huge + b"\ndata: b\n\n"
        b"retry: " + b"0" * 5000 + b"42\ndata: c\n\n"
        b"retry: 999999999999999999\ndata: d\n\n"
        b"retry: 1000000000000000000\ndata: e\n\n"
        b"retry: 000\ndata: f\n\n"
    )
    assert [(e.data, e.retry) for e in decode(core, raw)] == [
        ("a", 7),
        ("b", None),
        ("c", 42),
        ("d", 999999999999999999),
        ("e", None),
        ("f", 0),
    ]


PAYLOADS = {
    "OpenAIChatParser": (
        b'{"choices":[{"index":0,"delta":{"content":"x"}}]}',
        b"[DONE]",
    ),
    "AnthropicParser": (
        b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
        b'"text":"x"}}',
        b'{"type":"message_stop"}',
    ),
}


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_parsers_read_on_past_an_absurd_retry(core: ModuleType, name: str) -> None:
    text, end = PAYLOADS[name]
    parser = getattr(core, name)()
    assert parser.feed(b"retry: " + b"9" * 5000 + b"\n") == []
    assert parser.feed(b"data: " + text + b"\n\n") == [(TEXT, "x")]
    assert parser.feed(b"retry: " + b"1" * 4301 + b"\ndata: " + end + b"\n\n") == [
        (DONE,)
    ]


BYTES_LIKE = {
    "bytes": b"data: hi\n\n",
    "bytearray": bytearray(b"data: hi\n\n"),
    "memoryview": memoryview(b"??data: hi\n\n")[2:],
    "strided memoryview": memoryview(b"dxaxtxax:x xhxix\nx\n")[::2],
    "reversed memoryview": memoryview(b"\n\nih :atad")[::-1],
    "2-d memoryview": memoryview(b"data: hi\n\n").cast("B", (2, 5)),
    "array": array.array("B", b"data: hi\n\n"),
}


@pytest.mark.parametrize("data", BYTES_LIKE.values(), ids=list(BYTES_LIKE))
def test_feed_takes_any_bytes_like_object(core: ModuleType, data: Any) -> None:
    assert core.SSEDecoder().feed(data) == [core.SSEEvent("message", "hi", "", None)]


NOT_BYTES = ["", "data: x\n\n", [100, 97], 5, None, {b"data": b"x"}]


@pytest.mark.parametrize("name", ["SSEDecoder", "OpenAIChatParser", "AnthropicParser"])
@pytest.mark.parametrize("data", NOT_BYTES, ids=[repr(d) for d in NOT_BYTES])
def test_feed_refuses_anything_else_alike(
    core: ModuleType, name: str, data: Any
) -> None:
    parser = getattr(core, name)()
    message = (
        f"feed() argument must be a bytes-like object, not {type(data).__name__!r}"
    )
    with pytest.raises(TypeError) as info:
        parser.feed(data)
    assert str(info.value) == message
    assert parser.feed(b": still usable\n") == []
    parser.close()
    with pytest.raises(TypeError):  # the type is checked first, even after close()
        parser.feed(data)


NEW_WITHOUT_INIT = """
import navi_core._core as cy
from navi_core._deltas import MODEL, TEXT, USAGE
decoder = cy.SSEDecoder.__new__(cy.SSEDecoder)
assert decoder.feed(b"event: e\\ndata: x\\n\\n") == [cy.SSEEvent("e", "x", "", None)]
openai = cy.OpenAIChatParser.__new__(cy.OpenAIChatParser)
assert openai.feed(
    b'data: {"model":"m","choices":[{"index":0,"delta":{"content":"x"}}]}\\n\\n'
) == [(MODEL, "m"), (TEXT, "x")]
anthropic = cy.AnthropicParser.__new__(cy.AnthropicParser)
assert anthropic.feed(
    b'data: {"type":"message_start","message":{"usage":{"input_tokens":1}}}\\n\\n'
) == [(USAGE, 1, 0, 0, 0, 0)]
print("ok")
"""


@pytest.mark.cython
def test_compiled_objects_made_by_new_alone_are_ready() -> None:
    """``cls.__new__(cls)`` skips ``__init__``: the state must exist without it."""
    pytest.importorskip("navi_core._core")
    result = subprocess.run(
        [sys.executable, "-c", NEW_WITHOUT_INIT],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout == "ok\n", result.stderr[-2000:]


@pytest.mark.cython
def test_the_compiled_core_raises_through_the_twins_helpers(
    both_cores: tuple[ModuleType, ModuleType],
) -> None:
    """One definition of each message, value and rule, so the twins cannot drift."""
    compiled = both_cores[1]
    shared = ["BOM", "DEFAULT_MAX_EVENT_BYTES", "SSEEvent", "as_bytes", "data_error",
              "line_error", "parse_retry"]  # fmt: skip
    for name in shared:
        assert getattr(compiled, name, None) is getattr(_framing_py, name), name
    for name in ["AnthropicReader", "OpenAIChatReader"]:  # the generic JSON path
        assert getattr(compiled, name, None) is getattr(_sse_py, name), name
