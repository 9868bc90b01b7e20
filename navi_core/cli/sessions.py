"""``navi-core sessions list``, ``show`` and ``delete``: stored sessions as text.

The store is chosen by the shared ``--db`` / ``--postgres`` flags (``options``); blocks
read as in the compaction's transcript (``navi_core.compaction._transcript``). What a
session holds is what models, tools and servers sent: it is shown through
``terminal_safe``, and so are session ids (a database file from elsewhere may hold
any text as one).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from ..compaction._transcript import heading, render_block
from ..conversation import Message, Usage
from ..errors import SessionError, SessionNotFound
from ..store.base import SessionInfo, SessionStore
from ._terminal_text import terminal_safe, terminal_safe_line
from .options import (
    Subcommands,
    add_store_arguments,
    error_line,
    help_command,
    store_from_args,
)

__all__ = ["register", "render_listing", "render_session"]

_PROMPT_WIDTH = 60


def register(subcommands: Subcommands) -> None:
    """Add ``sessions list``, ``sessions show ID [--all]`` and ``sessions delete ID``.

    ``sessions`` alone prints its help on stderr and exits with status 2.
    """
    sessions = subcommands.add_parser(
        "sessions",
        help="list and read stored sessions",
        description="List and read the sessions of a store.",
    )
    sessions.set_defaults(func=help_command(sessions))
    sub = sessions.add_subparsers(
        title="commands", metavar="COMMAND", dest="sessions_command"
    )

    listing = sub.add_parser("list", help="every session, most recent first")
    listing.add_argument(
        "--all",
        action="store_true",
        help="also the sessions whose turns never got an answer (a prompt the "
        "model never answered: its request failed or was cancelled)",
    )
    add_store_arguments(listing)
    listing.set_defaults(func=_cmd_list)

    show = sub.add_parser("show", help="the transcript of one session")
    show.add_argument(
        "session",
        metavar="ID",
        help='"latest" (the most recently used), a session id or unique id prefix',
    )
    show.add_argument(
        "--all",
        action="store_true",
        help="every window, not just the one after the last compaction",
    )
    add_store_arguments(show)
    show.set_defaults(func=_cmd_show)

    delete = sub.add_parser(
        "delete",
        help="delete one session: its messages, held approvals and lock",
    )
    delete.add_argument(
        "session", metavar="ID_PREFIX", help="a session id or unique id prefix"
    )
    add_store_arguments(delete)
    delete.set_defaults(func=_cmd_delete)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _one_line(text: str, width: int) -> str:
    flat = " ".join(terminal_safe(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def render_listing(infos: Sequence[SessionInfo], width: int | None = None) -> str:
    """A table of sessions: id, last change, message count, model, last prompt (cut
    so that a row fits in ``width`` columns, when given)."""
    models = [terminal_safe(i.model or "-") for i in infos]
    ids = [terminal_safe_line(i.id) for i in infos]
    id_width = max(map(len, ids), default=2)
    model_width = max([len("MODEL"), *map(len, models)])
    header = (
        f"{'ID':<{id_width}}  {'MODIFIED':<19}  {'MSGS':>5}  "
        f"{'MODEL':<{model_width}}  LAST PROMPT"
    )
    prompt_width = _PROMPT_WIDTH
    if width is not None:
        before = id_width + model_width + 19 + 5 + 8  # the columns and their gaps
        prompt_width = min(prompt_width, max(8, width - before))
    lines = [header]
    for i, sid, model in zip(infos, ids, models, strict=True):
        prompt = _one_line(i.last_user_message or "", prompt_width)
        lines.append(
            f"{sid:<{id_width}}  {_when(i.modified_at)}  {i.message_count:>5}  "
            f"{model:<{model_width}}  {prompt}".rstrip()
        )
    return "\n".join(lines) + "\n"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def _usage(u: Usage) -> str:
    text = f"tokens: {u.input} in, {u.output} out"
    if u.cache_read or u.cache_write:
        text += f", cache {u.cache_read} read / {u.cache_write} written"
    if u.reasoning:
        text += f", {u.reasoning} reasoning"
    return text


def _message(m: Message, names: dict[str, str]) -> str:
    head = f"[{heading(m).lower()}]"
    details = []
    if m.role == "assistant" and m.wire is not None:
        details.append(m.wire.model)
    if m.stop_reason:
        details.append(m.stop_reason)
    if m.usage is not None:
        details.append(_usage(m.usage))
    if details:
        head += " " + " · ".join(details)
    return "\n".join([head, *(_indent(render_block(b, names)) for b in m.content)])


def render_session(info: SessionInfo, windows: Sequence[Sequence[Message]]) -> str:
    """The messages of ``windows``, readable, with a separator at each compaction.

    Pass every window to show the whole history, or ``[latest]`` for the current one.
    Blocks read as in the compaction's transcript (``navi_core.compaction._transcript``).
    """
    lines = [
        f"session {terminal_safe_line(info.id)}",
        f"created {_when(info.created_at)} · modified {_when(info.modified_at)} · "
        f"{info.message_count} messages · model {info.model or '-'}",
    ]
    earlier = info.message_count - sum(len(w) for w in windows)
    if earlier > 0:
        lines.append(
            f"(the latest window; {earlier} earlier messages were compacted, "
            "--all shows them)"
        )
    names: dict[str, str] = {}
    for n, window in enumerate(windows):
        if len(windows) > 1:
            label = "start" if n == 0 else "compaction"
            lines.append(f"\n===== {label}: window {n + 1} of {len(windows)} =====")
        lines.extend("\n" + _message(m, names) for m in window)
    return terminal_safe("\n".join(lines) + "\n")


def _print_error(exc: SessionError) -> None:
    """``exc`` as one line on stderr (a driver's message may span several)."""
    print(error_line(exc, with_type=False), file=sys.stderr)


def _cmd_list(args: argparse.Namespace) -> int:
    try:
        store = store_from_args(args)
        try:
            infos = store.list()
            hidden = [] if args.all else [i for i in infos if _unanswered(store, i)]
        finally:
            store.close()
    except SessionError as exc:
        _print_error(exc)
        return 1
    shown = [i for i in infos if i not in hidden]
    if shown:
        sys.stdout.write(render_listing(shown))
    elif not hidden:
        print("no sessions")
    if hidden:
        n = len(hidden)
        print(
            f"({n} session{'s' if n > 1 else ''} with a prompt the model never "
            "answered not shown: --all lists them)"
        )
    return 0


#: sessions holding more messages than this are not read to tell (a listing stays
#: cheap): a failed first turn stores a prompt, perhaps a system prompt, no more
_UNANSWERED_MAX = 8


def _unanswered(store: SessionStore, info: SessionInfo) -> bool:
    """True for a session that holds prompts but no answer: its first turn failed
    (or was cancelled) before the model answered. Such a session is kept, its prompt
    is committed (``run --session latest`` retries it), but not listed by default."""
    if not 0 < info.message_count <= _UNANSWERED_MAX:
        return False
    roles = {m.role for m in store.history_page(info.id, _UNANSWERED_MAX).messages}
    return "user" in roles and "assistant" not in roles


def _cmd_show(args: argparse.Namespace) -> int:
    try:
        store = store_from_args(args)
        try:
            if args.session == "latest":
                latest = store.latest()
                if latest is None:
                    raise SessionNotFound("there is no session yet")
                info = latest
            else:
                info = store.get(args.session)
            windows = (
                store.history(info.id) if args.all else [store.load(info.id).messages]
            )
        finally:
            store.close()
    except SessionError as exc:
        _print_error(exc)
        return 1
    sys.stdout.write(render_session(info, windows))
    return 0


def _matching(store: SessionStore, prefix: str) -> list[SessionInfo]:
    return [i for i in store.list() if i.id.startswith(prefix)]


def _cmd_delete(args: argparse.Namespace) -> int:
    prefix: str = args.session
    try:
        store = store_from_args(args)
        try:
            exact = [i for i in store.list() if i.id == prefix]
            found = exact or (_matching(store, prefix) if prefix else [])
            if len(found) != 1:
                if not found:
                    raise SessionNotFound(f"no session matches {prefix!r}")
                print(
                    f"error: {prefix!r} matches {len(found)} sessions; give more "
                    "characters of one of them:",
                    file=sys.stderr,
                )
                sys.stderr.write(render_listing(found))
                return 1
            info = found[0]
            # Taken first: a session an agent is driving right now is not pulled
            # from under it.
            lock = store.lock(info.id)
            try:
                store.delete_session(info.id)
            finally:
                lock.release()
        finally:
            store.close()
    except SessionError as exc:
        _print_error(exc)
        return 1
    shown = terminal_safe_line(info.id)
    print(f"deleted session {shown} ({info.message_count} messages)")
    return 0
