"""``terminal_safe``: the one rule by which the CLI shows text it did not write."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from terminal_check import HOSTILE, leaks

from navi_core.cli._terminal_text import terminal_safe


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("A\x1b]52;c;SGVsbG8=\x07B", "A␛]52;c;SGVsbG8=␇B"),  # clipboard write
        ("\x1b]0;title\x07", "␛]0;title␇"),  # window title
        ("\x1b[2J\x1b[H", "␛[2J␛[H"),  # clear the screen, cursor home
        ("\x9b2J", "␛[2J"),  # 8-bit CSI, shown as its 7-bit spelling
        ("\x9d0;t\x9c", "␛]0;t␛\\"),  # 8-bit OSC and ST
        ("\x00\x08\x7f", "␀␈␡"),
        ("line\rforged", "line␍forged"),  # a lone CR would overwrite the line
        ("a\r\nb", "a\nb"),  # CRLF is a newline
        ("half a CRLF\r", "half a CRLF"),  # its LF may come in the next delta
        ("\u202egnp.exe", "<U+202E>gnp.exe"),  # right-to-left override
        ("\u2066x\u2069", "<U+2066>x<U+2069>"),
        ("tabs\tand\nnewlines", "tabs\tand\nnewlines"),
        ("héllo wörld ✓ 日本 🙂", "héllo wörld ✓ 日本 🙂"),
    ],
)
def test_controls_are_shown_as_visible_marks(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown


def test_the_hostile_sample_is_inert() -> None:
    out = terminal_safe(HOSTILE)
    assert leaks(out) == []
    assert "\x1b" not in out and "\r" not in out


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_any_text_comes_out_inert_and_stays_so(text: str) -> None:
    once = terminal_safe(text)
    assert leaks(once) == []
    assert "\r" not in once
    assert terminal_safe(once) == once


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cc", "Cf", "Cs"))))
def test_text_without_controls_is_left_alone(text: str) -> None:
    assert terminal_safe(text) == text
