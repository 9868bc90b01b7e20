"""Sub-agents: a child agent's turn as a tool, over real HTTP on loopback."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    OpenAIChat,
    Scripted,
    StopReason,
    SubAgent,
    SubagentEvent,
    Text,
    TextDelta,
    Thinking,
    ToolContext,
    ToolDispatchComplete,
    ToolUse,
    TurnComplete,
    Usage,
    tool,
)
from navi_core.events import Event


def _chunk(delta: dict[str, Any] | None, **extra: Any) -> bytes:
    obj: dict[str, Any] = {"id": "x", "object": "chat.completion.chunk", "model": "m"}
    obj["choices"] = [] if delta is None else [{"index": 0, "delta": delta, **extra}]
    if "usage" in extra:
        obj["choices"] = []
        obj["usage"] = extra["usage"]
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def body(
    text: str = "",
    call: tuple[str, str, str] | None = None,
    usage: tuple[int, int] = (10, 5),
) -> bytes:
    """A chat-completions stream with ``text`` and at most one tool call."""
    out = [_chunk({"role": "assistant", "content": ""})]
    out += [_chunk({"content": text[i : i + 5]}) for i in range(0, len(text), 5)]
    if call is not None:
        cid, name, args = call
        fn = {"name": name, "arguments": args}
        out.append(_chunk({"tool_calls": [{"index": 0, "id": cid, "function": fn}]}))
    out.append(_chunk({}, finish_reason="tool_calls" if call else "stop"))
    prompt, completion = usage
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    out.append(_chunk(None, usage=counts))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as s:
        yield s


@pytest.fixture
def providers() -> Iterator[list[OpenAIChat]]:
    """Every provider a test opened, closed after it."""
    opened: list[OpenAIChat] = []
    yield opened
    for p in opened:
        p.close()


def http_agent(server: LoopbackServer, opened: list[OpenAIChat], **kw: Any) -> Agent:
    provider = OpenAIChat("m", server.url + "/v1", api_key="sk-test")
    opened.append(provider)
    return Agent(provider, **kw)


def drive(agent: Agent, prompt: str) -> list[Event]:
    with agent.run(prompt) as stream:
        return list(stream)


def test_a_sub_agent_turn_over_http(
    server: LoopbackServer, providers: list[OpenAIChat]
) -> None:
    server.add(
        Reply.sse(body("Asking.", ("c1", "research", '{"task": "find X"}'), (10, 5))),
        Reply.sse(body("X is 42.", usage=(7, 3))),
        Reply.sse(body("The answer is 42.", usage=(20, 6))),
    )
    research = SubAgent(
        "research",
        "Research a question in a fresh context.",
        lambda: http_agent(server, providers, system="You research."),
    )
    parent = http_agent(server, providers, tools=[research])
    events = drive(parent, "what is X?")
    parent.close()
    child = [e for e in events if isinstance(e, SubagentEvent)]
    assert child and all(e.call_id == "c1" for e in child)
    text = "".join(e.event.text for e in child if isinstance(e.event, TextDelta))
    assert text == "X is 42."
    child_done = child[-1].event
    assert isinstance(child_done, TurnComplete)
    assert child_done.usage == Usage(7, 3)
    result = next(e for e in events if isinstance(e, ToolDispatchComplete))
    assert result.message.tool_results[0].text == (
        "X is 42.\n\n[Sub-agent stopped: completed]"
    )
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.response == "The answer is 42."
    assert done.usage == Usage(10, 5) + Usage(20, 6) + Usage(7, 3)
    # the child saw only its task and its own system prompt, not the parent's chat
    child_request = server.requests[1].json
    assert [m["role"] for m in child_request["messages"]] == ["system", "user"]
    assert child_request["messages"][1]["content"] == "find X"
    assert "tools" not in child_request or not child_request["tools"]
    spec = server.requests[0].json["tools"][0]["function"]
    assert spec["name"] == "research"
    assert list(spec["parameters"]["properties"]) == ["task"]


def scripted_child(*items: Any) -> Agent:
    @tool
    def step() -> str:
        """One step."""
        return "stepped"

    return Agent(Scripted(list(items)), tools=[step])


def run_sub(sub: SubAgent, task: str = "t") -> str:
    parent = Agent(
        Scripted(
            [
                [ToolUse("c1", sub.name, orjson.dumps({"task": task}).decode())],
                [Text("ok")],
            ]
        ),
        tools=[sub],
    )
    events = drive(parent, "go")
    result = next(e for e in events if isinstance(e, ToolDispatchComplete))
    return result.message.tool_results[0].text


def test_iteration_limit_status() -> None:
    sub = SubAgent(
        "loop",
        "Loops.",
        lambda: scripted_child(*[[ToolUse(f"s{i}", "step", "{}")] for i in range(5)]),
        max_iterations=2,
    )
    assert run_sub(sub).endswith("[Sub-agent stopped: iteration limit]")


def test_thinking_stall_status() -> None:
    sub = SubAgent(
        "ponder",
        "Thinks.",
        lambda: scripted_child([Thinking("hmm " * 50), Text("late")]),
        max_thinking_chars=40,
    )
    assert run_sub(sub) == "[Sub-agent stopped: thinking stall]"


def test_timeout_status_cancels_the_child() -> None:
    cancelled = threading.Event()

    @tool
    def wait(context: ToolContext) -> str:
        """Wait for the cancel."""
        if context.cancelled.wait(10):
            cancelled.set()
        return "waited"

    def child() -> Agent:
        return Agent(
            Scripted([[ToolUse("w", "wait", "{}")], [Text("x")]]), tools=[wait]
        )

    sub = SubAgent("slow", "Slow.", child, timeout=0.3)
    t0 = time.monotonic()
    text = run_sub(sub)
    assert time.monotonic() - t0 < 5
    assert text.endswith("[Sub-agent stopped: timeout]")
    assert cancelled.wait(2)


def test_parent_cancel_cancels_the_child() -> None:
    entered = threading.Event()
    child_cancelled = threading.Event()

    @tool
    def wait(context: ToolContext) -> str:
        """Wait for the cancel."""
        entered.set()
        if context.cancelled.wait(10):
            child_cancelled.set()
        return "waited"

    def child() -> Agent:
        return Agent(Scripted([[ToolUse("w", "wait", "{}")]]), tools=[wait])

    sub = SubAgent("slow", "Slow.", child)
    parent = Agent(Scripted([[ToolUse("c1", "slow", '{"task": "t"}')]]), tools=[sub])
    with parent.run("go") as stream:
        while not entered.is_set():
            stream.next(timeout=0.05)
        stream.cancel()
        events = list(iter(lambda: stream.next(timeout=1), None))
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.CANCELLED
    assert child_cancelled.wait(2), "the child's tool saw the cancel"


def test_sub_agent_is_a_plain_tool() -> None:
    sub = SubAgent("helper", "Helps.", lambda: scripted_child([Text("hi")]))
    assert sub.spec.parameters["required"] == ["task"]
    assert sub.run_task("say hi", ToolContext("c", "helper")) == (
        "hi\n\n[Sub-agent stopped: completed]"
    )
    with pytest.raises(ValueError, match="max_iterations"):
        SubAgent("x", "y", lambda: scripted_child(), max_iterations=0)


@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy])
def test_a_copied_sub_agent_keeps_its_factory_and_limits(
    copier: Callable[[SubAgent], SubAgent],
) -> None:
    """A ``SubAgent`` holds more than ``Tool``'s fields (its factory and limits): a
    copy keeps them and runs its child as the original does."""

    def child() -> Agent:
        return Agent(Scripted([[Text("child answer")]]))

    original = SubAgent("helper", "Help.", child, max_iterations=3, timeout=9.0)
    original.invoke({"task": "warm up"})  # a tool that already worked out its plan
    twin = copier(original)
    assert (twin.max_iterations, twin.timeout, twin.max_thinking_chars) == (
        3,
        9.0,
        None,
    )
    assert twin.name == "helper" and twin.agent_factory is child
    assert "child answer" in twin.invoke({"task": "go"})
