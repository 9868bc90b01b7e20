"""``navi-core run [PROMPT]``: one agent turn against a real endpoint, shown live.

Without a prompt it resumes the session's interrupted turn. ``--workspace DIR`` gives
the model the file tools of the demo, confined to DIR. The endpoint comes from the
shared provider flags, the store from the shared store flags (``options``).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path

from ..agent import Agent
from ..config import Config
from ..errors import NaviError
from ..events import TurnComplete
from .console import EventPrinter, turn_summary
from .options import (
    Subcommands,
    UsageError,
    add_provider_arguments,
    add_store_arguments,
    error_line,
    provider_choice,
    store_and_provider,
)
from .workspace import workspace_tools

__all__ = ["command", "register"]


def register(subcommands: Subcommands) -> None:
    """Add ``run [PROMPT]`` with the provider and store flags."""
    p = subcommands.add_parser(
        "run",
        help="run one turn against a real endpoint",
        description="Send one user message to a model and run the turn to its end "
        "(tool calls included), printing the events as they arrive.",
    )
    p.add_argument("prompt", nargs="?", help="the user message (omit to resume)")
    add_provider_arguments(p)
    p.add_argument("--session", default=None, help='"latest", an id or an id prefix')
    p.add_argument("--system", default=None, help="system prompt for a new session")
    p.add_argument(
        "--workspace",
        default=None,
        metavar="DIR",
        help="give the model file tools (list, read, count words) in this folder",
    )
    p.add_argument(
        "--max-tokens", type=int, default=None, help="cap on each response's output"
    )
    add_store_arguments(p)
    p.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """``navi-core run``: 0 when the turn ended, 1 when it failed, 2 for bad flags."""
    try:
        choice = provider_choice(args)
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    tools = workspace_tools(Path(args.workspace)) if args.workspace else []
    printer = EventPrinter(sys.stdout)
    try:
        with ExitStack() as stack:
            store, provider = stack.enter_context(store_and_provider(args, choice))
            agent = stack.enter_context(
                Agent(
                    provider,
                    tools=tools,
                    store=store,
                    session=args.session,
                    config=Config(max_output_tokens=args.max_tokens),
                    system=args.system,
                )
            )
            stream = stack.enter_context(
                agent.run(args.prompt) if args.prompt else agent.resume()
            )
            while ev := stream.next():
                printer.handle(ev)
                if isinstance(ev, TurnComplete):
                    print(turn_summary(ev, agent.session_id))
    except (NaviError, ValueError) as exc:
        # ValueError: an endpoint the provider refuses, such as a bad base URL
        print(error_line(exc), file=sys.stderr)
        return 1
    return 0
