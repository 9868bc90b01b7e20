"""The ``navi-core`` parser and the dispatch to one sub-command per module.

Loaded by ``main.main`` once the entry point is guarded against Ctrl-C: building the
parser imports every command's module. ``navi-core`` alone prints the help on stderr
and exits with status 2 (a command is missing, as argparse reports any missing
argument); ``navi-core --help`` prints it on stdout and exits with 0; ``navi-core
--version`` prints ``navi-core X.Y.Z``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .. import __version__
from .bench.command import register as add_bench
from .chat.command import register as add_chat
from .compact import register as add_compact
from .demo import register as add_demo
from .options import Command, help_command
from .run import register as add_run
from .serve import register as add_serve
from .sessions import register as add_sessions

__all__ = ["build_parser", "dispatch"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = argparse.ArgumentParser(
        prog="navi-core",
        description="A synchronous, pull-based LLM agent loop.",
        epilog="Run 'navi-core COMMAND --help' for a command's flags.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}"
    )
    parser.set_defaults(func=help_command(parser))
    subcommands = parser.add_subparsers(
        title="commands", metavar="COMMAND", dest="command"
    )
    for add in (add_demo, add_run, add_chat, add_sessions, add_compact, add_serve,
                add_bench):  # fmt: skip
        add(subcommands)
    return parser


def dispatch(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run its command; returns the exit status (130 on Ctrl-C)."""
    try:
        args = build_parser().parse_args(argv)
        command: Command = args.func
        return int(command(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
