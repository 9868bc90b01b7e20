"""What an MCP server may ask of the client, in both revisions (requests mid-call under
the initialize handshake, ``input_required`` results under 2026-07-28): sampling only
through a provider the user allowed, with caps; elicitation; roots; progress as
``ToolProgress``; an idle limit that progress resets; a cancelled turn cancels the
call at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("mcp")

from mcp_servers import STDIO
from revision_servers import KINDS, where

from navi_core import (
    Agent,
    AnyEvent,
    Scripted,
    StopReason,
    Text,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    ToolUse,
    TurnComplete,
)
from navi_core.events import Elicitation
from navi_core.mcp import MCPError, MCPTools, SamplingPolicy
from navi_core.tools import ToolCall

REVISIONS = ("2026-07-28", "2025-11-25")


def use(name: str, **arguments: object) -> ToolUse:
    return ToolUse(f"id-{name}", name, orjson.dumps(arguments).decode())


@pytest.fixture(params=REVISIONS)
def revision(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sampling_goes_to_the_allowed_provider(revision: str, transport: str) -> None:
    model = Scripted([[Text("a pear")]], model="sampler")
    policy = SamplingPolicy(model, max_tokens=16, max_requests=5)
    with (
        where("sdk", transport) as at,
        MCPTools(**at, protocol=revision, sampling=policy) as tools,
    ):
        assert tools.call_batch([ToolCall("1", "sample", {})]) == [
            "the model said: a pear"
        ]
    (messages,) = model.requests
    assert messages[0].text == "Name a fruit."
    assert model.last_request is not None
    assert model.last_request.config.max_output_tokens == 16  # the server asked 40


def test_sampling_is_refused_without_a_policy(revision: str) -> None:
    with MCPTools(STDIO, protocol=revision) as tools:
        (error,) = tools.call_batch([ToolCall("1", "sample", {})])
    assert isinstance(error, MCPError) and "sampling" in str(error)


def test_sampling_stops_at_max_requests(revision: str) -> None:
    model = Scripted([[Text("fig")], [Text("never sent")]])
    policy = SamplingPolicy(model, max_requests=1)
    with MCPTools(STDIO, protocol=revision, sampling=policy) as tools:
        first = tools.call_batch([ToolCall("1", "sample", {})])
        (second,) = tools.call_batch([ToolCall("2", "sample", {})])
    assert first == ["the model said: fig"]
    assert isinstance(second, MCPError) and "sampling limit" in str(second)
    assert model.calls == 1


def test_elicitation_declined_by_the_callback(revision: str) -> None:
    asked: list[str] = []

    def decline(message: str, schema: Any) -> None:
        asked.append(message)

    with MCPTools(STDIO, protocol=revision, elicit=decline) as tools:
        assert tools.call_batch([ToolCall("1", "ask", {})]) == ["no colour (decline)"]
    assert asked == ["Which colour?"]


def test_roots_are_answered(revision: str, tmp_path: Path) -> None:
    with MCPTools(STDIO, protocol=revision, roots=[tmp_path]) as tools:
        assert tools.call_batch([ToolCall("1", "rootlist", {})]) == [tmp_path.as_uri()]


def turn(tools: MCPTools, *uses: ToolUse) -> list[AnyEvent]:
    agent = Agent(Scripted([list(uses), [Text("done")]]), tools=[tools])
    with agent.run("go") as stream:
        return list(stream)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_progress_becomes_tool_progress_and_resets_the_idle_limit(
    revision: str, transport: str
) -> None:
    # 4 steps 0.3 s apart: 1.2 s in all, never 1 s without progress
    with (
        where("sdk", transport) as at,
        MCPTools(**at, protocol=revision, timeout=1.0) as tools,
    ):
        events = turn(tools, use("steps", count=4))
    progress = [e.text for e in events if isinstance(e, ToolProgress)]
    assert progress == [f"step {i} ({i}/4)" for i in range(1, 5)]
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert not finished.is_error


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_hung_call_is_an_error_result_after_the_idle_limit(
    revision: str, transport: str
) -> None:
    with (
        where("sdk", transport) as at,
        MCPTools(**at, protocol=revision, timeout=1.0) as tools,
    ):
        start = time.monotonic()
        events = turn(tools, use("hang"))
        assert time.monotonic() - start < 10
        assert tools.call_batch([ToolCall("a", "add", {"a": 1, "b": 1})]) == ["2"]
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.is_error
    assert isinstance(events[-1], TurnComplete)


@pytest.fixture
def mark(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "cancelled.txt"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_cancelled_turn_cancels_the_call_at_once(
    revision: str, transport: str, mark: Path
) -> None:
    with (
        where("sdk", transport) as at,
        MCPTools(**at, protocol=revision, timeout=600) as tools,
    ):
        agent = Agent(
            Scripted([[use("hang", mark=str(mark))], [Text("x")]]), tools=[tools]
        )
        with agent.run("go") as stream:
            for event in stream:
                if isinstance(event, ToolProgress):  # the call is running
                    cancelled_at = time.monotonic()
                    stream.cancel()
                if isinstance(event, TurnComplete):
                    assert event.stop_reason == StopReason.CANCELLED
        assert time.monotonic() - cancelled_at < 5
        # the server heard of it and ended the call
        deadline = time.monotonic() + 10
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.read_text() == "cancelled"
        assert tools.call_batch([ToolCall("a", "add", {"a": 2, "b": 2})]) == ["4"]


def test_tool_started_precedes_progress(revision: str) -> None:
    with MCPTools(STDIO, protocol=revision) as tools:
        events = turn(tools, use("steps", count=1))
    kinds = [type(e) for e in events if isinstance(e, (ToolStarted, ToolProgress))]
    assert kinds == [ToolStarted, ToolProgress]


@pytest.mark.parametrize(
    ("kind", "transport"),
    [
        ("sdk", "stdio"),
        ("sdk", "http"),
        ("legacy-only", "stdio"),
        ("legacy-only", "http"),
    ],
)
def test_an_elicitation_is_a_stream_event_the_host_answers(
    kind: str, transport: str
) -> None:
    """Without an ``elicit`` callback the question reaches the host as an event; its
    ``Stream.answer`` goes to the waiting call (mid-call requests of the handshake
    revisions, ``input_required`` rounds of 2026-07-28)."""
    with where(kind, transport) as at, MCPTools(**at) as tools:
        agent = Agent(Scripted([[use("ask")], [Text("ok")]]), tools=[tools])
        asked: list[Elicitation] = []
        with agent.run("go") as stream:
            for event in stream:
                if isinstance(event, Elicitation):
                    asked.append(event)
                    stream.answer(event.request_id, {"colour": "plum"})
        (question,) = asked
        assert question.call_id == "id-ask" and question.message == "Which colour?"
        assert question.schema["properties"]["colour"]["type"] == "string"
        (result,) = agent.conversation.messages[2].tool_results
        assert result.text == "colour: plum" and not result.is_error


def test_an_elicitation_answered_with_none_is_declined(revision: str) -> None:
    with MCPTools(STDIO, protocol=revision) as tools:
        agent = Agent(Scripted([[use("ask")], [Text("ok")]]), tools=[tools])
        with agent.run("go") as stream:
            for event in stream:
                if isinstance(event, Elicitation):
                    stream.answer(event.request_id, None)
                    with pytest.raises(KeyError):  # answered once only
                        stream.answer(event.request_id, None)
        (result,) = agent.conversation.messages[2].tool_results
        assert result.text == "no colour (decline)"


def test_a_question_outside_a_turn_is_declined(revision: str) -> None:
    with MCPTools(STDIO, protocol=revision) as tools:
        assert tools.call_batch([ToolCall("1", "ask", {})]) == ["no colour (decline)"]


def test_a_question_reaches_the_user_with_the_servers_secrets_redacted() -> None:
    secret = "sk-live-5b8e0c7d1f2a4e6b9c3d"
    asked: list[str] = []

    def record(message: str, schema: Any) -> dict[str, str]:
        asked.append(message)
        return {"colour": "red"}

    command = KINDS["legacy-only"][0]
    with MCPTools(command, env={"API_TOKEN": secret}, elicit=record) as tools:
        assert tools.call_batch([ToolCall("1", "ask", {})]) == ["colour: red"]
    (message,) = asked
    assert message.startswith("Which colour? (sent with ") and secret not in message
