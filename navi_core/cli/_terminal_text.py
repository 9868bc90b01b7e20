"""Text the CLI did not write, made safe to show on a terminal.

What a model, a tool, a server or a stored session says reaches the terminal through
``terminal_safe``. Without it an answer could write the clipboard (OSC 52), set the
window title (OSC 0), hide a link's target (OSC 8), clear the screen and forge what
it shows (CSI), or reverse what follows it (bidi overrides).

Every control character but newline and tab is replaced, one character at a time, by
a visible mark: C0 by its control picture (ESC is ``␛``), DEL by ``␡``, C1 by ``␛``
and its 7-bit spelling (8-bit CSI is ``␛[``), a bidi embedding, override or isolate
by its code point (``<U+202E>``). Marks rather than removal, so a reader sees that something was there
and what. Without its ESC (or C1) introducer what follows is inert text, so the rule
needs no parser and no state: it holds for text that comes in deltas, whatever the
cuts. CRLF is a newline; a lone CR, which would let a line be overwritten, shows as
``␍``, but one that ends the text is dropped, as its LF may open the next delta.

``cells`` and ``wrap`` measure and fold such text as a terminal shows it: wide
characters (CJK, most emoji) take two cells, combining marks none.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Final

__all__ = ["cells", "tail_rows", "terminal_safe", "terminal_safe_line", "wrap"]

_BIDI: Final = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
_MARKS: Final[dict[int, str]] = {
    **{c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)},
    0x7F: "\u2421",
    **{c: "\u241b" + chr(c - 0x40) for c in range(0x80, 0xA0)},
    **{c: f"<U+{c:04X}>" for c in _BIDI},
}


def terminal_safe(text: str) -> str:
    """``text`` with every control but newline and tab shown as a visible mark."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").removesuffix("\r")
    return text.translate(_MARKS)


_LINE_MARKS: Final = {0x0A: "\u240a", 0x09: "\u2409"}


def terminal_safe_line(text: str) -> str:
    """``terminal_safe(text)`` with newline and tab marked too (``␊``, ``␉``): for a
    name shown inside a line (a session id in a table row), which must stay one."""
    return terminal_safe(text).translate(_LINE_MARKS)


_WRAP_WHOLE: Final = 16_384


def _fallback_width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _char_width() -> Callable[[str], int]:
    try:  # prompt_toolkit measures with wcwidth: agree with it when it is there
        from wcwidth import wcwidth
    except ImportError:  # pragma: no cover - the chat extra brings it
        return _fallback_width
    return lambda ch: max(0, wcwidth(ch))


_width: Final = lru_cache(maxsize=4096)(_char_width())


def cells(text: str) -> int:
    """How many terminal cells ``text`` (one line, already ``terminal_safe``) takes."""
    if text.isascii():
        return len(text)
    return sum(_width(ch) for ch in text)


def _split_long(word: str, width: int) -> list[str]:
    """A word wider than a line, cut into pieces that fit (by cells)."""
    pieces, piece, used = [], "", 0
    for ch in word:
        w = _width(ch)
        if used + w > width and piece:
            pieces.append(piece)
            piece, used = "", 0
        piece += ch
        used += w
    return [*pieces, piece]


def wrap(line: str, width: int) -> list[str]:
    """One line folded into rows of at most ``width`` cells, at spaces.

    A row breaks before a word that would not fit, as rich wraps the committed
    text; only a word wider than a whole row is cut. The spaces at a break are
    dropped; the line's leading indent stays.
    """
    width = max(1, width)
    if cells(line) <= width:
        return [line]
    rows: list[str] = []
    row, used = "", 0
    for token in re.split(r"( +)", line.replace("\t", "    ")):
        if not token:
            continue
        w = cells(token)
        if token.startswith(" "):
            if row or not rows:  # an indent at the start of the line is kept
                row, used = row + token, used + w
            continue
        if used + w > width and row.strip():
            rows.append(row.rstrip(" "))
            row, used = "", 0
        elif used + w > width:  # only spaces so far: they cannot fit with the word
            row, used = "", 0
        if w > width:
            *full, row = _split_long(token, width)
            rows.extend(full)
            used = cells(row)
        else:
            row, used = row + token, used + w
    rows.append(row.rstrip(" "))
    return rows


def tail_rows(text: str, width: int, rows: int) -> list[str]:
    """The last ``rows`` rows of ``text`` wrapped to ``width``: only as many of its
    last lines are wrapped as it takes, so a long answer costs no more each redraw."""
    out: list[str] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # a paragraph is wrapped whole (its rows stay put as it grows); only one longer
    # than this, far more than ``rows`` rows need, is wrapped from a word near its end
    keep = max(_WRAP_WHOLE, 2 * (rows + 1) * max(1, width))
    for line in reversed(lines):
        if len(line) > keep:
            end = line[-keep:]
            space = end.find(" ")
            line = end[space + 1 :] if 0 <= space < len(end) - 1 else end
        out[:0] = wrap(line, width)
        if len(out) >= rows:
            break
    return out[-rows:] if rows > 0 else []
