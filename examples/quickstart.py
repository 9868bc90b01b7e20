"""Quickstart: an agent with a tool, a stored session, and the event stream.

    python examples/quickstart.py

The model: NAVI_BASE_URL (an OpenAI-compatible base URL ending in /v1) and NAVI_MODEL
name a real endpoint; unset, the example runs offline on ``Scripted``, which replays
the answers written below.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from navi_core import (
    Agent,
    OpenAIChat,
    Provider,
    Scripted,
    SQLiteStore,
    Text,
    TextDelta,
    ToolFinished,
    ToolStarted,
    ToolUse,
    TurnComplete,
    tool,
)


def provider(*answers: str | list[Text | ToolUse]) -> Provider:
    """NAVI_BASE_URL's endpoint, or ``answers`` replayed offline."""
    base_url = os.environ.get("NAVI_BASE_URL")
    if base_url:
        return OpenAIChat(os.environ.get("NAVI_MODEL", "qwen2.5"), base_url=base_url)
    return Scripted(answers)


@tool
def weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city's name.
    """
    return {"Oslo": "4 °C, light snow"}.get(city, "no data")


model = provider(
    # the offline model first asks for the tool, then answers with its result
    [Text("Let me check."), ToolUse("call_1", "weather", '{"city": "Oslo"}')],
    "It is 4 °C with light snow in Oslo.",
)

with tempfile.TemporaryDirectory() as folder:
    store = SQLiteStore(Path(folder) / "navi.db")  # every committed message is kept
    agent = Agent(model, tools=[weather], store=store)
    with agent.run("What is the weather in Oslo?") as stream:
        while ev := stream.next():  # one event per call; None when the turn is over
            match ev:
                case TextDelta(text=t):
                    print(t, end="", flush=True)
                case ToolStarted(name=name):
                    print(f"\n[calling {name}]")
                case ToolFinished(name=name, is_error=failed):
                    print(f"[{name} {'failed' if failed else 'done'}]")
                case TurnComplete(stop_reason=reason):
                    print(f"\n[{reason}]")
    print("stored messages:", len(store.load(agent.session_id).messages))
    agent.close()
    store.close()
