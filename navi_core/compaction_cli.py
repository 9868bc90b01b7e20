"""``navi-core compact SESSION [instructions]``: summarise a stored session now.

The session's old prefix is summarised by the chosen endpoint and stored as a new
window; ``navi-core sessions show --all`` still shows every earlier message. The
endpoint is OpenAI-compatible unless ``--anthropic`` or ``--anthropic-base-url`` (which
implies ``--anthropic``) is given. Every failure, opening the store or the endpoint
included, is one ``error:`` line on stderr and exit status 1; both are closed in any
case.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import Any

from .compaction import DEFAULT_SUMMARY_PROMPT
from .config import CompactionConfig, Config
from .errors import NaviError
from .providers.base import Provider

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``compact SESSION [instructions]`` to the ``navi-core`` subcommands."""
    from .sessions_cli import add_store_arguments

    p = subparsers.add_parser(
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
    p.add_argument("--model", required=True, help="the model that writes the summary")
    p.add_argument(
        "--openai-base-url",
        metavar="URL",
        help="an OpenAI-compatible endpoint ending in /v1 (key: $OPENAI_API_KEY)",
    )
    p.add_argument(
        "--anthropic",
        action="store_true",
        help="use the Anthropic Messages API (key: $ANTHROPIC_API_KEY)",
    )
    p.add_argument(
        "--anthropic-base-url",
        metavar="URL",
        help="an Anthropic Messages API endpoint, without /v1; implies --anthropic",
    )
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
    p.set_defaults(func=_cmd_compact)


def _provider(args: argparse.Namespace, anthropic: bool) -> Provider:
    if anthropic:
        from .providers.anthropic import Anthropic

        return Anthropic(args.model, base_url=args.anthropic_base_url)
    from .providers.openai_chat import OpenAIChat

    return OpenAIChat(args.model, base_url=args.openai_base_url)


def _error(exc: Exception) -> str:
    """``exc`` on one line; provider and store errors never hold a key or password."""
    text = " ".join(str(exc).split())
    if isinstance(exc, NaviError):
        return f"error: {type(exc).__name__}: {text}"
    return f"error: {text}"


def _cmd_compact(args: argparse.Namespace) -> int:
    from .agent import Agent
    from .sessions_cli import store_from_args

    anthropic = args.anthropic or args.anthropic_base_url is not None
    if anthropic and args.openai_base_url:
        print(
            "error: give --anthropic / --anthropic-base-url or --openai-base-url, "
            "not both",
            file=sys.stderr,
        )
        return 2
    if args.keep_verbatim < 0:
        print("error: --keep-verbatim must not be negative", file=sys.stderr)
        return 2
    config = Config(
        compaction=CompactionConfig(
            keep_verbatim=args.keep_verbatim, prompt=args.prompt
        )
    )
    try:
        with ExitStack() as resources:
            store = store_from_args(args)
            resources.callback(store.close)
            provider = _provider(args, anthropic)
            resources.callback(provider.close)
            with Agent(
                provider, store=store, session=args.session, config=config
            ) as agent:
                before = len(agent.conversation)
                result = agent.compact(args.instructions)
                after = len(agent.conversation)
                sid = agent.session_id
    except (NaviError, ValueError) as exc:
        # ValueError: an endpoint the provider refuses, such as a bad base URL
        print(_error(exc), file=sys.stderr)
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
