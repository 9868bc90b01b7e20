# C-only fast path, no Python twin: shape scanners for the common provider chunks,
# built on _fast_scan.pxi; the parsers' _fast methods (csrc/_sse.pxi) read the result.
#
# Each fills a struct with the string members it found and returns 0, or -1 when
# the chunk is not one it fully understands (the parser then takes the generic path).
# A member that may carry meaning is accepted once only: orjson keeps the last of
# duplicate keys, the scanner would see the first.

cdef struct _OpenAIChunk:
    _Str model, content, refusal, reasoning_content, reasoning, finish
    int model_st, content_st, refusal_st, reasoning_content_st, reasoning_st, finish_st
    int choices_st, usage_st, error_st, index_st, delta_st, tools_st
    # the one tool call fragment of tool_calls, if any
    _Str call_id, call_name, call_args
    int call_st, call_index_st, call_id_st, call_function_st, call_name_st, call_args_st
    long long call_index


cdef struct _AnthropicEvent:
    _Str type, delta_type, text, thinking, partial_json, signature
    int type_st, delta_type_st, text_st, thinking_st, partial_json_st, signature_st
    int index_st, delta_st
    long long index


cdef inline bint _nonempty(_Str* s) noexcept nogil:
    return s.end > s.start


cdef inline Py_ssize_t _plain_int(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, long long* value
) noexcept nogil:
    """A non-negative integer without sign, fraction or leading zero."""
    cdef Py_ssize_t j = i
    value[0] = 0
    while j < n and 48 <= p[j] <= 57 and j - i < 18:
        value[0] = value[0] * 10 + (p[j] - 48)
        j += 1
    return j if j > i and _number(p, i, n) == j else -1


cdef inline Py_ssize_t _null_once(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, int* state
) noexcept nogil:
    if state[0]:
        return -1
    state[0] = 1
    return _literal(p, i, n, b"null", 4)


cdef Py_ssize_t _openai_function(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, _OpenAIChunk* c
) noexcept nogil:
    cdef _Str key
    cdef bint done = False
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        return i + 1
    while not done:
        i = _key(p, i, n, &key)
        if i < 0:
            return -1
        if _is(p, &key, b"name", 4):
            i = _opt_string(p, i, n, &c.call_name, &c.call_name_st)
        elif _is(p, &key, b"arguments", 9):  # an object here is left to orjson
            i = _opt_string(p, i, n, &c.call_args, &c.call_args_st)
        else:
            i = _skip(p, i, n, 5)
        if i < 0:
            return -1
        i = _sep(p, i, n, 125, &done)
        if i < 0:
            return -1
    return i


cdef Py_ssize_t _openai_call(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, _OpenAIChunk* c
) noexcept nogil:
    cdef _Str key
    cdef bint done = False
    if p[i] != 123:
        return -1
    c.call_st = 1
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        return i + 1
    while not done:
        i = _key(p, i, n, &key)
        if i < 0:
            return -1
        if _is(p, &key, b"index", 5):
            if c.call_index_st:
                return -1
            if i < n and p[i] == 110:
                c.call_index_st = 1
                i = _literal(p, i, n, b"null", 4)
            else:
                c.call_index_st = 2
                i = _plain_int(p, i, n, &c.call_index)
        elif _is(p, &key, b"id", 2):
            i = _opt_string(p, i, n, &c.call_id, &c.call_id_st)
        elif _is(p, &key, b"function", 8):
            if c.call_function_st:
                return -1
            c.call_function_st = 1
            if i < n and p[i] == 123:
                i = _openai_function(p, i, n, c)
            else:
                i = _literal(p, i, n, b"null", 4)
        else:
            i = _skip(p, i, n, 4)
        if i < 0:
            return -1
        i = _sep(p, i, n, 125, &done)
        if i < 0:
            return -1
    return i


cdef Py_ssize_t _openai_delta(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, _OpenAIChunk* c
) noexcept nogil:
    cdef _Str key
    cdef bint done = False
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        return i + 1
    while not done:
        i = _key(p, i, n, &key)
        if i < 0:
            return -1
        if _is(p, &key, b"content", 7):
            i = _opt_string(p, i, n, &c.content, &c.content_st)
        elif _is(p, &key, b"role", 4):
            i = _skip(p, i, n, 3)
        elif _is(p, &key, b"refusal", 7):
            i = _opt_string(p, i, n, &c.refusal, &c.refusal_st)
        elif _is(p, &key, b"reasoning_content", 17):
            i = _opt_string(p, i, n, &c.reasoning_content, &c.reasoning_content_st)
        elif _is(p, &key, b"reasoning", 9):
            i = _opt_string(p, i, n, &c.reasoning, &c.reasoning_st)
        elif _is(p, &key, b"tool_calls", 10):
            if c.tools_st:
                return -1
            c.tools_st = 1
            if i < n and p[i] == 91:  # an empty list or one call fragment
                i = _ws(p, i + 1, n)
                if i < n and p[i] != 93:
                    i = _openai_call(p, i, n, c)
                    if i >= 0:
                        i = _ws(p, i, n)
                i = i + 1 if 0 <= i < n and p[i] == 93 else -1
            else:
                i = _literal(p, i, n, b"null", 4)
        else:
            i = _skip(p, i, n, 3)
        if i < 0:
            return -1
        i = _sep(p, i, n, 125, &done)
        if i < 0:
            return -1
    return i


cdef Py_ssize_t _openai_choice(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, _OpenAIChunk* c
) noexcept nogil:
    """The one choice of a chunk; ``index_st`` 2: not the first choice."""
    cdef _Str key
    cdef bint done = False
    cdef long long other
    if i >= n or p[i] != 123:
        return -1
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        return i + 1
    while not done:
        i = _key(p, i, n, &key)
        if i < 0:
            return -1
        if _is(p, &key, b"index", 5):
            if c.index_st:
                return -1
            c.index_st = 1
            if i < n and p[i] == 48:  # choice 0
                i = i + 1 if _number(p, i, n) == i + 1 else -1
            elif i < n and 49 <= p[i] <= 57:  # another choice (n > 1): ignored
                c.index_st = 2
                i = _plain_int(p, i, n, &other)
            else:
                i = _literal(p, i, n, b"null", 4)
        elif _is(p, &key, b"delta", 5):
            if c.delta_st:
                return -1
            c.delta_st = 1
            if i < n and p[i] == 123:
                i = _openai_delta(p, i, n, c)
            else:
                i = _literal(p, i, n, b"null", 4)
        elif _is(p, &key, b"finish_reason", 13):
            i = _opt_string(p, i, n, &c.finish, &c.finish_st)
        else:
            i = _skip(p, i, n, 2)
        if i < 0:
            return -1
        i = _sep(p, i, n, 125, &done)
        if i < 0:
            return -1
    return i


cdef int _openai_chunk(
    const unsigned char* p,
    Py_ssize_t n,
    _OpenAIChunk* c,
    Py_ssize_t start,
    _OpenAIChunk* at_choices,
    Py_ssize_t* choices_at,
) noexcept nogil:
    """Scan a chunk from its start, or from ``start`` (a member's key after the first,
    ``c`` the scan's state there: what a scan of the same bytes before it left). The
    scan's state at the ``choices`` key, and where it is, go to ``at_choices`` and
    ``choices_at`` (left alone when the key is not met)."""
    cdef _Str key, kind
    cdef int st
    cdef bint done = False
    cdef Py_ssize_t i = start, member
    if start == 0:
        i = _ws(p, 0, n)
        if i >= n or p[i] != 123:
            return -1
        i = _ws(p, i + 1, n)
        if i < n and p[i] == 125:
            done = True
            i += 1
    while not done:
        member = i
        i = _key(p, i, n, &key)
        if i < 0:
            return -1
        if _is(p, &key, b"model", 5):
            i = _opt_string(p, i, n, &c.model, &c.model_st)
        elif _is(p, &key, b"choices", 7):
            if c.choices_st or i >= n or p[i] != 91:
                return -1
            at_choices[0] = c[0]
            choices_at[0] = member
            c.choices_st = 1
            i = _ws(p, i + 1, n)
            if i < n and p[i] == 93:
                i += 1
            else:  # exactly one choice
                i = _openai_choice(p, i, n, c)
                if i >= 0:
                    i = _ws(p, i, n)
                    i = i + 1 if i < n and p[i] == 93 else -1
        elif _is(p, &key, b"usage", 5):
            i = _null_once(p, i, n, &c.usage_st)
        elif _is(p, &key, b"error", 5):
            i = _null_once(p, i, n, &c.error_st)
        elif _is(p, &key, b"object", 6):  # "error": vLLM's flat error, for the reader
            st = 0
            i = _opt_string(p, i, n, &kind, &st)
            if st == 2 and (kind.flags & _ESCAPED or _is(p, &kind, b"error", 5)):
                return -1
        else:
            i = _skip(p, i, n, 1)
        if i < 0:
            return -1
        i = _sep(p, i, n, 125, &done)
        if i < 0:
            return -1
    return 0 if _ws(p, i, n) == n else -1


cdef Py_ssize_t _anthropic_delta(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, _AnthropicEvent* e
) noexcept nogil:
    cdef _Str key
    cdef bint done = False
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        return i + 1
    while not done:
        i = _key(p, i, n, &key)
        if i < 0:
            return -1
        if _is(p, &key, b"type", 4):
            i = _opt_string(p, i, n, &e.delta_type, &e.delta_type_st)
        elif _is(p, &key, b"text", 4):
            i = _opt_string(p, i, n, &e.text, &e.text_st)
        elif _is(p, &key, b"partial_json", 12):
            i = _opt_string(p, i, n, &e.partial_json, &e.partial_json_st)
        elif _is(p, &key, b"thinking", 8):
            i = _opt_string(p, i, n, &e.thinking, &e.thinking_st)
        elif _is(p, &key, b"signature", 9):
            i = _opt_string(p, i, n, &e.signature, &e.signature_st)
        else:
            i = _skip(p, i, n, 2)
        if i < 0:
            return -1
        i = _sep(p, i, n, 125, &done)
        if i < 0:
            return -1
    return i


cdef int _anthropic_event(
    const unsigned char* p, Py_ssize_t n, _AnthropicEvent* e
) noexcept nogil:
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
        elif _is(p, &key, b"index", 5):
            if e.index_st:
                return -1
            e.index_st = 1
            i = _plain_int(p, i, n, &e.index)
        elif _is(p, &key, b"delta", 5):
            if e.delta_st or i >= n or p[i] != 123:
                return -1
            e.delta_st = 1
            i = _anthropic_delta(p, i, n, e)
        else:
            i = _skip(p, i, n, 1)
        if i < 0:
            return -1
        i = _sep(p, i, n, 125, &done)
        if i < 0:
            return -1
    return 0 if _ws(p, i, n) == n else -1
