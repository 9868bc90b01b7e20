# Token estimate and base64: the compiled twin of navi_core/_text_py.py, which documents
# the rules and owns the cost tables, copied into C arrays at import so both twins price
# every piece alike (tests/core/test_differential_text.py). Helpers carry the twin's
# names; C only: _copy_table, _load_tables, _char_class, and _scan / _scan_text (the
# loop of estimate_tokens on the PEP 393 storage, once per code unit width, the GIL
# released for long strings). b64encode's table loop is the C-only _fast_b64.pxi.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.string cimport memcpy

from navi_core import _text_py as _tp

cdef extern from *:
    """
    /* Before 3.12 a str made by the legacy wchar_t API is not "ready": its
       PEP 393 storage does not exist until PyUnicode_READY builds it. */
    #if PY_VERSION_HEX < 0x030C0000
    #  define navi_unicode_ready(text) PyUnicode_READY(text)
    #else
    #  define navi_unicode_ready(text) 0
    #endif
    """
    int navi_unicode_ready(object text) except -1

cdef extern from "Python.h":
    ctypedef unsigned char Py_UCS1
    ctypedef unsigned short Py_UCS2
    enum:
        PyUnicode_1BYTE_KIND
        PyUnicode_2BYTE_KIND
        PyUnicode_4BYTE_KIND
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)

ctypedef fused _tk_unit:
    Py_UCS1
    Py_UCS2
    Py_UCS4

cdef enum:  # character classes, as in _text_py
    _TK_LOWER = 0
    _TK_UPPER = 1
    _TK_DIGIT = 2
    _TK_SPACE = 3
    _TK_NEWLINE = 4
    _TK_BLANK = 5
    _TK_PUNCT = 6
    _TK_LATIN = 7
    _TK_OTHER = 16
    _TK_MARK = 17
    # what the scanner is inside of
    _TK_NONE = 0
    _TK_WORD = 1
    _TK_DIGITS = 2
    _TK_PUNCTS = 3
    _TK_TRAIL = 4
    _TK_SPACES = 5
    # what precedes a word
    _TK_PRE_NONE = 0
    _TK_PRE_SPACE = 1
    _TK_PRE_PUNCT = 2
    _TK_PRE_OTHER = 3

cdef enum:
    _TK_NOGIL_LENGTH = 65536  # release the GIL from this many code points or bytes

cdef unsigned char _tk_bmp[0x10000]
cdef unsigned char _tk_astral_cls[5]
cdef Py_UCS4 _tk_astral_lo[5]
cdef Py_UCS4 _tk_astral_hi[5]
cdef int _tk_ascii_word[78]
cdef int _tk_script_step[110]
cdef int _tk_punct_run[9]
cdef int _tk_symbol[22]
cdef int _tk_prefix[22]
cdef int _tk_prefix_punct = _tp.PREFIX_PUNCT
cdef int _tk_ascii_slope = _tp.ASCII_SLOPE
cdef int _tk_punct_slope = _tp.PUNCT_SLOPE
cdef int _tk_repeat_16 = _tp.REPEAT_16
cdef int _tk_lead_space = _tp.LEAD_SPACE
cdef int _tk_trailing_newline = _tp.TRAILING_NEWLINE
cdef long long _tk_token = _tp.TOKEN
cdef int _tk_spaces_per_token = _tp.SPACES_PER_TOKEN
cdef int _tk_newlines_per_token = _tp.NEWLINES_PER_TOKEN


cdef int _copy_table(int* dst, tuple src, Py_ssize_t size) except -1:
    if len(src) != size:
        raise ImportError(f"a _text_py table has {len(src)} entries, not {size}")
    for i in range(size):
        dst[i] = src[i]
    return 0


cdef int _load_tables() except -1:
    cdef bytes bmp = _tp.BMP_CLASS
    cdef Py_ssize_t i
    if (
        len(bmp) != 0x10000
        or (_tp.LATIN, _tp.OTHER, _tp.MARK) != (_TK_LATIN, _TK_OTHER, _TK_MARK)
        or len(_tp.ASTRAL_RANGES) != 5
    ):
        raise ImportError("navi_core._text_py classes differ from the compiled core")
    memcpy(_tk_bmp, <const char*>bmp, 0x10000)
    for i in range(5):
        _tk_astral_lo[i], _tk_astral_hi[i], _tk_astral_cls[i] = _tp.ASTRAL_RANGES[i]
    _copy_table(_tk_ascii_word, _tp.ASCII_WORD, 78)
    _copy_table(_tk_script_step, _tp.SCRIPT_STEP, 110)
    _copy_table(_tk_punct_run, _tp.PUNCT_RUN, 9)
    _copy_table(_tk_symbol, _tp.SYMBOL_COST, 22)
    _copy_table(_tk_prefix, _tp.PREFIX_COST, 22)
    return 0


_load_tables()


cdef inline int _astral_class(Py_UCS4 cp) noexcept nogil:
    for i in range(5):
        if _tk_astral_lo[i] <= cp <= _tk_astral_hi[i]:
            return _tk_astral_cls[i]
    return _TK_OTHER


cdef inline int _char_class(Py_UCS4 cp) noexcept nogil:
    """The twin's ``bmp[cp] if cp < 0x10000 else _astral_class(cp)``."""
    if cp < 0x10000:
        return _tk_bmp[cp]
    return _astral_class(cp)


cdef inline bint _is_letter(int cls) noexcept nogil:
    return cls <= _TK_UPPER or _TK_LATIN <= cls <= _TK_MARK


cdef inline long long _word_cost(
    int prefix, Py_ssize_t ascii_letters, Py_ssize_t capitals, long long cost
) noexcept nogil:
    cdef int row
    if ascii_letters:
        row = 3 if capitals >= 2 else 0
        row += 0 if prefix == _TK_PRE_SPACE else 1 if prefix == _TK_PRE_PUNCT else 2
        cost += _tk_ascii_word[row * 13 + (ascii_letters if ascii_letters < 12 else 12)]
        if ascii_letters > 12:
            cost += (ascii_letters - 12) * <long long>_tk_ascii_slope
    elif prefix == _TK_PRE_PUNCT:
        cost += _tk_prefix_punct
    return cost


cdef inline long long _punct_cost(
    long long cost, Py_ssize_t changes, Py_ssize_t repeats, bint lead, bint trail
) noexcept nogil:
    if lead:
        cost += _tk_lead_space
    if trail:
        cost += _tk_trailing_newline
    cost += repeats // 16 * <long long>_tk_repeat_16
    if changes > 8:
        return cost + _tk_punct_run[8] + (changes - 8) * <long long>_tk_punct_slope
    return cost + _tk_punct_run[changes]


cdef inline long long _newline_cost(Py_ssize_t n) noexcept nogil:
    return _tk_token + (n - 1) // _tk_newlines_per_token * _tk_token


cdef inline long long _space_cost(Py_ssize_t n) noexcept nogil:
    return _tk_token + (n - 1) // _tk_spaces_per_token * _tk_token


cdef long long _scan(const _tk_unit* s, Py_ssize_t n) noexcept nogil:
    """Thousandths of a token in ``s[:n]``, step for step as the twin's loop."""
    cdef long long total = 0
    cdef int mode = _TK_NONE, cls, sv
    cdef Py_UCS4 cp
    cdef int w_pre = 0, w_pre_cls = 0, w_run = -1
    cdef Py_ssize_t w_ascii = 0, w_caps = 0, w_len = 0
    cdef long long w_cost = 0
    cdef bint w_lower = False
    cdef Py_ssize_t p_changes = 0, p_repeats = 0, p_len = 0
    cdef long long p_cost = 0
    cdef Py_UCS4 p_first = 0, p_last = 0
    cdef int p_first_cls = 0
    cdef bint p_lead = False
    cdef Py_ssize_t s_newlines = 0, s_tail = 0, digits = 0
    cdef bint s_tail_space = False
    for i in range(n):
        cp = s[i]
        cls = _char_class(cp)
        if mode == _TK_WORD:
            if _TK_LATIN <= cls <= _TK_MARK:
                w_lower = True
                if cls == w_run:
                    w_len += 1
                else:
                    w_run = cls
                    w_len = 1
                sv = 0 if w_pre == _TK_PRE_SPACE else 1
                w_cost += _tk_script_step[
                    ((cls - _TK_LATIN) * 2 + sv) * 5 + (w_len if w_len < 5 else 5) - 1
                ]
                continue
            if cls == _TK_LOWER:
                w_ascii += 1
                w_lower = True
                continue
            if cls == _TK_UPPER and not w_lower:
                w_ascii += 1
                w_caps += 1
                continue
            total += _word_cost(w_pre, w_ascii, w_caps, w_cost)
            mode = _TK_NONE
        elif mode == _TK_PUNCTS:
            if _is_letter(cls) and p_len == 1 and not p_lead:
                mode = _TK_WORD
                w_pre = _TK_PRE_PUNCT if p_first < 0x80 else _TK_PRE_OTHER
                w_pre_cls = p_first_cls
            elif cls == _TK_PUNCT or cls >= _TK_MARK:
                p_len += 1
                if cls != _TK_PUNCT:
                    p_cost += _tk_symbol[cls]
                elif cp == p_last:
                    p_repeats += 1
                else:
                    p_changes += 1
                p_last = cp
                continue
            elif cls == _TK_NEWLINE:
                mode = _TK_TRAIL
                continue
            else:
                total += _punct_cost(p_cost, p_changes, p_repeats, p_lead, False)
                mode = _TK_NONE
        elif mode == _TK_TRAIL:
            if cls == _TK_NEWLINE or cp == 0x2F:
                continue
            total += _punct_cost(p_cost, p_changes, p_repeats, p_lead, True)
            mode = _TK_NONE
        elif mode == _TK_DIGITS:
            if cls == _TK_DIGIT:
                digits += 1
                continue
            total += (digits + 2) // 3 * _tk_token
            mode = _TK_NONE
        elif mode == _TK_SPACES:
            if cls == _TK_NEWLINE:
                s_newlines += 1
                s_tail = 0
                continue
            if _TK_SPACE <= cls <= _TK_BLANK:
                s_tail += 1
                s_tail_space = cp == 0x20
                continue
            if s_newlines:
                total += _newline_cost(s_newlines)
            mode = _TK_NONE
            if s_tail:
                if s_tail > 1:
                    total += _space_cost(s_tail - 1)
                if _is_letter(cls):
                    mode = _TK_WORD
                    w_pre = _TK_PRE_SPACE if s_tail_space else _TK_PRE_OTHER
                    w_pre_cls = _TK_BLANK
                elif s_tail_space and cls != _TK_DIGIT:
                    mode = _TK_PUNCTS
                    p_lead = True
                else:
                    total += _tk_token
        if mode == _TK_NONE:
            if _is_letter(cls):
                mode = _TK_WORD
                w_pre = _TK_PRE_NONE
            elif cls == _TK_DIGIT:
                mode = _TK_DIGITS
                digits = 1
                continue
            elif _TK_SPACE <= cls <= _TK_BLANK:
                mode = _TK_SPACES
                s_newlines = 0
                s_tail = 0
                if cls == _TK_NEWLINE:
                    s_newlines = 1
                else:
                    s_tail = 1
                    s_tail_space = cp == 0x20
                continue
            else:
                mode = _TK_PUNCTS
                p_lead = False
        if mode == _TK_WORD:
            w_ascii = 0
            w_caps = 0
            w_cost = _tk_prefix[w_pre_cls] if w_pre == _TK_PRE_OTHER else 0
            w_run = -1
            if cls <= _TK_UPPER:
                w_ascii = 1
                w_caps = cls == _TK_UPPER
                w_lower = cls == _TK_LOWER
            else:
                w_lower = True
                w_run = cls
                w_len = 1
                sv = 0 if w_pre == _TK_PRE_SPACE else 1
                w_cost += _tk_script_step[((cls - _TK_LATIN) * 2 + sv) * 5]
        else:
            p_len = 1
            p_first = cp
            p_first_cls = cls
            p_last = cp
            p_changes = cls == _TK_PUNCT
            p_repeats = 0
            p_cost = _tk_symbol[cls]
    if mode == _TK_WORD:
        total += _word_cost(w_pre, w_ascii, w_caps, w_cost)
    elif mode == _TK_PUNCTS or mode == _TK_TRAIL:
        total += _punct_cost(p_cost, p_changes, p_repeats, p_lead, mode == _TK_TRAIL)
    elif mode == _TK_DIGITS:
        total += (digits + 2) // 3 * _tk_token
    elif mode == _TK_SPACES:
        if s_newlines:
            total += _newline_cost(s_newlines)
        if s_tail:
            total += _space_cost(s_tail)
    return total


cdef long long _scan_text(int kind, const void* data, Py_ssize_t n) noexcept nogil:
    if kind == PyUnicode_1BYTE_KIND:
        return _scan(<const Py_UCS1*>data, n)
    if kind == PyUnicode_2BYTE_KIND:
        return _scan(<const Py_UCS2*>data, n)
    return _scan(<const Py_UCS4*>data, n)


def estimate_tokens(text):
    """Approximate o200k_base token count of ``text`` (the twin's rules), in one pass.

    Raises:
        TypeError: ``text`` is not a str.
    """
    cdef Py_ssize_t n
    cdef int kind
    cdef const void* data
    cdef long long total
    if not isinstance(text, str):
        raise TypeError(
            f"estimate_tokens() argument must be str, not {type(text).__name__}"
        )
    navi_unicode_ready(text)
    n = PyUnicode_GET_LENGTH(text)
    kind = PyUnicode_KIND(text)
    data = PyUnicode_DATA(text)
    if n < _TK_NOGIL_LENGTH:
        total = _scan_text(kind, data, n)
    else:
        with nogil:
            total = _scan_text(kind, data, n)
    return (total + _tk_token - 1) // _tk_token


def b64encode(data):
    """Standard base64 with padding, as ``base64.b64encode(data).decode()``; any
    buffer is accepted, one that is not C-contiguous is copied first.

    Raises:
        TypeError: ``data`` does not support the buffer protocol.
    """
    cdef Py_buffer view
    cdef Py_ssize_t n
    cdef object out
    cdef char* dst
    try:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    except TypeError:
        name = type(data).__name__
        raise TypeError(
            f"b64encode() argument must be a bytes-like object, not {name}"
        ) from None
    except BufferError:
        return b64encode(memoryview(data).tobytes())
    n = view.len
    try:
        if n > (PY_SSIZE_T_MAX // 4 - 1) * 3:
            raise MemoryError("b64encode() input too large")
        out = PyUnicode_New((n + 2) // 3 * 4, 127)
        if n == 0:
            return out
        dst = <char*>PyUnicode_DATA(out)
        if n < _TK_NOGIL_LENGTH:
            _b64_encode(<const unsigned char*>view.buf, n, dst)
        else:
            with nogil:
                _b64_encode(<const unsigned char*>view.buf, n, dst)
        return out
    finally:
        PyBuffer_Release(&view)
