"""The offline demo: a complete agent turn with real file tools on a scripted model."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import TextIO

from .agent import Agent
from .config import Config
from .console import EventPrinter
from .conversation import Message, Text, ToolUse, Usage
from .core import IMPLEMENTATION, estimate_tokens
from .events import TurnComplete
from .providers.scripted import Scripted
from .store.base import SessionStore
from .tools import Tool, tool

__all__ = ["demo_tools", "run_demo"]

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


def demo_tools(root: Path) -> list[Tool]:
    """Three real tools confined to ``root``: list a directory, read a file, count words."""

    def resolve(path: str) -> Path:
        target = (root / path).resolve()
        if root.resolve() not in (target, *target.parents):
            raise PermissionError(f"{path!r} is outside the workspace")
        return target

    @tool
    def list_dir(path: str = ".") -> list[str]:
        """List the entries of a directory in the workspace.

        Args:
            path: directory relative to the workspace root.
        """
        return sorted(
            p.name + ("/" if p.is_dir() else "") for p in resolve(path).iterdir()
        )

    @tool
    def read_file(path: str, max_chars: int = 4000) -> str:
        """Read a text file from the workspace.

        Args:
            path: file relative to the workspace root.
            max_chars: read at most this many characters.
        """
        with resolve(path).open(encoding="utf-8", errors="replace") as f:
            return f.read(max_chars)

    @tool
    def word_count(path: str) -> dict[str, int]:
        """Count lines, words and characters of a text file in the workspace.

        Args:
            path: file relative to the workspace root.
        """
        text = resolve(path).read_text(encoding="utf-8")
        return {
            "lines": text.count("\n"),
            "words": len(text.split()),
            "chars": len(text),
        }

    return [list_dir, read_file, word_count]


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


def run_demo(store: SessionStore, out: TextIO, *, color: bool | None = None) -> int:
    """Run one turn offline, printing the event stream live and a summary line."""
    prompt = "What is in this workspace? Summarise the README and the notes."
    with tempfile.TemporaryDirectory(prefix="navi-demo-") as tmp:
        root = Path(tmp)
        for name, text in _FILES.items():
            (root / name).write_text(text, encoding="utf-8")
        provider = _script(estimate_tokens(prompt) + 120)
        printer = EventPrinter(out, color=color)
        out.write(f"navi_core demo (core: {IMPLEMENTATION}, workspace: {root.name})\n")
        out.write(f"user: {prompt}\n")
        t0 = time.perf_counter()
        with (
            Agent(
                provider, tools=demo_tools(root), store=store, config=Config()
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
    u = done.usage
    out.write(
        f"[{done.stop_reason}] {done.iterations} responses, {done.tool_calls} tool calls, "
        f"{u.prompt_total} in / {u.output} out tokens, {elapsed * 1000:.1f} ms, "
        f"session {session[:12]}\n"
    )
    out.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover
    import sys

    from .store.memory import MemoryStore

    raise SystemExit(run_demo(MemoryStore(), sys.stdout, color=os.isatty(1)))
