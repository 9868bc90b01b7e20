"""One-call results (``Stream.result``, ``Agent.ask``) and a cancelled turn that keeps
the conversation well-formed, over real HTTP on loopback for both APIs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from providers.wire_streams import anthropic_body, openai_body, openai_chunk

from navi_core import (
    Agent,
    Anthropic,
    BadRequest,
    Config,
    MemoryStore,
    OpenAIChat,
    Pending,
    RetryPolicy,
    Scripted,
    StopReason,
    StreamPoisoned,
    Text,
    TextDelta,
    ToolUse,
    TurnComplete,
    Usage,
)

NO_RETRY = Config(retry=RetryPolicy(max_attempts=1))


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    """Providers to close when the test ends."""
    providers: list[Any] = []
    yield providers
    for p in providers:
        p.close()


@dataclass
class City:
    name: str
    population: int


def test_result_drives_the_turn_and_returns_the_summary() -> None:
    agent = Agent(Scripted([[ToolUse("c1", "nope", "{}")], [Text("done")]]))
    stream = agent.run("go")
    done = stream.result()
    assert done.stop_reason is StopReason.END_TURN
    assert (done.response, done.iterations, done.tool_calls) == ("done", 2, 1)
    assert stream.result() is done  # once ended, the same summary again
    assert stream.next() is None


def test_result_after_the_summary_was_handed_out_by_next() -> None:
    agent = Agent(Scripted([[Text("hi")]]))
    stream = agent.run("go")
    events = list(stream)
    assert isinstance(events[-1], TurnComplete)
    assert stream.result() is events[-1]


def test_result_raises_what_the_turn_raised() -> None:
    agent = Agent(Scripted([BadRequest("no such model", status_code=400)]))
    stream = agent.run("go")
    with pytest.raises(BadRequest, match="no such model"):
        stream.result()
    with pytest.raises(StreamPoisoned):
        stream.result()


def test_ask_returns_the_typed_output() -> None:
    agent = Agent(Scripted([[Text('{"name": "Oslo", "population": 709000}')]]))
    done = agent.ask("biggest city of Norway?", output=City)
    assert done.output == City("Oslo", 709000)
    assert done.stop_reason is StopReason.END_TURN
    again = Agent(Scripted([[Text("plain")]])).ask("hi")
    assert (again.response, again.output) == ("plain", None)


def test_ask_closes_the_stream_so_the_next_turn_can_start() -> None:
    agent = Agent(Scripted([[Text("one")], [Text("two")]]))
    assert agent.ask("1").response == "one"
    assert agent.ask("2").response == "two"


def test_result_timeout_leaves_the_turn_running(
    loopback: LoopbackServer, opened: list[Any]
) -> None:
    loopback.add(Reply.sse(openai_body(["late"]), delay=1.0))
    provider = OpenAIChat("gpt-test", base_url=loopback.url + "/v1", api_key="k")
    opened.append(provider)
    with Agent(provider, config=NO_RETRY) as agent:
        stream = agent.run("hi")
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            stream.result(timeout=0.2)
        assert time.monotonic() - started < 0.9
        assert stream.running
        done = stream.result(timeout=30)  # waiting again picks the turn up
    assert (done.stop_reason, done.response) == (StopReason.END_TURN, "late")


def test_a_cancel_after_a_timed_out_result_ends_the_turn(
    loopback: LoopbackServer, opened: list[Any]
) -> None:
    loopback.add(Reply.sse(openai_body(["never"]), delay=5.0))
    provider = OpenAIChat("gpt-test", base_url=loopback.url + "/v1", api_key="k")
    opened.append(provider)
    with Agent(provider, config=NO_RETRY) as agent:
        stream = agent.run("hi")
        with pytest.raises(TimeoutError):
            stream.result(timeout=0.1)
        stream.cancel()
        assert stream.result(timeout=5).stop_reason is StopReason.CANCELLED


# -- a cancelled turn keeps the conversation well-formed -----------------------------


def openai_slow(texts: list[str]) -> Reply:
    """A chat stream that sends ``texts`` and then stays silent for a long time."""
    head = [openai_chunk({"role": "assistant", "content": ""})]
    head += [openai_chunk({"content": t}) for t in texts]
    return Reply(body=[b"".join(head), 30.0, openai_body(["rest"])])


def anthropic_slow(texts: list[str]) -> Reply:
    """A Messages stream cut after ``texts`` (then a long silence)."""
    whole = anthropic_body([("text", texts)])
    stop = whole.index(b"event: content_block_stop")
    return Reply(body=[whole[:stop], 30.0, whole[stop:]])


def openai_roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"] if m["role"] != "system"]


def anthropic_roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"]]


API: dict[str, tuple[Callable[[str], Any], Callable[[list[str]], Reply], Reply]] = {
    "openai": (
        lambda url: OpenAIChat("gpt-test", base_url=url + "/v1", api_key="k"),
        openai_slow,
        Reply.sse(openai_body(["fine"])),
    ),
    "anthropic": (
        lambda url: Anthropic("claude-test", base_url=url, api_key="k"),
        anthropic_slow,
        Reply.sse(anthropic_body([("text", ["fine"])])),
    ),
}


def cancel_after_text(agent: Agent, prompt: str) -> tuple[str, TurnComplete]:
    """Run ``prompt``, cancel once two text deltas arrived; the text shown, the end."""
    stream = agent.run(prompt)
    shown: list[str] = []
    while (ev := stream.next()) is not None:
        if isinstance(ev, TextDelta):
            shown.append(ev.text)
            if len(shown) == 2:
                stream.cancel()
        if isinstance(ev, TurnComplete):
            stream.close()
            return "".join(shown), ev
    raise AssertionError("no TurnComplete")


@pytest.mark.parametrize("api", sorted(API))
def test_a_cancel_mid_stream_keeps_the_partial_answer(
    loopback: LoopbackServer, api: str, opened: list[Any]
) -> None:
    make, slow, _ = API[api]
    loopback.add(slow(["Hel", "lo, ", "wor"]))
    store = MemoryStore()
    opened.append(provider := make(loopback.url))
    with Agent(provider, store=store, config=NO_RETRY) as agent:
        shown, done = cancel_after_text(agent, "greet me")
        assert done.stop_reason is StopReason.CANCELLED
        assert done.response == shown
        assert shown.startswith("Hello, ")
        last = agent.conversation.messages[-1]
        assert (last.role, last.text, last.stop_reason) == (
            "assistant",
            shown,
            "cancelled",
        )
        sid = agent.conversation.session_id
    assert sid is not None
    stored = store.load(sid).messages
    assert [m.role for m in stored if m.role != "system"] == ["user", "assistant"]
    assert stored[-1].text == shown


@pytest.mark.parametrize("api", sorted(API))
def test_after_two_cancels_the_next_request_alternates_roles(
    loopback: LoopbackServer, api: str, opened: list[Any]
) -> None:
    make, slow, fine = API[api]
    roles = openai_roles if api == "openai" else anthropic_roles
    # turn 1 is cancelled while text streams; turn 2 before any byte of its answer
    loopback.add(slow(["Par", "tial"]), Reply.sse(b"", delay=30.0), fine)
    opened.append(provider := make(loopback.url))
    with Agent(provider, config=NO_RETRY) as agent:
        shown, first = cancel_after_text(agent, "one")
        assert first.response == shown == "Partial"
        stream = agent.run("two")
        assert isinstance(stream.next(timeout=0.3), Pending)
        stream.cancel()
        second = stream.result(timeout=5)
        assert (second.stop_reason, second.response) == (StopReason.CANCELLED, "")
        stream.close()
        assert agent.ask("three").response == "fine"
        stored = [m.role for m in agent.conversation.messages if m.role != "system"]
    # the conversation keeps what happened; the request never repeats a role
    assert stored == ["user", "assistant", "user", "user", "assistant"]
    third = loopback.requests[-1].json
    assert roles(third) == ["user", "assistant", "user"]
    texts = [str(m["content"]) for m in third["messages"]]
    assert "Partial" in texts[1]
    assert "two" in texts[2] and "three" in texts[2]


def test_a_subscripted_turn_complete_can_be_made() -> None:
    done = TurnComplete[int](StopReason.END_TURN, "x", 1, 0, Usage(), output=3)
    assert done.output == 3 and done == TurnComplete(
        StopReason.END_TURN, "x", 1, 0, Usage(), output=3
    )


def test_result_with_no_time_left_still_returns_a_turn_that_ended() -> None:
    stream = Agent(Scripted([[Text("hi")]])).run("go")
    while stream.next() is not None:  # the turn ends; its summary was handed out
        pass
    assert stream.result(timeout=0).response == "hi"
