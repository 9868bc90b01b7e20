"""``navi-core compact SESSION [instructions]``: summarise a stored session now.

The session's old prefix is summarised by the chosen endpoint and stored as a new
window; ``navi-core sessions show --all`` still shows every earlier message.
"""

from __future__ import annotations

import argparse
import sys
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
        "--anthropic-base-url", metavar="URL", help="with --anthropic: its base URL"
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


def _provider(args: argparse.Namespace) -> Provider:
    if args.anthropic:
        from .providers.anthropic import Anthropic

        return Anthropic(args.model, base_url=args.anthropic_base_url)
    from .providers.openai_chat import OpenAIChat

    return OpenAIChat(args.model, base_url=args.openai_base_url)


def _cmd_compact(args: argparse.Namespace) -> int:
    from .agent import Agent
    from .sessions_cli import store_from_args

    if args.anthropic and args.openai_base_url:
        print("error: give --anthropic or --openai-base-url, not both", file=sys.stderr)
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
        store = store_from_args(args)
    except NaviError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    provider = _provider(args)
    try:
        with Agent(provider, store=store, session=args.session, config=config) as agent:
            before = len(agent.conversation)
            result = agent.compact(args.instructions)
            after = len(agent.conversation)
            sid = agent.session_id
    except NaviError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        provider.close()
        store.close()
    if not result.compacted:
        print(f"session {sid}: nothing to summarise ({before} messages fit verbatim)")
    else:
        turns = "turn" if result.kept_turns == 1 else "turns"
        print(
            f"session {sid}: summarised {result.summarized_messages} messages, kept "
            f"{result.kept_turns} {turns} verbatim; {before} -> {after} messages"
        )
    return 0
