"""JSON Schema ``pattern`` checks in linear time: ECMA-262 patterns run on RE2.

A schema's ``pattern`` may come from an MCP server and the text it is checked against
from the model; a backtracking engine takes exponential time on ``^(a+)+$`` against
``"aaa…a!"`` and holds the GIL meanwhile. RE2 takes time linear in the text and
releases the GIL while it matches. ``matcher(pattern)`` translates the ECMA-262
pattern where RE2 reads it differently (``\\s`` and ``.`` take ECMA's Unicode line and
space characters, ``\\uXXXX``, ``\\cX``, ``[]``, ``[^]``, brace quantifiers, long
``\\p{...}`` names) and answers whether the pattern is found in a text.

A pattern RE2 cannot run (backreferences, lookaround, a count above 1000, a program
over RE2's memory budget) or that is not ECMA-262 at all is not enforced here:
``matcher`` returns None and the pattern is logged once, with the reason, at warning
level. Falling back to a backtracking engine would bring the exponential case back;
a server that wrote such a pattern can still check it on its side.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from .._logs import get_logger

__all__ = ["Matcher", "matcher"]

#: whether a pattern is found in a text
Matcher = Callable[[str], bool]

_log: Final = get_logger(__name__)

#: ECMA-262 WhiteSpace and LineTerminator: what ``\s`` matches there
_SPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_LINE_ENDS: Final = "\n\r\u2028\u2029"
_MAX_CODE: Final = 0x10FFFF
#: the largest count RE2 accepts in ``{n,m}``
_MAX_COUNT: Final = 1000
#: compiled patterns kept (RE2 bounds each one's memory itself)
_CACHE_SIZE: Final = 256
#: ECMA's own escapes; any other letter or digit after ``\`` is no ECMA-262 escape
_KEPT_ESCAPES: Final = frozenset("dDwWfnrtv")
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_DIGITS: Final = frozenset("0123456789")
#: Unicode general category long names (ECMA accepts both) -> RE2's short ones
_CATEGORIES: Final = {
    "Letter": "L",
    "Uppercase_Letter": "Lu",
    "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt",
    "Modifier_Letter": "Lm",
    "Other_Letter": "Lo",
    "Mark": "M",
    "Combining_Mark": "M",
    "Nonspacing_Mark": "Mn",
    "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me",
    "Number": "N",
    "Decimal_Number": "Nd",
    "digit": "Nd",
    "Letter_Number": "Nl",
    "Other_Number": "No",
    "Punctuation": "P",
    "punct": "P",
    "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe",
    "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po",
    "Symbol": "S",
    "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk",
    "Other_Symbol": "So",
    "Separator": "Z",
    "Space_Separator": "Zs",
    "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp",
    "Other": "C",
    "Control": "Cc",
    "cntrl": "Cc",
    "Format": "Cf",
    "Surrogate": "Cs",
    "Private_Use": "Co",
}
_PROPERTY_PREFIXES: Final = ("General_Category=", "gc=", "Script=", "sc=")


def _code(cp: int) -> str:
    return f"\\x{{{cp:X}}}"


def _ranges(chars: str) -> str:
    return "".join(_code(ord(c)) for c in chars)


def _complement(chars: str) -> str:
    """Class ranges for every code point not in ``chars``."""
    out: list[str] = []
    start = 0
    for cp in sorted(ord(c) for c in chars):
        if cp > start:
            out.append(f"{_code(start)}-{_code(cp - 1)}")
        start = cp + 1
    out.append(f"{_code(start)}-{_code(_MAX_CODE)}")
    return "".join(out)


_SPACE_SET: Final = _ranges(_SPACE)
_NOT_SPACE_SET: Final = _complement(_SPACE)
_ANY_BUT_LINE_END: Final = f"[^{_ranges(_LINE_ENDS)}]"
_NOTHING: Final = f"[^\\x{{0}}-{_code(_MAX_CODE)}]"
_ANYTHING: Final = f"[\\x{{0}}-{_code(_MAX_CODE)}]"


class _Untranslatable(Exception):
    """The pattern is not ECMA-262, or uses what RE2 cannot run."""


class _Translation:
    """One left-to-right pass over a pattern, inside or outside a ``[...]`` class."""

    __slots__ = ("i", "out", "src")

    def __init__(self, src: str) -> None:
        self.src = src
        self.i = 0
        self.out: list[str] = []

    def peek(self, ahead: int = 0) -> str:
        at = self.i + ahead
        return self.src[at] if at < len(self.src) else ""

    def run(self) -> str:
        while self.i < len(self.src):
            c = self.src[self.i]
            self.i += 1
            if c == "\\":
                self.out.append(self.escape(in_class=False))
            elif c == "[":
                self.char_class()
            elif c == ".":
                self.out.append(_ANY_BUT_LINE_END)
            elif c == "(":
                self.group()
            elif c == "{":
                self.brace()
            elif c == "}":
                self.out.append("\\}")
            else:
                self.out.append(c)
        return "".join(self.out)

    def group(self) -> None:
        if self.peek() != "?":
            self.out.append("(")
            return
        nxt, after = self.peek(1), self.peek(2)
        if (nxt and nxt in "=!") or (nxt == "<" and after and after in "=!"):
            raise _Untranslatable("lookaround needs a backtracking engine")
        if nxt == "<":
            self.i += 2
            self.out.append("(?P<")
            return
        self.out.append("(")  # ``(?:`` and anything RE2 reads or rejects itself

    def brace(self) -> None:
        """``{n}``, ``{n,}`` or ``{n,m}`` is a quantifier; any other ``{`` a literal."""
        end = self.src.find("}", self.i)
        body = self.src[self.i : end] if end >= 0 else ""
        low, _, high = body.partition(",")
        if end < 0 or not low or not set(low + high) <= _DIGITS:
            self.out.append("\\{")
            return
        if int(low) > _MAX_COUNT or (high and int(high) > _MAX_COUNT):
            raise _Untranslatable(f"RE2 counts to {_MAX_COUNT} at most")
        self.out.append("{" + body + "}")
        self.i = end + 1

    def char_class(self) -> None:
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        if self.peek() == "]":  # ECMA ``[]`` matches nothing, ``[^]`` anything
            self.i += 1
            self.out.append(_ANYTHING if negated else _NOTHING)
            return
        self.out.append("[^" if negated else "[")
        while self.i < len(self.src):
            c = self.src[self.i]
            self.i += 1
            if c == "]":
                self.out.append("]")
                return
            if c == "\\":
                self.out.append(self.escape(in_class=True))
            elif c == "[":
                self.out.append("\\[")  # RE2 would read ``[:alpha:]`` as a class
            else:
                self.out.append(c)
        raise _Untranslatable("a [ class is not closed")

    def escape(self, *, in_class: bool) -> str:
        c = self.peek()
        if not c:
            raise _Untranslatable("it ends with a lone backslash")
        self.i += 1
        if c in _KEPT_ESCAPES:
            return "\\" + c
        if c == "s":
            return _SPACE_SET if in_class else f"[{_SPACE_SET}]"
        if c == "S":
            return _NOT_SPACE_SET if in_class else f"[{_NOT_SPACE_SET}]"
        if c == "b":
            return "\\x{8}" if in_class else "\\b"
        if c == "B" and not in_class:
            return "\\B"
        if c == "0" and self.peek() not in _DIGITS:
            return "\\x{0}"
        if c == "c" and self.peek().isascii() and self.peek().isalpha():
            self.i += 1
            return _code(ord(self.src[self.i - 1]) % 32)
        if c == "x":
            return _code(self.hex_digits(2))
        if c == "u":
            return _code(self.unicode_escape())
        if c in "pP":
            return self.property(c)
        if c in "123456789k":
            raise _Untranslatable("a backreference needs a backtracking engine")
        if c.isalnum() or c == "_":
            raise _Untranslatable(f"\\{c} is no ECMA-262 escape")
        return _code(ord(c))  # an identity escape: the character itself

    def hex_digits(self, n: int) -> int:
        digits = self.src[self.i : self.i + n]
        if len(digits) != n or not set(digits) <= _HEX:
            raise _Untranslatable("a \\x or \\u escape is malformed")
        self.i += n
        return int(digits, 16)

    def unicode_escape(self) -> int:
        if self.peek() == "{":
            end = self.src.find("}", self.i)
            digits = self.src[self.i + 1 : end] if end > 0 else ""
            if not digits or not set(digits) <= _HEX or int(digits, 16) > _MAX_CODE:
                raise _Untranslatable("a \\u{...} escape is malformed")
            self.i = end + 1
            cp = int(digits, 16)
        else:
            cp = self.hex_digits(4)
            if 0xD800 <= cp < 0xDC00 and self.src.startswith("\\u", self.i):
                save = self.i
                self.i += 2
                low = self.hex_digits(4)
                if 0xDC00 <= low < 0xE000:  # a pair: one astral code point
                    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                self.i = save
        if 0xD800 <= cp < 0xE000:
            raise _Untranslatable("a lone surrogate escape")  # no UTF-8 text holds one
        return cp

    def property(self, kind: str) -> str:
        end = self.src.find("}", self.i)
        if self.peek() != "{" or end < 0:
            raise _Untranslatable("a \\p{...} escape is malformed")
        name = self.src[self.i + 1 : end]
        self.i = end + 1
        for prefix in _PROPERTY_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        name = _CATEGORIES.get(name, name)
        if not name.replace("_", "").isalnum():
            raise _Untranslatable("a \\p{...} escape is malformed")
        return f"\\{kind}{{{name}}}"


class _Compiled:
    """Compiled patterns by source text; the unenforced ones are logged once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.found: dict[str, Matcher | None] = {}
        #: hashes of the patterns logged (a collision only drops a log line)
        self.logged: set[int] = set()

    def get(self, pattern: str) -> Matcher | None:
        try:
            return self.found[pattern]
        except KeyError:
            pass
        result, reason = _compile(pattern)
        with self.lock:
            if len(self.found) >= _CACHE_SIZE:
                self.found.pop(next(iter(self.found)))
            self.found[pattern] = result
            first = result is None and hash(pattern) not in self.logged
            if first:
                if len(self.logged) >= 64 * _CACHE_SIZE:
                    self.logged.clear()
                self.logged.add(hash(pattern))
        if first:
            _log.warning(
                "schema pattern %r is not checked here: %s", pattern[:200], reason
            )
        return result


def _compile(pattern: str) -> tuple[Matcher | None, str]:
    """The pattern's matcher, or None and why there is none."""
    try:
        translated = _Translation(pattern).run()
    except _Untranslatable as exc:
        return None, str(exc)
    # imported at the first pattern, not with navi_core; google-re2 ships no types
    import re2  # type: ignore[import-untyped]

    options = re2.Options()
    options.log_errors = False  # RE2 would print each refusal to stderr
    try:
        search = re2.compile(translated, options).search
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        if isinstance(why, bytes):
            why = why.decode("utf-8", "replace")
        return None, f"RE2 cannot run it ({why})"
    except (UnicodeError, TypeError) as exc:
        return None, f"RE2 cannot read it ({exc})"

    def found(text: str) -> bool:
        # bytes spare re2 the character offsets; surrogates from loose JSON stay
        return search(text.encode("utf-8", "surrogatepass")) is not None

    return found, ""


_COMPILED: Final = _Compiled()


def matcher(pattern: str) -> Matcher | None:
    """Whether ``pattern`` (ECMA-262) is found in a text, in time linear in the text;
    None when it cannot be checked here (logged once per pattern, at warning level)."""
    return _COMPILED.get(pattern)
