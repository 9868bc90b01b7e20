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
"""

from __future__ import annotations

from typing import Final

__all__ = ["terminal_safe"]

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
