"""``terminal_safe``: the one rule by which the CLI shows text it did not write."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from terminal_check import HOSTILE, leaks

from navi_core.cli._terminal_text import cells, tail_rows, terminal_safe, wrap


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


def test_cells_count_wide_characters_twice_and_combining_marks_not_at_all() -> None:
    assert cells("abc") == 3
    assert cells("日本") == 4
    assert cells("😀") == 2
    assert cells("e\u0301") == 1  # e and a combining acute accent


def test_wrap_breaks_at_spaces_and_keeps_rows_within_the_width() -> None:
    assert wrap("hello world this is a test of wrapping", 10) == [
        "hello",
        "world this",
        "is a test",
        "of",
        "wrapping",
    ]
    assert wrap("  indented words here", 12) == ["  indented", "words here"]
    assert wrap("日本語の テキスト 😀😀😀", 8) == ["日本語の", "テキスト", "😀😀😀"]
    assert wrap("a" * 25, 10) == ["a" * 10, "a" * 10, "a" * 5]  # only a too-long word
    assert wrap("short", 10) == ["short"]


@given(
    words=st.lists(
        st.text(alphabet="abcdefghij日本😀é", min_size=1, max_size=12), max_size=60
    ),
    width=st.integers(24, 100),  # a word takes at most 24 cells
)
@settings(max_examples=200, deadline=None)
def test_wrap_never_cuts_a_word_that_fits_a_row(words: list[str], width: int) -> None:
    rows = wrap(" ".join(words), width)
    assert all(cells(r) <= width for r in rows)
    assert [w for r in rows for w in r.split()] == words


def test_the_tail_starts_at_a_row_start_and_bounds_its_work() -> None:
    text = "".join(f"line {i} has some words\n" for i in range(100))
    assert tail_rows(text, 12, 3) == ["some words", "line 99 has", "some words"]
    huge = "word " * 200_000  # one line of a megabyte
    rows = tail_rows(huge, 60, 5)
    assert len(rows) == 5 and all(set(r.split()) == {"word"} for r in rows)
