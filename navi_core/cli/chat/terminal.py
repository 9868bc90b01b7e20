"""The chat's terminal: a prompt that stays open while answers stream above it.

On a terminal, prompt_toolkit reads input with line editing, a history file and
multi-line editing; the live area of the running turn is drawn just above the input
line and redrawn ten times a second; finished output scrolls above it. So typing
while an answer streams is possible: Enter steers the running turn. Ctrl-C cancels
the running turn; at an empty prompt the first Ctrl-C warns, the second exits.

Without a terminal (input piped in), each line is sent in turn and waited for.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.application import Application
    from prompt_toolkit.formatted_text import ANSI

from .._terminal_text import terminal_safe
from .commands import EXIT, run_command
from .controller import ChatController

__all__ = ["default_history_path", "run_plain", "run_terminal", "stdout_writer"]

_PROMPT = "> "
_REDRAW_SECONDS = 0.1
_CANCEL_WAIT = 2.0  # seconds a Ctrl-C waits for its turn to end before re-prompting


def default_history_path() -> Path:
    """``$XDG_STATE_HOME/navi-core/chat_history`` (``~/.local/state/...``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "navi-core" / "chat_history"


def stdout_writer(text: str) -> None:
    """Write finished output; ``sys.stdout`` is prompt_toolkit's proxy while it runs."""
    sys.stdout.write(text)
    sys.stdout.flush()


def _handle(chat: ChatController, text: str) -> bool:
    """Send one input; False when the chat should end."""
    if text.startswith("/") and not text.startswith("//"):
        return run_command(chat, text) != EXIT
    chat.say(text[1:] if text.startswith("//") else text)
    return True


def run_terminal(chat: ChatController, history: Path | None) -> int:
    """The interactive chat on a terminal; returns the exit status."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.formatted_text import ANSI
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    keys = KeyBindings()
    carry = [""]  # text typed when Ctrl-C cancelled a turn, offered again

    @keys.add("enter")
    def _submit(event: KeyPressEvent) -> None:
        buf = event.current_buffer
        if buf.document.text_before_cursor.endswith("\\"):
            buf.delete_before_cursor()
            buf.insert_text("\n")
        else:
            buf.validate_and_handle()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        buf = event.current_buffer
        if buf.text and not chat.turn_running:
            buf.reset()
            return
        carry[0] = buf.text
        event.app.exit(exception=KeyboardInterrupt())

    store: FileHistory | InMemoryHistory = InMemoryHistory()
    if history is not None:
        try:
            history.parent.mkdir(parents=True, exist_ok=True)
            store = FileHistory(str(history))
        except OSError:
            pass  # a read-only home still chats, without a saved history
    # the finished prompt is erased (it held the live area) and the input echoed
    session: PromptSession[str] = PromptSession(
        history=store, multiline=True, key_bindings=keys, erase_when_done=True
    )
    painter = chat.painter

    def message() -> ANSI:
        marker = painter.style("35;1", "steer> ") if chat.turn_running else _PROMPT
        return ANSI(chat.view.live() + painter.style("1", marker))

    stop = threading.Event()
    ticker = threading.Thread(
        target=_tick,
        args=(chat, session.app, stop),
        name="navi-chat-redraw",
        daemon=True,
    )
    ticker.start()
    try:
        return _read_loop(chat, session, message, carry)
    finally:
        stop.set()
        ticker.join(timeout=1)


def _tick(chat: ChatController, app: Application[Any], stop: threading.Event) -> None:
    """Redraw ten times a second while a turn runs (and once after): idle costs nothing."""
    was_active = False
    while not stop.wait(_REDRAW_SECONDS):
        active = chat.view.active
        if active or was_active:
            app.invalidate()
        was_active = active


def _read_loop(
    chat: ChatController,
    session: PromptSession[str],
    message: Callable[[], ANSI],
    carry: list[str],
) -> int:
    from prompt_toolkit.patch_stdout import patch_stdout

    painter = chat.painter
    armed = False
    with patch_stdout(raw=True):
        while True:
            try:
                text = session.prompt(
                    message,
                    default=carry[0],
                    prompt_continuation=lambda width, line, soft: ". ".rjust(width),
                )
                carry[0] = ""
            except KeyboardInterrupt:
                if chat.cancel():
                    _settle(chat)
                    armed = False
                elif armed:
                    break
                else:
                    armed = True
                    stdout_writer(
                        painter.style("2", "  (Ctrl-C again to exit, or /exit)\n")
                    )
                continue
            except EOFError:
                break
            armed = False
            if not text.strip():
                continue
            if not chat.turn_running:  # a steer shows in the live area instead
                stdout_writer(_echo(text.strip(), painter.style))
            if not _handle(chat, text.strip()):
                break
    return 0


def _settle(chat: ChatController) -> None:
    """After a Ctrl-C cancel: the turn's last lines reach the terminal before the next
    prompt starts. ``patch_stdout``'s writer thread prints them; printed while a prompt
    starts, they land over it and nothing redraws it."""
    if not chat.wait_idle(_CANCEL_WAIT):
        return
    sys.stdout.flush()
    pending = getattr(sys.stdout, "_flush_queue", None)  # the proxy's, when present
    deadline = time.monotonic() + _CANCEL_WAIT
    while pending is not None and not pending.empty() and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.02)  # the writer thread took the last lines: let it write them


def _echo(text: str, style: Callable[[str, str], str]) -> str:
    """The submitted input as it stays in the scrollback (a paste may hold controls)."""
    first, *rest = terminal_safe(text).splitlines()
    lines = [style("1", _PROMPT) + first, *(style("2", ". ") + r for r in rest)]
    return "\n".join(lines) + "\n"


def run_plain(chat: ChatController, lines: Callable[[], str]) -> int:
    """The chat over piped input: one message per line, each waited for; exit status 1
    when a turn failed, so a script can tell."""

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if not chat.cancel():
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        while line := lines():
            text = line.strip()
            if text and not _handle(chat, text):
                break
            chat.wait_idle()
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    return 1 if chat.failed_turns else 0
