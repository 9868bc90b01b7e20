"""``navi-core run [PROMPT]``: one agent turn against a real endpoint, shown live.

Without a prompt it resumes the session's interrupted turn. ``--workspace DIR`` gives
the model the file tools of the demo, confined to DIR. The endpoint comes from the
shared provider flags, the store from the shared store flags (``options``).

The turn runs on a worker thread so that Ctrl-C, which Python delivers to the main
thread, cancels it (``Stream.cancel``): what was written stays, marked as interrupted,
and the program exits with 130. A second Ctrl-C leaves at once. While the turn runs
the main thread counts Ctrl-C with a handler of its own (``_counted_ctrl_c``) instead
of taking a KeyboardInterrupt wherever it is; a Ctrl-C the process was started
ignoring (a background job of a script) stays ignored.

A refused turn (``StopReason.REFUSED``: the model refused, or the provider's content
filter withheld or cut the answer) is said under what streamed and exits with 3, so a
script does not take the partial text for the answer.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Protocol

from ..agent import Agent
from ..config import Config
from ..errors import NaviError
from ..events import Event, StopReason, TurnComplete
from ..tools._tool import Tool, ToolSource
from .console import EventPrinter, turn_summary
from .options import (
    Subcommands,
    UsageError,
    add_provider_arguments,
    add_request_arguments,
    add_store_arguments,
    error_line,
    provider_choice,
    store_and_provider,
)
from .workspace import workspace_tools

__all__ = ["REFUSED_EXIT", "command", "register"]

#: the exit status of a turn the provider refused (``StopReason.REFUSED``)
REFUSED_EXIT = 3


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
    add_request_arguments(p)
    add_store_arguments(p)
    p.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """``navi-core run``: 0 when the turn ended, 1 when it failed, 2 for bad flags,
    3 when the provider refused the answer, 130 when Ctrl-C cut it short."""
    try:
        choice = provider_choice(args)
        if args.extra_body is not None:
            choice = replace(choice, extra_body=args.extra_body)
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    tools: list[Tool | ToolSource] = []
    if args.workspace:
        tools.extend(workspace_tools(Path(args.workspace)))
    printer = EventPrinter(sys.stdout)
    config = Config(max_output_tokens=args.max_tokens, temperature=args.temperature)
    try:
        with ExitStack() as stack:
            if args.mcp_config:
                from ._mcp_config import open_mcp_servers  # the MCP client: httpx

                servers = open_mcp_servers(Path(args.mcp_config).expanduser())
                for server in servers:
                    stack.callback(server.close)
                tools.extend(servers)
            store, provider = stack.enter_context(store_and_provider(args, choice))
            agent = stack.enter_context(
                Agent(
                    provider,
                    tools=tools,
                    store=store,
                    session=args.session,
                    config=config,
                    system=args.system,
                )
            )
            stream = stack.enter_context(
                agent.run(args.prompt) if args.prompt else agent.resume()
            )
            return _drive(stream, printer, agent.session_id)
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    except (NaviError, ValueError) as exc:
        # ValueError: an endpoint the provider refuses, such as a bad base URL
        print(error_line(exc), file=sys.stderr)
        return 1


class _Turn(Protocol):
    """What ``_drive`` uses of a ``Stream``."""

    def next(self) -> Event | None: ...

    def cancel(self) -> None: ...


class _CtrlC:
    """A SIGINT handler that counts the presses and raises nothing."""

    def __init__(self) -> None:
        self.presses = 0

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1


@contextmanager
def _counted_ctrl_c() -> Iterator[_CtrlC]:
    """While the turn runs, Ctrl-C is counted rather than raised.

    Python's own handler raises ``KeyboardInterrupt`` wherever the main thread is:
    inside a lock's wait, where it can break the lock, or inside a finalizer, which
    swallows it (the Ctrl-C is lost and the turn runs on). A counter cannot be lost;
    the waiting loop reads it. It replaces only Python's own handler, on the main
    thread: a Ctrl-C that this process was started ignoring (a background job of a
    script) stays ignored, and a host's own handler stays in place.
    """
    counter = _CtrlC()
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield counter  # never counts: KeyboardInterrupt, if anything, as before
        return
    signal.signal(signal.SIGINT, counter)
    try:
        yield counter
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: how often the waiting main thread looks at the turn and the Ctrl-C count
_POLL = 0.05


def _drive(stream: _Turn, printer: EventPrinter, session_id: str) -> int:
    """Print the turn as it runs on a worker thread; Ctrl-C here cancels it.

    Raises what the turn raised; 130 after a Ctrl-C, 3 (``REFUSED_EXIT``) for a
    turn the provider refused, else 0. A second Ctrl-C raises KeyboardInterrupt
    without waiting for the turn to end.
    """
    failure: list[BaseException] = []
    refused = threading.Event()
    # not Thread.join: a Ctrl-C that interrupts it can leave is_alive() False
    finished = threading.Event()

    def pump() -> None:
        try:
            while ev := stream.next():
                printer.handle(ev)
                if isinstance(ev, TurnComplete):
                    print(turn_summary(ev, session_id), flush=True)
                    if ev.stop_reason is StopReason.REFUSED:
                        refused.set()
        except BaseException as exc:  # re-raised on the main thread
            failure.append(exc)
        finally:
            finished.set()

    interrupted = False
    with _counted_ctrl_c() as ctrl_c:
        threading.Thread(target=pump, name="navi-run-turn", daemon=True).start()
        try:
            while not finished.wait(_POLL):
                if ctrl_c.presses > 1:
                    raise KeyboardInterrupt  # a second Ctrl-C leaves without waiting
                if ctrl_c.presses and not interrupted:
                    interrupted = True
                    stream.cancel()  # the turn ends as CANCELLED within 100 ms
        except KeyboardInterrupt:
            if interrupted:
                raise
            # Python's own handler (not the main thread, or a host's handler)
            interrupted = True
            stream.cancel()
            while not finished.wait(_POLL):  # a second Ctrl-C leaves without waiting
                pass
        # a Ctrl-C as the turn ended still says the run was interrupted
        interrupted = interrupted or ctrl_c.presses > 0
    if failure:
        raise failure[0]
    if interrupted:
        return 130
    return REFUSED_EXIT if refused.is_set() else 0
