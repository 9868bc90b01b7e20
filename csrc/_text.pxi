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
cdef int _tk_blank_line[68]
cdef int _tk_prefix_punct = _tp.PREFIX_PUNCT
cdef int _tk_ascii_slope = _tp.ASCII_SLOPE
cdef int _tk_punct_slope = _tp.PUNCT_SLOPE
cdef int _tk_repeat_16 = _tp.REPEAT_16
cdef int _tk_lead_space = _tp.LEAD_SPACE
cdef int _tk_trailing_newline = _tp.TRAILING_NEWLINE
cdef long long _tk_token = _tp.TOKEN
cdef int _tk_space_run = _tp.SPACE_RUN
cdef int _tk_spaces_per_token = _tp.SPACES_PER_TOKEN
cdef int _tk_tab_run = _tp.TAB_RUN
cdef int _tk_tabs_per_token = _tp.TABS_PER_TOKEN
cdef int _tk_newlines_per_token = _tp.NEWLINES_PER_TOKEN
cdef int _tk_cr_newlines = _tp.CR_NEWLINES
cdef int _tk_short_line = _tp.SHORT_LINE
cdef int _tk_blank_line_max = _tp.BLANK_LINE_MAX


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
    if _tp.BLANK_LINE_MAX != 16:
        raise ImportError("navi_core._text_py BLANK_LINE differs from the compiled one")
    _copy_table(_tk_blank_line, _tp.BLANK_LINE, 68)
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


cdef inline long long _space_cost(
    Py_ssize_t spaces, Py_ssize_t tabs, Py_ssize_t changes
) noexcept nogil:
    cdef long long cost = _tk_token + changes // 2 * _tk_token
    if spaces > _tk_space_run:
        cost += ((spaces - _tk_space_run - 1) // _tk_spaces_per_token + 1) * _tk_token
    if tabs > _tk_tab_run:
        cost += ((tabs - _tk_tab_run - 1) // _tk_tabs_per_token + 1) * _tk_token
    return cost


cdef inline long long _newline_cost(Py_ssize_t n) noexcept nogil:
    return (n - 1) // _tk_newlines_per_token * _tk_token


cdef inline int _line_key(
    Py_ssize_t spaces, Py_ssize_t tabs, Py_ssize_t changes, Py_ssize_t newlines
) noexcept nogil:
    if changes or newlines != 1 or spaces + tabs > _tk_blank_line_max:
        return -1
    return <int>(tabs + 2 * (_tk_blank_line_max + 1) if tabs else spaces)


cdef inline long long _line_cost(
    Py_ssize_t spaces,
    Py_ssize_t tabs,
    Py_ssize_t changes,
    Py_ssize_t newlines,
    int key,
    int prev,
) noexcept nogil:
    if key > 0 and prev:
        if prev == key + 1 or prev == -key - 1:
            return _tk_blank_line[key + _tk_blank_line_max + 1]
        if prev < 0:
            return _tk_blank_line[key]
    return _space_cost(spaces, tabs, changes) + _newline_cost(newlines)


cdef inline int _line_mark(int key, int prev) noexcept nogil:
    if key < 0:
        return 0
    if key <= _tk_short_line and not (prev < 0 or prev == key + 1):
        return -key - 1
    return key + 1


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
    cdef Py_ssize_t s_newlines = 0, s_spaces = 0, s_tabs = 0, s_changes = 0, digits = 0
    cdef Py_UCS4 s_last = 0
    cdef int s_prev = 0, key
    cdef bint s_last_change = False
    cdef Py_ssize_t i = 0, repeats
    while i < n:
        cp = s[i]
        i += 1
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
                s_newlines += _tk_cr_newlines if cp == 0x0D else 1
                continue
            if _TK_SPACE <= cls <= _TK_BLANK:
                if s_newlines:
                    key = _line_key(s_spaces, s_tabs, s_changes, s_newlines)
                    total += _line_cost(
                        s_spaces, s_tabs, s_changes, s_newlines, key, s_prev
                    )
                    s_prev = _line_mark(key, s_prev)
                    s_newlines = 0
                    s_spaces = 0
                    s_tabs = 0
                    s_changes = 0
                    s_last_change = False
                else:
                    s_last_change = (cp == 0x20) != (s_last == 0x20)
                    s_changes += s_last_change
                # C only: the blanks that repeat this one, in a tight loop
                repeats = 0
                while i < n and s[i] == cp:
                    i += 1
                    repeats += 1
                if repeats:
                    s_last_change = False
                if cp == 0x20:
                    s_spaces += repeats + 1
                else:
                    s_tabs += repeats + 1
                s_last = cp
                continue
            mode = _TK_NONE
            if s_newlines:
                key = _line_key(s_spaces, s_tabs, s_changes, s_newlines)
                total += _line_cost(
                    s_spaces, s_tabs, s_changes, s_newlines, key, s_prev
                )
            else:
                if s_last == 0x20:
                    s_spaces -= 1
                else:
                    s_tabs -= 1
                if s_spaces or s_tabs:
                    total += _space_cost(s_spaces, s_tabs, s_changes - s_last_change)
                if _is_letter(cls):
                    mode = _TK_WORD
                    w_pre = _TK_PRE_SPACE if s_last == 0x20 else _TK_PRE_OTHER
                    w_pre_cls = (
                        _TK_SPACE if s_last == 0x09 and cls <= _TK_UPPER else _TK_BLANK
                    )
                elif s_last == 0x20 and cls != _TK_DIGIT:
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
                s_changes = 0
                s_prev = 0
                s_last_change = False
                if cls == _TK_NEWLINE:
                    s_newlines = _tk_cr_newlines if cp == 0x0D else 1
                    s_spaces = 0
                    s_tabs = 0
                else:
                    s_newlines = 0
                    s_spaces = cp == 0x20
                    s_tabs = cp != 0x20
                    s_last = cp
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
            key = _line_key(s_spaces, s_tabs, s_changes, s_newlines)
            total += _line_cost(s_spaces, s_tabs, s_changes, s_newlines, key, s_prev)
        else:
            total += _space_cost(s_spaces, s_tabs, s_changes)
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


# -- tool calls written as text: the twin's TextCalls. The scan is the twin's, line for
# line; what differs is the hot path of scan(): a text delta without a marker
# character (_tc_has_trigger, one pass over its bytes in C) costs a loop step and an
# append, and a batch in which nothing changes is returned as it came.

import re as _tc_re

import orjson as _tc_orjson

from cpython.unicode cimport PyUnicode_READ_CHAR

cdef object _tc_D_TEXT = _deltas.TEXT
cdef object _tc_D_THINKING = _deltas.THINKING
cdef object _tc_D_TOOL_START = _deltas.TOOL_START
cdef object _tc_D_TOOL_ARGS = _deltas.TOOL_ARGS
cdef object _tc_D_FINISH = _deltas.FINISH
cdef object _tc_D_USAGE = _deltas.USAGE
cdef object _tc_D_DONE = _deltas.DONE


cdef inline bint _tc_has_trigger(str text, bint lt, bint sq, bint cu) noexcept:
    """Whether ``text`` holds a ``<`` (``lt``), ``[`` (``sq``) or ``{`` (``cu``)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef Py_ssize_t i
    cdef Py_UCS4 c
    cdef const unsigned char* p
    if not (lt or sq or cu):
        return False
    if PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND:
        p = <const unsigned char*>PyUnicode_DATA(text)
        for i in range(n):
            c = p[i]
            if (c == 0x3C and lt) or (c == 0x5B and sq) or (c == 0x7B and cu):
                return True
        return False
    for i in range(n):
        c = PyUnicode_READ_CHAR(text, i)
        if (c == 0x3C and lt) or (c == 0x5B and sq) or (c == 0x7B and cu):
            return True
    return False


#: the values of ``OpenAIChat(text_tool_calls=...)``
cdef tuple _tc_MODES = ("auto", "off", "hermes", "qwen", "llama", "mistral")

cdef str _tc_TOOL_CALL = "<tool_call>"
cdef str _tc_TOOL_CALL_END = "</tool_call>"
cdef str _tc_FUNCTION = "<function="
cdef str _tc_FUNCTION_END = "</function>"
cdef str _tc_PYTHON_TAG = "<|python_tag|>"
cdef str _tc_MISTRAL = "[TOOL_CALLS]"
cdef str _tc_ARGS = "[ARGS]"
cdef str _tc_BRACE = "{"

#: the markers each mode looks for
cdef dict _tc_MARKERS = {
    "off": (),
    "hermes": (_tc_TOOL_CALL,),
    "qwen": (_tc_TOOL_CALL, _tc_FUNCTION),
    "llama": (_tc_PYTHON_TAG, _tc_BRACE),
    "mistral": (_tc_MISTRAL,),
    "auto": (_tc_TOOL_CALL, _tc_FUNCTION, _tc_PYTHON_TAG, _tc_MISTRAL, _tc_BRACE),
}

cdef str _tc_WS = " \t\r\n"
cdef str _tc_SEP = " \t\r\n;"  # what may stand between two calls
cdef object _tc_NAME_RE = _tc_re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
cdef object _tc_ARGS_RE = _tc_re.compile(r'"(?:arguments|parameters)"\s*:\s*')
cdef object _tc_HEAD_NAME = _tc_re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
cdef object _tc_LLAMA_HEAD = _tc_re.compile(r'\{\s*"name"\s*:')
cdef object _tc_PARAM_RE = _tc_re.compile(
    r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|$)", _tc_re.S
)

# states of the scan
cdef int _tc_S_TEXT = 0
cdef int _tc_S_THINK = 1
cdef int _tc_S_CALL = 2


def _head(s, marker):
    """Whether ``s`` starts with ``marker`` (its length), may still (0), or not (-1)."""
    if marker == _tc_BRACE:
        if not s.startswith("{"):
            return -1
        if _tc_LLAMA_HEAD.match(s):
            return 1
        # "{", whitespace, then a prefix of '"name"' and its colon
        rest = s[1:].lstrip(_tc_WS)
        if '"name"'.startswith(rest):
            return 0
        if rest.startswith('"name"') and rest[6:].strip(_tc_WS) == "":
            return 0
        return -1
    if s.startswith(marker):
        return len(marker)
    return 0 if marker.startswith(s) else -1


cdef Py_ssize_t _json_end(str s, Py_ssize_t start) except -2:
    """The index after the JSON value (object or array) that opens at ``start``, or
    -1 while it has not closed."""
    cdef Py_ssize_t depth = 0
    cdef bint in_string = False
    cdef bint escape = False
    cdef Py_ssize_t i
    cdef Py_UCS4 c
    for i in range(start, PyUnicode_GET_LENGTH(s)):
        c = PyUnicode_READ_CHAR(s, i)
        if in_string:
            if escape:
                escape = False
            elif c == 0x5C:  # backslash
                escape = True
            elif c == 0x22:  # '"'
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c == 0x7B or c == 0x5B:  # '{' '['
            depth += 1
        elif c == 0x7D or c == 0x5D:  # '}' ']'
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _loads(text):
    try:
        return _tc_orjson.loads(text)
    except _tc_orjson.JSONDecodeError:
        return _tc_INVALID


cdef object _tc_INVALID = object()


def _arguments(value):
    """A call's arguments as JSON text: an object as it is, a string holding a JSON
    object as that object, anything else encoded."""
    if type(value) is str:
        inner = _loads(value)
        if type(inner) is dict:
            return value
    return _tc_orjson.dumps(value).decode()


cdef class TextCalls:
    """A chat-completions parser whose content is scanned for calls written as text.

    ``parser`` is the core's ``OpenAIChatParser`` (anything with ``feed(bytes)`` and
    ``close()`` returning deltas). ``mode`` is one of ``MODES``; in ``"auto"`` a call
    counts only when ``tools`` (name -> parameter name -> JSON type) has its name.
    ``think`` is the (open, close) pair of reasoning tags, or None. ``prompt`` is the
    request's estimated prompt size (or a function that estimates it), reported with
    the estimated output when the stream sent no usage. A recovered call's id is
    ``ids`` and its index (``ids`` empty: the assembler makes one). ``recovered``
    counts the calls recovered so far.
    """

    cdef object _parser
    cdef str _mode
    cdef tuple _markers
    cdef str _triggers
    cdef bint _lt, _sq, _cu  # which marker characters the mode looks for
    cdef dict _tools
    cdef object _think
    cdef object _prompt
    cdef str _ids
    cdef str _buf
    cdef int _state
    cdef bint _fresh
    cdef str _marker
    cdef bint _sep
    cdef str _started
    cdef bint _strip
    cdef Py_ssize_t _next_index
    cdef bint _usage
    cdef object _finish
    cdef bint _ended
    cdef public Py_ssize_t recovered

    def __init__(
        self, parser, mode = "auto", tools = None, think = None, prompt = 0, ids = ""
    ):
        if mode not in _tc_MARKERS:
            raise ValueError(f"text_tool_calls must be one of {', '.join(_tc_MODES)}")
        if think is not None and (len(think) != 2 or not think[0] or not think[1]):
            raise ValueError("reasoning_tags must be two non-empty strings or None")
        self._parser = parser
        self._mode = mode
        self._markers = _tc_MARKERS[mode]
        self._triggers = "".join(sorted({m[0] for m in self._markers}))
        self._lt = "<" in self._triggers
        self._sq = "[" in self._triggers
        self._cu = "{" in self._triggers
        self._tools = dict(tools or {})
        self._think = think
        self._prompt = prompt
        self._ids = ids
        self._buf = ""
        self._state = _tc_S_TEXT
        self._fresh = think is not None  # nothing but whitespace seen yet
        self._marker = ""  # the marker of the call being read
        self._started = ""  # the name of the call whose start went out, until it ends
        self._sep = False  # whitespace after a call is held: the next call may follow
        self._strip = False  # whitespace after the reasoning is dropped
        self._next_index = 0
        self._usage = False
        self._finish = None
        self._ended = False
        self.recovered = 0

    def feed(self, data):
        """The parser's deltas for ``data``, content scanned."""
        return self.scan(self._parser.feed(data))

    def close(self):
        """The parser's last deltas, then whatever the scan still held."""
        out = self.scan(self._parser.close())
        if not self._ended:
            self._end(out)
        return out

    def scan(self, list deltas):
        """``deltas`` with their content scanned (``deltas`` itself when nothing in
        it changes)."""
        cdef list out = None  # made at the first delta that changes
        cdef Py_ssize_t i
        cdef tuple d
        cdef object kind
        cdef str text
        for i in range(len(deltas)):
            d = <tuple>deltas[i]
            kind = d[0]
            if kind is _tc_D_TEXT:
                text = <str>d[1]
                if (
                    self._state == _tc_S_TEXT
                    and not self._buf
                    and not (self._fresh or self._sep or self._strip)
                    and not _tc_has_trigger(text, self._lt, self._sq, self._cu)
                ):
                    if out is not None:
                        out.append(d)
                    continue
                if out is None:
                    out = deltas[:i]
                self._buf += text
                self._run(out, False)
                continue
            if kind is _tc_D_DONE:
                if out is None:
                    out = deltas[:i]
                self._end(out)
            elif kind is _tc_D_TOOL_START:
                if d[1] >= self._next_index:
                    self._next_index = d[1] + 1
            elif kind is _tc_D_USAGE:
                self._usage = True
            elif kind is _tc_D_FINISH:
                self._finish = d[1]
            if out is not None:
                out.append(d)
        return deltas if out is None else out

    # -- the scan ------------------------------------------------------------------

    cdef _text(self, out, text):
        if text:
            out.append((_tc_D_TEXT, text))

    cdef _run(self, out, final):
        while self._buf:
            state = self._state
            if state == _tc_S_TEXT:
                if not self._lead(out, final):
                    return
                if self._state == _tc_S_TEXT and not self._scan_text(out, final):
                    return
            elif state == _tc_S_THINK:
                if not self._scan_think(out, final):
                    return
            elif not self._scan_call(out, final):
                return

    cdef _lead(self, out, final):
        """Whitespace at the start of the content, after the reasoning or after a call;
        True to go on scanning."""
        if not (self._fresh or self._sep or self._strip):
            return True
        buf = self._buf
        body = buf.lstrip(_tc_SEP if self._sep else _tc_WS)
        if not body:
            if final:
                if self._fresh and not self._strip:
                    self._text(out, buf)  # a content of whitespace only
                self._buf = ""
                self._fresh = self._sep = self._strip = False
            return False
        if self._fresh and self._think is not None:
            opening = self._think[0]
            if body.startswith(opening):
                self._buf = body[len(opening) :]
                self._state = _tc_S_THINK
                self._fresh = False
                return True
            if opening.startswith(body) and not final:
                return False
        if self._strip:
            buf = body
        elif self._sep:
            heads = [_head(body, m) for m in self._markers]
            if any(h > 0 for h in heads):
                buf = body  # whitespace between calls is no text
            elif not final and any(h == 0 for h in heads):
                return False
        self._buf = buf
        self._fresh = self._sep = self._strip = False
        return True

    cdef _scan_text(self, out, final):
        buf = self._buf
        triggers = self._triggers
        i = 0
        n = len(buf)
        while i < n:
            if buf[i] not in triggers:
                i += 1
                continue
            tail = buf[i:]
            for marker in self._markers:
                if marker[0] != buf[i]:
                    continue
                got = _head(tail, marker)
                if got > 0:
                    self._text(out, buf[:i])
                    self._buf = tail
                    self._marker = marker
                    self._state = _tc_S_CALL
                    return True
                if got == 0 and not final:
                    self._text(out, buf[:i])
                    self._buf = tail
                    return False
            i += 1
        self._text(out, buf)
        self._buf = ""
        return False

    cdef _scan_think(self, out, final):
        assert self._think is not None
        closing = self._think[1]
        buf = self._buf
        at = buf.find(closing)
        if at >= 0:
            if at:
                out.append((_tc_D_THINKING, buf[:at]))
            self._buf = buf[at + len(closing) :]
            self._state = _tc_S_TEXT
            self._strip = True  # the answer's leading whitespace is dropped
            return True
        keep = 0
        if not final:
            for k in range(min(len(closing) - 1, len(buf)), 0, -1):
                if closing.startswith(buf[-k:]):
                    keep = k
                    break
        text = buf[: len(buf) - keep]
        if text:
            out.append((_tc_D_THINKING, text))
        self._buf = buf[len(buf) - keep :]
        return False

    cdef _scan_call(self, out, final):
        """Read the call that opens the buffer; True when it ended (or was given
        back)."""
        marker = self._marker
        buf = self._buf
        end = -1  # the end of the call's markup in buf
        if marker == _tc_TOOL_CALL:
            at = buf.find(_tc_TOOL_CALL_END, len(_tc_TOOL_CALL))
            if at >= 0:
                end = at + len(_tc_TOOL_CALL_END)
        elif marker == _tc_FUNCTION:
            at = buf.find(_tc_FUNCTION_END)
            if at >= 0:
                end = at + len(_tc_FUNCTION_END)
        elif marker == _tc_PYTHON_TAG or marker == _tc_BRACE:
            start = len(_tc_PYTHON_TAG) if marker == _tc_PYTHON_TAG else 0
            while start < len(buf) and buf[start] in _tc_WS:
                start += 1
            if start < len(buf):
                if buf[start] != "{":
                    end = start  # not a call: given back
                else:
                    end = _json_end(buf, start)
        else:  # Mistral
            end = self._mistral_end(buf)
        if end < 0 and not final:
            if not self._started:
                self._announce(out, marker, buf)
            return False
        if end < 0:
            end = len(buf)
        markup, self._buf = buf[:end], buf[end:]
        self._state = _tc_S_TEXT
        calls = self._calls(marker, markup)
        started = self._started
        self._started = ""
        if calls is None:
            if not started:
                # not a call: its first character is text, the rest is scanned again
                self._text(out, markup[0])
                self._buf = markup[1:] + self._buf
                return True
            calls = [(started, markup)]  # announced: a call, with bad arguments
        for k, (name, arguments) in enumerate(calls):
            if k == 0 and started:
                index = self._next_index - 1  # its start went out already
            else:
                index = self._start(out, name)
            if arguments:
                out.append((_tc_D_TOOL_ARGS, index, arguments))
        self._sep = True
        return True

    cdef _start(self, out, name):
        """Push the start of a recovered call; its index."""
        index = self._next_index
        self._next_index += 1
        self.recovered += 1
        call_id = f"{self._ids}{index}" if self._ids else ""
        out.append((_tc_D_TOOL_START, index, call_id, name))
        return index

    cdef _announce(self, out, marker, buf):
        """A call in tags whose name is known yet: its start goes out before its
        arguments have arrived."""
        if marker == _tc_TOOL_CALL:
            body = buf[len(_tc_TOOL_CALL) :].lstrip(_tc_WS)
        elif marker == _tc_FUNCTION:
            body = buf
        else:
            return
        if body.startswith(_tc_FUNCTION):
            name, sep, _ = body[len(_tc_FUNCTION) :].partition(">")
            name = name.strip(_tc_WS)
            if not sep:
                return
        else:
            found = _tc_HEAD_NAME.match(body)
            if found is None:
                return
            name = _loads(f'"{found.group(1)}"')
        if self._known(name):
            self._start(out, name)
            self._started = name

    cdef _mistral_end(self, buf):
        i = len(_tc_MISTRAL)
        while i < len(buf) and buf[i] in _tc_WS:
            i += 1
        if i >= len(buf):
            return -1
        if buf[i] == "[":
            return _json_end(buf, i)
        at = buf.find(_tc_ARGS, i)
        if at < 0:
            return -1
        j = at + len(_tc_ARGS)
        while j < len(buf) and buf[j] in _tc_WS:
            j += 1
        if j >= len(buf):
            return -1
        if buf[j] != "{":
            return j
        return _json_end(buf, j)

    # -- what a call's markup holds -----------------------------------------------

    cdef _known(self, name):
        if type(name) is not str or not name:
            return False
        return self._mode != "auto" or name in self._tools

    cdef _calls(self, marker, markup):
        """The (name, arguments) of the calls ``markup`` holds; None: not a call."""
        if marker == _tc_TOOL_CALL:
            body = markup[len(_tc_TOOL_CALL) :]
            if body.endswith(_tc_TOOL_CALL_END):
                body = body[: -len(_tc_TOOL_CALL_END)]
            body = body.strip(_tc_WS)
            if body.startswith(_tc_FUNCTION):
                return self._xml(body)
            return self._json_call(body, ("arguments", "parameters"))
        if marker == _tc_FUNCTION:
            return self._xml(markup)
        if marker == _tc_PYTHON_TAG or marker == _tc_BRACE:
            start = len(_tc_PYTHON_TAG) if marker == _tc_PYTHON_TAG else 0
            return self._json_call(
                markup[start:].strip(_tc_WS), ("parameters", "arguments")
            )
        body = markup[len(_tc_MISTRAL) :].strip(_tc_WS)
        if body.startswith("["):
            items = _loads(body)
            if type(items) is not list or not items:
                return None
            calls = []
            for item in items:
                if type(item) is not dict or not self._known(item.get("name")):
                    return None
                calls.append((item["name"], _arguments(item.get("arguments", {}))))
            return calls
        name, sep, args = body.partition(_tc_ARGS)
        name = name.strip(_tc_WS)
        if not sep or not self._known(name):
            return None
        args = args.strip(_tc_WS)
        value = _loads(args)
        return [(name, args if value is _tc_INVALID else _arguments(value))]

    cdef _json_call(self, body, keys):
        obj = _loads(body)
        if type(obj) is dict:
            name = obj.get("name")
            if not self._known(name):
                return None
            for key in keys:
                if key in obj:
                    return [(name, _arguments(obj[key]))]
            if keys[0] == "parameters":  # Llama: a name alone is not a call
                return None
            return [(name, "{}")]
        if obj is not _tc_INVALID:
            return None
        # not JSON: a call with a name keeps its raw arguments (an error result)
        found = _tc_NAME_RE.search(body)
        if found is None or keys[0] == "parameters":
            return None
        name = _loads(f'"{found.group(1)}"')
        if not self._known(name):
            return None
        args = _tc_ARGS_RE.search(body, found.end())
        raw = body[args.end() :] if args else ""
        raw = raw.rstrip(_tc_WS)
        if raw.endswith("}") and raw.count("{") < raw.count("}"):
            raw = raw[:-1].rstrip(_tc_WS)
        return [(name, raw or "{")]

    cdef _xml(self, body):
        head = body[len(_tc_FUNCTION) :]
        name, sep, rest = head.partition(">")
        name = name.strip(_tc_WS)
        if not sep or not self._known(name):
            return None
        at = rest.find(_tc_FUNCTION_END)
        if at >= 0:
            rest = rest[:at]
        types = self._tools.get(name, {})
        args = {}
        for param, raw in _tc_PARAM_RE.findall(rest):
            value = raw[1:] if raw.startswith("\n") else raw
            value = value[:-1] if value.endswith("\n") else value
            args[param.strip(_tc_WS)] = _typed(value, types.get(param.strip(_tc_WS)))
        return [(name, _tc_orjson.dumps(args).decode())]

    # -- the end of the stream ----------------------------------------------------

    cdef _end(self, out):
        self._ended = True
        self._run(out, True)
        if self._buf:  # a false start at the very end
            self._text(out, self._buf)
            self._buf = ""
        if self.recovered and self._finish == "stop":  # no finish: cut off, not done
            out.append((_tc_D_FINISH, "tool_calls"))
        if not self._usage:
            # the output is estimated from the finished message (ResponseAssembler)
            prompt = self._prompt() if callable(self._prompt) else self._prompt
            out.append((_tc_D_USAGE, prompt, 0, 0, 0, 0, True))


def _typed(value, kind):
    """A Qwen3-Coder parameter's value: a string for a string parameter, else its JSON
    value when it is one."""
    if kind == "string":
        return value
    parsed = _loads(value.strip(_tc_WS))
    if parsed is _tc_INVALID:
        return value
    return parsed
