"""The chat's slash commands: ``/help``, ``/compact``, ``/sessions``, ``/resume`` ...

``run_command`` parses one input line starting with ``/``. Commands that touch the
agent run as jobs on the controller's worker, after a turn that is still running;
``/help``, ``/queue`` and ``/exit`` act at once. What they show of a session, a tool
or a server goes through ``terminal_safe``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace

from ...conversation import Message, Usage
from ...errors import NaviError
from .._terminal_text import terminal_safe, terminal_safe_line
from ..options import error_line
from ..sessions import render_listing
from .controller import ChatController

__all__ = ["COMMANDS", "EXIT", "announce", "recap", "run_command"]

#: what ``run_command`` returns when the chat should end
EXIT = "exit"
_RECAP_MESSAGES = 4


@dataclass(frozen=True, slots=True)
class Command:
    """One slash command: its argument's name (or ""), what it does, its handler."""

    arg: str
    help: str
    run: Callable[[ChatController, str], None]


def _say(chat: ChatController, text: str) -> None:
    chat.out(text.rstrip("\n") + "\n")


def _dim(chat: ChatController, text: str) -> None:
    _say(chat, chat.painter.style("2", text))


def _help(chat: ChatController, arg: str) -> None:
    width = max(len(f"/{n} {c.arg}") for n, c in COMMANDS.items())
    lines = [f"  {f'/{n} {c.arg}':<{width}}  {c.help}" for n, c in COMMANDS.items()]
    lines += [
        "",
        "  Enter sends; Esc Enter (or a line ending in \\) starts a new line.",
        "  Typing while an answer streams steers it: the running turn reads your",
        "  message before its next response. /queue TEXT waits for the turn's end.",
        "  Ctrl-C cancels the running turn; Ctrl-C twice at an empty prompt exits.",
        "  //text sends a message that starts with a slash.",
    ]
    _say(chat, "\n".join(lines))


def _compact(chat: ChatController, arg: str) -> None:
    agent = chat.agent
    before = len(agent.conversation.messages)
    _dim(chat, f"  ⇊ compacting {before} messages…")
    if chat.before_compact is not None:
        chat.before_compact()
    result = agent.compact(arg or None)
    if not result.compacted:
        _say(chat, f"  nothing to compact: {before} messages fit verbatim")
        return
    after = len(agent.conversation.messages)
    turns = "turn" if result.kept_turns == 1 else "turns"
    _say(
        chat,
        f"  ⇊ compacted: {result.summarized_messages} messages summarised, "
        f"{result.kept_turns} {turns} kept verbatim; {before} → {after} messages",
    )


def _sessions(chat: ChatController, arg: str) -> None:
    infos = chat.store.list()
    if not infos:
        _say(chat, "  no sessions")
        return
    current = terminal_safe_line(chat.agent.session_id)  # as render_listing shows it
    width = shutil.get_terminal_size().columns - 4  # the indent and the * mark
    lines = render_listing(infos, width).rstrip("\n").splitlines()
    marked = [lines[0]] + [
        ("* " if ln.startswith(current) else "  ") + ln for ln in lines[1:]
    ]
    _say(chat, "  " + marked[0] + "\n" + "\n".join(marked[1:]))


def recap(messages: list[Message], painter_style: Callable[[str, str], str]) -> str:
    """The last few user and assistant texts of a session, one line each."""
    shown: list[str] = []
    for m in messages:
        if m.role not in ("user", "assistant") or not m.text.strip():
            continue
        flat = " ".join(terminal_safe(m.text).split())
        flat = flat if len(flat) <= 100 else flat[:99] + "…"
        who = "you" if m.role == "user" else "assistant"
        shown.append(painter_style("2", f"  {who}: {flat}"))
    return "\n".join(shown[-_RECAP_MESSAGES:])


def announce(chat: ChatController, verb: str) -> None:
    """Say which session the chat now drives, with a recap of its last messages."""
    agent = chat.agent
    messages = agent.conversation.messages
    n = len(messages)
    sid = terminal_safe_line(agent.session_id)
    _say(chat, f"  {verb} session {sid} ({n} message{'s' * (n != 1)})")
    text = recap(messages, chat.painter.style)
    if text:
        _say(chat, text)
    last = agent.session.last_dialogue_message()
    if last is not None and last.role == "user":
        _dim(chat, "  its last turn did not finish: /continue answers it")


def _resume(chat: ChatController, arg: str) -> None:
    if not arg:
        _say(
            chat, "  usage: /resume ID (an id, an id prefix or 'latest'; see /sessions)"
        )
        return
    if not chat.switch(chat.settings, arg):
        _say(chat, f"  already in session {terminal_safe_line(chat.agent.session_id)}")
        return
    announce(chat, "resumed")


def _new(chat: ChatController, arg: str) -> None:
    chat.switch(chat.settings, None)
    _say(chat, f"  new session {terminal_safe_line(chat.agent.session_id)}")


def _model(chat: ChatController, arg: str) -> None:
    if not arg:
        _say(chat, f"  model: {terminal_safe(chat.agent.provider.wire.model)}")
        return
    chat.switch(chat.settings.with_model(arg), chat.agent.session_id)
    sid = terminal_safe_line(chat.agent.session_id)
    _say(chat, f"  model: {terminal_safe(arg)} (session {sid} goes on)")


def _system(chat: ChatController, arg: str) -> None:
    if not arg:
        prompt = terminal_safe(chat.agent.conversation.system_prompt() or "")
        _say(chat, f"  system: {prompt}" if prompt else "  no system prompt")
        return
    chat.agent.add_system_message(arg, "replace")
    chat.settings = replace(chat.settings, system=arg)  # kept across /model
    _say(chat, "  system prompt replaced")


def _tools(chat: ChatController, arg: str) -> None:
    specs = chat.agent.tool_specs()
    if not specs:
        _say(chat, "  no tools (give --workspace DIR, or tools in the profile)")
        return
    rows = [
        (terminal_safe(s.name), terminal_safe((s.description or "").split("\n")[0]))
        for s in specs
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"  {name:<{width}}  {about}" for name, about in rows]
    _say(chat, "\n".join(lines))


def _usage_text(u: Usage) -> str:
    text = f"{u.prompt_total:,} in / {u.output:,} out tokens"
    if u.cache_read or u.cache_write:
        text += f" (cache {u.cache_read:,} read / {u.cache_write:,} written)"
    if u.reasoning:
        text += f", {u.reasoning:,} reasoning"
    return text


def _usage(chat: ChatController, arg: str) -> None:
    totals = chat.totals
    stored = sum(
        (m.usage for m in chat.agent.conversation.messages if m.usage is not None),
        Usage(),
    )
    price = chat.settings.price
    cost = f", ${price.cost(totals.usage):.4f}" if price is not None else ""
    _say(
        chat,
        f"  this chat: {totals.turns} turn{'s' * (totals.turns != 1)}, "
        f"{_usage_text(totals.usage)}{cost}\n"
        f"  session {terminal_safe_line(chat.agent.session_id)} (current window): "
        f"{_usage_text(stored)}",
    )


def _continue(chat: ChatController, arg: str) -> None:
    if not chat.awaits_answer():
        _say(chat, "  nothing to continue: the last turn was answered or cancelled")
        return
    chat.turn(None)


COMMANDS: dict[str, Command] = {
    "help": Command("", "this list", _help),
    "compact": Command(
        "[instructions]", "summarise the old part of the session", _compact
    ),
    "sessions": Command("", "the stored sessions (* marks this one)", _sessions),
    "resume": Command("ID", "continue another stored session", _resume),
    "new": Command("", "start a new session", _new),
    "model": Command("NAME", "switch the model (the session goes on)", _model),
    "system": Command("TEXT", "replace the system prompt", _system),
    "tools": Command("", "the tools the model may call", _tools),
    "usage": Command("", "tokens (and cost) of this chat and session", _usage),
    "continue": Command("", "answer an interrupted turn of this session", _continue),
    "queue": Command("TEXT", "send TEXT as a new turn after the running one", _help),
    "exit": Command("", "leave the chat (also Ctrl-D)", _help),
}


def _guarded(chat: ChatController, command: Command, arg: str) -> Callable[[], None]:
    def job() -> None:
        try:
            command.run(chat, arg)
        except (NaviError, ValueError) as exc:
            _say(chat, chat.painter.style("31", error_line(exc)))

    return job


def run_command(chat: ChatController, line: str) -> str | None:
    """Run the slash command ``line``; returns ``EXIT`` when the chat should end."""
    name, _, arg = line[1:].strip().partition(" ")
    arg = arg.strip()
    command = COMMANDS.get(name.lower())
    if command is None:
        _say(chat, f"  unknown command /{name}: /help lists them")
        return None
    if name == "exit":
        return EXIT
    if name == "queue":
        if arg:
            chat.queue_turn(arg)
        else:
            _say(chat, "  usage: /queue TEXT")
        return None
    if name == "help":
        _help(chat, arg)
        return None
    if chat.turn_running:
        _dim(chat, f"  /{name} runs when the current turn ends (Ctrl-C cancels it)")
    chat.submit(_guarded(chat, command, arg))
    return None
