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


# -- the tree of sub-agents: depth, how many at once, cancel and timeout --------------


def delegate_call(i: int = 0) -> ToolUse:
    return ToolUse(f"call_{i}", "delegate", '{"task": "go on"}')


class Family:
    """Makes the child agents of a recursive sub-agent and counts them: made, closed,
    alive at once. Past ``limit`` children the factory fails, so a recursion that is
    not bounded ends the test instead of running on."""

    def __init__(self, script: Callable[[], list[Any]], limit: int = 60) -> None:
        self.script = script
        self.limit = limit
        self.lock = threading.Lock()
        self.made = 0
        self.closed = 0
        self.peak = 0
        self.providers: list[Scripted] = []
        self.tools: list[Any] = []

    def __call__(self) -> Agent:
        with self.lock:
            if self.made >= self.limit:
                raise RuntimeError(f"runaway recursion: {self.made} children")
            self.made += 1
            self.peak = max(self.peak, self.made - self.closed)
            provider = Scripted(self.script())
            self.providers.append(provider)
        family = self

        class Child(Agent):
            counted = False

            def close(self) -> None:
                try:
                    super().close()
                finally:
                    with family.lock:
                        if not self.counted:
                            self.counted = True
                            family.closed += 1

        return Child(provider, tools=self.tools)

    def alive(self) -> int:
        with self.lock:
            return self.made - self.closed


def recursive(family: Family, **limits: Any) -> SubAgent:
    sub = SubAgent("delegate", "Hand a task to a helper.", family, **limits)
    family.tools.append(sub)
    return sub


def test_nesting_stops_at_the_depth_limit() -> None:
    family = Family(lambda: [[delegate_call()], [Text("done here")]])
    sub = recursive(family, max_depth=3)
    parent = Agent(Scripted([[delegate_call()], [Text("all done")]]), tools=[sub])
    events = drive(parent, "go")
    parent.close()
    assert family.made == 3 and family.closed == 3  # depths 1, 2 and 3
    deepest = family.providers[2].requests[-1][-1]
    (refused,) = deepest.tool_results
    assert refused.is_error
    assert (
        "cannot delegate further" in refused.text and "at most 3 deep" in refused.text
    )
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.response == "all done"
    assert SubAgent("x", "y", family).max_depth == 4  # the default
    with pytest.raises(ValueError, match="max_depth"):
        SubAgent("x", "y", family, max_depth=0)


def test_sub_agents_running_at_once_are_bounded() -> None:
    def fan_out() -> list[Any]:  # three helpers at once, then an answer
        return [[delegate_call(0), delegate_call(1), delegate_call(2)], [Text("ok")]]

    family = Family(fan_out, limit=200)
    sub = recursive(family, max_depth=3, max_running=4)
    parent = Agent(Scripted(fan_out()), tools=[sub])
    drive(parent, "go")
    parent.close()
    assert family.peak <= 4
    assert family.made == family.closed
    refused = [
        r.text
        for p in family.providers
        for request in p.requests
        for m in request
        for r in m.tool_results
        if "sub-agents run already" in r.text
    ]
    assert refused and all("at most 4 at once" in t for t in refused)


def test_cancel_reaches_every_descendant_and_none_starts_after() -> None:
    family = Family(lambda: [[delegate_call()]] * 40, limit=400)
    sub = recursive(family, max_depth=1000, max_running=1000)
    baseline = threading.active_count()
    parent = Agent(Scripted([[delegate_call()]]), tools=[sub])
    stream = parent.run("go")
    driver = threading.Thread(target=lambda: list(stream), daemon=True)
    driver.start()
    deadline = time.monotonic() + 10
    while family.made < 5:  # the recursion is under way
        assert time.monotonic() < deadline, "no sub-agent started"
        time.sleep(0.005)
    stream.cancel()
    at_cancel = family.made
    time.sleep(0.2)
    settled = family.made
    time.sleep(1.0)
    assert family.made == settled, "a sub-agent started after cancel() returned"
    assert settled - at_cancel <= 1  # at most the one passing its gate as it came
    driver.join(5)
    assert not driver.is_alive()
    deadline = time.monotonic() + 5
    while family.alive() or threading.active_count() > baseline + 12:
        assert time.monotonic() < deadline, (family.alive(), threading.active_count())
        time.sleep(0.02)
    stream.close()
    parent.close()


def test_a_timeout_ends_the_sub_agents_under_the_child() -> None:
    """The child times out while its own sub-agents run: when the call returns, every
    agent of its tree was closed, the deepest one's tool saw the cancel."""
    cancelled = threading.Event()

    @tool
    def wait(context: ToolContext) -> str:
        """Wait for the cancel."""
        if context.cancelled.wait(30):
            cancelled.set()
        return "waited"

    family = Family(lambda: [[delegate_call()], [ToolUse("w", "wait", "{}")]])
    family.tools.append(wait)
    sub = recursive(family, max_depth=3, timeout=0.5)
    alive_at_result: list[int] = []
    parent = Agent(Scripted([[delegate_call()], [Text("ok")]]), tools=[sub])
    t0 = time.monotonic()
    with parent.run("go") as stream:
        for ev in stream:
            if isinstance(ev, ToolDispatchComplete):
                alive_at_result.append(family.alive())
                result = ev.message.tool_results[0].text
    parent.close()
    assert time.monotonic() - t0 < 10
    assert result.endswith("[Sub-agent stopped: timeout]")
    assert family.made == 3 and alive_at_result == [0]
    assert cancelled.wait(2), "the deepest tool saw the cancel"
