"""``navi-core demo``: a complete agent turn offline, real file tools, a scripted model.

The model is ``Scripted`` (no network, no key); the tools are the ones ``run
--workspace`` gives a real model, on a scratch folder of three files.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from ..agent import Agent
from ..config import Config
from ..conversation import Message, Text, ToolUse, Usage
from ..core import IMPLEMENTATION, estimate_tokens
from ..errors import NaviError
from ..events import TurnComplete
from ..providers.scripted import Scripted
from ..store.base import SessionStore
from .console import EventPrinter, turn_summary
from .options import (
    Subcommands,
    add_store_arguments,
    error_line,
    store_from_args,
)
from .workspace import workspace_tools

__all__ = ["demo_files", "register", "run_demo"]

_FILES = {
    "README.md": (
        "# Weather station\n\nA tiny project that logs temperature readings every "
        "minute and plots a daily chart.\n"
    ),
    "station.py": (
        "import time\n\n\ndef read_sensor():\n    return 21.5\n\n\n"
        "while True:\n    print(read_sensor())\n    time.sleep(60)\n"
    ),
    "notes.txt": "Calibrate the sensor in spring.\nReplace the battery in autumn.\n",
}


def _reply(blocks: list[Text | ToolUse], prompt_tokens: int) -> Message:
    out = sum(
        estimate_tokens(b.text if isinstance(b, Text) else b.input) for b in blocks
    )
    return Message("assistant", tuple(blocks), Usage(input=prompt_tokens, output=out))


def _script(prompt_tokens: int) -> Scripted:
    return Scripted(
        [
            _reply(
                [
                    Text("I'll look at the workspace first."),
                    ToolUse("call_1", "list_dir", '{"path": "."}'),
                ],
                prompt_tokens,
            ),
            _reply(
                [
                    Text("Reading the README and measuring the notes, in parallel."),
                    ToolUse("call_2", "read_file", '{"path": "README.md"}'),
                    ToolUse("call_3", "word_count", '{"path": "notes.txt"}'),
                ],
                prompt_tokens + 60,
            ),
            _reply(
                [
                    Text(
                        "The workspace holds a small weather-station project: README.md "
                        "says it logs temperature readings every minute and plots a "
                        "daily chart; station.py reads the sensor in a loop; notes.txt "
                        "has 2 maintenance reminders (10 words)."
                    )
                ],
                prompt_tokens + 160,
            ),
        ],
        model="scripted-demo",
    )


def demo_files(root: Path) -> None:
    """Write the demo's three files (a small weather-station project) into ``root``."""
    for name, text in _FILES.items():
        (root / name).write_text(text, encoding="utf-8")


def run_demo(store: SessionStore, out: TextIO, *, color: bool | None = None) -> int:
    """Run one turn offline, printing the event stream live and a summary line."""
    prompt = "What is in this workspace? Summarise the README and the notes."
    with tempfile.TemporaryDirectory(prefix="navi-demo-") as tmp:
        root = Path(tmp)
        demo_files(root)
        provider = _script(estimate_tokens(prompt) + 120)
        printer = EventPrinter(out, color=color)
        out.write(f"navi_core demo (core: {IMPLEMENTATION}, workspace: {root.name})\n")
        out.write(f"user: {prompt}\n")
        t0 = time.perf_counter()
        with (
            Agent(
                provider, tools=workspace_tools(root), store=store, config=Config()
            ) as agent,
            agent.run(prompt) as stream,
        ):
            done: TurnComplete | None = None
            while ev := stream.next():
                printer.handle(ev)
                if isinstance(ev, TurnComplete):
                    done = ev
            session = agent.session_id
        elapsed = time.perf_counter() - t0
    assert done is not None
    out.write(turn_summary(done, session, seconds=elapsed) + "\n")
    out.flush()
    return 0


def register(subcommands: Subcommands) -> None:
    """Add ``demo [--db FILE | --postgres DSN]``."""
    p = subcommands.add_parser(
        "demo",
        help="run one complete agent turn offline, with real tools",
        description="Run one complete agent turn against a scripted model, with real "
        "file tools on a scratch folder, and store the session.",
    )
    add_store_arguments(p)
    p.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """``navi-core demo``: 0, or 1 with one ``error:`` line when the store fails."""
    try:
        store = store_from_args(args)
    except NaviError as exc:
        print(error_line(exc, with_type=False), file=sys.stderr)
        return 1
    try:
        return run_demo(store, sys.stdout)
    finally:
        store.close()
