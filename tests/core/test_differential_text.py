"""Hypothesis: the Cython token estimate and base64 equal the pure twin, errors included."""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from hypothesis import given, settings, strategies as st

DIFF = settings(deadline=None, max_examples=500)
#: pieces that exercise every branch of the scanner when joined in any order
PIECES = (
    "word", " word", "Word", "WORD", "camelCase", "x", "'s", "(", " (", "((", "--",
    "-" * 20, "):\n", ".\n/", "\n", "\r\n", "\n\n  ", "  ", "   ", "\t", "\u00a0", "7",
    "    \n", "  \t  \n", "\t\n", " " * 100, "\t" * 30,
    "123456", "é", "naïve", " Привет", "мир", "Ωμέγα", "مرحبا", "नमस्ते", "สวัสดี", "中文",
    "ひらがな", "カタカナ", "한국어", "ሰላም", "\u0301", "\u200d", "\ufe0f", "😀", "👍🏽",
    "«", "“", "—", "\uff0c", "。", "→", "\x00", "\U00020000", "\U000e0041", "\U0010ffff",
)  # fmt: skip
MIXED = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)
#: runs of blanks, tabs and newlines (lines of blanks, repeated lines, long runs, CRLF)
#: between a few other pieces
BLANKS = (
    " ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\r", "\r\n", "\n\n",
    "\u00a0", "\x0c", "\u3000", " " * 90, "\t" * 22, "\n" * 17,
)  # fmt: skip
WHITESPACE = st.lists(
    st.sampled_from(BLANKS) | st.sampled_from(("x", " word", "(", "7", "é", "😀")),
    max_size=40,
).map("".join)
ANY_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=80)
WITH_SURROGATES = st.text(st.characters(), max_size=40)


def same_outcome(py: ModuleType, cy: ModuleType, name: str, arg: object) -> None:
    """Both twins return the same value, or raise the same type with the same message."""
    outcomes = []
    for core in (py, cy):
        try:
            outcomes.append(("ok", getattr(core, name)(arg)))
        except Exception as exc:  # the exception is the outcome
            outcomes.append((type(exc).__name__, str(exc)))
    assert outcomes[0] == outcomes[1]


@DIFF
@given(text=ANY_TEXT | MIXED)
def test_estimates_agree(both_cores: tuple[ModuleType, ModuleType], text: str) -> None:
    py, cy = both_cores
    assert py.estimate_tokens(text) == cy.estimate_tokens(text)


@DIFF
@given(text=WHITESPACE)
def test_estimates_agree_on_whitespace_runs(
    both_cores: tuple[ModuleType, ModuleType], text: str
) -> None:
    py, cy = both_cores
    assert py.estimate_tokens(text) == cy.estimate_tokens(text)


@DIFF
@given(text=WITH_SURROGATES)
def test_estimates_agree_on_lone_surrogates(
    both_cores: tuple[ModuleType, ModuleType], text: str
) -> None:
    py, cy = both_cores
    assert py.estimate_tokens(text) == cy.estimate_tokens(text)


@pytest.mark.parametrize(
    "widest", ["z", "é", "Я", "😀"], ids=["ascii", "ucs1", "ucs2", "ucs4"]
)
def test_long_texts_of_each_storage_width_agree(
    both_cores: tuple[ModuleType, ModuleType], widest: str
) -> None:
    """Past 64 Ki code points the compiled scan runs without the GIL; same result."""
    py, cy = both_cores
    rng = random.Random(widest)
    narrow = [p for p in PIECES if max(map(ord, p)) <= ord(widest)] or ["z"]
    text = "".join(rng.choice(narrow) for _ in range(30_000)) + widest
    assert len(text) > 65_536
    assert py.estimate_tokens(text) == cy.estimate_tokens(text)


@pytest.mark.parametrize("arg", [b"bytes", None, 1.5, ["a"], "text"])
def test_estimate_errors_agree(
    both_cores: tuple[ModuleType, ModuleType], arg: object
) -> None:
    same_outcome(*both_cores, "estimate_tokens", arg)


@DIFF
@given(data=st.binary(max_size=300))
def test_base64_agrees(both_cores: tuple[ModuleType, ModuleType], data: bytes) -> None:
    py, cy = both_cores
    assert py.b64encode(data) == cy.b64encode(data)
    assert py.b64encode(bytearray(data)) == cy.b64encode(memoryview(data))


@given(data=st.binary(min_size=1, max_size=300), step=st.integers(2, 5))
def test_base64_agrees_on_strided_views(
    both_cores: tuple[ModuleType, ModuleType], data: bytes, step: int
) -> None:
    py, cy = both_cores
    view = memoryview(data)[::step]
    assert py.b64encode(view) == cy.b64encode(view)


@pytest.mark.parametrize("arg", ["text", None, 3, [1], object()])
def test_base64_errors_agree(
    both_cores: tuple[ModuleType, ModuleType], arg: object
) -> None:
    same_outcome(*both_cores, "b64encode", arg)
