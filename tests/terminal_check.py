"""Hostile text for terminal tests, and the check that none of it reached the output.

``HOSTILE`` holds what a model, a tool or a server may send to take over a terminal:
OSC 52 (writes the clipboard), OSC 0 (the window title), an OSC 8 link whose text
hides its target, CSI sequences that clear the screen and move the cursor, their
8-bit forms (C1 CSI, OSC, ST), a DCS string, BEL, backspaces, a lone carriage return
that overwrites a line, and a right-to-left override that reverses what follows.
"""

from __future__ import annotations

import re

__all__ = ["HOSTILE", "OWN_SGR", "leaks", "without_own_styling"]

HOSTILE = (
    "A\x1b]52;c;SGVsbG8=\x07B"
    "\x1b]0;pwned\x07"
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
    "\x1b[2J\x1b[H"
    "\x9b31m\x9d0;t\x9c"
    "\x1bP1$r\x1b\\"
    "\x1bc"
    "\u202egnp.exe\u202c"
    "xx\x08\x08ok\x7f"
    "\x01\x02"
    "line\rforged"
)

#: SGR sequences: the only escapes the program itself writes around text
OWN_SGR = re.compile(r"\x1b\[[0-9;]*m")

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def without_own_styling(text: str) -> str:
    """``text`` without the SGR sequences the program emits around what it shows."""
    return OWN_SGR.sub("", text)


def leaks(text: str) -> list[str]:
    """Every control character in ``text`` but newline and tab: C0, DEL, C1 (8-bit
    CSI, OSC, ST...) and the bidi embeddings, overrides and isolates."""
    return sorted({repr(m.group()) for m in _CONTROLS.finditer(text)})
