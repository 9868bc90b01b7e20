"""The ``navi-core`` command: an offline demo, one turn against a real endpoint,
session listing and compaction."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import NaviError

if TYPE_CHECKING:
    from .providers.base import Provider
    from .store.base import SessionStore

__all__ = ["build_parser", "main"]


def _open_store(args: argparse.Namespace) -> SessionStore:
    from .sessions_cli import store_from_args

    return store_from_args(args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    try:
        store = _open_store(args)
    except NaviError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        return run_demo(store, sys.stdout)
    finally:
        store.close()


def _cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .agent import Agent
    from .config import Config
    from .console import EventPrinter
    from .demo import demo_tools
    from .events import TurnComplete

    printer = EventPrinter(sys.stdout)
    try:
        with contextlib.ExitStack() as stack:
            provider = _provider_from_args(args)
            stack.callback(provider.close)
            store = _open_store(args)
            stack.callback(store.close)
            agent = stack.enter_context(
                Agent(
                    provider,
                    tools=demo_tools(Path(args.workspace)) if args.workspace else [],
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
                    u = ev.usage
                    print(
                        f"[{ev.stop_reason}] {ev.iterations} responses, "
                        f"{ev.tool_calls} tool calls, {u.prompt_total} in / "
                        f"{u.output} out tokens, session {agent.session_id[:12]}"
                    )
    except (NaviError, ValueError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def _provider_from_args(args: argparse.Namespace) -> Provider:
    if args.anthropic:
        from .providers.anthropic import Anthropic

        return Anthropic(args.model, base_url=args.base_url)
    from .providers.openai_chat import OpenAIChat

    return OpenAIChat(args.model, base_url=args.base_url)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="navi-core", description="A synchronous, pull-based LLM agent loop."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    from . import compaction_cli, sessions_cli
    from .sessions_cli import add_store_arguments

    demo = sub.add_parser(
        "demo", help="run one complete agent turn offline, with real tools"
    )
    add_store_arguments(demo)
    demo.set_defaults(func=_cmd_demo)

    run = sub.add_parser("run", help="run one turn against a real endpoint")
    run.add_argument("prompt", nargs="?", help="the user message (omit to resume)")
    run.add_argument("--model", required=True)
    run.add_argument(
        "--base-url", default=None, help="API base URL (OpenAI style ends in /v1)"
    )
    run.add_argument(
        "--anthropic", action="store_true", help="use the Anthropic Messages API"
    )
    run.add_argument("--session", default=None, help='"latest", an id or an id prefix')
    run.add_argument("--system", default=None, help="system prompt for a new session")
    run.add_argument(
        "--workspace", default=None, help="give the model file tools in this folder"
    )
    run.add_argument("--max-tokens", type=int, default=None)
    add_store_arguments(run)
    run.set_defaults(func=_cmd_run)

    sessions_cli.register(sub)
    compaction_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``navi-core`` command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
