"""``RequestFramer``: where a request ends, from the bytes read so far."""

from __future__ import annotations

import pytest

from navi_core.serve.framing import Frame, HeadTooLarge, RequestFramer


def feed_bytewise(framer: RequestFramer, data: bytes) -> tuple[Frame, int]:
    """Feed ``data`` one byte at a time; the frame and how many bytes it needed."""
    buf = bytearray()
    for i, byte in enumerate(data):
        buf.append(byte)
        frame = framer.feed(buf)
        if frame is not None:
            return frame, i + 1
    raise AssertionError("never whole")


def test_a_request_without_a_body_ends_at_the_blank_line() -> None:
    head = b"GET /v1/sessions?limit=2 HTTP/1.1\r\nHost: x\r\n\r\n"
    frame, used = feed_bytewise(RequestFramer(1024, 100), head + b"GET / HTTP/1.1")
    assert used == len(head) and frame.size == len(head) and frame.whole
    assert frame.data == head
    assert (frame.method, frame.target) == ("GET", "/v1/sessions?limit=2")


def test_a_content_length_body_is_waited_for_whole() -> None:
    req = b"POST /a HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world"
    frame, used = feed_bytewise(RequestFramer(1024, 100), req + b"NEXT")
    assert used == len(req) and frame.size == len(req) and frame.data == req
    assert frame.whole


def test_a_chunked_body_ends_after_its_last_chunk_and_trailers() -> None:
    body = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
    req = b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    frame, used = feed_bytewise(RequestFramer(1024, 100), req + b"NEXT")
    assert used == len(req) and frame.whole and frame.data == req
    plain = (
        b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    )
    frame, used = feed_bytewise(RequestFramer(1024, 100), plain)
    assert used == len(plain) and frame.whole


@pytest.mark.parametrize(
    "head",
    [
        b"POST /a HTTP/1.1\r\nContent-Length: 101\r\n\r\n",  # over max_body
        b"POST /a HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        b"POST /a HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        b"POST /a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
    ],
)
def test_unclear_or_oversized_framing_goes_on_at_once_and_closes(head: bytes) -> None:
    frame = RequestFramer(1024, 100).feed(head)
    assert frame is not None and not frame.whole and frame.data == head


def test_a_chunked_body_over_the_limit_goes_on_once_past_it() -> None:
    framer = RequestFramer(1024, 100)
    head = b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert framer.feed(head + b"64\r\n" + b"x" * 100) is None  # 100: at the limit
    frame = framer.feed(head + b"64\r\n" + b"x" * 100 + b"\r\n1\r\ny")
    assert frame is not None and not frame.whole


def test_expect_100_continue_is_reported_and_dropped_from_the_head() -> None:
    framer = RequestFramer(1024, 100)
    head = b"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
    assert framer.feed(head) is None and framer.expect_continue
    frame = framer.feed(head + b"{}")
    assert frame is not None and frame.expect_continue
    assert frame.data == b"POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"


def test_blank_lines_before_a_request_are_skipped() -> None:
    req = b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"
    frame = RequestFramer(1024, 100).feed(req)
    assert frame is not None and frame.size == len(req)
    assert frame.data == b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def test_a_head_without_an_end_within_the_limit_is_too_large() -> None:
    framer = RequestFramer(64, 100)
    assert framer.feed(b"GET / HTTP/1.1\r\n" + b"a" * 40) is None
    with pytest.raises(HeadTooLarge):
        framer.feed(b"GET / HTTP/1.1\r\n" + b"a" * 60)


def test_reset_starts_on_the_next_request() -> None:
    framer = RequestFramer(1024, 100)
    first = b"POST /a HTTP/1.1\r\nContent-Length: 1\r\n\r\nx"
    second = b"GET /b HTTP/1.1\r\n\r\n"
    buf = bytearray(first + second)
    frame = framer.feed(buf)
    assert frame is not None and frame.size == len(first)
    del buf[: frame.size]
    framer.reset()
    frame = framer.feed(buf)
    assert frame is not None and frame.target == "/b"
