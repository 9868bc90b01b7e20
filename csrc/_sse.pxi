# The OpenAI / Anthropic delta parsers: the compiled twin of navi_core/_sse_py.py.
#
# Parser._dispatch takes the twin's three steps: a fast path, _terminal, _generic.
# Only the fast path differs: here it is _fast, a strict scanner over the bytes of the
# common chunks (the C-only _fast_scan.pxi and _fast_shapes.pxi). _generic hands the
# payload to the twin's own reader (OpenAIChatReader, AnthropicReader): the generic
# orjson path exists once, in Python, and the fast path shares the reader's state
# (its model, open tool calls, whether a refusal piece came: see its finish). A
# chunk that may start a tool call (one with a name) or holds a piece of a bare
# thinking block is the reader's to read.

from cpython.bytearray cimport PyByteArray_GET_SIZE
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from libc.string cimport memcmp, memset

from navi_core import _deltas
from navi_core._sse_py import AnthropicReader, OpenAIChatReader

cdef object _TEXT = _deltas.TEXT
cdef object _THINKING = _deltas.THINKING
cdef object _SIGNATURE = _deltas.SIGNATURE
cdef object _TOOL_START = _deltas.TOOL_START
cdef object _TOOL_ARGS = _deltas.TOOL_ARGS
cdef object _FINISH = _deltas.FINISH
cdef object _MODEL = _deltas.MODEL
cdef tuple _DONE_DELTA = (_deltas.DONE,)
#: the fewest bytes before "choices" worth keeping to compare (a memcmp, not a scan)
cdef Py_ssize_t _MIN_HEAD = 32


cdef class Parser(Framer):
    """Turns each event payload into deltas: fast path, ``_terminal``, ``_generic``."""

    cdef object _reader  # the twin's reader, made by the subclass: the generic path

    cdef int _dispatch(
        self, const unsigned char* p, Py_ssize_t n, list out
    ) except -1:
        if not self._fast(p, n, out) and not self._terminal(p, n, out):
            self._generic(PyBytes_FromStringAndSize(<const char*>p, n), out)
        return 0

    cdef bint _fast(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        """Emit the deltas of a chunk the scanner takes; False otherwise."""
        return False

    cdef bint _terminal(
        self, const unsigned char* p, Py_ssize_t n, list out
    ) except -1:
        """Handle the payload that ends the stream, if p[:n] is it."""
        return False

    cdef int _generic(self, bytes data, list out) except -1:
        """The reader's deltas for ``data``."""
        reader = self._reader
        reader.read(data, self._data_offset, out)
        if reader.finished:  # the payload that ends the stream
            self._stopped = True
        return 0


cdef class OpenAIChatParser(Parser):
    """Chat-completions stream (``data: {chunk}`` ... ``data: [DONE]``) to deltas."""

    cdef bytes _model_raw  # the JSON text the reader's model was last read from here
    cdef dict _tools  # the reader's open tool calls by wire index (the same object)
    # A server sends the same members before "choices" in every chunk of a response
    # (id, object, created, model, ...): the bytes up to that key in the last chunk
    # _fast took, and the scan's state there. A chunk that starts with the same bytes
    # is scanned from the key on, its start compared instead of read again.
    cdef bytes _head
    cdef _OpenAIChunk _head_state

    def __cinit__(self, *args, **kwargs):
        self._reader = OpenAIChatReader()
        self._tools = self._reader.tools
        self._model_raw = b""
        self._head = b""

    def close(self):
        """End of input. A body that ends at an event boundary after a finish reason
        ends with ``DONE`` too: the model had ended, some servers send no ``[DONE]``."""
        cdef bint clean = not (
            self._closed or self._stopped or PyByteArray_GET_SIZE(self._buf)
            or self._parts
        )
        out = Framer.close(self)
        if clean and self._reader.finish_seen:
            out.append(_DONE_DELTA)
        return out

    cdef bint _terminal(
        self, const unsigned char* p, Py_ssize_t n, list out
    ) except -1:
        if n != 6 or memcmp(p, b"[DONE]", 6) != 0:
            return False
        out.append(_DONE_DELTA)
        self._stopped = True
        return True

    cdef int _generic(self, bytes data, list out) except -1:
        self._model_raw = b""  # the reader may set another model: compare afresh
        return Parser._generic(self, data, out)

    cdef bint _fast(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        cdef _OpenAIChunk c, at_choices
        cdef Py_ssize_t size, choices_at = -1
        cdef Py_ssize_t known = PyBytes_GET_SIZE(self._head)
        cdef object call = None, pieces
        if known and n > known and memcmp(p, PyBytes_AS_STRING(self._head), known) == 0:
            c = self._head_state
            if _openai_chunk(p, n, &c, known, &at_choices, &choices_at) < 0:
                return False
        else:
            memset(&c, 0, sizeof(c))
            if _openai_chunk(p, n, &c, 0, &at_choices, &choices_at) < 0:
                return False
            if choices_at >= _MIN_HEAD:
                self._head = PyBytes_FromStringAndSize(<const char*>p, choices_at)
                self._head_state = at_choices
        if c.call_st and c.index_st != 2:  # only an argument piece of an open call
            if c.call_name_st == 2 and _nonempty(&c.call_name):  # maybe a new call
                return False
            call = self._tools.get(c.call_index if c.call_index_st == 2 else 0)
            if call is None:
                return False
        if c.model_st == 2 and _nonempty(&c.model):
            size = c.model.end - c.model.start
            if size != PyBytes_GET_SIZE(self._model_raw) or memcmp(
                p + c.model.start, PyBytes_AS_STRING(self._model_raw), size
            ):  # not the text seen last: decode it (an escaped twin may still be equal)
                model = _text(p, &c.model)
                self._model_raw = PyBytes_FromStringAndSize(
                    <const char*>p + c.model.start, size
                )
                reader = self._reader
                if model != reader.model:
                    reader.model = model
                    out.append((_MODEL, model))
        if c.index_st == 2:  # a choice the parser does not follow: only the model
            return True
        if c.reasoning_content_st == 2 and _nonempty(&c.reasoning_content):
            out.append((_THINKING, _text(p, &c.reasoning_content)))
        elif c.reasoning_st == 2 and _nonempty(&c.reasoning):
            out.append((_THINKING, _text(p, &c.reasoning)))
        if c.content_st == 2 and _nonempty(&c.content):
            out.append((_TEXT, _text(p, &c.content)))
        if c.refusal_st == 2 and _nonempty(&c.refusal):
            out.append((_TEXT, _text(p, &c.refusal)))
            self._reader.refused = True
        if c.call_st and c.call_args_st == 2 and _nonempty(&c.call_args):
            args = _text(p, &c.call_args)
            out.append((_TOOL_ARGS, (<list>call)[0], args))
            pieces = (<list>call)[3]
            if pieces is not None:  # a call with no id: the reader keeps its pieces
                (<list>pieces).append(args)
        if c.finish_st == 2:
            out.append((_FINISH, self._reader.finish(_text(p, &c.finish))))
        return True


cdef class AnthropicParser(Parser):
    """Anthropic Messages stream to deltas, dispatching on each payload's ``type``."""

    cdef dict _blocks  # the reader's block index -> tool ordinal (the same object)
    cdef list _bare  # the reader's bare thinking block, if any (the same object)

    def __cinit__(self, *args, **kwargs):
        self._reader = AnthropicReader()
        self._blocks = self._reader.blocks
        self._bare = self._reader.bare

    cdef bint _fast(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        """Also skips a ping or a content_block_stop; a message_stop is DONE."""
        cdef _AnthropicEvent e
        memset(&e, 0, sizeof(e))
        if _anthropic_event(p, n, &e) < 0 or e.type_st != 2:
            return False
        # The types are compared as raw bytes: an escaped one ("text\u005fdelta") may
        # still mean one of them, so the generic path decides.
        if e.type.flags & _ESCAPED:
            return False
        if e.delta_type_st == 2 and e.delta_type.flags & _ESCAPED:
            return False
        if _is(p, &e.type, b"ping", 4) or _is(p, &e.type, b"content_block_stop", 18):
            return True
        if _is(p, &e.type, b"message_stop", 12):
            out.append(_DONE_DELTA)
            return True
        if not _is(p, &e.type, b"content_block_delta", 19) or not e.delta_st:
            return False
        if e.delta_type_st != 2:  # no delta type: nothing to emit
            return True
        if _is(p, &e.delta_type, b"text_delta", 10):
            if e.text_st != 2:
                return False
            if _nonempty(&e.text):
                out.append((_TEXT, _text(p, &e.text)))
        elif _is(p, &e.delta_type, b"input_json_delta", 16):
            if e.partial_json_st != 2 or not e.index_st:
                return False
            ordinal = self._blocks.get(e.index)
            if ordinal is not None and _nonempty(&e.partial_json):
                out.append((_TOOL_ARGS, ordinal, _text(p, &e.partial_json)))
        elif _is(p, &e.delta_type, b"thinking_delta", 14):
            if e.thinking_st != 2 or self._of_bare(&e):
                return False
            if _nonempty(&e.thinking):
                out.append((_THINKING, _text(p, &e.thinking)))
        elif _is(p, &e.delta_type, b"signature_delta", 15):
            if e.signature_st != 2 or self._of_bare(&e):
                return False
            out.append((_SIGNATURE, _text(p, &e.signature)))
        return True

    cdef bint _of_bare(self, _AnthropicEvent* e) except -1:
        """Whether the event may be a piece of the reader's bare thinking block."""
        return bool(self._bare) and (not e.index_st or self._bare[0] == e.index)
