"""Token estimate and base64, in pure Python: the reference twin of ``csrc/_text.pxi``.

``estimate_tokens`` approximates what the o200k_base BPE tokenizer would count, without
its vocabulary. One pass over the code points cuts the text the way o200k's pre-tokenizer
does (words with an optional leading space or punctuation mark, runs of digits,
punctuation runs, whitespace runs) and prices each piece from tables measured against
o200k on real text: a word's cost grows with its letter count, per script (ASCII,
extended Latin, Greek, Cyrillic, Arabic/Hebrew, Indic, Thai, Han, kana, Hangul, other),
digits cost one token per group of three, punctuation and symbols per run or per
character, whitespace one token per run of blanks or newlines and per line of blanks
between newlines, less for lines o200k merges (a repeated indentation), more for long
runs and for changes between spaces and tabs. ``bench/token_error.py`` measures the
error on text the tables were not tuned on: a few percent on English prose, code and
JSON, about 10% at most on the other languages it samples.

Costs are integers in thousandths of a token, so both twins agree exactly; the total is
rounded up. Two bounds hold for any texts ``a`` and ``b``:
``estimate(a + b) <= estimate(a) + estimate(b) + 1`` and
``estimate(a + b) >= estimate(a) - 1``. The compiled twin copies these tables at import.

``TextCalls`` (below the estimate) wraps a chat-completions parser and scans the
content for the tool calls local models write as text when the server does not parse
them: Hermes / Qwen2.5 ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
Qwen3-Coder ``<tool_call><function=name><parameter=p>value</parameter></function>
</tool_call>`` (also without the wrapper), Llama 3.x ``{"name": ..., "parameters":
{...}}`` (optionally after ``<|python_tag|>``, several separated by ``;``), Mistral
``[TOOL_CALLS][{"name": ..., "arguments": {...}}]`` and ``[TOOL_CALLS]name[ARGS]{...}``;
and for reasoning between tags at the start of the content. A call's ``TOOL_START``
goes out once its name has arrived (tagged formats; else when the call closes), its
``TOOL_ARGS`` when its markup closes; text outside the markup stays ``TEXT``, in order. Markup that turns out not to be a call (``<tooltip>``,
a JSON answer without a tool's name, a name no tool has in ``"auto"`` mode) is given
back as text; a call whose arguments are not valid JSON keeps its name and raw
arguments, so it gets the usual invalid-arguments result. A stream that reported no
usage ends with a ``USAGE`` delta of the estimated prompt, its last item True: the
assembler estimates the output from the finished message.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from ._deltas import DONE, FINISH, TEXT, THINKING, TOOL_ARGS, TOOL_START, USAGE

__all__ = ["MODES", "TextCalls", "b64encode", "estimate_tokens"]

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
#: a word after a tab, when it starts with an ASCII letter (at SPACE: a space is no
#: prefix here), after another blank (BLANK) or one non-ASCII mark or symbol, by the
#: prefix's class
PREFIX_COST: Final[tuple[int, ...]] = (
    (0,) * SPACE + (450, 0, 920) + (0,) * (UPUNCT - BLANK - 1) + (420, 850, 340, 1100)
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
# A group of 1-3 digits costs one token. Whitespace: see _space_cost, _newline_cost and
# the whitespace branch of estimate_tokens.
TOKEN: Final = 1000
# A run of blanks costs one token up to SPACE_RUN spaces or TAB_RUN tabs (other blanks
# count as tabs), one more per SPACES_PER_TOKEN spaces or TABS_PER_TOKEN tabs beyond,
# and one more per second change between spaces and tabs ("    \t  ": "    \t", "  ").
SPACE_RUN: Final = 79
SPACES_PER_TOKEN: Final = 128
TAB_RUN: Final = 20
TABS_PER_TOKEN: Final = 16
# A run of newlines costs one token, one more per NEWLINES_PER_TOKEN; "\r" counts as
# CR_NEWLINES ("\n" * 16 is one token, so is "\r\n" * 4).
NEWLINES_PER_TOKEN: Final = 16
CR_NEWLINES: Final = 3
# A line of 1..16 blanks of one kind (spaces, tabs) ended by one "\n" inside a
# whitespace run: its cost by length (index 0 unused) after a short line (a bare "\n"
# or at most SHORT_LINE spaces: "\n    \n" is one token), then repeating the line
# before ("    \n" * 4 is one token). Other lines cost like a blank run (one token and
# more) plus their newlines' extra tokens.
SHORT_LINE: Final = 3
BLANK_LINE: Final[tuple[int, ...]] = (
    # spaces, after a short line
    0,  0, 0, 0, 0, 1000, 0, 1000, 0,
        1000, 1000, 1000, 0, 1000, 1000, 1000, 0,
    # spaces, repeating the line before
    0,  500, 500, 1000, 250, 1000, 1000, 1000, 500,
        1000, 1000, 1000, 500, 1000, 1000, 1000, 500,
    # tabs, after a short line
    0,  0, 0, 0, 0, 1000, 1000, 1000, 1000,
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
    # tabs, repeating the line before
    0,  250, 500, 500, 500, 1000, 1000, 1000, 1000,
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
)  # fmt: skip
BLANK_LINE_MAX: Final = 16

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


def _space_cost(spaces: int, tabs: int, changes: int) -> int:
    """A run of ``spaces`` spaces and ``tabs`` other blanks, ``changes`` between."""
    cost = TOKEN + changes // 2 * TOKEN
    if spaces > SPACE_RUN:
        cost += ((spaces - SPACE_RUN - 1) // SPACES_PER_TOKEN + 1) * TOKEN
    if tabs > TAB_RUN:
        cost += ((tabs - TAB_RUN - 1) // TABS_PER_TOKEN + 1) * TOKEN
    return cost


def _newline_cost(n: int) -> int:
    """What a run of ``n`` newlines (CR_NEWLINES per "\\r") adds to its line's cost."""
    return (n - 1) // NEWLINES_PER_TOKEN * TOKEN


def _line_key(spaces: int, tabs: int, changes: int, newlines: int) -> int:
    """A whitespace line's index in BLANK_LINE's first row of its kind, when it is at
    most BLANK_LINE_MAX blanks of one kind (0: none) and one "\\n"; else -1."""
    if changes or newlines != 1 or spaces + tabs > BLANK_LINE_MAX:
        return -1
    return tabs + 2 * (BLANK_LINE_MAX + 1) if tabs else spaces


def _line_cost(
    spaces: int, tabs: int, changes: int, newlines: int, key: int, prev: int
) -> int:
    """A line of a whitespace run: its blanks and the newlines ending it; ``key`` is
    its ``_line_key``, ``prev`` the ``_line_mark`` of the line before."""
    if key > 0 and prev:
        if prev == key + 1 or prev == -key - 1:
            return BLANK_LINE[key + BLANK_LINE_MAX + 1]
        if prev < 0:
            return BLANK_LINE[key]
    return _space_cost(spaces, tabs, changes) + _newline_cost(newlines)


def _line_mark(key: int, prev: int) -> int:
    """What a whitespace line lets the next one do, from its ``_line_key`` and the
    line before's mark: repeat it (key + 1); also merge with it (-key - 1: a short line
    that neither merged nor repeated); nothing (0)."""
    if key < 0:
        return 0
    if key <= SHORT_LINE and not (prev < 0 or prev == key + 1):
        return -key - 1
    return key + 1


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
    # whitespace run (its finished lines are in total): the current line's newlines (0:
    # still in its blanks), spaces, tabs (other blanks), changes between the two, last
    # blank and whether it made a change; the _line_mark of the line before
    s_newlines = s_spaces = s_tabs = s_changes = s_last = s_prev = 0
    s_last_change = False
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
                s_newlines += CR_NEWLINES if cp == 0x0D else 1
                continue
            if SPACE <= cls <= BLANK:
                if s_newlines:  # the line ends, the next one starts
                    key = _line_key(s_spaces, s_tabs, s_changes, s_newlines)
                    total += _line_cost(
                        s_spaces, s_tabs, s_changes, s_newlines, key, s_prev
                    )
                    s_prev = _line_mark(key, s_prev)
                    s_newlines = s_spaces = s_tabs = s_changes = 0
                    s_last_change = False
                else:
                    s_last_change = (cp == 0x20) != (s_last == 0x20)
                    if s_last_change:
                        s_changes += 1
                if cp == 0x20:
                    s_spaces += 1
                else:
                    s_tabs += 1
                s_last = cp
                continue
            mode = _NONE
            if s_newlines:
                key = _line_key(s_spaces, s_tabs, s_changes, s_newlines)
                total += _line_cost(
                    s_spaces, s_tabs, s_changes, s_newlines, key, s_prev
                )
            else:
                # o200k gives the last blank to a following word or " " + punctuation
                if s_last == 0x20:
                    s_spaces -= 1
                else:
                    s_tabs -= 1
                if s_spaces or s_tabs:
                    total += _space_cost(s_spaces, s_tabs, s_changes - s_last_change)
                if _is_letter(cls):
                    mode = _WORD
                    w_pre = _PRE_SPACE if s_last == 0x20 else _PRE_OTHER
                    w_pre_cls = SPACE if s_last == 0x09 and cls <= UPPER else BLANK
                elif s_last == 0x20 and cls != DIGIT:
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
                s_changes = s_prev = 0
                s_last_change = False
                if cls == NEWLINE:
                    s_newlines = CR_NEWLINES if cp == 0x0D else 1
                    s_spaces = s_tabs = 0
                else:
                    s_newlines = 0
                    s_spaces = 1 if cp == 0x20 else 0
                    s_tabs = 1 - s_spaces
                    s_last = cp
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
            key = _line_key(s_spaces, s_tabs, s_changes, s_newlines)
            total += _line_cost(s_spaces, s_tabs, s_changes, s_newlines, key, s_prev)
        else:
            total += _space_cost(s_spaces, s_tabs, s_changes)
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


# -- tool calls written as text ------------------------------------------------------

#: the values of ``OpenAIChat(text_tool_calls=...)``
MODES: Final = ("auto", "off", "hermes", "qwen", "llama", "mistral")

_TOOL_CALL: Final = "<tool_call>"
_TOOL_CALL_END: Final = "</tool_call>"
_FUNCTION: Final = "<function="
_FUNCTION_END: Final = "</function>"
_PYTHON_TAG: Final = "<|python_tag|>"
_MISTRAL: Final = "[TOOL_CALLS]"
_ARGS: Final = "[ARGS]"
_BRACE: Final = "{"

#: the markers each mode looks for
_MARKERS: Final[dict[str, tuple[str, ...]]] = {
    "off": (),
    "hermes": (_TOOL_CALL,),
    "qwen": (_TOOL_CALL, _FUNCTION),
    "llama": (_PYTHON_TAG, _BRACE),
    "mistral": (_MISTRAL,),
    "auto": (_TOOL_CALL, _FUNCTION, _PYTHON_TAG, _MISTRAL, _BRACE),
}

_WS: Final = " \t\r\n"
_SEP: Final = " \t\r\n;"  # what may stand between two calls
_NAME_RE: Final = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS_RE: Final = re.compile(r'"(?:arguments|parameters)"\s*:\s*')
_HEAD_NAME: Final = re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_LLAMA_HEAD: Final = re.compile(r'\{\s*"name"\s*:')
_PARAM_RE: Final = re.compile(
    r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.S
)

# states of the scan
_S_TEXT: Final = 0
_S_THINK: Final = 1
_S_CALL: Final = 2


def _head(s: str, marker: str) -> int:
    """Whether ``s`` starts with ``marker`` (its length), may still (0), or not (-1)."""
    if marker == _BRACE:
        if not s.startswith("{"):
            return -1
        if _LLAMA_HEAD.match(s):
            return 1
        # "{", whitespace, then a prefix of '"name"' and its colon
        rest = s[1:].lstrip(_WS)
        if '"name"'.startswith(rest):
            return 0
        if rest.startswith('"name"') and rest[6:].strip(_WS) == "":
            return 0
        return -1
    if s.startswith(marker):
        return len(marker)
    return 0 if marker.startswith(s) else -1


def _json_end(s: str, start: int) -> int:
    """The index after the JSON value (object or array) that opens at ``start``, or
    -1 while it has not closed."""
    depth = 0
    in_string = False
    escape = False
    for i in range(start, len(s)):
        c = s[i]
        if in_string:
            if escape:
                escape = False
            elif c == "\\":
                escape = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "{" or c == "[":
            depth += 1
        elif c == "}" or c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return _INVALID


_INVALID: Final = object()


def _arguments(value: Any) -> str:
    """A call's arguments as JSON text: an object as it is, a string holding a JSON
    object as that object, anything else encoded."""
    if type(value) is str:
        inner = _loads(value)
        if type(inner) is dict:
            return value
    return orjson.dumps(value).decode()


class TextCalls:
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

    def __init__(
        self,
        parser: Any,
        mode: str = "auto",
        tools: Mapping[str, Mapping[str, str]] | None = None,
        think: tuple[str, str] | None = None,
        prompt: int | Callable[[], int] = 0,
        ids: str = "",
    ) -> None:
        if mode not in _MARKERS:
            raise ValueError(f"text_tool_calls must be one of {', '.join(MODES)}")
        if think is not None and (len(think) != 2 or not think[0] or not think[1]):
            raise ValueError("reasoning_tags must be two non-empty strings or None")
        self._parser = parser
        self._mode = mode
        self._markers = _MARKERS[mode]
        self._triggers = "".join(sorted({m[0] for m in self._markers}))
        self._tools = dict(tools or {})
        self._think = think
        self._prompt = prompt
        self._ids = ids
        self._buf = ""
        self._state = _S_TEXT
        self._fresh = think is not None  # nothing but whitespace seen yet
        self._marker = ""  # the marker of the call being read
        self._started = ""  # the name of the call whose start went out, until it ends
        self._sep = False  # whitespace after a call is held: the next call may follow
        self._strip = False  # whitespace after the reasoning is dropped
        self._next_index = 0
        self._usage = False
        self._finish: Any = None
        self._ended = False
        self.recovered = 0

    def feed(self, data: bytes) -> list[Any]:
        """The parser's deltas for ``data``, content scanned."""
        return self.scan(self._parser.feed(data))

    def close(self) -> list[Any]:
        """The parser's last deltas, then whatever the scan still held."""
        out = self.scan(self._parser.close())
        if not self._ended:
            self._end(out)
        return out

    def scan(self, deltas: list[Any]) -> list[Any]:
        """``deltas`` with their content scanned."""
        out: list[Any] = []
        for d in deltas:
            kind = d[0]
            if kind == TEXT:
                text = d[1]
                if (
                    not self._buf
                    and self._state == _S_TEXT
                    and not (self._fresh or self._sep or self._strip)
                    and not any(c in text for c in self._triggers)
                ):
                    out.append(d)
                else:
                    self._buf += text
                    self._run(out, False)
            elif kind == DONE:
                self._end(out)
                out.append(d)
            else:
                if kind == TOOL_START:
                    if d[1] >= self._next_index:
                        self._next_index = d[1] + 1
                elif kind == USAGE:
                    self._usage = True
                elif kind == FINISH:
                    self._finish = d[1]
                out.append(d)
        return out

    # -- the scan ------------------------------------------------------------------

    def _text(self, out: list[Any], text: str) -> None:
        if text:
            out.append((TEXT, text))

    def _run(self, out: list[Any], final: bool) -> None:
        while self._buf:
            state = self._state
            if state == _S_TEXT:
                if not self._lead(out, final):
                    return
                if self._state == _S_TEXT and not self._scan_text(out, final):
                    return
            elif state == _S_THINK:
                if not self._scan_think(out, final):
                    return
            elif not self._scan_call(out, final):
                return

    def _lead(self, out: list[Any], final: bool) -> bool:
        """Whitespace at the start of the content, after the reasoning or after a call;
        True to go on scanning."""
        if not (self._fresh or self._sep or self._strip):
            return True
        buf = self._buf
        body = buf.lstrip(_SEP if self._sep else _WS)
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
                self._state = _S_THINK
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

    def _scan_text(self, out: list[Any], final: bool) -> bool:
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
                    self._state = _S_CALL
                    return True
                if got == 0 and not final:
                    self._text(out, buf[:i])
                    self._buf = tail
                    return False
            i += 1
        self._text(out, buf)
        self._buf = ""
        return False

    def _scan_think(self, out: list[Any], final: bool) -> bool:
        assert self._think is not None
        closing = self._think[1]
        buf = self._buf
        at = buf.find(closing)
        if at >= 0:
            if at:
                out.append((THINKING, buf[:at]))
            self._buf = buf[at + len(closing) :]
            self._state = _S_TEXT
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
            out.append((THINKING, text))
        self._buf = buf[len(buf) - keep :]
        return False

    def _scan_call(self, out: list[Any], final: bool) -> bool:
        """Read the call that opens the buffer; True when it ended (or was given back)."""
        marker = self._marker
        buf = self._buf
        end = -1  # the end of the call's markup in buf
        if marker == _TOOL_CALL:
            at = buf.find(_TOOL_CALL_END, len(_TOOL_CALL))
            if at >= 0:
                end = at + len(_TOOL_CALL_END)
        elif marker == _FUNCTION:
            at = buf.find(_FUNCTION_END)
            if at >= 0:
                end = at + len(_FUNCTION_END)
        elif marker in (_PYTHON_TAG, _BRACE):
            start = len(_PYTHON_TAG) if marker == _PYTHON_TAG else 0
            while start < len(buf) and buf[start] in _WS:
                start += 1
            if start < len(buf):
                # anything but an object after the tag: given back as text
                end = _json_end(buf, start) if buf[start] == "{" else start
        else:  # Mistral
            end = self._mistral_end(buf)
        if end < 0 and not final:
            if not self._started:
                self._announce(out, marker, buf)
            return False
        if end < 0:
            end = len(buf)
        markup, self._buf = buf[:end], buf[end:]
        self._state = _S_TEXT
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
                out.append((TOOL_ARGS, index, arguments))
        self._sep = True
        return True

    def _start(self, out: list[Any], name: str) -> int:
        """Push the start of a recovered call; its index."""
        index = self._next_index
        self._next_index += 1
        self.recovered += 1
        call_id = f"{self._ids}{index}" if self._ids else ""
        out.append((TOOL_START, index, call_id, name))
        return index

    def _announce(self, out: list[Any], marker: str, buf: str) -> None:
        """A call in tags whose name is known yet: its start goes out before its
        arguments have arrived."""
        if marker == _TOOL_CALL:
            body = buf[len(_TOOL_CALL) :].lstrip(_WS)
        elif marker == _FUNCTION:
            body = buf
        else:
            return
        if body.startswith(_FUNCTION):
            name, sep, _ = body[len(_FUNCTION) :].partition(">")
            name = name.strip(_WS)
            if not sep:
                return
        else:
            found = _HEAD_NAME.match(body)
            if found is None:
                return
            name = _loads(f'"{found.group(1)}"')
        if self._known(name):
            self._start(out, name)
            self._started = name

    def _mistral_end(self, buf: str) -> int:
        i = len(_MISTRAL)
        while i < len(buf) and buf[i] in _WS:
            i += 1
        if i >= len(buf):
            return -1
        if buf[i] == "[":
            return _json_end(buf, i)
        at = buf.find(_ARGS, i)
        if at < 0:
            return -1
        j = at + len(_ARGS)
        while j < len(buf) and buf[j] in _WS:
            j += 1
        if j >= len(buf):
            return -1
        if buf[j] != "{":
            return j
        return _json_end(buf, j)

    # -- what a call's markup holds -----------------------------------------------

    def _known(self, name: Any) -> bool:
        if type(name) is not str or not name:
            return False
        return self._mode != "auto" or name in self._tools

    def _calls(self, marker: str, markup: str) -> list[tuple[str, str]] | None:
        """The (name, arguments) of the calls ``markup`` holds; None: not a call."""
        if marker == _TOOL_CALL:
            body = markup[len(_TOOL_CALL) :]
            if body.endswith(_TOOL_CALL_END):
                body = body[: -len(_TOOL_CALL_END)]
            body = body.strip(_WS)
            if body.startswith(_FUNCTION):
                return self._xml(body)
            return self._json_call(body, ("arguments", "parameters"))
        if marker == _FUNCTION:
            return self._xml(markup)
        if marker in (_PYTHON_TAG, _BRACE):
            start = len(_PYTHON_TAG) if marker == _PYTHON_TAG else 0
            return self._json_call(
                markup[start:].strip(_WS), ("parameters", "arguments")
            )
        body = markup[len(_MISTRAL) :].strip(_WS)
        if body.startswith("["):
            items = _loads(body)
            if type(items) is not list or not items:
                return None
            calls: list[tuple[str, str]] = []
            for item in items:
                if type(item) is not dict or not self._known(item.get("name")):
                    return None
                calls.append((item["name"], _arguments(item.get("arguments", {}))))
            return calls
        name, sep, args = body.partition(_ARGS)
        name = name.strip(_WS)
        if not sep or not self._known(name):
            return None
        args = args.strip(_WS)
        value = _loads(args)
        return [(name, args if value is _INVALID else _arguments(value))]

    def _json_call(
        self, body: str, keys: tuple[str, str]
    ) -> list[tuple[str, str]] | None:
        obj = _loads(body)
        if type(obj) is dict:
            name: Any = obj.get("name")  # a str once _known says so
            if not self._known(name):
                return None
            for key in keys:
                if key in obj:
                    return [(name, _arguments(obj[key]))]
            if keys[0] == "parameters":  # Llama: a name alone is not a call
                return None
            return [(name, "{}")]
        if obj is not _INVALID:
            return None
        # not JSON: a call with a name keeps its raw arguments (an error result)
        found = _NAME_RE.search(body)
        if found is None or keys[0] == "parameters":
            return None
        name = _loads(f'"{found.group(1)}"')
        if not self._known(name):
            return None
        args = _ARGS_RE.search(body, found.end())
        raw = body[args.end() :] if args else ""
        raw = raw.rstrip(_WS)
        if raw.endswith("}") and raw.count("{") < raw.count("}"):
            raw = raw[:-1].rstrip(_WS)
        return [(name, raw or "{")]

    def _xml(self, body: str) -> list[tuple[str, str]] | None:
        head = body[len(_FUNCTION) :]
        name, sep, rest = head.partition(">")
        name = name.strip(_WS)
        if not sep or not self._known(name):
            return None
        at = rest.find(_FUNCTION_END)
        if at >= 0:
            rest = rest[:at]
        types = self._tools.get(name, {})
        args: dict[str, Any] = {}
        for param, raw in _PARAM_RE.findall(rest):
            value = raw[1:] if raw.startswith("\n") else raw
            value = value[:-1] if value.endswith("\n") else value
            args[param.strip(_WS)] = _typed(value, types.get(param.strip(_WS)))
        return [(name, orjson.dumps(args).decode())]

    # -- the end of the stream ----------------------------------------------------

    def _end(self, out: list[Any]) -> None:
        self._ended = True
        self._run(out, True)
        if self._buf:  # a false start at the very end
            self._text(out, self._buf)
            self._buf = ""
        if self.recovered and self._finish == "stop":  # no finish: cut off, not done
            out.append((FINISH, "tool_calls"))
        if not self._usage:
            # the output is estimated from the finished message (ResponseAssembler)
            prompt = self._prompt() if callable(self._prompt) else self._prompt
            out.append((USAGE, prompt, 0, 0, 0, 0, True))


def _typed(value: str, kind: str | None) -> Any:
    """A Qwen3-Coder parameter's value: a string for a string parameter, else its JSON
    value when it is one."""
    if kind == "string":
        return value
    parsed = _loads(value.strip(_WS))
    if parsed is _INVALID:
        return value
    return parsed
