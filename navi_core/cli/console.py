"""Terminal rendering shared by the commands: a Stream's events as they arrive, and
the one-line summary of a finished turn.

What the model, its tools and the server say is shown through ``terminal_safe``, with
the program's own styling around it, so none of their escape sequences reach the
terminal.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Mapping
from typing import Any, Final, TextIO

from ..events import (
    Compacted,
    CompactionStarted,
    Event,
    MessageComplete,
    ProviderRetry,
    ResponseDiscarded,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
    ToolDispatchComplete,
    ToolDispatchStart,
    ToolFinished,
    TurnComplete,
)
from ._terminal_text import terminal_safe, terminal_safe_line

__all__ = ["STOP_NOTES", "EventPrinter", "turn_summary"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

#: what a turn that ended for the provider's reason says after its answer (the
#: commands show it: ``run``, ``demo``, the chat)
STOP_NOTES: Final[Mapping[StopReason, str]] = {
    StopReason.REFUSED: "the model refused, or the provider's content filter withheld the answer",
    StopReason.PAUSED: "the provider paused its own server tools' turn; navi-core "
    "cannot continue it",
}


class EventPrinter:
    """Prints text live and one line per notable event; dims thinking on a TTY."""

    def __init__(self, out: TextIO | None = None, *, color: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.color = self.out.isatty() if color is None else color
        self._inline = False  # the cursor is in the middle of streamed text
        self._mode: str | None = None
        self._attempt: list[str] = []  # what this response's attempt printed so far

    def _style(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _write(self, text: str) -> None:
        self.out.write(text)
        self._attempt.append(text)

    def _line(self, text: str) -> None:
        if self._inline:
            self._write("\n")
            self._inline = False
        self._mode = None
        self._write(text + "\n")
        self.out.flush()

    def _discard(self) -> None:
        """Take back what the failed attempt printed: erased on a terminal (as far as
        it is still on screen), marked in a log or pipe."""
        printed = "".join(self._attempt)
        self._attempt = []
        self._mode = None
        if self.color:
            width = shutil.get_terminal_size().columns or 80
            rows = sum(
                max(1, -(-len(_ANSI.sub("", line)) // width))
                for line in printed.split("\n")
            )
            # to the start of the first row printed, then clear to the end of screen
            self.out.write("\r" + (f"\x1b[{rows - 1}F" if rows > 1 else "") + "\x1b[J")
        else:
            self.out.write(
                ("\n" if self._inline else "") + "[the response above was discarded]\n"
            )
        self._inline = False
        self.out.flush()

    def _stream(self, mode: str, text: str) -> None:
        text = terminal_safe(text)
        if not text:
            return
        if self._mode != mode:
            if self._inline:
                self._write("\n")
            label = "thinking: " if mode == "thinking" else "assistant: "
            self._write(self._style("2" if mode == "thinking" else "1", label))
            self._mode = mode
        self._write(self._style("2", text) if mode == "thinking" else text)
        self._inline = not text.endswith("\n")
        self.out.flush()

    def interrupted(self) -> None:
        """The turn was cut short: end the line it was writing and say so."""
        if self._inline:
            self.out.write("\n")
            self._inline = False
        self._mode = None
        self.out.write(self._style("33", "[interrupted]") + "\n")
        self.out.flush()

    def handle(self, ev: Event) -> None:
        """Render one event."""
        match ev:
            case TextDelta(text=t):
                self._stream("text", t)
            case ThinkingDelta(text=t):
                self._stream("thinking", t)
            case ToolCallStart(name=name, id=call_id):
                call = f"{terminal_safe(name)} ({terminal_safe(call_id)})"
                self._line(self._style("36", f"  -> call {call}"))
            case ToolDispatchStart(count=n):
                self._line(
                    self._style("36", f"  [running {n} tool call{'s' * (n != 1)}]")
                )
            case ToolFinished(name=name, call_id=call_id, is_error=err, seconds=s):
                mark = self._style("31", "error") if err else self._style("32", "ok")
                call = f"{terminal_safe(name)} ({terminal_safe(call_id)})"
                why = f": {terminal_safe(ev.error)}" if err and ev.error else ""
                self._line(f"  <- {call} {mark} in {s * 1000:.1f} ms{why}")
            case ResponseDiscarded():
                self._discard()
            case MessageComplete() | ToolDispatchComplete():
                self._attempt = []
            case ProviderRetry() as r:
                self._line(
                    self._style(
                        "33",
                        f"  [attempt {r.attempt}/{r.max_attempts} failed "
                        f"({terminal_safe(r.error)}): retrying in {r.delay_ms} ms]",
                    )
                )
            case CompactionStarted(reason=reason, messages_before=n):
                why = terminal_safe(reason)
                self._line(self._style("35", f"  [compacting {n} messages: {why}]"))
            case Compacted(messages_before=a, messages_after=b):
                self._line(self._style("35", f"  [compacted {a} -> {b} messages]"))
            case TurnComplete(stop_reason=StopReason.CANCELLED):
                self.interrupted()
            case TurnComplete(stop_reason=reason) if reason in STOP_NOTES:
                self._line(self._style("33", f"[{reason}: {STOP_NOTES[reason]}]"))
            case TurnComplete():
                if self._inline:
                    self.out.write("\n")
                    self._inline = False
            case _:
                pass


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def turn_summary(
    done: TurnComplete[Any], session_id: str, *, seconds: float | None = None
) -> str:
    """``[end_turn] 3 responses, 3 tool calls, 900 in / 80 out tokens, session …``.

    ``seconds``, when given, is shown in milliseconds before the session id.
    """
    u = done.usage
    parts = [
        f"[{done.stop_reason}] {_count(done.iterations, 'response')}",
        _count(done.tool_calls, "tool call"),
        f"{u.prompt_total} in / {u.output} out tokens"
        + (" (estimated)" if u.estimated else ""),
    ]
    if seconds is not None:
        parts.append(f"{seconds * 1000:.1f} ms")
    parts.append(f"session {terminal_safe_line(session_id[:12])}")
    return ", ".join(parts)
