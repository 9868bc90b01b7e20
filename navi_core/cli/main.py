"""The ``navi-core`` entry point: cheap to import, and interruptible from the start.

``main`` imports the parser and the commands (``parser``) only once it runs, under
the same guard as the command itself: a Ctrl-C while Python is still loading them,
as while a command runs, exits with status 130 and no traceback. ``import
navi_core.cli`` (what the ``navi-core`` script does first) loads nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["build_parser", "main"]

#: the exit status of a command cut short by Ctrl-C (128 + SIGINT, as shells report)
INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    from .parser import build_parser as build

    return build()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``navi-core`` command; returns the exit status."""
    try:
        from .parser import dispatch  # every command's module: the slow part

        return dispatch(argv)
    except KeyboardInterrupt:
        return INTERRUPTED
