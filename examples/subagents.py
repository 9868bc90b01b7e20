"""Sub-agents: a tool that hands a task to a fresh agent with its own context.

    python examples/subagents.py

Each call of the ``research`` tool makes a child agent (from the factory), runs one
turn and returns the child's answer to the parent; the child's events reach the
parent's stream as ``SubagentEvent``. The model: NAVI_BASE_URL and NAVI_MODEL name a
real endpoint for both agents; unset, each runs offline on its own ``Scripted``.
"""

from __future__ import annotations

import os

from navi_core import (
    Agent,
    OpenAIChat,
    Provider,
    Scripted,
    SubAgent,
    SubagentEvent,
    Text,
    TextDelta,
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
def lookup(topic: str) -> str:
    """Look a topic up in the encyclopedia.

    Args:
        topic: what to look up.
    """
    return {"Fram": "Fram is a polar ship built in 1892, now a museum in Oslo."}.get(
        topic, "nothing found"
    )


def researcher() -> Agent:
    """A fresh child agent for each call: its own context, its own tools."""
    return Agent(
        provider(
            [ToolUse("c1", "lookup", '{"topic": "Fram"}')],
            "Fram: a polar ship from 1892, shown in a museum in Oslo.",
        ),
        tools=[lookup],
    )


research = SubAgent(
    "research",
    "Research a question in a fresh context and report back.",
    researcher,
    max_iterations=10,
    timeout=60.0,
)
agent = Agent(
    provider(
        [ToolUse("p1", "research", '{"task": "What is the Fram?"}')],
        "The Fram is a polar ship from 1892; you can visit it in Oslo.",
    ),
    tools=[research],
)
with agent.run("Tell me about the Fram.") as stream:
    for ev in stream:
        if isinstance(ev, SubagentEvent):  # the child's own events, as they happen
            if isinstance(ev.event, TurnComplete):
                print(f"  sub-agent answered: {ev.event.response}")
        elif isinstance(ev, TextDelta):
            print(ev.text, end="", flush=True)
        elif isinstance(ev, TurnComplete):
            print(f"\n[{ev.stop_reason}]")
agent.close()
