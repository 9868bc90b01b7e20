# SSE framing: the compiled twin of navi_core/_framing_py.py, which documents the
# rules. Framer and SSEDecoder have the same methods as the twin's, each doing the
# same step, and use the twin's helpers (errors, field values, SSEEvent) as they are:
# same results, errors and messages; tests/core/test_differential.py holds the two to
# that. Lines are found with memchr in the caller's buffer (only an unfinished line is
# copied) and fields are matched on char pointers.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_GET_SIZE,
    PyByteArray_Resize,
)
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.string cimport memchr, memcmp, memcpy

from navi_core._framing_py import (
    BOM,
    DEFAULT_MAX_EVENT_BYTES,
    MAX_CHUNK_LINE,
    SSEEvent,
    as_bytes,
    data_error,
    line_error,
    parse_retry,
)
from navi_core.errors import MalformedStream


cdef class Framer:
    """Splits bytes into SSE fields and hands each complete event to ``_dispatch``."""

    cdef bytearray _buf  # the unfinished line; first bytes until the BOM check
    cdef Py_ssize_t _buf_offset  # stream offset of _buf[0]
    cdef Py_ssize_t _pos  # stream offset of the next byte fed
    cdef Py_ssize_t _max, _size, _data_offset
    cdef bint _bom, _skip_lf, _closed, _stopped
    cdef bint _names_events  # False: _dispatch never reads _event, so it is not kept
    cdef list _parts
    cdef bytes _event
    cdef str _id
    cdef object _retry, _error

    def __cinit__(self, max_event_bytes=DEFAULT_MAX_EVENT_BYTES):
        # Here rather than in __init__: an object made by cls.__new__(cls) is usable.
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be positive")
        self._max = max_event_bytes
        self._buf = bytearray()
        self._bom = True
        self._parts = []
        self._event = b""
        self._id = ""

    def feed(self, data):
        """Consume a chunk of the body; return what it completed (maybe nothing)."""
        cdef list out = []
        cdef Py_buffer view
        if type(data) is not bytes and type(data) is not bytearray:
            data = as_bytes(data)
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ValueError("feed() called after close()")
        if self._stopped:
            return out
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            if view.len:
                try:
                    self._feed(<const unsigned char*>view.buf, view.len, out)
                except MalformedStream as exc:
                    self._fail(exc, out)
        finally:
            PyBuffer_Release(&view)
        return out

    def close(self):
        """End of input: finish the last line and dispatch a pending event with data."""
        cdef list out = []
        if self._error is not None:
            raise self._error
        if not self._closed:
            self._closed = True
            if not self._stopped:
                try:
                    self._finish(out)
                except MalformedStream as exc:
                    self._fail(exc, out)
        return out

    cdef int _fail(self, exc, list out) except -1:
        self._error = exc
        PyByteArray_Resize(self._buf, 0)
        self._parts = []
        if not out:
            raise exc
        return 0

    cdef int _feed(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        cdef bytes head
        if not self._bom:
            return self._chunk(p, n, out)
        head = bytes(self._buf) + (<const char*>p)[:n]
        if len(head) < 3 and BOM.startswith(head):
            self._buf = bytearray(head)
            return 0
        return self._unhold(head, out)

    cdef int _unhold(self, bytes head, list out) except -1:
        """The BOM question is settled: feed what was held back."""
        self._bom = False
        PyByteArray_Resize(self._buf, 0)
        if head.startswith(BOM):
            head = head[3:]
            self._pos += 3
        if head:
            self._chunk(<const unsigned char*>PyBytes_AS_STRING(head), len(head), out)
        return 0

    cdef int _finish(self, list out) except -1:
        if self._bom:
            self._unhold(bytes(self._buf), out)
            if self._stopped:
                return 0
        if PyByteArray_GET_SIZE(self._buf):
            self._line(
                <const unsigned char*>PyByteArray_AS_STRING(self._buf),
                PyByteArray_GET_SIZE(self._buf),
                self._buf_offset,
                out,
            )
            PyByteArray_Resize(self._buf, 0)
        if self._parts and not self._stopped:
            self._flush(out)
        return 0

    cdef inline Py_ssize_t _past_eol(
        self, const unsigned char* p, Py_ssize_t j, Py_ssize_t n
    ):
        """Index after the line terminator at p[j]; a CR ending the chunk may pair
        later."""
        if p[j] == 10:
            return j + 1
        if j + 1 < n:
            return j + 2 if p[j + 1] == 10 else j + 1
        self._skip_lf = True
        return j + 1

    cdef int _chunk(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        """Apply the complete lines of p[:n]; hold back the unfinished one."""
        cdef Py_ssize_t base = self._pos, i = 0, j
        cdef bytearray buf = self._buf
        cdef const unsigned char* q
        self._pos = base + n
        if self._skip_lf:
            self._skip_lf = False
            if p[0] == 10:
                i = 1
        if PyByteArray_GET_SIZE(buf):  # finish the line the last chunk left open
            j = _eol(p, i, n)
            buf += (<const char*>p)[i:j]
            if PyByteArray_GET_SIZE(buf) > self._max:
                raise line_error(self._buf_offset, self._max)
            if j == n:
                return 0
            self._line(
                <const unsigned char*>PyByteArray_AS_STRING(buf),
                PyByteArray_GET_SIZE(buf),
                self._buf_offset,
                out,
            )
            PyByteArray_Resize(buf, 0)
            i = self._past_eol(p, j, n)
            if self._stopped:
                return 0
        if memchr(p + i, 13, n - i) == NULL:
            while True:
                q = <const unsigned char*>memchr(p + i, 10, n - i)
                if q == NULL:
                    break
                j = q - p
                if (
                    j + 1 < n and p[j + 1] == 10 and 6 <= j - i <= self._max
                    and memcmp(p + i, b"data: ", 6) == 0 and not self._parts
                ):  # the usual one-line event: same effect as two _line calls
                    self._data_offset = base + i
                    self._dispatch(p + i + 6, j - i - 6, out)
                    self._event = b""
                    self._retry = None
                    i = j + 2
                else:
                    self._line(p + i, j - i, base + i, out)
                    i = j + 1
                if self._stopped:
                    return 0
        else:
            while i < n:
                j = _eol(p, i, n)
                if j == n:
                    break
                self._line(p + i, j - i, base + i, out)
                i = self._past_eol(p, j, n)
                if self._stopped:
                    return 0
        if i < n:
            if n - i > self._max:
                raise line_error(base + i, self._max)
            buf += (<const char*>p)[i:n]
            self._buf_offset = base + i
        return 0

    cdef int _line(
        self, const unsigned char* p, Py_ssize_t n, Py_ssize_t offset, list out
    ) except -1:
        """Apply one line (without its terminator) to the pending event."""
        cdef const unsigned char* colon
        cdef const unsigned char* v
        cdef Py_ssize_t name, vn
        if n == 0:
            if self._parts:
                self._flush(out)
            else:
                self._event = b""
                self._retry = None
            return 0
        if n > self._max:
            raise line_error(offset, self._max)
        if p[0] == 58:  # ":" starts a comment
            return 0
        colon = <const unsigned char*>memchr(p, 58, n)
        if colon == NULL:
            name, v, vn = n, p + n, 0
        else:
            name = colon - p
            v = colon + 1
            vn = n - name - 1
            if vn and v[0] == 32:
                v += 1
                vn -= 1
        if name == 4 and memcmp(p, b"data", 4) == 0:
            if self._parts:
                self._size += vn + 1
            else:
                self._size = vn
                self._data_offset = offset
            if self._size > self._max:
                raise data_error(offset, self._max)
            self._parts.append(PyBytes_FromStringAndSize(<const char*>v, vn))
        elif name == 5 and memcmp(p, b"event", 5) == 0:
            if self._names_events:
                self._event = PyBytes_FromStringAndSize(<const char*>v, vn)
        elif name == 2 and memcmp(p, b"id", 2) == 0:
            if memchr(v, 0, vn) == NULL:
                self._id = PyUnicode_DecodeUTF8(<const char*>v, vn, b"replace")
        elif name == 5 and memcmp(p, b"retry", 5) == 0:
            retry = parse_retry(PyBytes_FromStringAndSize(<const char*>v, vn))
            if retry is not None:
                self._retry = retry
        return 0

    cdef int _flush(self, list out) except -1:
        cdef list parts = self._parts
        cdef bytes data = parts[0] if len(parts) == 1 else b"\n".join(parts)
        del parts[:]
        self._dispatch(
            <const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), out
        )
        self._event = b""
        self._retry = None
        return 0

    cdef int _dispatch(
        self, const unsigned char* p, Py_ssize_t n, list out
    ) except -1:
        """Handle one event's data (valid until this returns)."""
        raise NotImplementedError


cdef class SSEDecoder(Framer):
    """Incremental ``text/event-stream`` decoder: bytes in, ``SSEEvent`` values out."""

    def __cinit__(self, *args, **kwargs):
        self._names_events = True

    cdef int _dispatch(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        event = PyUnicode_DecodeUTF8(
            PyBytes_AS_STRING(self._event), PyBytes_GET_SIZE(self._event), b"replace"
        )
        text = PyUnicode_DecodeUTF8(<const char*>p, n, b"replace")
        out.append(SSEEvent(event or "message", text, self._id, self._retry))
        return 0


cdef Py_ssize_t _MAX_CHUNK_LINE = MAX_CHUNK_LINE


cdef inline int _hex_digit(char c) noexcept:
    if 48 <= c <= 57:
        return c - 48
    if 65 <= c <= 70:
        return c - 55
    if 97 <= c <= 102:
        return c - 87
    return -1


cdef inline Py_ssize_t _crlf(const char *p, Py_ssize_t pos, Py_ssize_t end) noexcept:
    """The offset of the next CRLF at or after ``pos``, or -1."""
    cdef const char *q
    while pos < end - 1:
        q = <const char *>memchr(p + pos, 13, end - 1 - pos)
        if q == NULL:
            return -1
        pos = q - p
        if p[pos + 1] == 10:
            return pos
        pos += 1
    return -1


cdef class Dechunker:
    """An HTTP/1.1 body with its chunked transfer coding removed, fed in pieces: the
    twin's rules and messages, with lines found by memchr and the data copied once."""

    cdef bytes _buf
    cdef int _state
    cdef Py_ssize_t _left
    cdef bint _failed
    cdef public bint done
    cdef public bint overrun

    def __init__(self):
        self._buf = b""
        self._state = 0
        self._left = 0
        self._failed = False
        self.done = False
        self.overrun = False

    def feed(self, data):
        """The body bytes in ``data``."""
        if self._failed:
            raise ValueError("the chunked body failed already")
        cdef bytes chunk = as_bytes(data)
        if self.done:
            self.overrun = self.overrun or PyBytes_GET_SIZE(chunk) > 0
            return b""
        cdef bytes buf = self._buf + chunk if PyBytes_GET_SIZE(self._buf) else chunk
        self._buf = b""
        cdef const char *p = PyBytes_AS_STRING(buf)
        cdef Py_ssize_t end = PyBytes_GET_SIZE(buf)
        cdef Py_ssize_t pos = 0, stop, take, a, b, i, n = 0
        cdef Py_ssize_t left = self._left
        cdef int state = self._state, digit
        cdef unsigned long long size
        cdef char *out = <char *>PyMem_Malloc(end if end > 0 else 1)
        if out == NULL:
            raise MemoryError()
        try:
            while pos < end:
                if state == 1:
                    take = end - pos if left > end - pos else left
                    memcpy(out + n, p + pos, take)
                    n += take
                    pos += take
                    left -= take
                    if left:
                        break
                    state = 2
                elif state == 2:
                    if end - pos < 2:
                        if p[pos] != 13:
                            raise ValueError("chunk data not followed by CRLF")
                        break
                    if p[pos] != 13 or p[pos + 1] != 10:
                        raise ValueError("chunk data not followed by CRLF")
                    pos += 2
                    state = 0
                else:
                    stop = _crlf(p, pos, end)
                    if stop < 0:
                        if end - pos > _MAX_CHUNK_LINE + 1:
                            raise ValueError("chunk line too long")
                        break
                    if stop - pos > _MAX_CHUNK_LINE:
                        raise ValueError("chunk line too long")
                    if state == 3:
                        a = pos
                        pos = stop + 2
                        if stop == a:
                            self.done = True
                            self.overrun = pos < end
                            pos = end
                            break
                        continue
                    a = pos
                    b = stop
                    for i in range(pos, stop):
                        if p[i] == 59:  # ";": the extensions start
                            b = i
                            break
                    while a < b and (p[a] == 32 or p[a] == 9):
                        a += 1
                    while b > a and (p[b - 1] == 32 or p[b - 1] == 9):
                        b -= 1
                    if b == a or b - a > 15:
                        raise ValueError(f"bad chunk size line {buf[pos:stop]!r}")
                    size = 0  # 15 hex digits at most: fits in 64 bits
                    for i in range(a, b):
                        digit = _hex_digit(p[i])
                        if digit < 0:
                            raise ValueError(f"bad chunk size line {buf[pos:stop]!r}")
                        size = size * 16 + <unsigned long long>digit
                    if size > <unsigned long long>PY_SSIZE_T_MAX:
                        raise ValueError("chunk size too large")
                    left = <Py_ssize_t>size
                    pos = stop + 2
                    state = 1 if left else 3
            self._state = state
            self._left = left
            if pos < end:
                self._buf = buf[pos:]
            return PyBytes_FromStringAndSize(out, n)
        except ValueError:
            self._failed = True
            raise
        finally:
            PyMem_Free(out)
