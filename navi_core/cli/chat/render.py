"""How a chat turn looks: a live area under the scrollback, and what is committed to it.

While a response streams, its text, its thinking (dimmed), the tool calls being
written and the tools running (with progress and elapsed time) live in a small area
that is redrawn in place, with a spinner until the first token. Only a *completed*
response is committed to the scrollback, rendered as markdown; so when an attempt
fails mid-stream (``ResponseDiscarded``) its partial text just vanishes from the live
area and the retried answer is never printed twice. Each finished tool call commits
one line; the turn ends with a status line of its tokens (and cost, when priced).

Every string an event carries (the model's text and thinking, tool names, arguments,
progress and errors, a server's error) is taken through ``terminal_safe`` as it
arrives, so the live area, rich's markdown and the scrollback hold no escape
sequence but the program's own styling.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...conversation import Usage

if TYPE_CHECKING:
    from markdown_it.token import Token
from ...events import (
    Compacted,
    CompactionStarted,
    Event,
    MessageComplete,
    ModelInfo,
    ProviderRetry,
    ResponseDiscarded,
    Steered,
    StopReason,
    SubagentEvent,
    TextDelta,
    ThinkingDelta,
    TodoItem,
    TodoUpdated,
    ToolCallDelta,
    ToolCallStart,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnComplete,
)
from .._terminal_text import tail_rows, terminal_safe, wrap
from ..console import STOP_NOTES
from .profiles import Price

__all__ = ["Painter", "TurnView", "status_line"]

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_ARGS_WIDTH = 60


class Painter:
    """ANSI styles and markdown, or plain text when colour is off.

    ``wrap``: plain text is folded at word boundaries to ``width`` (on a terminal
    with colour off, so it wraps as rich wraps the markdown); piped text is not.
    """

    def __init__(
        self, *, color: bool, width: Callable[[], int], wrap: bool = False
    ) -> None:
        self.color = color
        self.width = width
        self.wrap = wrap

    def style(self, code: str, text: str) -> str:
        """``text`` in SGR ``code`` (2 dim, 1 bold, 31 red...), or as is."""
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def preload(self) -> None:
        """Import rich's markdown on a background thread when colour is on, so the
        first answer (or a Ctrl-C's partial one) is committed without that wait."""
        if self.color:
            threading.Thread(target=_import_rich, name="navi-rich", daemon=True).start()

    def markdown(self, text: str) -> str:
        """``text`` rendered as markdown for the terminal, ending with a newline.

        Links show their target as text: an OSC 8 link could hide where it goes.
        """
        text = terminal_safe(text)  # rich passes ESC through
        if not self.color:
            return self._plain(text)
        try:
            from rich.console import Console
            from rich.markdown import Markdown
        except ImportError:  # without the chat extra: the text as written
            return self._plain(text)

        buf = io.StringIO()
        console = Console(
            file=buf, force_terminal=True, width=max(20, self.width()), soft_wrap=False
        )
        rendered = Markdown(text.strip(), hyperlinks=False)
        rendered.parsed = _html_as_text(rendered.parsed)
        console.print(rendered)
        return buf.getvalue()

    def _plain(self, text: str) -> str:
        lines = text.rstrip("\n").split("\n")
        if self.wrap:
            width = max(20, self.width())
            lines = [row for line in lines for row in wrap(line, width)]
        return "\n".join(lines) + "\n"


def _html_as_text(tokens: list[Token]) -> list[Token]:
    """Markdown's raw HTML shown as the text it is: rich drops HTML, so an answer's
    ``List<String>`` or ``<div>`` would vanish from the screen."""
    from markdown_it.token import Token

    out: list[Token] = []
    for token in tokens:
        if token.type == "html_block":
            text = Token("text", "", 0, content=token.content.rstrip("\n"))
            out += [
                Token("paragraph_open", "p", 1, block=True),
                Token("inline", "", 0, content=text.content, children=[text]),
                Token("paragraph_close", "p", -1, block=True),
            ]
            continue
        for child in token.children or ():
            if child.type == "html_inline":
                child.type = "text"
        out.append(token)
    return out


def _import_rich() -> None:
    try:
        from rich.console import Console
        from rich.markdown import Markdown
    except ImportError:  # without the chat extra: plain text
        return
    # one small render loads the rest lazily imported (the parser, the styles)
    Console(file=io.StringIO(), force_terminal=True).print(Markdown("*a* `b`"))


def _short(text: str, width: int = _ARGS_WIDTH) -> str:
    flat = " ".join(terminal_safe(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


_TODO_MARKS = {"pending": ("2", "☐"), "in_progress": ("33", "▸"), "done": ("32", "☑")}


def _todo_lines(items: tuple[TodoItem, ...], p: Painter) -> str:
    """The model's todo list as committed lines: a mark per status, then the text."""
    out = [p.style("35", "  ☰ todo") + "\n"]
    for item in items:
        code, mark = _TODO_MARKS.get(item.status, ("2", "?"))
        out.append(f"    {p.style(code, mark)} {_short(item.text, 100)}\n")
    return "".join(out)


def _seconds(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def status_line(
    done: TurnComplete, seconds: float, price: Price | None, painter: Painter
) -> str:
    """``[end_turn] 2 responses · 1 tool call · 812 in / 64 out tokens · $0.0003 · 1.2 s``."""
    u: Usage = done.usage
    calls = f"{done.tool_calls} tool call{'s' * (done.tool_calls != 1)}"
    parts = [
        f"[{done.stop_reason}]",
        f"{done.iterations} response{'s' * (done.iterations != 1)}",
        calls,
        f"{u.prompt_total:,} in / {u.output:,} out tokens"
        + " (estimated)" * u.estimated,
    ]
    if u.cache_read or u.cache_write:
        parts.append(f"cache {u.cache_read:,} read / {u.cache_write:,} written")
    if price is not None:  # the profile's price wins, as it does for /usage
        parts.append(f"${price.cost(u):.4f}")
    elif done.cost is not None:  # the provider's price (or the price table's)
        parts.append(f"${done.cost.usd:.4f}")
    parts.append(_seconds(seconds))
    return painter.style("2", " · ".join(parts))


@dataclass
class _Call:
    name: str
    args: str = ""
    started: float | None = None
    progress: str = ""


class TurnView:
    """The live state of one turn; ``handle`` is called by the turn's thread,
    ``live`` by the terminal's, so both hold a lock.

    ``commit(text)`` writes finished lines (ending in a newline) to the scrollback.
    """

    def __init__(
        self,
        painter: Painter,
        commit: Callable[[str], None],
        *,
        price: Price | None = None,
        live_rows: Callable[[], int] = lambda: 8,
    ) -> None:
        self.painter = painter
        self.commit = commit
        self.price = price
        self.live_rows = live_rows
        self._lock = threading.Lock()
        self._active = False
        self._started = 0.0
        self._waiting = False  # spinner: nothing of the response has arrived yet
        self._text = ""
        self._thinking = ""
        self._writing: dict[int, _Call] = {}  # tool calls the model is writing
        self._running: dict[str, _Call] = {}  # tool calls running
        self._notes: list[str] = []  # steering shown under the live area
        self.model: str | None = None

    # -- the turn's thread -------------------------------------------------------------

    def begin(self) -> None:
        """A turn starts: the spinner shows until its first token."""
        with self._lock:
            self._active, self._waiting = True, True
            self._started = time.monotonic()
            self._text = self._thinking = ""
            self._writing.clear()
            self._running.clear()

    def note(self, text: str) -> None:
        """Show ``text`` in the live area until the turn ends (steering, cancelling)."""
        with self._lock:
            self._notes.append(text)

    def end(self) -> None:
        """The turn ended (or failed): clear the live area."""
        with self._lock:
            self._active = self._waiting = False
            self._text = self._thinking = ""
            self._writing.clear()
            self._running.clear()
            self._notes.clear()

    def handle(self, ev: Event) -> None:
        """Apply one event of the turn to the live area or the scrollback."""
        p = self.painter
        with self._lock:
            match ev:
                case TextDelta(text=t):
                    self._waiting = False
                    self._text += terminal_safe(t)
                case ThinkingDelta(text=t):
                    self._waiting = False
                    self._thinking += terminal_safe(t)
                case ToolCallStart(index=i, name=name):
                    self._waiting = False
                    self._writing[i] = _Call(terminal_safe(name))
                case ToolCallDelta(index=i, arguments=a) if i in self._writing:
                    self._writing[i].args += terminal_safe(a)
                case ModelInfo(model=m):
                    self.model = m
                case MessageComplete():
                    self._complete_response()
                case ToolStarted(call_id=cid, name=name):
                    started = time.monotonic()
                    self._running[cid] = _Call(terminal_safe(name), started=started)
                case ToolProgress(call_id=cid, text=t) if cid in self._running:
                    self._running[cid].progress = _short(t, 40)
                case ToolFinished() as f:
                    self._tool_finished(f)
                case ResponseDiscarded(attempt=n, text_chars=chars):
                    self._text = self._thinking = ""
                    self._writing.clear()
                    self._waiting = True
                    self.commit(
                        p.style("33", f"  ↺ attempt {n} broke off after {chars} chars")
                        + p.style("2", "; its partial answer was removed\n")
                    )
                case ProviderRetry() as r:
                    # the failed attempt is never committed: drop what it showed
                    self._text = self._thinking = ""
                    self._writing.clear()
                    self._waiting = True
                    self.commit(
                        p.style(
                            "33",
                            f"  ↺ attempt {r.attempt}/{r.max_attempts} failed "
                            f"({terminal_safe(r.error)}): retrying in "
                            f"{r.delay_ms} ms\n",
                        )
                    )
                case Steered(message=m):
                    self._notes = [n for n in self._notes if "steer" not in n]
                    self.commit(p.style("35", f"  ↳ steered: {_short(m.text)}\n"))
                case CompactionStarted(reason=reason, messages_before=n):
                    why = terminal_safe(reason)
                    self.commit(p.style("35", f"  ⇊ compacting {n} messages ({why})\n"))
                case Compacted(messages_before=a, messages_after=b):
                    self.commit(p.style("35", f"  ⇊ compacted {a} → {b} messages\n"))
                case SubagentEvent(call_id=cid, event=inner) if cid in self._running:
                    if isinstance(inner, ToolStarted):
                        name = terminal_safe(inner.name)
                        self._running[cid].progress = f"sub-agent: {name}"
                case TodoUpdated(items=items):
                    self.commit(_todo_lines(items, p))
                case TurnComplete() as done:
                    if done.stop_reason is StopReason.CANCELLED:
                        self._interrupted()
                    elif done.stop_reason in STOP_NOTES:
                        self._stopped(done.stop_reason)
                    seconds = time.monotonic() - self._started
                    self.commit(status_line(done, seconds, self.price, p) + "\n\n")
                case _:
                    pass

    def _complete_response(self) -> None:
        p = self.painter
        if self._thinking.strip():
            lines = self._thinking.strip().splitlines()
            self.commit("".join(p.style("2", f"  {line}") + "\n" for line in lines))
        if self._text.strip():
            self.commit(p.markdown(self._text))
        for call in self._writing.values():
            args = _short(call.args) if call.args.strip() not in ("", "{}") else ""
            self.commit(p.style("36", f"  ⚙ {call.name}") + p.style("2", f" {args}\n"))
        self._text = self._thinking = ""
        self._writing.clear()
        self._waiting = True

    def _interrupted(self) -> None:
        """A cancelled turn: what it had shown stays, marked as cut short."""
        p = self.painter
        if self._thinking.strip() or self._text.strip() or self._writing:
            self._complete_response()
        self.commit(p.style("33", "  ⏹ interrupted") + "\n")

    def _stopped(self, reason: StopReason) -> None:
        """A turn the provider stopped (refused, paused): what it showed stays, with
        a note saying so."""
        p = self.painter
        if self._thinking.strip() or self._text.strip() or self._writing:
            self._complete_response()
        self.commit(p.style("33", f"  ⊘ {reason}: {STOP_NOTES[reason]}") + "\n")

    def _tool_finished(self, f: ToolFinished) -> None:
        p = self.painter
        self._running.pop(f.call_id, None)
        if f.is_error:
            mark = p.style("31", "✗")
            tail = p.style("31", f" {_short(f.error or 'error', 50)}")
        else:
            mark, tail = p.style("32", "✓"), ""
        name = terminal_safe(f.name)
        self.commit(
            f"  {mark} {name} " + p.style("2", _seconds(f.seconds)) + tail + "\n"
        )

    # -- the terminal's thread ---------------------------------------------------------

    @property
    def active(self) -> bool:
        """True between ``begin`` and ``end``."""
        return self._active

    def live(self) -> str:
        """The live area as ANSI text, each line ending in a newline ("" when idle)."""
        p = self.painter
        with self._lock:
            if not self._active:
                return ""
            now = time.monotonic()
            lines: list[str] = []
            width = max(20, p.width())
            if self._thinking:
                tail = tail_rows(self._thinking, width - 2, 2)
                lines.extend(p.style("2", f"  {line}") for line in tail)
            if self._text:
                lines.extend(tail_rows(self._text, width, self.live_rows()))
            for call in self._writing.values():
                lines.append(p.style("36", f"  ⚙ {call.name} ") + _short(call.args))
            for call in self._running.values():
                spent = _seconds(now - (call.started or now))
                extra = f" · {call.progress}" if call.progress else ""
                lines.append(p.style("36", f"  ⋯ {call.name} ") + spent + extra)
            if self._waiting:
                frame = _SPINNER[int(now * 10) % len(_SPINNER)]
                lines.append(p.style("2", f"{frame} {_seconds(now - self._started)}"))
            lines.extend(self._notes)
        return "".join(line + "\n" for line in lines)
