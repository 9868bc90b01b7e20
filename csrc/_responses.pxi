# The OpenAI Responses stream parser: the compiled twin of navi_core/_responses_py.py,
# which documents what each event means.
#
# The parser takes the twin's steps (a fast path, _terminal, _generic) with the twin's
# reader, ResponsesReader, as its generic path. The fast path scans the delta events
# (text, reasoning, function-call arguments) with the strict scanner of
# _fast_scan.pxi and steps over the events that mean nothing to the parser (the
# ".done" echoes of what the deltas already said); everything else goes to the reader,
# refusal deltas too: the reader remembers one came, to end the response "refusal".
# A [DONE] before any terminal event raises the twin's done_too_soon error.

from navi_core._responses_py import ResponsesReader, done_too_soon


cdef struct _ResponsesEvent:
    _Str type, delta
    int type_st, delta_st, index_st
    long long index


cdef int _responses_event(
    const unsigned char* p, Py_ssize_t n, _ResponsesEvent* e
) noexcept nogil:
    """The members of one event payload the fast path reads; -1 to give up."""
    cdef _Str key
    cdef bint done = False
    cdef Py_ssize_t i = _ws(p, 0, n)
    if i >= n or p[i] != 123:
        return -1
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        done = True
        i += 1
    while not done:
        i = _key(p, i, n, &key)
        if i < 0:
            return -1
        if _is(p, &key, b"type", 4):
            i = _opt_string(p, i, n, &e.type, &e.type_st)
        elif _is(p, &key, b"delta", 5):
            i = _opt_string(p, i, n, &e.delta, &e.delta_st)
        elif _is(p, &key, b"output_index", 12):
            if e.index_st:
                return -1
            e.index_st = 1
            i = _plain_int(p, i, n, &e.index)
        else:
            i = _skip(p, i, n, 1)
        if i < 0:
            return -1
        i = _sep(p, i, n, 125, &done)
        if i < 0:
            return -1
    return 0 if _ws(p, i, n) == n else -1


cdef inline bint _echo(const unsigned char* p, _Str* t) noexcept nogil:
    """An event the reader ignores whatever it holds (it repeats the deltas)."""
    return (
        _is(p, t, b"response.output_text.done", 25)
        or _is(p, t, b"response.content_part.added", 27)
        or _is(p, t, b"response.content_part.done", 26)
        or _is(p, t, b"response.reasoning_summary_part.done", 36)
        or _is(p, t, b"response.reasoning_summary_text.done", 36)
        or _is(p, t, b"response.function_call_arguments.done", 37)
        or _is(p, t, b"response.reasoning_text.done", 28)
        or _is(p, t, b"response.refusal.done", 21)
    )


cdef class OpenAIResponsesParser(Parser):
    """Responses API stream (typed ``response.*`` events) to deltas."""

    cdef dict _calls  # the reader's output_index -> tool ordinal (the same object)
    cdef set _streamed  # the reader's ordinals with streamed arguments (the same)

    def __cinit__(self, *args, **kwargs):
        self._reader = ResponsesReader()
        self._calls = self._reader.calls
        self._streamed = self._reader.streamed

    cdef bint _terminal(
        self, const unsigned char* p, Py_ssize_t n, list out
    ) except -1:
        # a terminal event stopped the parser: this [DONE] came before one
        if n != 6 or memcmp(p, b"[DONE]", 6) != 0:
            return False
        raise done_too_soon(self._data_offset)

    cdef bint _fast(self, const unsigned char* p, Py_ssize_t n, list out) except -1:
        cdef _ResponsesEvent e
        memset(&e, 0, sizeof(e))
        if _responses_event(p, n, &e) < 0 or e.type_st != 2:
            return False
        if e.type.flags & _ESCAPED:  # it may still name one of ours: the reader decides
            return False
        if _is(p, &e.type, b"response.output_text.delta", 26):
            if e.delta_st != 2:
                return False
            if _nonempty(&e.delta):
                out.append((_TEXT, _text(p, &e.delta)))
            return True
        if _is(p, &e.type, b"response.function_call_arguments.delta", 38):
            if e.delta_st != 2 or not e.index_st:
                return False
            ordinal = self._calls.get(e.index)
            if ordinal is not None and _nonempty(&e.delta):
                self._streamed.add(ordinal)
                out.append((_TOOL_ARGS, ordinal, _text(p, &e.delta)))
            return True
        if _is(p, &e.type, b"response.reasoning_summary_text.delta", 37) or _is(
            p, &e.type, b"response.reasoning_text.delta", 29
        ):
            if e.delta_st != 2:
                return False
            if _nonempty(&e.delta):
                out.append((_THINKING, _text(p, &e.delta)))
            return True
        return _echo(p, &e.type)
