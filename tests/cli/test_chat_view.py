"""What a chat turn looks like (``navi_core.cli.chat.render``): the live area, what is
committed to the scrollback, and the rule that a retried answer is not shown twice."""

from __future__ import annotations

import re

import pytest

from navi_core.cli.chat.profiles import Price
from navi_core.cli.chat.render import Painter, TurnView
from navi_core.conversation import Message, Text, Usage
from navi_core.events import (
    MessageComplete,
    ProviderRetry,
    ResponseDiscarded,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnComplete,
)


def make_view(price: Price | None = None) -> tuple[TurnView, list[str]]:
    committed: list[str] = []
    view = TurnView(
        Painter(color=False, width=lambda: 80), committed.append, price=price
    )
    view.begin()
    return view, committed


def answer(text: str) -> MessageComplete:
    return MessageComplete(Message("assistant", (Text(text),)), Usage())


def test_a_spinner_shows_until_the_first_token() -> None:
    view, committed = make_view()
    assert any(ch in view.live() for ch in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
    view.handle(TextDelta("Hel"))
    view.handle(TextDelta("lo"))
    assert view.live() == "Hello\n"
    assert committed == []


def test_a_discarded_attempt_vanishes_and_the_retry_is_committed_once() -> None:
    view, committed = make_view()
    view.handle(TextDelta("The answer is 4"))
    view.handle(ThinkingDelta("hmm"))
    view.handle(ResponseDiscarded(1, 15, 3, 0))
    view.handle(ProviderRetry(1, 4, 500, "TransportError", None, None, "reset"))
    assert "The answer is 4" not in view.live()
    view.handle(TextDelta("The answer is 42."))
    view.handle(answer("The answer is 42."))
    out = "".join(committed)
    assert out.count("The answer is") == 1
    assert "The answer is 42." in out
    assert "attempt 1 broke off after 15 chars" in out
    assert "attempt 1/4 failed (TransportError): retrying in" in out


def test_thinking_is_committed_before_the_answer_and_tool_calls_get_a_line() -> None:
    view, committed = make_view()
    view.handle(ThinkingDelta("first look at the file"))
    view.handle(TextDelta("Reading."))
    view.handle(ToolCallStart(0, "c1", "read_file"))
    view.handle(ToolCallDelta(0, '{"path": "a.txt"}'))
    assert '⚙ read_file {"path": "a.txt"}' in view.live()
    view.handle(answer("Reading."))
    view.handle(ToolStarted("c1", "read_file"))
    view.handle(ToolProgress("c1", "half done"))
    assert "⋯ read_file" in view.live() and "half done" in view.live()
    view.handle(ToolFinished("c1", "read_file", False, 0.25))
    view.handle(ToolStarted("c2", "scan"))
    view.handle(ToolFinished("c2", "scan", True, 1.5, "PermissionError: outside"))
    lines = "".join(committed).splitlines()
    assert lines == [
        "  first look at the file",
        "Reading.",
        '  ⚙ read_file {"path": "a.txt"}',
        "  ✓ read_file 250 ms",
        "  ✗ scan 1.5 s PermissionError: outside",
    ]


def test_the_status_line_counts_tokens_and_prices_them() -> None:
    view, committed = make_view(Price(input=3.0, output=15.0, cache_read=0.3))
    usage = Usage(input=1000, output=200, cache_read=10_000)
    view.handle(TurnComplete(StopReason.END_TURN, "ok", 2, 1, usage))
    (line,) = committed
    assert line.endswith("\n\n")
    # 1000 * 3 + 10000 * 0.3 + 200 * 15 = 9000 USD per million tokens
    assert line.startswith(
        "[end_turn] · 2 responses · 1 tool call · 11,000 in / 200 out tokens · "
        "cache 10,000 read / 0 written · $0.0090 · "
    )


def test_the_live_area_is_empty_once_the_turn_ended() -> None:
    view, _ = make_view()
    view.handle(TextDelta("partial"))
    view.note("  ↳ steer: also this")
    assert "also this" in view.live()
    view.end()
    assert view.live() == ""


def test_the_live_area_shows_only_the_tail_of_a_long_answer() -> None:
    committed: list[str] = []
    view = TurnView(
        Painter(color=False, width=lambda: 40), committed.append, live_rows=lambda: 3
    )
    view.begin()
    view.handle(TextDelta("".join(f"line {i}\n" for i in range(100))))
    assert view.live() == "line 97\nline 98\nline 99\n"
    view.handle(TextDelta("x" * 10_000))
    assert len(view.live()) <= 3 * 40 + 3


def test_a_todo_update_commits_the_list_with_a_mark_per_status() -> None:
    from navi_core import TodoItem, TodoUpdated

    view, committed = make_view()
    items = (
        TodoItem("read the notes", "done"),
        TodoItem("fix \x1b]52;c;x\x07 the sensor", "in_progress"),
        TodoItem("write the report"),
    )
    view.handle(TodoUpdated(items))
    text = "".join(committed)
    assert text.splitlines() == [
        "  ☰ todo",
        "    ☑ read the notes",
        "    ▸ fix ␛]52;c;x␇ the sensor",
        "    ☐ write the report",
    ]


def test_live_text_wraps_at_word_boundaries_and_its_window_starts_a_row() -> None:
    for color in (False, True):
        committed: list[str] = []
        view = TurnView(
            Painter(color=color, width=lambda: 24),
            committed.append,
            live_rows=lambda: 3,
        )
        view.begin()
        words = [f"word{i:02d}" for i in range(40)]
        view.handle(TextDelta(" ".join(words)))
        # three words to a row: the tail is the last three rows, each whole
        assert view.live().splitlines() == [
            "word33 word34 word35",
            "word36 word37 word38",
            "word39",
        ]
        # wide characters take two cells each: 8 of them fill 16 of the 24 cells
        view.handle(TextDelta("\n" + " ".join(["日本語の"] * 6)))
        rows = view.live().splitlines()
        assert rows[-3:] == [
            "日本語の 日本語の",
            "日本語の 日本語の",
            "日本語の 日本語の",
        ]


def test_a_cancelled_turn_keeps_its_partial_answer_with_a_marker() -> None:
    view, committed = make_view()
    view.handle(ThinkingDelta("looking"))
    view.handle(TextDelta("1. Wheels\n4. **Sensor"))
    view.handle(TurnComplete(StopReason.CANCELLED, "", 0, 0, Usage()))
    lines = "".join(committed).splitlines()
    assert lines[:4] == ["  looking", "1. Wheels", "4. **Sensor", "  ⏹ interrupted"]
    assert lines[4].startswith("[cancelled]")


def test_a_cancel_with_nothing_shown_still_says_so() -> None:
    view, committed = make_view()
    view.handle(TurnComplete(StopReason.CANCELLED, "", 0, 0, Usage()))
    assert "".join(committed).startswith("  ⏹ interrupted\n[cancelled]")
    view, committed = make_view()
    view.handle(TurnComplete(StopReason.END_TURN, "", 1, 0, Usage()))
    assert "interrupted" not in "".join(committed)


def test_a_refused_or_paused_turn_keeps_its_answer_with_a_note() -> None:
    view, committed = make_view()
    view.handle(TextDelta("Step one: take"))
    view.handle(
        MessageComplete(
            Message("assistant", (Text("Step one: take"),), stop_reason="refusal"),
            Usage(),
        )
    )
    view.handle(TurnComplete(StopReason.REFUSED, "Step one: take", 1, 0, Usage()))
    lines = "".join(committed).splitlines()
    assert lines[:2] == [
        "Step one: take",
        "  ⊘ refused: the model refused, or the provider's content filter withheld the answer",
    ]
    assert lines[2].startswith("[refused]")
    view, committed = make_view()
    view.handle(TurnComplete(StopReason.PAUSED, "", 1, 0, Usage()))
    assert "".join(committed).startswith("  ⊘ paused: the provider paused its own")


def test_markdown_shows_html_in_an_answer_as_the_text_it_is() -> None:
    pytest.importorskip("rich")
    painter = Painter(color=True, width=lambda: 80)
    answer = (
        "Return a List<String> or Vec<T>; include <stdio.h> first.\n\n"
        "<div>\nblock <b>x</b>\n</div>\n\nand **bold**"
    )
    shown = re.sub(r"\x1b\[[0-9;]*m", "", painter.markdown(answer))
    for kept in ("List<String>", "Vec<T>", "<stdio.h>", "<div>", "<b>x</b>", "</div>"):
        assert kept in shown
    assert "**" not in shown  # the markdown around it is still rendered
