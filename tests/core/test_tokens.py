"""estimate_tokens and the message estimates: rules, bounds, and error against o200k."""

from __future__ import annotations

import gettext
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from navi_core import tokens
from navi_core.conversation import (
    CompactionSummary,
    MediaPart,
    Message,
    RedactedThinking,
    System,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
)

DATA = Path(__file__).parent.parent / "data"
O200K = "fb374d419588a4632f3f557e76b4b70aebbca790"  # sha1 of the download URL
CACHES = (
    DATA / "tiktoken-cache",
    DATA.parent.parent.parent / "shared" / "tiktoken-cache",
)
LOCALE = Path("/usr/share/locale")
FIXTURE_SAFE = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40) | st.lists(
    st.sampled_from(
        ["word", " Word", "ALL", "x", "(", " (", "--", "\n", "  ", "\t", "123", "é",
         " Привет", "中文", "かな", "한국", "😀", "\u200d", "\ufe0f", "\u0301", ",", ".",
         " ", "    ", "\t\t", " \t", "\r\n", "\n\n", "    \n", "  \n", "\t\n",
         "    \t  \n", "\u00a0", " " * 90, "\t" * 24, "\n" * 20]
    ),
    max_size=12,
).map("".join)  # fmt: skip
#: whitespace-heavy texts and their o200k_base token counts, measured with tiktoken
#: 0.14 (``test_the_whitespace_counts_are_o200k_counts`` checks them where it can)
WHITESPACE = {
    "blank lines of 4 spaces, a tab, 2 spaces": ("    \t  \n" * 800, 1600),
    "blank lines of 4 spaces": ("x = 1\n" + "    \n" * 200 + "y = 2", 59),
    "blank lines of 8 spaces": ("x = 1\n" + "        \n" * 200 + "y = 2", 108),
    "blank lines of 3 spaces": ("x\n" + "   \n" * 300 + "y", 302),
    "lines of 2 trailing spaces": ("x\n" + "  \n" * 300 + "y", 153),
    "blank lines of a tab": ("x\n" + "\t\n" * 300 + "y", 78),
    "blank lines of 0-12 spaces": (
        "x\n" + "".join(" " * (i % 13) + "\n" for i in range(300)) + "y",
        233,
    ),
    "trailing spaces, indented blank line": (
        "".join(f"line {i}   \n    \n" for i in range(300)),
        1200,
    ),
    "python, trailing whitespace": (
        "def f(x):\n    y = x + 1    \n    \n    return y\n\n\n" * 100,
        1600,
    ),
    "go, tab indents": (
        "func main() {\n\tx := 1\n\t\n\tfor i := range items {\n\t\tif i > 0 {\n"
        "\t\t\tfmt.Println(i)\n\t\t}\n\t\t\n\t}\n}\n\n" * 50,
        1700,
    ),
    "python, CRLF": (
        "def f(x):\r\n    y = x + 1\r\n\r\n    return y\r\n\r\n\r\n" * 100,
        1600,
    ),
    "CRLF blank lines": ("\r\n" * 400, 100),
    "runs of 100 newlines": (("word" + "\n" * 100) * 10, 80),
    "1000 newlines": ("\n" * 1000, 63),
    "1000 spaces": ("a" + " " * 1000 + "b", 11),
    "runs of 200 spaces": (("a" + " " * 200) * 50 + "b", 151),
    "runs of 50 tabs": (("a" + "\t" * 50) * 40 + "b", 161),
    "spaces and tabs alternating": (("a" + "  \t  \t " * 5) * 60 + "b", 661),
    "blanks, tabs, newlines mixed": (
        "a" + " \t\n \t \n\t\t  \n   \t\n" * 100 + "b",
        602,
    ),
}
WHITESPACE_TOLERANCE = 0.20


# --- rules -----------------------------------------------------------------------


def test_empty_text_costs_nothing(core: ModuleType) -> None:
    assert core.estimate_tokens("") == 0


@pytest.mark.parametrize("bad", [b"text", None, 3, ["a"]])
def test_non_str_is_a_type_error(core: ModuleType, bad: object) -> None:
    with pytest.raises(TypeError, match=f"must be str, not {type(bad).__name__}"):
        core.estimate_tokens(bad)


def test_str_subclass_is_accepted(core: ModuleType) -> None:
    class Name(str):
        pass

    assert core.estimate_tokens(Name("hello world")) == core.estimate_tokens(
        "hello world"
    )


@pytest.mark.parametrize(
    "char",
    ["a", "Z", "7", " ", "\n", "\t", "%", "é", "Я", "Ω", "ع", "क", "ก", "中", "あ", "한",
     "\u1200", "\u0301", "\u2014", "\u3002", "\u2603", "😀", "\U00020000", "\ud800", "\U0010ffff"],
)  # fmt: skip
def test_any_character_costs_at_least_one_token(core: ModuleType, char: str) -> None:
    assert core.estimate_tokens(char) >= 1


@pytest.mark.parametrize("n", range(1, 13))
def test_digits_cost_one_token_per_group_of_three(core: ModuleType, n: int) -> None:
    assert core.estimate_tokens("9" * n) == (n + 2) // 3


def test_the_estimate_is_rounded_up(core: ModuleType) -> None:
    """A word costs about a token; the total rounds up, so one word alone can cost 2."""
    assert core.estimate_tokens(" the") in (1, 2)
    assert core.estimate_tokens(" the" * 1000) in range(900, 1101)


def test_a_short_whitespace_run_is_one_token(core: ModuleType) -> None:
    for run in (" " * 8, "\t\t", "\n\n\n", " \n\n", "    \n", "\r\n", "\n    \n"):
        assert core.estimate_tokens(run) == 1, repr(run)
    assert core.estimate_tokens(" " * 200) > 1
    assert core.estimate_tokens("\t" * 40) > 1


def test_blanks_between_newlines_are_counted(core: ModuleType) -> None:
    """Each line of blanks costs tokens, not just the newlines around it."""
    est = core.estimate_tokens
    assert est("    \t  \n" * 800) > est("\n" * 800) * 10
    assert est("\n" + "   \n" * 100) > 50
    assert est("x\n" + "    \n" * 100 + "y") < est("x\n" + "   \n" * 100 + "y")


@pytest.mark.parametrize("name", WHITESPACE)
def test_whitespace_shapes_are_within_a_fifth_of_o200k(
    core: ModuleType, name: str
) -> None:
    text, real = WHITESPACE[name]
    estimate = core.estimate_tokens(text)
    assert abs(estimate - real) <= WHITESPACE_TOLERANCE * real, (name, real, estimate)


def test_a_repeated_mark_is_cheap_and_a_mixed_run_is_not(core: ModuleType) -> None:
    assert core.estimate_tokens("-" * 16) == 1
    assert core.estimate_tokens("-" * 40) > 1
    assert core.estimate_tokens("})];,") > core.estimate_tokens("-----")


def test_long_words_cost_more_than_short_ones(core: ModuleType) -> None:
    assert core.estimate_tokens(" " + "x" * 40) > core.estimate_tokens(" " + "x" * 10)


def test_scripts_without_spaces_cost_per_character(core: ModuleType) -> None:
    assert core.estimate_tokens("中" * 100) > 50
    assert core.estimate_tokens("😀" * 10) >= 10


@FIXTURE_SAFE
@given(a=TEXT, b=TEXT)
def test_concatenation_costs_at_most_one_more_than_its_parts(
    core: ModuleType, a: str, b: str
) -> None:
    """Documented bound: estimate(a + b) <= estimate(a) + estimate(b) + 1."""
    est = core.estimate_tokens
    assert est(a + b) <= est(a) + est(b) + 1


@FIXTURE_SAFE
@given(a=TEXT, b=TEXT)
def test_appending_never_lowers_the_estimate_by_more_than_one(
    core: ModuleType, a: str, b: str
) -> None:
    assert core.estimate_tokens(a + b) >= core.estimate_tokens(a) - 1


def test_repeating_a_text_scales_the_estimate(core: ModuleType) -> None:
    text = (DATA / "tokens" / "prose.txt").read_text()
    one = core.estimate_tokens(text)
    assert 10 * one - 10 <= core.estimate_tokens(text * 10) <= 10 * one + 9


# --- error against o200k_base -------------------------------------------------------


@pytest.fixture(scope="module")
def o200k() -> Iterator[Callable[[str], int]]:
    """o200k_base token counts from the committed (or the shared) offline cache."""
    tiktoken = pytest.importorskip("tiktoken")
    cache = next((c for c in CACHES if (c / O200K).is_file()), None)
    if cache is None:
        pytest.skip("no offline o200k_base file (tests/data/tiktoken-cache, ../shared)")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", os.fspath(cache))
        encoding = tiktoken.get_encoding("o200k_base")
    yield lambda text: len(encoding.encode(text, disallowed_special=()))


def catalog_sample(languages: tuple[str, ...], size: int = 6000) -> str:
    """Translated messages from installed gettext catalogs, about ``size`` characters."""
    texts: list[str] = []
    for lang in languages:
        budget = size // len(languages)
        for path in sorted((LOCALE / lang / "LC_MESSAGES").glob("*.mo")):
            with path.open("rb") as fp:
                catalog = gettext.GNUTranslations(fp)._catalog  # type: ignore[attr-defined]
            for key, value in sorted(catalog.items(), key=lambda kv: str(kv[0])):
                if (
                    budget > 0
                    and key
                    and isinstance(value, str)
                    and not value.isascii()
                ):
                    texts.append(value)
                    budget -= len(value)
    return "\n\n".join(texts)


@pytest.mark.parametrize("name", ["prose", "code", "json"])
def test_error_on_english_code_and_json_is_within_ten_percent(
    core: ModuleType, o200k: Callable[[str], int], name: str
) -> None:
    text = (DATA / "tokens" / f"{name}.txt").read_text()
    real, estimate = o200k(text), core.estimate_tokens(text)
    assert abs(estimate - real) <= 0.10 * real, (name, real, estimate)


@pytest.mark.parametrize("name", WHITESPACE)
def test_the_whitespace_counts_are_o200k_counts(
    o200k: Callable[[str], int], name: str
) -> None:
    text, recorded = WHITESPACE[name]
    assert o200k(text) == recorded, name


@pytest.mark.parametrize(
    "languages",
    [("ru", "uk"), ("zh_CN", "zh_TW", "ja"), ("ko",), ("el", "ar", "hi")],
    ids=["cyrillic", "cjk", "korean", "greek-arabic-hindi"],
)
def test_error_on_non_latin_text_is_within_a_quarter(
    core: ModuleType, o200k: Callable[[str], int], languages: tuple[str, ...]
) -> None:
    text = catalog_sample(languages)
    if len(text) < 2000:
        pytest.skip(f"no installed gettext catalogs for {', '.join(languages)}")
    real, estimate = o200k(text), core.estimate_tokens(text)
    assert abs(estimate - real) <= 0.25 * real, (languages, real, estimate)


# --- messages ----------------------------------------------------------------------


def test_a_message_is_its_blocks_plus_the_overhead() -> None:
    est = tokens.estimate_tokens
    text = (DATA / "tokens" / "prose.txt").read_text()
    msg = Message("assistant", (Thinking("let me see", "sig"), Text(text)))
    assert tokens.estimate_message_tokens(msg) == (
        tokens.MESSAGE_OVERHEAD + est("let me see") + est(text)
    )
    assert (
        tokens.estimate_message_tokens(Message("user", ())) == tokens.MESSAGE_OVERHEAD
    )


def test_tool_calls_and_results_count_their_text_and_framing() -> None:
    est = tokens.estimate_tokens
    call = ToolUse("call_1", "read_file", '{"path": "README.md"}')
    result = ToolResult("call_1", (TextPart("# navi\n"), TextPart("more")))
    assert tokens.estimate_block_tokens(call) == tokens.BLOCK_OVERHEAD + sum(
        map(est, ("call_1", "read_file", '{"path": "README.md"}'))
    )
    assert tokens.estimate_block_tokens(result) == tokens.BLOCK_OVERHEAD + sum(
        map(est, ("call_1", "# navi\n", "more"))
    )


def test_an_image_costs_a_fixed_amount_whatever_its_size() -> None:
    small = ToolResult("c", (MediaPart("image/png", "iVBORw0KGgo="),))
    large = ToolResult("c", (MediaPart("image/png", "A" * 400_000),))
    size = tokens.estimate_block_tokens(small)
    assert size == tokens.estimate_block_tokens(large)
    assert (
        size
        == tokens.BLOCK_OVERHEAD + tokens.estimate_tokens("c") + tokens.IMAGE_TOKENS
    )


def test_other_blocks_count_their_text() -> None:
    for block in (
        System("be brief"),
        CompactionSummary("so far"),
        RedactedThinking("Zm9v"),
    ):
        text = block.data if isinstance(block, RedactedThinking) else block.text
        assert tokens.estimate_block_tokens(block) == tokens.estimate_tokens(text)


def test_several_messages_add_up() -> None:
    msgs = [Message("user", (Text("hi"),)), Message("assistant", (Text("hello"),))]
    assert tokens.estimate_messages_tokens(msgs) == sum(
        map(tokens.estimate_message_tokens, msgs)
    )


class NotAPart:
    text = "x"


def test_an_unknown_block_or_part_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not a conversation block: str"):
        tokens.estimate_message_tokens(Message("user", ("raw text",)))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a tool result part: NotAPart"):
        tokens.estimate_block_tokens(ToolResult("c", (NotAPart(),)))  # type: ignore[arg-type]


LEGACY_STR = """
import ctypes, sys, warnings
import {module} as core
warnings.simplefilter("ignore", DeprecationWarning)
api = ctypes.pythonapi
api.PyUnicode_FromUnicode.restype = ctypes.py_object
api.PyUnicode_FromUnicode.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
api.PyUnicode_AsUnicode.restype = ctypes.c_void_p
api.PyUnicode_AsUnicode.argtypes = [ctypes.py_object]
text = sys.argv[1]
units = text.encode("utf-32-le" if ctypes.sizeof(ctypes.c_wchar) == 4 else "utf-16-le")
legacy = api.PyUnicode_FromUnicode(None, len(units) // ctypes.sizeof(ctypes.c_wchar))
ctypes.memmove(api.PyUnicode_AsUnicode(legacy), units, len(units))
print(core.estimate_tokens(legacy))
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="no legacy str after 3.11")
@pytest.mark.parametrize("text", ["hello world", "héllo wörld", "東京 数据 😀 ok"])
def test_a_legacy_str_counts_like_any_other(core: ModuleType, text: str) -> None:
    """Before 3.12 a str built by the wchar_t API is made ready on first use."""
    result = subprocess.run(
        [sys.executable, "-c", LEGACY_STR.format(module=core.__name__), text],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout) == core.estimate_tokens(text) > 0
