"""``navi-core bench``: an agent workload against your own server, measured.

    navi-core bench --base-url http://127.0.0.1:8080/v1 --model M \\
        --concurrency 4 --turns 5 --tools --json run.json --png run.png

N workers (``--concurrency``) each run ``--turns`` turns in their own session; with
``--tools`` every turn is a multi-iteration tool loop over a local ``add`` tool
(``--steps`` calls). Prints time to first token, inter-token latency, decode speed,
tool round-trip overhead, turn time and the client's own CPU share
(``.workload``, ``.report``). Responses a server cut off before their end
(``IncompleteResponse``) are counted and warned about, and left out of every speed.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..options import (
    Subcommands,
    UsageError,
    add_provider_arguments,
    error_line,
    provider_choice,
)

if TYPE_CHECKING:  # loaded when the command runs: the parser stays cheap to build
    from .workload import Workload

__all__ = ["Progress", "command", "register"]


def register(subcommands: Subcommands) -> None:
    """Add ``bench`` with the provider flags and the workload's."""
    p = subcommands.add_parser(
        "bench",
        help="measure an agent workload against a server",
        description="Run agent turns (optionally tool loops) from several workers "
        "against a server and report time to first token, inter-token latency, "
        "tokens/s, tool round-trip overhead and the client's CPU share.",
    )
    add_provider_arguments(p)
    w = p.add_argument_group("workload")
    w.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="N",
        help="workers running turns at once (default 1)",
    )
    w.add_argument(
        "--turns",
        type=int,
        default=3,
        metavar="T",
        help="turns per worker, in one session each (default 3)",
    )
    w.add_argument(
        "--tools",
        action="store_true",
        help="make every turn a tool loop over a local add tool",
    )
    w.add_argument(
        "--steps",
        type=int,
        default=3,
        metavar="K",
        help="tool calls asked for per turn with --tools (default 3)",
    )
    w.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        metavar="N",
        help="cap on each response's output (default 256)",
    )
    out = p.add_argument_group("output")
    out.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="write the summary and every sample as JSON",
    )
    out.add_argument(
        "--png",
        type=Path,
        metavar="FILE",
        help="write a chart (needs matplotlib, in the bench extra: "
        "pip install '.[bench]' from a clone)",
    )
    out.add_argument("--no-progress", action="store_true",
                     help="no progress bar on stderr")  # fmt: skip
    p.set_defaults(func=command)


class Progress:
    """A one-line progress bar on ``out``, redrawn after every turn."""

    def __init__(self, total: int, out: TextIO, width: int = 30) -> None:
        self._total = total
        self._done = 0
        self._out = out
        self._width = width
        self._start = time.perf_counter()
        self._lock = threading.Lock()
        self._draw()

    def step(self) -> None:
        """One more turn done."""
        with self._lock:
            self._done += 1
            self._draw()

    def finish(self) -> None:
        """End the bar's line."""
        self._out.write("\n")
        self._out.flush()

    def _draw(self) -> None:
        filled = self._width * self._done // max(self._total, 1)
        bar = "#" * filled + "." * (self._width - filled)
        elapsed = time.perf_counter() - self._start
        self._out.write(f"\r[{bar}] {self._done}/{self._total} turns {elapsed:.1f} s")
        self._out.flush()


def command(args: argparse.Namespace) -> int:
    """``navi-core bench``: 0 when every turn ended, 1 when some failed, 2 for bad flags."""
    from .report import check_png, summarize, table, write_json, write_png
    from .workload import run

    try:
        choice = provider_choice(args)
        workload = _workload(args)
        if args.png is not None:
            check_png()
    except (UsageError, ImportError) as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    try:
        provider = choice.open()
    except ValueError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    total = workload.concurrency * workload.turns
    progress = None if args.no_progress else Progress(total, sys.stderr)
    try:
        result = run(provider, workload, None if progress is None else progress.step)
    finally:
        provider.close()
        if progress is not None:
            progress.finish()
    summary = summarize(result)
    print(table(summary))
    try:
        if args.json is not None:
            write_json(args.json, result, summary)
            print(f"wrote {args.json}")
        if args.png is not None:
            write_png(args.png, result, summary)
            print(f"wrote {args.png}")
    except OSError as exc:  # the table is out; only the file is lost
        print(error_line(exc), file=sys.stderr)
        return 1
    return 1 if summary["totals"]["failed_turns"] else 0


def _workload(args: argparse.Namespace) -> Workload:
    from .workload import Workload

    for flag in ("concurrency", "turns", "steps", "max_tokens"):
        if getattr(args, flag) < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1")
    return Workload(
        concurrency=args.concurrency,
        turns=args.turns,
        tools=args.tools,
        steps=args.steps,
        max_tokens=args.max_tokens,
    )
