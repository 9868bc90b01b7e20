"""What the CLI writes to a terminal holds no escape sequence or control character of
a model's, a tool's or a server's: only the SGR styling the program puts around text.

Fuzzed with arbitrary text (C0 and C1 controls, DEL, whole and broken escape
sequences, bidi overrides) split at arbitrary delta boundaries, through
``EventPrinter`` (``run``, ``demo``) and the chat's ``TurnView`` and ``Painter``, with
colour on so that rich renders the markdown.
"""

from __future__ import annotations

import io
import itertools
import re
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from terminal_check import HOSTILE, leaks, without_own_styling

from navi_core.cli.bench.report import table
from navi_core.cli.chat.render import Painter, TurnView
from navi_core.cli.console import EventPrinter
from navi_core.cli.options import error_line
from navi_core.conversation import Message, Text, ToolUse, Usage
from navi_core.errors import ProviderError
from navi_core.events import (
    CompactionStarted,
    Event,
    MessageComplete,
    ModelInfo,
    ProviderRetry,
    ResponseDiscarded,
    Steered,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolDispatchComplete,
    ToolDispatchStart,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnComplete,
)

#: what ``EventPrinter`` writes to take back a discarded attempt on a terminal
_OWN_ERASE = re.compile(r"\r(?:\x1b\[\d+F)?\x1b\[J")

_FRAGMENTS = [
    "\x1b",
    "\x1b[",
    "\x1b]",
    "\x1b\\",
    "\x1bP",
    "\x1b_",
    "\x1b^",
    "\x1bX",
    "\x1b[2J",
    "\x1b[31m",
    "\x1b[0m",
    "\x1b]52;c;SGVsbG8=\x07",
    "\x1b]0;title\x07",
    "\x1b]8;;https://evil.example/\x1b\\",
    "\x9b",
    "\x9d",
    "\x9c",
    "\x90",
    "\x07",
    "\r",
    "\r\n",
    "\n",
    "\t",
    "\x08",
    "\x7f",
    "\u202e",
    "\u2066",
    "[x](https://evil.example)",
    "**b**",
    "`c`",
    "# h\n",
    "- i\n",
    "```\n",
]
_CONTROLS = st.characters(min_codepoint=0, max_codepoint=0x9F)
_ANY = st.characters()  # surrogates excluded
hostile_text = st.lists(
    st.one_of(
        st.sampled_from(_FRAGMENTS), st.text(_CONTROLS, max_size=6), st.text(_ANY)
    ),
    max_size=12,
).map("".join)


@st.composite
def split(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at arbitrary places, as it arrives in deltas."""
    cuts = sorted(
        draw(st.lists(st.integers(0, len(text)), max_size=max(1, len(text) // 2)))
    )
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def turns(draw: st.DrawFn) -> list[Event]:
    """A turn's events whose every string comes from the model, a tool or a server."""
    events: list[Event] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["text", "thinking", "tool", "retry", "other"]))
        text = draw(hostile_text)
        if kind in ("text", "thinking"):
            cls = TextDelta if kind == "text" else ThinkingDelta
            events += [cls(piece) for piece in draw(split(text))]
        elif kind == "tool":
            name, call_id = draw(hostile_text), draw(hostile_text)
            events.append(ModelInfo(draw(hostile_text)))
            events.append(ToolCallStart(0, call_id, name))
            events += [ToolCallDelta(0, piece) for piece in draw(split(text))]
            events.append(
                MessageComplete(
                    Message("assistant", (ToolUse(call_id, name, text),)), Usage()
                )
            )
            events.append(ToolDispatchStart(1))
            events.append(ToolStarted(call_id, name))
            events.append(ToolProgress(call_id, draw(hostile_text)))
            error = draw(st.one_of(st.none(), hostile_text))
            events.append(ToolFinished(call_id, name, error is not None, 0.01, error))
            events.append(ToolDispatchComplete(Message("user", ())))
        elif kind == "retry":
            events.append(ResponseDiscarded(1, len(text), 0, 0))
            events.append(ProviderRetry(1, 4, 10, text, 500, None, text))
        else:
            events.append(CompactionStarted(text, 3, 100))
            events.append(Steered(Message("user", (Text(text),))))
            events.append(MessageComplete(Message("assistant", (Text(text),)), Usage()))
    events.append(TurnComplete(StopReason.END_TURN, "", 1, 0, Usage()))
    return events


def _assert_clean(written: str) -> None:
    shown = _OWN_ERASE.sub("", without_own_styling(written))
    assert leaks(shown) == [], repr(written)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_the_event_printer_writes_no_control_of_the_model(events: list[Event]) -> None:
    for color in (True, False):
        out = _Terminal()
        printer = EventPrinter(out, color=color)
        for ev in events:
            printer.handle(ev)
        _assert_clean(out.getvalue())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_the_chat_view_writes_no_control_of_the_model(events: list[Event]) -> None:
    for color in (True, False):
        committed: list[str] = []
        painter = Painter(color=color, width=lambda: 60)
        view = TurnView(painter, committed.append)
        view.begin()
        view.note(painter.style("35", "  ↳ steer: typed by the user"))
        for ev in events:
            view.handle(ev)
            _assert_clean(view.live())
        _assert_clean("".join(committed))


def test_markdown_shows_a_link_target_instead_of_hiding_it() -> None:
    """A model's ``[bank](https://evil.example)`` must not become an OSC 8 link whose
    visible text hides where it goes."""
    out = Painter(color=True, width=lambda: 80).markdown(
        "Log in at [https://bank.example](https://evil.example/login)."
    )
    assert "\x1b]8" not in out
    assert "evil.example/login" in without_own_styling(out)


def test_markdown_renders_a_hostile_answer_inert() -> None:
    out = Painter(color=True, width=lambda: 80).markdown(HOSTILE)
    shown = without_own_styling(out)
    assert leaks(shown) == []
    assert "␛]52;c;SGVsbG8=␇" in shown


def test_an_error_line_quoting_a_server_body_is_inert() -> None:
    line = error_line(ProviderError(f"HTTP 400: {HOSTILE}"))
    assert line.startswith("error: ProviderError: HTTP 400: A␛]52;c;SGVsbG8=␇B")
    assert leaks(line) == []
    assert "\n" not in line


def test_the_bench_table_shows_server_errors_inert() -> None:
    metrics: dict[str, Any] = dict.fromkeys(
        ("ttft", "itl", "tokens_per_second", "tool_overhead", "turn")
    )
    totals = {"turns": 1, "failed_turns": 1, "responses": 0, "tool_calls": 0,
              "output_tokens": 0, "wall_seconds": 1.0, "tokens_per_second": 0.0,
              "client_cpu_seconds": 0.1, "client_cpu_share": 0.1, "cpu_count": 2}  # fmt: skip
    summary = {
        "metrics": metrics,
        "totals": totals,
        "workload": {"tools": False},
        "errors": [f"ProviderError: {HOSTILE}"],
    }
    out = table(summary)
    assert leaks(out) == []
    assert "error: ProviderError: A␛]52;c;SGVsbG8=␇B" in out
