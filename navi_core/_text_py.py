"""Token estimate and base64, in pure Python: the reference twin of ``csrc/_text.pxi``.

``estimate_tokens`` approximates what the o200k_base BPE tokenizer would count, without
its vocabulary. One pass over the code points cuts the text the way o200k's pre-tokenizer
does (words with an optional leading space or punctuation mark, runs of digits,
punctuation runs, whitespace runs) and prices each piece from tables measured against
o200k on real text: a word's cost grows with its letter count, per script (ASCII,
extended Latin, Greek, Cyrillic, Arabic/Hebrew, Indic, Thai, Han, kana, Hangul, other),
digits cost one token per group of three, punctuation and symbols per run or per
character, whitespace one token per run. ``bench/token_error.py`` measures the error on
text the tables were not tuned on: a few percent on English prose, code and JSON, about
10% at most on the other languages it samples.

Costs are integers in thousandths of a token, so both twins agree exactly; the total is
rounded up. Two bounds hold for any texts ``a`` and ``b``:
``estimate(a + b) <= estimate(a) + estimate(b) + 1`` and
``estimate(a + b) >= estimate(a) - 1``. The compiled twin copies these tables at import.
"""

from __future__ import annotations

import binascii
from typing import Final

__all__ = ["b64encode", "estimate_tokens"]

# Character classes. Letters continue words, PUNCT..EMOJI continue punctuation runs.
LOWER, UPPER, DIGIT, SPACE, NEWLINE, BLANK, PUNCT = range(7)
LATIN, GREEK, CYRILLIC, ARABIC, INDIC, THAI = range(7, 13)
HAN, KANA, HANGUL, OTHER, MARK = range(13, 18)
UPUNCT, CJKPUNCT, SYMBOL, EMOJI = range(18, 22)

# Inclusive code point ranges from 0x80 to 0xFFFF; gaps are OTHER letters.
RANGES: Final[tuple[tuple[int, int, int], ...]] = (
    (0x80, 0x84, SYMBOL), (0x85, 0x85, BLANK), (0x86, 0x9F, SYMBOL),
    (0xA0, 0xA0, BLANK), (0xA1, 0xBF, UPUNCT), (0xC0, 0xD6, LATIN),
    (0xD7, 0xD7, UPUNCT), (0xD8, 0xF6, LATIN), (0xF7, 0xF7, UPUNCT),
    (0xF8, 0x2FF, LATIN), (0x300, 0x36F, MARK), (0x370, 0x3FF, GREEK),
    (0x400, 0x52F, CYRILLIC), (0x590, 0x60B, ARABIC), (0x60C, 0x60D, UPUNCT),
    (0x60E, 0x61A, ARABIC), (0x61B, 0x61F, UPUNCT), (0x620, 0x669, ARABIC),
    (0x66A, 0x66D, UPUNCT), (0x66E, 0x6D3, ARABIC), (0x6D4, 0x6D4, UPUNCT),
    (0x6D5, 0x8FF, ARABIC), (0x900, 0x963, INDIC), (0x964, 0x965, UPUNCT),
    (0x966, 0xDFF, INDIC), (0xE00, 0xFFF, THAI), (0x1100, 0x11FF, HANGUL),
    (0x1680, 0x1680, BLANK), (0x1C80, 0x1C8F, CYRILLIC), (0x1E00, 0x1EFF, LATIN),
    (0x1F00, 0x1FFF, GREEK), (0x2000, 0x200A, BLANK), (0x200B, 0x200C, SYMBOL),
    (0x200D, 0x200D, EMOJI), (0x200E, 0x2027, UPUNCT), (0x2028, 0x2029, BLANK),
    (0x202A, 0x202E, SYMBOL), (0x202F, 0x202F, BLANK), (0x2030, 0x205E, UPUNCT),
    (0x205F, 0x205F, BLANK), (0x2060, 0x25FF, SYMBOL), (0x2600, 0x27BF, EMOJI),
    (0x27C0, 0x2BFF, SYMBOL), (0x2DE0, 0x2DFF, CYRILLIC), (0x2E00, 0x2E7F, UPUNCT),
    (0x2E80, 0x2FDF, HAN), (0x3000, 0x3000, BLANK), (0x3001, 0x3004, CJKPUNCT),
    (0x3005, 0x3007, HAN), (0x3008, 0x3020, CJKPUNCT), (0x3021, 0x3029, HAN),
    (0x302A, 0x303F, CJKPUNCT), (0x3040, 0x30FF, KANA), (0x3130, 0x318F, HANGUL),
    (0x31F0, 0x31FF, KANA), (0x3400, 0x4DBF, HAN), (0x4E00, 0x9FFF, HAN),
    (0xA640, 0xA69F, CYRILLIC), (0xA960, 0xA97F, HANGUL), (0xAC00, 0xD7FF, HANGUL),
    (0xD800, 0xF8FF, SYMBOL), (0xF900, 0xFAFF, HAN), (0xFB50, 0xFDFF, ARABIC),
    (0xFE00, 0xFE0F, MARK), (0xFE10, 0xFE6F, CJKPUNCT), (0xFE70, 0xFEFF, ARABIC),
    (0xFF01, 0xFF0F, CJKPUNCT), (0xFF1A, 0xFF20, CJKPUNCT), (0xFF3B, 0xFF40, CJKPUNCT),
    (0xFF5B, 0xFF65, CJKPUNCT), (0xFF66, 0xFF9F, KANA), (0xFFF0, 0xFFFF, SYMBOL),
)  # fmt: skip
# Above 0xFFFF: emoji and other rare symbols, CJK extensions, tags, selectors.
ASTRAL_RANGES: Final[tuple[tuple[int, int, int], ...]] = (
    (0x10000, 0x1FFFF, EMOJI), (0x20000, 0x3FFFF, HAN), (0xE0000, 0xE007F, EMOJI),
    (0xE0100, 0xE01EF, MARK), (0xF0000, 0x10FFFF, SYMBOL),
)  # fmt: skip


def _ascii_class(c: int) -> int:
    if 0x61 <= c <= 0x7A:
        return LOWER
    if 0x41 <= c <= 0x5A:
        return UPPER
    if 0x30 <= c <= 0x39:
        return DIGIT
    if c == 0x20:
        return SPACE
    if c in (0x0A, 0x0D):
        return NEWLINE
    if 0x09 <= c <= 0x0C or 0x1C <= c <= 0x1F:  # what str.isspace() also accepts
        return BLANK
    return PUNCT


def _bmp_table() -> bytes:
    table = bytearray([OTHER]) * 0x10000
    table[:0x80] = bytes(_ascii_class(c) for c in range(0x80))
    for start, end, cls in RANGES:
        table[start : end + 1] = bytes([cls]) * (end + 1 - start)
    return bytes(table)


#: class of every code point below 0x10000
BMP_CLASS: Final[bytes] = _bmp_table()


def _astral_class(cp: int) -> int:
    for start, end, cls in ASTRAL_RANGES:
        if start <= cp <= end:
            return cls
    return OTHER


# Costs, in thousandths of a token, measured against o200k_base (bench/token_error.py).
# Words: the ASCII letters of a word by count 0..12 (then ASCII_SLOPE per letter), one
# row per (case, what precedes the word).
ASCII_WORD: Final[tuple[int, ...]] = (
    # lower case or capitalised, after a space
    0, 990, 1000, 1010, 1020, 1040, 1120, 1140, 1210, 1340, 1370, 1370, 1370,
    # lower case or capitalised, after one ASCII punctuation mark
    0, 1090, 1220, 1220, 1220, 1340, 1430, 1540, 1710, 1880, 1880, 2030, 2620,
    # lower case or capitalised, otherwise
    0, 990, 990, 1100, 1100, 1110, 1170, 1280, 1330, 1330, 1390, 1680, 1900,
    # two or more capitals, after a space
    0, 970, 970, 1280, 1280, 1540, 1780, 1960, 2040, 2280, 2280, 2340, 2340,
    # two or more capitals, after one ASCII punctuation mark
    0, 1450, 1450, 1460, 1460, 1770, 1850, 1900, 2150, 2260, 2260, 2260, 2260,
    # two or more capitals, otherwise
    0, 1020, 1020, 1360, 1470, 1640, 2210, 2210, 2210, 2210, 2210, 2210, 2210,
)  # fmt: skip
ASCII_SLOPE: Final = 190
# Non-ASCII letters: the cost of the 1st, 2nd, 3rd, 4th and each later letter of a run
# of one script inside a word; per script, first after a space, then otherwise.
SCRIPT_STEP: Final[tuple[int, ...]] = (
    600, 220, 160, 0, 500,  1480, 710, 0, 0, 500,  # extended Latin
    990, 10, 30, 700, 350,  1000, 200, 540, 940, 400,  # Greek
    990, 20, 40, 390, 200,  860, 240, 580, 670, 270,  # Cyrillic
    1020, 110, 210, 520, 340,  910, 90, 810, 560, 340,  # Arabic, Hebrew
    1070, 0, 450, 740, 330,  760, 320, 900, 880, 430,  # Indic
    500, 0, 390, 1090, 400,  500, 80, 1010, 570, 400,  # Thai, Lao, Tibetan
    1380, 680, 930, 790, 760,  980, 600, 1230, 820, 760,  # Han
    500, 760, 630, 330, 590,  580, 720, 820, 750, 590,  # kana
    1100, 390, 820, 180, 460,  1140, 760, 920, 810, 760,  # Hangul
    1090, 0, 500, 410, 250,  910, 0, 810, 780, 450,  # other letters
    450, 450, 450, 450, 450,  450, 450, 450, 450, 450,  # combining marks
)  # fmt: skip
PREFIX_PUNCT: Final = 680  # a word without ASCII letters after one ASCII mark
#: a word after a tab (BLANK) or one non-ASCII mark or symbol, by the prefix's class
PREFIX_COST: Final[tuple[int, ...]] = (
    (0,) * BLANK + (920,) + (0,) * (UPUNCT - BLANK - 1) + (420, 850, 340, 1100)
)
# Punctuation runs: by the ASCII marks that differ from the character before them
# (0..8, then PUNCT_SLOPE per mark); repeats of a mark ("-----") cost REPEAT_16 per 16;
# each non-ASCII character costs by its class.
PUNCT_RUN: Final[tuple[int, ...]] = (0, 880, 970, 1270, 2100, 2700, 2700, 2700, 2700)
PUNCT_SLOPE: Final = 300
REPEAT_16: Final = 820
LEAD_SPACE: Final = 160  # " (" is one piece
TRAILING_NEWLINE: Final = 140  # "):\n" is one piece
#: per-character cost by class; only UPUNCT..EMOJI are non-zero
SYMBOL_COST: Final[tuple[int, ...]] = (0,) * UPUNCT + (860, 870, 600, 1910)
# A run of blanks, a run of newlines and a group of 1-3 digits cost one token each;
# a run costs one more per SPACES_PER_TOKEN blanks or NEWLINES_PER_TOKEN newlines.
TOKEN: Final = 1000
SPACES_PER_TOKEN: Final = 64
NEWLINES_PER_TOKEN: Final = 12

# What the scanner is inside of.
_NONE, _WORD, _DIGITS, _PUNCT, _TRAIL, _SPACE = range(6)
# What precedes a word.
_PRE_NONE, _PRE_SPACE, _PRE_PUNCT, _PRE_OTHER = range(4)


def _is_letter(cls: int) -> bool:
    return cls <= UPPER or LATIN <= cls <= MARK


def _word_cost(prefix: int, ascii_letters: int, capitals: int, cost: int) -> int:
    """``cost`` so far (prefix and non-ASCII letters) plus the ASCII letters' cost."""
    if ascii_letters:
        row = (3 if capitals >= 2 else 0) + (
            0 if prefix == _PRE_SPACE else 1 if prefix == _PRE_PUNCT else 2
        )
        cost += ASCII_WORD[row * 13 + min(ascii_letters, 12)]
        if ascii_letters > 12:
            cost += (ascii_letters - 12) * ASCII_SLOPE
    elif prefix == _PRE_PUNCT:
        cost += PREFIX_PUNCT
    return cost


def _punct_cost(cost: int, changes: int, repeats: int, lead: bool, trail: bool) -> int:
    """``cost`` so far (non-ASCII characters) plus the rest of a punctuation run's."""
    if lead:
        cost += LEAD_SPACE
    if trail:
        cost += TRAILING_NEWLINE
    cost += repeats // 16 * REPEAT_16
    if changes > 8:
        return cost + PUNCT_RUN[8] + (changes - 8) * PUNCT_SLOPE
    return cost + PUNCT_RUN[changes]


def _space_cost(n: int) -> int:
    return TOKEN + (n - 1) // SPACES_PER_TOKEN * TOKEN


def _newline_cost(n: int) -> int:
    return TOKEN + (n - 1) // NEWLINES_PER_TOKEN * TOKEN


def estimate_tokens(text: str) -> int:
    """Approximate o200k_base token count of ``text`` (module docstring), in one pass.

    Raises:
        TypeError: ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(
            f"estimate_tokens() argument must be str, not {type(text).__name__}"
        )
    total = 0
    mode = _NONE
    # word: prefix kind and class, ASCII letters and capitals, cost of the rest so far,
    # current run of one script
    w_pre = w_pre_cls = w_ascii = w_caps = w_cost = w_len = 0
    w_lower = False
    w_run = -1
    # punctuation run: ASCII marks that change, that repeat; non-ASCII cost; length;
    # first code point and its class, last code point
    p_changes = p_repeats = p_cost = p_len = p_first = p_first_cls = p_last = 0
    p_lead = False
    # whitespace run: newlines (the part up to the last one), blanks after it
    s_newlines = s_tail = 0
    s_tail_space = False
    digits = 0
    bmp = BMP_CLASS
    for ch in text:
        cp = ord(ch)
        cls = bmp[cp] if cp < 0x10000 else _astral_class(cp)
        if mode == _WORD:
            if LATIN <= cls <= MARK:
                w_lower = True
                if cls == w_run:
                    w_len += 1
                else:
                    w_run, w_len = cls, 1
                sv = 0 if w_pre == _PRE_SPACE else 1
                w_cost += SCRIPT_STEP[((cls - LATIN) * 2 + sv) * 5 + min(w_len, 5) - 1]
                continue
            if cls == LOWER:
                w_ascii += 1
                w_lower = True
                continue
            if cls == UPPER and not w_lower:
                w_ascii += 1
                w_caps += 1
                continue
            total += _word_cost(w_pre, w_ascii, w_caps, w_cost)
            mode = _NONE
        elif mode == _PUNCT:
            if _is_letter(cls) and p_len == 1 and not p_lead:
                mode = _WORD
                w_pre = _PRE_PUNCT if p_first < 0x80 else _PRE_OTHER
                w_pre_cls = p_first_cls
            elif cls == PUNCT or cls >= MARK:
                p_len += 1
                if cls != PUNCT:
                    p_cost += SYMBOL_COST[cls]
                elif cp == p_last:
                    p_repeats += 1
                else:
                    p_changes += 1
                p_last = cp
                continue
            elif cls == NEWLINE:
                mode = _TRAIL
                continue
            else:
                total += _punct_cost(p_cost, p_changes, p_repeats, p_lead, False)
                mode = _NONE
        elif mode == _TRAIL:
            if cls == NEWLINE or cp == 0x2F:
                continue
            total += _punct_cost(p_cost, p_changes, p_repeats, p_lead, True)
            mode = _NONE
        elif mode == _DIGITS:
            if cls == DIGIT:
                digits += 1
                continue
            total += (digits + 2) // 3 * TOKEN
            mode = _NONE
        elif mode == _SPACE:
            if cls == NEWLINE:
                s_newlines += 1
                s_tail = 0
                continue
            if SPACE <= cls <= BLANK:
                s_tail += 1
                s_tail_space = cp == 0x20
                continue
            if s_newlines:
                total += _newline_cost(s_newlines)
            mode = _NONE
            if s_tail:
                # o200k gives the last blank to a following word or " " + punctuation
                if s_tail > 1:
                    total += _space_cost(s_tail - 1)
                if _is_letter(cls):
                    mode = _WORD
                    w_pre = _PRE_SPACE if s_tail_space else _PRE_OTHER
                    w_pre_cls = BLANK
                elif s_tail_space and cls != DIGIT:
                    mode = _PUNCT
                    p_lead = True
                else:
                    total += TOKEN
        # start a piece with this character (mode says what a run already decided)
        if mode == _NONE:
            if _is_letter(cls):
                mode = _WORD
                w_pre = _PRE_NONE
            elif cls == DIGIT:
                mode = _DIGITS
                digits = 1
                continue
            elif SPACE <= cls <= BLANK:
                mode = _SPACE
                s_newlines = s_tail = 0
                if cls == NEWLINE:
                    s_newlines = 1
                else:
                    s_tail = 1
                    s_tail_space = cp == 0x20
                continue
            else:
                mode = _PUNCT
                p_lead = False
        if mode == _WORD:
            w_ascii = w_caps = 0
            w_cost = PREFIX_COST[w_pre_cls] if w_pre == _PRE_OTHER else 0
            w_lower = False
            w_run = -1
            if cls <= UPPER:
                w_ascii = 1
                w_caps = 1 if cls == UPPER else 0
                w_lower = cls == LOWER
            else:
                w_lower = True
                w_run, w_len = cls, 1
                sv = 0 if w_pre == _PRE_SPACE else 1
                w_cost += SCRIPT_STEP[((cls - LATIN) * 2 + sv) * 5]
        else:  # _PUNCT
            p_len = 1
            p_first = p_last = cp
            p_first_cls = cls
            p_changes = 1 if cls == PUNCT else 0
            p_repeats = 0
            p_cost = SYMBOL_COST[cls]
    if mode == _WORD:
        total += _word_cost(w_pre, w_ascii, w_caps, w_cost)
    elif mode in (_PUNCT, _TRAIL):
        total += _punct_cost(p_cost, p_changes, p_repeats, p_lead, mode == _TRAIL)
    elif mode == _DIGITS:
        total += (digits + 2) // 3 * TOKEN
    elif mode == _SPACE:
        if s_newlines:
            total += _newline_cost(s_newlines)
        if s_tail:
            total += _space_cost(s_tail)
    return (total + TOKEN - 1) // TOKEN


def b64encode(data: bytes | bytearray | memoryview) -> str:
    """Standard base64 with padding, as ``base64.b64encode(data).decode()``.

    Any buffer is accepted; one that is not C-contiguous is copied first.

    Raises:
        TypeError: ``data`` does not support the buffer protocol.
    """
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(
            f"b64encode() argument must be a bytes-like object, not {type(data).__name__}"
        ) from None
    with view:
        if not view.c_contiguous:
            return binascii.b2a_base64(view.tobytes(), newline=False).decode("ascii")
        return binascii.b2a_base64(view, newline=False).decode("ascii")
