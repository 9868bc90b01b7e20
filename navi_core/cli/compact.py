"""``navi-core compact SESSION [instructions]``: summarise a stored session now.

The session's old prefix is summarised by the chosen model and stored as a new window;
``navi-core sessions show --all`` still shows every earlier message. The endpoint comes
from the shared provider flags (``options``). Every failure, opening the store or the
endpoint included, is one ``error:`` line on stderr and exit status 1 (2 for flags that
contradict each other); both are closed in any case.
"""

from __future__ import annotations

import argparse
import sys

from ..agent import Agent
from ..compaction._compaction import DEFAULT_SUMMARY_PROMPT
from ..config import CompactionConfig, Config
from ..errors import NaviError
from ._terminal_text import terminal_safe_line
from .options import (
    Subcommands,
    UsageError,
    add_provider_arguments,
    add_store_arguments,
    error_line,
    provider_choice,
    store_and_provider,
)

__all__ = ["command", "register"]


def register(subcommands: Subcommands) -> None:
    """Add ``compact SESSION [instructions]`` with the provider and store flags."""
    p = subcommands.add_parser(
        "compact",
        help="summarise the old part of a session, keeping recent turns verbatim",
        description=(
            "Summarise the old part of a stored session with a model and store the "
            "result as a new window; earlier windows stay readable."
        ),
    )
    p.add_argument("session", metavar="SESSION", help="a session id or id prefix")
    p.add_argument(
        "instructions", nargs="?", help="extra instructions for this summary"
    )
    add_provider_arguments(p, model_help="the model that writes the summary")
    p.add_argument(
        "--prompt",
        default=DEFAULT_SUMMARY_PROMPT,
        help="the system prompt of the summary request (default: a built-in one)",
    )
    p.add_argument(
        "--keep-verbatim",
        type=int,
        default=CompactionConfig().keep_verbatim,
        metavar="TOKENS",
        help="token budget of the recent turns kept word for word (default: %(default)s)",
    )
    add_store_arguments(p)
    p.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """``navi-core compact``: 0 (also when nothing needed summarising), 1 or 2."""
    try:
        choice = provider_choice(args)
        if args.keep_verbatim < 0:
            raise UsageError("--keep-verbatim must not be negative")
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    config = Config(
        compaction=CompactionConfig(
            keep_verbatim=args.keep_verbatim, prompt=args.prompt
        )
    )
    try:
        with (
            store_and_provider(args, choice) as (store, provider),
            Agent(provider, store=store, session=args.session, config=config) as agent,
        ):
            before = len(agent.conversation.messages)
            result = agent.compact(args.instructions)
            after = len(agent.conversation.messages)
            sid = terminal_safe_line(agent.session_id)  # a file's id may hold anything
    except (NaviError, ValueError) as exc:
        # ValueError: an endpoint the provider refuses, such as a bad base URL
        print(error_line(exc), file=sys.stderr)
        return 1
    if not result.compacted:
        print(f"session {sid}: nothing to summarise ({before} messages fit verbatim)")
    else:
        turns = "turn" if result.kept_turns == 1 else "turns"
        print(
            f"session {sid}: summarised {result.summarized_messages} messages, kept "
            f"{result.kept_turns} {turns} verbatim; {before} -> {after} messages"
        )
    return 0
