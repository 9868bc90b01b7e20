"""SSE framing in pure Python: the twin of ``csrc/_framing.pxi``.

Framing follows the WHATWG event-stream rules
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
on bytes, with three deliberate choices both twins share:

* ``close()`` ends the last line and dispatches a pending event that has data, because
  recorded streams and some servers omit the final blank line (WHATWG would drop it);
* a line, or the data of one event, larger than ``max_event_bytes`` raises
  ``MalformedStream``, so memory stays bounded however the input is chunked;
* an error found after some results of the same ``feed`` returns those results first
  and raises on the next call; a failed or closed object refuses further input;
* a ``retry`` value with more than 18 significant digits is ignored like one that is
  not all digits: no delay that long means anything, and ``int()`` refuses past 4300.

``feed()`` takes any bytes-like object (a strided ``memoryview`` is copied in order) and
nothing else. ``Framer`` has the same methods as its compiled twin, each doing the same
step: ``feed`` / ``close`` → ``_feed`` (the BOM check) → ``_unhold`` → ``_chunk`` (the
lines of one chunk) → ``_line`` → ``_flush`` → ``_dispatch``, which the delta parsers of
``_sse_py`` and ``SSEDecoder`` override. The compiled twin uses the helpers here (errors,
field values, ``SSEEvent``) as they are, so both raise the same errors with the same
messages.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from .errors import MalformedStream

__all__ = [
    "BOM",
    "DEFAULT_MAX_EVENT_BYTES",
    "MAX_CHUNK_LINE",
    "Buffer",
    "Dechunker",
    "Delta",
    "Framer",
    "SSEDecoder",
    "SSEEvent",
    "as_bytes",
    "data_error",
    "line_error",
    "parse_retry",
]

BOM: Final = b"\xef\xbb\xbf"
DEFAULT_MAX_EVENT_BYTES: Final = 16 * 1024 * 1024
_EOL: Final = re.compile(rb"\r\n|\r|\n")
_MAX_RETRY_DIGITS: Final = 18
#: the longest chunk-size line (extensions included) or trailer line, CRLF not counted
MAX_CHUNK_LINE: Final = 4096
_CHUNK_SIZE: Final = re.compile(rb"[0-9A-Fa-f]{1,15}")

Buffer = bytes | bytearray | memoryview
Delta = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched server-sent event; ``retry`` only when its own block set one."""

    event: str
    data: str
    id: str
    retry: int | None


def line_error(offset: int, limit: int) -> MalformedStream:
    return MalformedStream(
        f"SSE line at byte {offset} exceeds max_event_bytes ({limit})", offset=offset
    )


def data_error(offset: int, limit: int) -> MalformedStream:
    return MalformedStream(
        f"SSE event data at byte {offset} exceeds max_event_bytes ({limit})",
        offset=offset,
    )


def as_bytes(data: object) -> bytes:
    """``data`` copied to bytes if it is bytes-like; TypeError for anything else."""
    if isinstance(data, bytes | bytearray):
        return bytes(data)
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"feed() argument must be a bytes-like object, not {type(data).__name__!r}"
        ) from None
    with view:
        return view.tobytes()  # C order, whatever the strides


def parse_retry(value: bytes) -> int | None:
    """The milliseconds of a ``retry`` field, or None to ignore it."""
    if not value.isdigit():  # ASCII digits only, and not empty
        return None
    digits = value.lstrip(b"0")
    if len(digits) > _MAX_RETRY_DIGITS:
        return None
    return int(digits) if digits else 0


class Framer:
    """Splits bytes into SSE fields and hands each complete event to ``_dispatch``."""

    _names_events: ClassVar[bool] = True  # False: _dispatch never reads _event

    __slots__ = (
        "_bom",
        "_buf",
        "_buf_offset",
        "_closed",
        "_data_offset",
        "_error",
        "_event",
        "_id",
        "_max",
        "_parts",
        "_retry",
        "_size",
        "_skip_lf",
        "_stopped",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be positive")
        self._max = max_event_bytes
        self._buf = bytearray()  # the unfinished line; first bytes until BOM check
        self._buf_offset = 0  # stream offset of _buf[0] (or of the next byte fed)
        self._bom = True  # a leading BOM may still be arriving
        self._skip_lf = False  # the last chunk ended in CR: drop a leading LF
        self._parts: list[bytes] = []
        self._size = 0
        self._data_offset = 0
        self._event = b""
        self._id = ""
        self._retry: int | None = None
        self._closed = False
        self._stopped = False  # the parser saw its terminator: ignore the rest
        self._error: MalformedStream | None = None

    def feed(self, data: Buffer) -> list[Any]:
        """Consume a chunk of the body; return what it completed (maybe nothing).

        Raises:
            TypeError: ``data`` is not a bytes-like object.
            MalformedStream: the input breaks a limit or the payload format.
            ValueError: called after ``close()``.
        """
        if type(data) is not bytes:
            data = as_bytes(data)
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ValueError("feed() called after close()")
        out: list[Any] = []
        if self._stopped or not data:
            return out
        buf = self._buf
        if buf and not self._bom and b"\n" not in data and b"\r" not in data:
            buf += data  # only the unfinished line grows: no copy of it
            if len(buf) > self._max:
                self._fail(line_error(self._buf_offset, self._max), out)
            return out
        if buf:
            data = bytes(buf) + data
            buf.clear()
        try:
            self._feed(data, out)
        except MalformedStream as exc:
            self._fail(exc, out)
        return out

    def close(self) -> list[Any]:
        """End of input: finish the last line and dispatch a pending event with data."""
        if self._error is not None:
            raise self._error
        out: list[Any] = []
        if not self._closed:
            self._closed = True
            if not self._stopped:
                try:
                    self._finish(out)
                except MalformedStream as exc:
                    self._fail(exc, out)
        return out

    def _fail(self, exc: MalformedStream, out: list[Any]) -> None:
        """Poison this object; raise now unless ``out`` must be returned first."""
        self._error = exc
        self._buf.clear()
        self._parts = []
        if not out:
            raise exc

    def _feed(self, data: bytes, out: list[Any]) -> None:
        """``data`` (with the held line in front) after the BOM question."""
        if not self._bom:
            self._chunk(data, out)
        elif len(data) < 3 and BOM.startswith(data):
            self._buf += data
        else:
            self._unhold(data, out)

    def _unhold(self, head: bytes, out: list[Any]) -> None:
        """The BOM question is settled: feed what was held back."""
        self._bom = False
        self._buf.clear()
        if head.startswith(BOM):
            head = head[3:]
            self._buf_offset += 3
        if head:
            self._chunk(head, out)

    def _finish(self, out: list[Any]) -> None:
        if self._bom:
            self._unhold(bytes(self._buf), out)
            if self._stopped:
                return
        buf = self._buf
        if buf:
            self._line(bytes(buf), self._buf_offset, out)
            buf.clear()
        if self._parts and not self._stopped:
            self._flush(out)

    def _chunk(self, buf: bytes, out: list[Any]) -> None:
        """Apply the complete lines of ``buf``; hold back the unfinished one."""
        if self._skip_lf:
            self._skip_lf = False
            if buf[0] == 10:
                buf = buf[1:]
                self._buf_offset += 1
        base = self._buf_offset
        pos = 0
        if b"\r" in buf:
            end = len(buf)
            for m in _EOL.finditer(buf):
                self._line(buf[pos : m.start()], base + pos, out)
                pos = m.end()
                if self._stopped:
                    return
                if pos == end and m.group() == b"\r":
                    self._skip_lf = True
        else:  # LF only: whole events at a time; the two usual shapes skip _line
            blocks = buf.split(b"\n\n")
            rest = blocks.pop()
            limit = self._max
            dispatch = self._dispatch
            for block in blocks:
                size = len(block)
                if self._parts or size > limit:
                    pass
                elif block.startswith(b"data: ") and b"\n" not in block:
                    self._data_offset = base + pos
                    dispatch(block[6:], out)
                    self._event = b""
                    self._retry = None
                    pos += size + 2
                    if self._stopped:
                        return
                    continue
                elif block.startswith(b"event: "):
                    nl = block.find(b"\n")
                    if (
                        block.startswith(b"data: ", nl + 1)
                        and block.find(b"\n", nl + 1) < 0
                    ):
                        if self._names_events:
                            self._event = block[7:nl]
                        self._data_offset = base + pos + nl + 1
                        dispatch(block[nl + 7 :], out)
                        self._event = b""
                        self._retry = None
                        pos += size + 2
                        if self._stopped:
                            return
                        continue
                self._lf_lines(block, base + pos, out, whole=True)
                if not self._stopped:
                    self._line(b"", base + pos + size + 1, out)
                pos += size + 2
                if self._stopped:
                    return
            pos += self._lf_lines(rest, base + pos, out)
            if self._stopped:
                return
        rest_size = len(buf) - pos
        if rest_size > self._max:
            raise line_error(base + pos, self._max)
        if rest_size:
            self._buf += buf[pos:]
        self._buf_offset = base + pos

    def _lf_lines(
        self, text: bytes, offset: int, out: list[Any], whole: bool = False
    ) -> int:
        """Apply the LF-ended lines of ``text`` (all of it if ``whole``); return the
        length used. Python only: the compiled ``_chunk`` walks lines with memchr."""
        pos = 0
        find = text.find
        while (nl := find(b"\n", pos)) >= 0:
            self._line(text[pos:nl], offset + pos, out)
            pos = nl + 1
            if self._stopped:
                return pos
        if whole:
            self._line(text[pos:], offset + pos, out)
            pos = len(text)
        return pos

    def _line(self, line: bytes, offset: int, out: list[Any]) -> None:
        """Apply one line (without its terminator) to the pending event."""
        if not line:
            if self._parts:
                self._flush(out)
            else:
                self._event = b""
                self._retry = None
            return
        if len(line) > self._max:
            raise line_error(offset, self._max)
        if line[0] == 58:  # ":" starts a comment
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name = line[:colon]
            value = (
                line[colon + 2 :]
                if line[colon + 1 : colon + 2] == b" "
                else line[colon + 1 :]
            )
        if name == b"data":
            parts = self._parts
            if parts:
                self._size += len(value) + 1
            else:
                self._size = len(value)
                self._data_offset = offset
            if self._size > self._max:
                raise data_error(offset, self._max)
            parts.append(value)
        elif name == b"event":
            if self._names_events:
                self._event = value
        elif name == b"id":
            if b"\x00" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry":
            retry = parse_retry(value)
            if retry is not None:
                self._retry = retry

    def _flush(self, out: list[Any]) -> None:
        parts = self._parts
        data = parts[0] if len(parts) == 1 else b"\n".join(parts)
        self._parts = []
        self._dispatch(data, out)
        self._event = b""
        self._retry = None

    def _dispatch(self, data: bytes, out: list[Any]) -> None:
        """Handle one event's data."""
        raise NotImplementedError


class SSEDecoder(Framer):
    """Incremental ``text/event-stream`` decoder: bytes in, ``SSEEvent`` values out."""

    __slots__ = ()

    def feed(self, data: Buffer) -> list[SSEEvent]:
        """Consume a chunk; return the events it completed (maybe none)."""
        return super().feed(data)

    def close(self) -> list[SSEEvent]:
        """End of input: return the pending event if it has data."""
        return super().close()

    def _dispatch(self, data: bytes, out: list[Any]) -> None:
        out.append(
            SSEEvent(
                self._event.decode("utf-8", "replace") or "message",
                data.decode("utf-8", "replace"),
                self._id,
                self._retry,
            )
        )


class Dechunker:
    """An HTTP/1.1 body with its chunked transfer coding removed, fed in pieces.

    ``feed`` returns the body bytes of what it is given (RFC 9112 section 7.1: a
    hexadecimal size line, extensions ignored, that many bytes and a CRLF, until a zero
    size; then trailer lines up to an empty one). ``done`` turns true at that empty
    line; ``overrun`` when bytes came after it (a connection not fit for reuse). The
    results do not depend on where the pieces are cut.

    Raises (from ``feed``):
        ValueError: a size line that is not 1 to 15 hex digits, chunk data not followed
            by CRLF, or a line longer than ``MAX_CHUNK_LINE``; the object refuses
            further input.
    """

    __slots__ = ("_buf", "_failed", "_left", "_state", "done", "overrun")

    def __init__(self) -> None:
        self._buf = b""  # an unfinished line, or the first byte of a chunk's CRLF
        self._state = 0  # 0: a size line, 1: chunk data, 2: its CRLF, 3: trailer lines
        self._left = 0  # bytes of the current chunk still to come
        self._failed = False
        self.done = False
        self.overrun = False

    def feed(self, data: Buffer) -> bytes:
        """The body bytes in ``data``."""
        if self._failed:
            raise ValueError("the chunked body failed already")
        chunk = as_bytes(data)
        if self.done:
            self.overrun = self.overrun or bool(chunk)
            return b""
        buf = self._buf + chunk if self._buf else chunk
        self._buf = b""
        out: list[bytes] = []
        pos, end = 0, len(buf)
        state, left = self._state, self._left
        try:
            while pos < end:
                if state == 1:
                    stop = pos + left
                    if stop > end:
                        out.append(buf[pos:end])
                        left -= end - pos
                        pos = end
                        break
                    out.append(buf[pos:stop])
                    pos, left, state = stop, 0, 2
                elif state == 2:
                    if end - pos < 2:
                        if buf[pos] != 13:
                            raise ValueError("chunk data not followed by CRLF")
                        break
                    if buf[pos] != 13 or buf[pos + 1] != 10:
                        raise ValueError("chunk data not followed by CRLF")
                    pos += 2
                    state = 0
                else:
                    stop = buf.find(b"\r\n", pos)
                    if stop < 0:
                        if end - pos > MAX_CHUNK_LINE + 1:
                            raise ValueError("chunk line too long")
                        break
                    if stop - pos > MAX_CHUNK_LINE:
                        raise ValueError("chunk line too long")
                    line = buf[pos:stop]
                    pos = stop + 2
                    if state == 3:
                        if not line:
                            self.done = True
                            self.overrun = pos < end
                            pos = end
                            break
                        continue
                    size = line.partition(b";")[0].strip(b" \t")
                    if _CHUNK_SIZE.fullmatch(size) is None:
                        raise ValueError(f"bad chunk size line {line!r}")
                    left = int(size, 16)
                    if left > sys.maxsize:  # a 32-bit build: beyond any buffer
                        raise ValueError("chunk size too large")
                    state = 1 if left else 3
        except ValueError:
            self._failed = True
            raise
        self._state, self._left = state, left
        if pos < end:
            self._buf = buf[pos:]
        return b"".join(out) if len(out) != 1 else out[0]
