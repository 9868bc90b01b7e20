"""Schema ``pattern``: linear time whoever writes the pattern and the text, ECMA-262
meaning, and patterns RE2 cannot run skipped out loud."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from navi_core import Agent, AnyEvent, Scripted, Stream, Text, Tool, ToolUse
from navi_core.tools._fast_validation import compile_schema
from navi_core.tools._validation import errors

EVIL_PATTERN = "^(a+)+$"
EVIL_TEXT = "a" * 27 + "!"  # seconds of backtracking for a backtracking engine

LOGGER = "navi_core.tools._patterns"


def schema_with(pattern: str) -> dict[str, Any]:
    """An object schema as an MCP server sends it, one patterned string property."""
    return {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": pattern}},
        "required": ["name"],
    }


def longest_pause_while(
    work: Callable[[], object], seconds: float
) -> tuple[int, float]:
    """Repeat ``work`` for ``seconds`` while another thread ticks every millisecond:
    (times ``work`` ran, the longest gap between two ticks)."""
    stamps: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            stamps.append(time.monotonic())
            time.sleep(0.001)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    runs = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            work()
            runs += 1
    finally:
        stop.set()
        ticker.join()
    stamps.append(time.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return runs, max(gaps)


def test_a_catastrophic_pattern_is_checked_at_once_and_other_threads_keep_running() -> (
    None
):
    schema = schema_with(EVIL_PATTERN)
    value = {"name": EVIL_TEXT}
    started = time.monotonic()
    problems = errors(schema, value)
    assert time.monotonic() - started < 1.0
    assert len(problems) == 1 and problems[0].startswith(
        "`name`: expected text matching '^(a+)+$'"
    )

    runs, pause = longest_pause_while(lambda: errors(schema, value), 0.5)
    assert runs >= 50
    assert pause < 1.0, f"another thread stood still for {pause:.2f} s"

    check = compile_schema(schema)
    assert check is not None
    runs, pause = longest_pause_while(lambda: check(value), 0.5)
    assert runs >= 50 and pause < 1.0
    assert check(value) is False and check({"name": "aaaa"}) is True

    long_text = {"name": "a" * 2_000_000 + "!"}  # linear: milliseconds, GIL released
    runs, pause = longest_pause_while(lambda: errors(schema, long_text), 0.5)
    assert runs >= 2 and pause < 1.0
    # text from loose JSON may hold a lone surrogate: checked, not raised
    assert errors(schema_with("^a"), {"name": "a\ud800"}) == []
    assert len(errors(schema_with("^a"), {"name": "\ud800a"})) == 1


def drain(stream: Stream) -> list[AnyEvent]:
    out: list[AnyEvent] = []
    while (ev := stream.next()) is not None:
        out.append(ev)
    return out


def test_a_turn_with_a_catastrophic_server_schema_ends_with_the_validation_error() -> (
    None
):
    ran: list[str] = []

    def look_up(name: str) -> str:
        ran.append(name)
        return "found"

    lookup = Tool("lookup", "Look a name up.", schema_with(EVIL_PATTERN), look_up)
    use = ToolUse("c1", "lookup", orjson.dumps({"name": EVIL_TEXT}).decode())
    agent = Agent(Scripted([[use], [Text("done")]]), tools=[lookup])
    started = time.monotonic()
    drain(agent.run("go"))
    assert time.monotonic() - started < 2.0
    (result,) = agent.conversation.messages[2].tool_results
    assert result.is_error and ran == []
    assert result.text.startswith("Tool 'lookup' was not run: invalid arguments:")
    assert "`name`: expected text matching '^(a+)+$'" in result.text


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        (r"^\d+$", "123", True),
        (r"^\d+$", "\u0661\u0662", False),  # Arabic-Indic digits: \d is ASCII
        (r"^\w+$", "caf\u00e9", False),  # \w is ASCII
        (r"^\s$", "\v", True),
        (r"^\s$", "\u00a0", True),
        (r"^\s$", "\ufeff", True),
        (r"^\S$", "\ufeff", False),
        (r"^[\S]$", "x", True),
        (r"^[^\s]$", "\u2028", False),
        (r"^.$", "\r", False),  # . stops at every line terminator
        (r"^.$", "\u2029", False),
        (r"^.$", "\U0001f600", True),
        ("abc$", "abc\n", False),  # $ is the end of the text only
        ("^abc", "x\nabc", False),
        (r"^\cJ$", "\n", True),
        (r"^\x41\u0042$", "AB", True),
        (r"^\uD83D\uDE00$", "\U0001f600", True),  # a surrogate pair: one character
        (r"^\u{1F600}$", "\U0001f600", True),
        ("^[^]$", "\n", True),  # [^] is any character
        ("^[^]$", "ab", False),
        ("^a[]$", "a", False),  # [] is no character
        ("^[[:alpha:]]$", "b", False),  # no POSIX classes in ECMA: [ : a l p h then ]
        ("^[[:alpha:]]$", "a]", True),
        ("^x{,2}$", "x{,2}", True),  # not a quantifier in ECMA: literal braces
        ("^x{2}$", "xx", True),
        ("^x{2}$", "x{2}", False),
        ("^a{2,3}?$", "aaa", True),
        (r"^\p{Letter}+$", "\u00e9cole", True),
        (r"^\p{Lu}", "\u00c9t\u00e9", True),
        (r"^\p{Script=Greek}+$", "\u03b1\u03b2", True),
        (r"^\p{L}+$", "123", False),
        ("^(?<year>[0-9]{4})-", "2024-01", True),
        (r"^a\.b\/c$", "a.b/c", True),
        (r"^[\b]$", "\b", True),
    ],
)
def test_patterns_mean_what_ecma_262_says(
    pattern: str, text: str, matches: bool
) -> None:
    schema = schema_with(pattern)
    value = {"name": text}
    assert (errors(schema, value) == []) is matches
    check = compile_schema(schema)
    assert check is not None and check(value) is matches


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"^(a)\1$", "a backreference needs a backtracking engine"),
        (r"^(?=.*[0-9]).{3,}$", "lookaround needs a backtracking engine"),
        (r"^(?<!x)b", "lookaround needs a backtracking engine"),
        (r"^(?<n>a)\k<n>$", "a backreference needs a backtracking engine"),
        ("^a{1001}$", "RE2 counts to 1000 at most"),
        ("^a{99999999999}$", "RE2 counts to 1000 at most"),
        (r"^\p{L}{1,1000}$", "RE2 cannot run it (pattern too large"),
        ("^(a", "RE2 cannot run it (missing )"),  # no ECMA-262 pattern at all
        (r"^\A", "\\A is no ECMA-262 escape"),
    ],
)
def test_a_pattern_re2_cannot_run_is_not_enforced_and_logged_once(
    pattern: str,
    reason: str,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    schema = schema_with(pattern)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for text in ("ab", "aa", EVIL_TEXT):
            assert errors(schema, {"name": text}) == []
            check = compile_schema(schema)
            assert check is not None and check({"name": text}) is True
            # the other rules of the schema still hold
            assert errors(schema, {"name": 3}) == [
                "`name`: expected string, got integer"
            ]
    logged = [r for r in caplog.records if r.name == LOGGER]
    assert len(logged) == 1, [r.getMessage() for r in logged]
    assert logged[0].levelno == logging.WARNING
    assert repr(pattern) in logged[0].getMessage()
    assert f"is not checked here: {reason}" in logged[0].getMessage()
    assert capfd.readouterr().err == ""  # RE2 prints nothing of its own
