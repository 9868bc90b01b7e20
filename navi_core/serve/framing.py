"""Where an HTTP/1.1 request ends, found in the bytes read so far without parsing it.

``ServeWorker`` reads requests on its event loop and hands one to a thread only once
it is whole; ``RequestFramer`` tells it when that is. It reads just enough of the head
to size the body (``Content-Length``, ``Transfer-Encoding: chunked``, ``Expect``);
gunicorn's parser, in the thread, still parses and validates the request. When the
framing is unclear (two lengths, an unknown coding, a body over ``max_body``) the
request goes on at once with ``whole=False``: the app or the parser answers it, and
the connection is closed after, since where the next request starts is not known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["Frame", "HeadTooLarge", "RequestFramer"]

#: the longest chunk-size line (size and extensions)
MAX_CHUNK_LINE: Final = 1024


class HeadTooLarge(ValueError):
    """The request head is longer than the framer's ``max_head`` (answer 431)."""


@dataclass(frozen=True)
class Frame:
    """One request ready for a thread.

    Attributes:
        data: the bytes to parse: the head (an ``Expect`` line dropped when the
            framer answered it) and the body, as far as it was read.
        size: how many buffered bytes the request took (the rest is the next one).
        whole: the body is all there; False when the connection must close after.
        method, target: from the request line, to route it before it is parsed.
        expect_continue: the client waits for ``100 Continue`` before the body.
    """

    data: bytes
    size: int
    whole: bool
    method: str
    target: str
    expect_continue: bool = False


@dataclass(frozen=True)
class _Head:
    size: int
    data: bytes
    method: str
    target: str
    body: str  # "none", "length", "chunked" or "unread"
    length: int
    expect_continue: bool


def _parse_head(raw: bytes, size: int, max_body: int) -> _Head:
    """The parts of a complete head that frame it; ``raw`` is the head without its
    blank line, ``size`` the bytes it took in the buffer (blank lines before it too)."""
    request_line, *fields = raw.split(b"\r\n")
    parts = request_line.split(b" ")
    method = parts[0].decode("latin-1") if parts else ""
    target = parts[1].decode("latin-1") if len(parts) > 1 else ""
    version = parts[2] if len(parts) > 2 else b""
    lengths: list[bytes] = []
    codings: list[bytes] = []
    expect = False
    kept: list[bytes] = [request_line]
    for line in fields:
        name, sep, value = line.partition(b":")
        key = name.strip().lower() if sep else b""
        value = value.strip()
        if key == b"content-length":
            lengths += [v.strip() for v in value.split(b",")]
        elif key == b"transfer-encoding":
            codings += [c.strip().lower() for c in value.split(b",") if c.strip()]
        elif key == b"expect" and value.lower() == b"100-continue":
            expect = version == b"HTTP/1.1"
            if expect:
                continue  # answered by the worker; the parser must not answer again
        kept.append(line)
    body, length = "none", 0
    if codings:
        chunked = codings[-1] == b"chunked" and not lengths
        body = "chunked" if chunked else "unread"
    elif lengths:
        first = lengths[0]
        same = all(v == first for v in lengths)
        if not same or not first.isdigit() or len(first) > 18:
            body = "unread"
        else:
            length = int(first)
            body = "unread" if length > max_body else "length" if length else "none"
    data = b"\r\n".join(kept) + b"\r\n\r\n"
    expect = expect and body != "none"
    return _Head(size, data, method, target, body, length, expect)


class RequestFramer:
    """Finds the end of the next request in a connection's buffer, a read at a time.

    Call ``feed(buf)`` with everything buffered so far (the same growing buffer each
    time); it returns a ``Frame`` once the request is whole (or must go on anyway),
    else None. ``reset()`` starts on the next request.
    """

    def __init__(self, max_head: int, max_body: int) -> None:
        self.max_head = max_head
        self.max_body = max_body
        self.reset()

    def reset(self) -> None:
        self._head: _Head | None = None
        self._scanned = 0  # where the search for the blank line goes on
        self._chunk_at = 0  # where the next chunk-size line starts
        self._chunk_data = 0  # chunk bytes seen so far

    @property
    def head_done(self) -> bool:
        """True once the head was read (the body, if any, is being read)."""
        return self._head is not None

    @property
    def expect_continue(self) -> bool:
        """True when the client waits for ``100 Continue`` before sending the body."""
        return self._head is not None and self._head.expect_continue

    def feed(self, buf: bytes | bytearray) -> Frame | None:
        """The request, once ``buf`` holds all of it; None while more must be read.

        Raises:
            HeadTooLarge: no blank line within ``max_head`` bytes.
        """
        if self._head is None:
            start = 0
            while buf.startswith(b"\r\n", start):  # empty lines before a request
                start += 2
            end = buf.find(b"\r\n\r\n", max(self._scanned, start), self.max_head)
            if end < 0:
                if len(buf) >= self.max_head:
                    raise HeadTooLarge(f"no end of head in {self.max_head} bytes")
                self._scanned = max(start, len(buf) - 3)
                return None
            raw = bytes(buf[start:end])
            self._head = _parse_head(raw, end + 4, self.max_body)
            self._chunk_at = self._head.size
        head = self._head
        if head.body == "none":
            return self._frame(buf, head.size, whole=True)
        if head.body == "unread":
            return self._frame(buf, len(buf), whole=False)
        if head.body == "length":
            end = head.size + head.length
            return self._frame(buf, end, whole=True) if len(buf) >= end else None
        return self._chunked(buf, head)

    def _chunked(self, buf: bytes | bytearray, head: _Head) -> Frame | None:
        """The end of a chunked body: chunks, the last (size 0) one, its trailers.

        Past ``max_body`` bytes of chunk data (or a buffer that chunk framing alone
        made four times that) the request goes on unfinished: the app answers 413.
        """
        raw_limit = head.size + 4 * self.max_body + self.max_head
        while True:
            line_end = buf.find(b"\r\n", self._chunk_at)
            if line_end < 0:
                if len(buf) - self._chunk_at > MAX_CHUNK_LINE:
                    return self._frame(buf, len(buf), whole=False)
                return None
            size_text = bytes(buf[self._chunk_at : line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                return self._frame(buf, len(buf), whole=False)  # the parser says 400
            if size == 0:
                end = buf.find(b"\r\n\r\n", line_end)  # after the trailers, if any
                if end >= 0:
                    return self._frame(buf, end + 4, whole=True)
                if len(buf) - line_end > self.max_head:
                    return self._frame(buf, len(buf), whole=False)
                return None
            held = min(size, max(0, len(buf) - line_end - 2))
            if self._chunk_data + held > self.max_body or len(buf) > raw_limit:
                return self._frame(buf, len(buf), whole=False)  # the app says 413
            next_at = line_end + 2 + size + 2
            if len(buf) < next_at:
                return None
            self._chunk_data += size
            self._chunk_at = next_at

    def _frame(self, buf: bytes | bytearray, end: int, *, whole: bool) -> Frame:
        head = self._head
        assert head is not None
        data = head.data + bytes(buf[head.size : end])
        return Frame(data, end, whole, head.method, head.target, head.expect_continue)
