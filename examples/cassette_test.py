"""A cassette test: record a real model's answers once, replay them in every test run.

    python examples/cassette_test.py              # replays cassettes/weather.jsonl
    NAVI_BASE_URL=http://127.0.0.1:11434/v1 NAVI_MODEL=qwen2.5 NAVI_RECORD=1 \\
        python examples/cassette_test.py          # records it again from that endpoint
    python -m pytest examples/cassette_test.py    # the same tests, as pytest runs them

``Recorder`` wraps an HTTP provider and writes what it sends and the raw bytes it gets
back (never a key); ``Replay`` serves those bytes to the same parser offline, so the
test is deterministic and needs no network, and a request that drifts from the
recording (another prompt, another tool) fails at once with ``CassetteMismatch``.
NAVI_CASSETTE names another cassette file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from navi_core import Agent, OpenAIChat, Provider, TurnComplete, tool
from navi_core.testing import CassetteMismatch, Recorder, Replay

CASSETTE = Path(
    os.environ.get("NAVI_CASSETTE") or Path(__file__).parent / "cassettes/weather.jsonl"
)
PROMPT = "What is the weather in Oslo?"


@tool
def weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city's name.
    """
    return {"Oslo": "4 °C, light snow"}.get(city, "no data")


def answer(provider: Provider, prompt: str = PROMPT) -> str:
    """The agent's final answer to ``prompt``."""
    agent = Agent(provider, tools=[weather])
    try:
        with agent.run(prompt) as stream:
            done = [ev for ev in stream][-1]
        assert isinstance(done, TurnComplete)
        return done.response
    finally:
        agent.close()


def record() -> None:
    """Once, live: the turn against NAVI_BASE_URL, written to the cassette."""
    model = OpenAIChat(
        os.environ.get("NAVI_MODEL", "qwen2.5"), base_url=os.environ["NAVI_BASE_URL"]
    )
    CASSETTE.parent.mkdir(parents=True, exist_ok=True)
    with Recorder(model, CASSETTE) as provider:
        print("recorded:", answer(provider))


def test_the_agent_answers_with_the_tools_result() -> None:
    assert "4 °C" in answer(Replay(CASSETTE))


def test_a_request_that_drifts_from_the_recording_fails_at_once() -> None:
    with pytest.raises(CassetteMismatch, match="differs from the recording"):
        answer(Replay(CASSETTE), "What is the weather in Bergen?")


if __name__ == "__main__":
    if os.environ.get("NAVI_BASE_URL") and (
        os.environ.get("NAVI_RECORD") or not CASSETTE.exists()
    ):
        record()
    # pytest in a fresh interpreter: its plugins must be imported before navi_core
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__]
    sys.exit(subprocess.call(command))
