# C-only fast path, no Python twin: byte scanners for the compiled framer and parsers.
#
# _eol finds the end of an SSE line for csrc/_framing.pxi. The rest is a strict,
# allocation-free JSON scanner for the parsers' fast paths (the shapes it reads are in
# _fast_shapes.pxi). Every JSON function returns the index just past what it scanned,
# or -1 to give up. Giving up is always safe: the parser then takes its generic path,
# the readers of navi_core/_sse_py.py, which both twins share. The scanner therefore
# accepts only what orjson accepts with the same meaning, and gives up on anything it
# does not fully check: exponents, surrogate escapes, deep nesting, duplicate keys of
# interest, keys with escapes. A string is only ever compared by its raw bytes when it
# holds no escape (flag _ESCAPED): "text\u005fdelta" means text_delta, yet its bytes
# differ.

from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp

cdef enum:
    _MAX_DEPTH = 32
    _MAX_NUMBER = 40  # long enough for any count, too short to overflow a double
    _ESCAPED = 1  # the string holds a backslash escape: its raw bytes are not its text


cdef struct _Str:
    Py_ssize_t start  # first byte after the opening quote
    Py_ssize_t end  # the closing quote
    int flags  # _ESCAPED


cdef inline Py_ssize_t _eol(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n
) noexcept nogil:
    """Index of the first CR or LF in p[i:n], or n."""
    while i < n and p[i] != 10 and p[i] != 13:
        i += 1
    return i


cdef inline Py_ssize_t _ws(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n
) noexcept nogil:
    while i < n and (p[i] == 32 or p[i] == 10 or p[i] == 13 or p[i] == 9):
        i += 1
    return i


cdef inline int _hex(unsigned char c) noexcept nogil:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef inline int _hex4(const unsigned char* p) noexcept nogil:
    cdef int a = _hex(p[0]), b = _hex(p[1]), c = _hex(p[2]), d = _hex(p[3])
    if a < 0 or b < 0 or c < 0 or d < 0:
        return -1
    return (a << 12) | (b << 8) | (c << 4) | d


cdef inline bint _cont(unsigned char c) noexcept nogil:
    return 0x80 <= c <= 0xBF


cdef inline Py_ssize_t _utf8(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n
) noexcept nogil:
    """Length of the well-formed UTF-8 sequence at p[i] (a non-ASCII byte), or 0."""
    cdef unsigned char c = p[i], c1
    if 0xC2 <= c <= 0xDF:
        return 2 if i + 1 < n and _cont(p[i + 1]) else 0
    if 0xE0 <= c <= 0xEF:
        if i + 2 >= n:
            return 0
        c1 = p[i + 1]
        if c == 0xE0 and not (0xA0 <= c1 <= 0xBF):
            return 0
        if c == 0xED and not (0x80 <= c1 <= 0x9F):
            return 0
        return 3 if _cont(c1) and _cont(p[i + 2]) else 0
    if 0xF0 <= c <= 0xF4:
        if i + 3 >= n:
            return 0
        c1 = p[i + 1]
        if c == 0xF0 and not (0x90 <= c1 <= 0xBF):
            return 0
        if c == 0xF4 and not (0x80 <= c1 <= 0x8F):
            return 0
        return 4 if _cont(c1) and _cont(p[i + 2]) and _cont(p[i + 3]) else 0
    return 0


cdef unsigned char _PLAIN[256]  # 1 for bytes a JSON string holds as they are


cdef void _init_plain() noexcept:
    cdef int c
    for c in range(256):
        _PLAIN[c] = 0x20 <= c < 0x80 and c != 34 and c != 92


_init_plain()


cdef Py_ssize_t _string(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, _Str* s
) noexcept nogil:
    """Scan the string whose opening quote is p[i]."""
    cdef unsigned char c
    cdef Py_ssize_t k
    cdef int cp
    i += 1
    s.start = i
    s.flags = 0
    while i < n:
        while i < n and _PLAIN[p[i]]:
            i += 1
        if i >= n:
            return -1
        c = p[i]
        if c == 34:  # "
            s.end = i
            return i + 1
        if c == 92:  # backslash
            s.flags |= _ESCAPED
            if i + 1 >= n:
                return -1
            c = p[i + 1]
            if c == 117:  # u
                if i + 5 >= n:
                    return -1
                cp = _hex4(p + i + 2)
                if cp < 0 or 0xD800 <= cp <= 0xDFFF:
                    return -1
                i += 6
            elif c in b'"\\/bfnrt':
                i += 2
            else:
                return -1
        elif c < 0x20:
            return -1
        elif c < 0x80:
            i += 1
        else:
            k = _utf8(p, i, n)
            if k == 0:
                return -1
            i += k
    return -1


cdef Py_ssize_t _number(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n
) noexcept nogil:
    """Scan a JSON number without exponent (exponents give up: 1e400 is an error)."""
    cdef Py_ssize_t start = i
    if i < n and p[i] == 45:  # -
        i += 1
    if i >= n:
        return -1
    if p[i] == 48:
        i += 1
    elif 49 <= p[i] <= 57:
        while i < n and 48 <= p[i] <= 57:
            i += 1
    else:
        return -1
    if i < n and p[i] == 46:  # .
        i += 1
        if i >= n or not (48 <= p[i] <= 57):
            return -1
        while i < n and 48 <= p[i] <= 57:
            i += 1
    if i < n and (p[i] == 101 or p[i] == 69):
        return -1
    if i - start > _MAX_NUMBER:
        return -1
    return i


cdef inline Py_ssize_t _literal(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, const char* word, Py_ssize_t k
) noexcept nogil:
    if i + k <= n and memcmp(p + i, word, k) == 0:
        return i + k
    return -1


cdef Py_ssize_t _skip(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, int depth
) noexcept nogil:
    """Validate and step over the value starting at p[i]."""
    cdef _Str s
    cdef unsigned char c
    if i >= n:
        return -1
    c = p[i]
    if c == 34:
        return _string(p, i, n, &s)
    if c == 123 or c == 91:  # { [
        if depth >= _MAX_DEPTH:
            return -1
        i = _ws(p, i + 1, n)
        if i < n and p[i] == c + 2:  # } or ]
            return i + 1
        while i < n:
            if c == 123:
                if p[i] != 34:
                    return -1
                i = _string(p, i, n, &s)
                if i < 0:
                    return -1
                i = _ws(p, i, n)
                if i >= n or p[i] != 58:  # :
                    return -1
                i = _ws(p, i + 1, n)
            i = _skip(p, i, n, depth + 1)
            if i < 0:
                return -1
            i = _ws(p, i, n)
            if i >= n:
                return -1
            if p[i] == c + 2:
                return i + 1
            if p[i] != 44:  # ,
                return -1
            i = _ws(p, i + 1, n)
        return -1
    if c == 110:
        return _literal(p, i, n, b"null", 4)
    if c == 116:
        return _literal(p, i, n, b"true", 4)
    if c == 102:
        return _literal(p, i, n, b"false", 5)
    return _number(p, i, n)


cdef inline bint _is(
    const unsigned char* p, _Str* s, const char* word, Py_ssize_t k
) noexcept nogil:
    """Raw bytes equality: the caller rules out escaped strings (see _ESCAPED)."""
    return s.end - s.start == k and memcmp(p + s.start, word, k) == 0


cdef str _text(const unsigned char* p, _Str* s):
    """The Python string a scanned JSON string stands for."""
    cdef Py_ssize_t i = s.start, end = s.end, j = 0
    cdef unsigned char c
    cdef int cp
    cdef char* buf
    if not (s.flags & _ESCAPED):
        return PyUnicode_DecodeUTF8(<const char*>p + i, end - i, NULL)
    buf = <char*>malloc(end - i)
    if buf == NULL:
        raise MemoryError()
    try:
        while i < end:
            c = p[i]
            if c != 92:
                buf[j] = <char>c
                j += 1
                i += 1
                continue
            c = p[i + 1]
            i += 2
            if c == 117:
                cp = _hex4(p + i)
                i += 4
                if cp < 0x80:
                    buf[j] = <char>cp
                    j += 1
                elif cp < 0x800:
                    buf[j] = <char>(0xC0 | (cp >> 6))
                    buf[j + 1] = <char>(0x80 | (cp & 0x3F))
                    j += 2
                else:
                    buf[j] = <char>(0xE0 | (cp >> 12))
                    buf[j + 1] = <char>(0x80 | ((cp >> 6) & 0x3F))
                    buf[j + 2] = <char>(0x80 | (cp & 0x3F))
                    j += 3
            else:
                buf[j] = <char>(
                    8 if c == 98 else 12 if c == 102 else 10 if c == 110
                    else 13 if c == 114 else 9 if c == 116 else c
                )
                j += 1
        return PyUnicode_DecodeUTF8(buf, j, NULL)
    finally:
        free(buf)


cdef inline Py_ssize_t _key(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, _Str* key
) noexcept nogil:
    """Scan ``"key" :`` at p[i]; give up on escaped keys (they may alias ours)."""
    if i >= n or p[i] != 34:
        return -1
    i = _string(p, i, n, key)
    if i < 0 or key.flags & _ESCAPED:
        return -1
    i = _ws(p, i, n)
    if i >= n or p[i] != 58:
        return -1
    return _ws(p, i + 1, n)


cdef inline Py_ssize_t _sep(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, unsigned char close, bint* done
) noexcept nogil:
    """After a member: past the closing ``close`` (``done`` set) or at the next one."""
    i = _ws(p, i, n)
    if i >= n:
        return -1
    if p[i] == close:
        done[0] = True
        return i + 1
    if p[i] != 44:
        return -1
    return _ws(p, i + 1, n)


cdef inline Py_ssize_t _opt_string(
    const unsigned char* p, Py_ssize_t i, Py_ssize_t n, _Str* s, int* state
) noexcept nogil:
    """A string or null member value; ``state``: 1 null, 2 string; -1 on a repeat."""
    if state[0]:
        return -1
    if i < n and p[i] == 34:
        state[0] = 2
        return _string(p, i, n, s)
    state[0] = 1
    return _literal(p, i, n, b"null", 4)
