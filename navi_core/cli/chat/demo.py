"""``navi-core chat --demo``: the chat against the offline ``Scripted`` provider.

No server, no key. A scratch workspace of three files gets the real file tools plus a
slow ``scan`` tool that reports progress, and each message is answered by a script
chosen from what it asks: a question about the workspace runs tool calls (two in
parallel), anything else gets a short markdown reply. ``/compact`` gets a summary.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...conversation import Message, Text, Thinking, ToolUse, Usage, WireIdentity
from ...core import estimate_tokens
from ...providers.base import ProviderRequest, ProviderStream
from ...providers.scripted import Scripted
from ...tools._tool import Tool, ToolContext, tool
from ..workspace import workspace_tools
from .profiles import Price

__all__ = ["DEMO_PRICE", "DemoProvider", "DemoScript"]

#: what the demo's model "costs", so the status line shows a cost (USD per Mtok)
DEMO_PRICE = Price(input=3.0, output=15.0)

_FILES = {
    "README.md": "# Weather station\n\nLogs a temperature reading every minute and "
    "plots a daily chart.\n",
    "station.py": "import time\n\n\ndef read_sensor():\n    return 21.5\n\n\n"
    "while True:\n    print(read_sensor())\n    time.sleep(60)\n",
    "notes.txt": "Calibrate the sensor in spring.\nReplace the battery in autumn.\n",
}
_WORKSPACE_WORDS = ("workspace", "file", "read", "readme", "notes", "project", "look")


def _scan_tool(root: Path) -> Tool:
    @tool
    def scan(pattern: str, context: ToolContext) -> list[str]:
        """Find the lines of the workspace's files that contain a word (slowly).

        Args:
            pattern: the word to look for (case-insensitive).
        """
        hits: list[str] = []
        files = sorted(p for p in root.iterdir() if p.is_file())
        for n, path in enumerate(files, 1):
            context.emit(f"{n}/{len(files)} {path.name}")
            if context.cancelled.wait(0.3):
                break
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.lower() in line.lower():
                    hits.append(f"{path.name}:{i}: {line.strip()}")
        return hits

    return scan


def _reply(blocks: list[Text | Thinking | ToolUse], prompt: int) -> Message:
    out = sum(
        estimate_tokens(b.input if isinstance(b, ToolUse) else b.text) for b in blocks
    )
    return Message("assistant", tuple(blocks), Usage(input=prompt, output=out))


class DemoProvider:
    """A ``Scripted`` model whose script is replaced before each turn (``script``)."""

    def __init__(self, model: str) -> None:
        self.script = Scripted(model=model)

    @property
    def wire(self) -> WireIdentity:
        return self.script.wire

    def open(self, request: ProviderRequest) -> ProviderStream:
        return self.script.open(request)

    def close(self) -> None:
        self.script.close()


class DemoScript:
    """The scratch workspace, its tools, and the ``Scripted`` model that answers."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="navi-chat-demo-")
        self.root = Path(self._dir.name)
        for name, text in _FILES.items():
            (self.root / name).write_text(text, encoding="utf-8")
        self.tools: list[Tool] = [*workspace_tools(self.root), _scan_tool(self.root)]
        self.provider = DemoProvider("scripted-demo")
        self._calls = 0

    def provider_for(self, model: str | None) -> DemoProvider:
        """The demo model for a new agent (``/model`` names another)."""
        self.provider = DemoProvider(model or "scripted-demo")
        return self.provider

    def _script(self, *items: Message) -> None:
        self.provider.script = Scripted(items, model=self.provider.wire.model)

    def feed(self, prompt: str | None, history_tokens: int) -> None:
        """Script the answer to ``prompt`` (None: an interrupted turn or a steer)."""
        self._calls += 1
        base = history_tokens + estimate_tokens(prompt or "") + 150
        text = (prompt or "").lower()
        if any(w in text for w in _WORKSPACE_WORDS):
            self._script(*self._workspace_turn(base))
        else:
            self._script(self._chat_reply(prompt, base))

    def feed_summary(self) -> None:
        """Script the summary that ``/compact`` asks for."""
        self._script(
            _reply(
                [
                    Text(
                        "The user explored a demo workspace (README.md, station.py, "
                        "notes.txt) of a weather-station project and asked about it."
                    )
                ],
                400,
            )
        )

    def close(self) -> None:
        """Remove the scratch workspace."""
        self._dir.cleanup()

    def _workspace_turn(self, base: int) -> list[Message]:
        return [
            _reply(
                [
                    Thinking("The user asks about the workspace; list it first."),
                    Text("Let me look at the workspace."),
                    ToolUse(f"call_{self._calls}_1", "list_dir", '{"path": "."}'),
                ],
                base,
            ),
            _reply(
                [
                    Text("Reading the README and scanning for *sensor*, in parallel."),
                    ToolUse(
                        f"call_{self._calls}_2", "read_file", '{"path": "README.md"}'
                    ),
                    ToolUse(f"call_{self._calls}_3", "scan", '{"pattern": "sensor"}'),
                ],
                base + 60,
            ),
            _reply(
                [
                    Text(
                        "This is a small **weather-station** project:\n\n"
                        "- `README.md`: logs a temperature reading every minute and "
                        "plots a daily chart\n"
                        "- `station.py`: reads the sensor in a loop (`read_sensor()`)\n"
                        "- `notes.txt`: two maintenance reminders, one about "
                        "calibrating the sensor\n"
                    )
                ],
                base + 180,
            ),
        ]

    def _chat_reply(self, prompt: str | None, base: int) -> Message:
        said = " ".join((prompt or "").split())[:80] or "(your earlier message)"
        return _reply(
            [
                Text(
                    f"You said: *{said}*\n\nThis is **demo mode**: answers come from "
                    "the offline `Scripted` provider. Ask *what is in the workspace?* "
                    "to see tool calls, or try `/tools`, `/usage`, `/compact`."
                )
            ],
            base,
        )
